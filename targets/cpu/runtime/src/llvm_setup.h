// Internal: once-only LLVM initialisation and the host's target description, shared by
// host.cpp and jit.cpp.
#pragma once

#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>

#include <memory>
#include <string>

namespace kiln::cpu::detail {

// InitializeNativeTarget / AsmPrinter / AsmParser and LLVM's options, exactly once.
void init_llvm();
// Host triple, CPU and features; opt_level 0..3 sets the code generator's level.
llvm::orc::JITTargetMachineBuilder host_machine_builder(int opt_level);
// Whether libmvec is loaded (loading it the first time) and matches the host (AVX2 for 8-wide,
// or SSE-only hosts).
bool vector_math_available();
// The same answer without loading it (~0.25 ms): it matches the host and its file lies beside
// the libm this process uses. What host_identity() says; an object that calls libmvec loads it.
bool vector_math_usable();

}  // namespace kiln::cpu::detail
