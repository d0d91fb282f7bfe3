// Internal to frontends/cpp: the CPU target behind the "kiln" backend.
#pragma once

#include <optional>

#include "kiln/capture/backend.h"

namespace kiln::detail {

bool cpu_target_available();
// Every node on the cpu and no empty tensor (those run on the reference target).
bool cpu_target_applies(const Graph& g);
// Schedule + LLVM codegen + JIT of an optimised graph, through an in-memory cache of plans
// keyed by the canonical graph and the codegen options.
Executable cpu_executable(const Graph& g);
// The same without the cache.
Executable cpu_compile(const Graph& g);
// Eager mode: one op on concrete CPU tensors as a compiled single-op kernel, cached by op,
// attributes, dtypes and shape pattern (sizes are symbols, so a new batch size reuses the
// kernel). nullopt when the op should run on the reference interpreter instead: no CPU target,
// views and sources, empty or small outputs (cpu.eager_compile_threshold).
std::optional<TensorData> cpu_eager(OpId op, std::span<const TensorData> inputs, const Attrs& attrs,
                                    const TensorMeta& out);

}  // namespace kiln::detail
