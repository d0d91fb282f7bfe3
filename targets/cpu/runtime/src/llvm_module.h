// Internal: the CPU target's LLVM module (libkiln_cpu_llvm.so, src/llvm_module.cpp), the only
// part of the CPU runtime that links LLVM, loaded by kiln::modules the first time the runtime
// needs LLVM: to compile, to link object code (a cache hit), or to ask LLVM about the host. The
// rest of the runtime (jit.cpp, host.cpp) calls it through this table, and keeps what needs no
// LLVM: which symbols kernels may call, host symbols, libmvec, the thread pool.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/cpu/jit.h"

namespace kiln::cpu::detail {

// Code linked into memory of its own (RuntimeDyld's): the module's, freed with release().
struct LinkedCode;

struct LlvmTable {
  // LLVM's name for the host CPU and its features (on and off), asked of the host once.
  void (*host_cpu)(std::string& name, std::vector<std::pair<std::string, bool>>& features);
  // The data layout of the host's target machine, and the vector register width (bits) its
  // vectorisers use.
  void (*host_target)(std::string& data_layout, int& vector_bits);
  // LLVM IR text -> verified, optimised module -> object code, as JitModule::compile documents
  // (errors are kiln::Errors naming `name`). `vector_math`: libmvec may be called (loaded).
  // Fills the parse, optimise and codegen timings, and `optimized_ir` where not null.
  std::string (*compile)(std::string_view ir_text, const std::string& name, int opt_level, bool vector_math,
                         const std::vector<std::string>& kernel_entries, CompileTimings& timings,
                         std::string* optimized_ir);
  // Object code -> code in memory, its undefined symbols resolved by `resolve` (null: none);
  // `symbols` receives what it defines. A kiln::Error naming `name` when the bytes are not an
  // object for this host or a symbol stays unresolved.
  LinkedCode* (*link)(std::string_view object, const std::string& name, void* (*resolve)(const std::string&),
                      std::vector<std::pair<std::string, void*>>& symbols);
  void (*release)(LinkedCode*);
};

// The table, loading the module on the first call (a kiln::Error when it cannot be loaded).
const LlvmTable& llvm_module();

// Whether libmvec is loaded (loading it the first time) and matches the host (AVX2 for 8-wide,
// or SSE-only hosts).
bool vector_math_available();
// The same answer without loading it (~0.25 ms): it matches the host and its file lies beside
// the libm this process uses. What host_identity() says; an object that calls libmvec loads it.
bool vector_math_usable();

}  // namespace kiln::cpu::detail

// The module's entry point: its table.
extern "C" const kiln::cpu::detail::LlvmTable* kiln_cpu_llvm_table();
