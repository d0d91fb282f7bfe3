// Internal to frontends/cpp: the CPU target behind the "kiln" backend.
#pragma once

#include "kiln/capture/backend.h"

namespace kiln::detail {

bool cpu_target_available();
// Every node on the cpu and no empty tensor (those run on the reference target).
bool cpu_target_applies(const Graph& g);
// Schedule + LLVM codegen + JIT of an optimised graph.
Executable cpu_executable(const Graph& g);

}  // namespace kiln::detail
