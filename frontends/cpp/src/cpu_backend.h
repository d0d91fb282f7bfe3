// Internal to frontends/cpp: the CPU target behind the "kiln" backend.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "backend_cache.h"
#include "kiln/capture/backend.h"

namespace kiln::detail {

bool cpu_target_available();
// Called before the first trace of a process: install_remote_cache(), and the CPU target's
// one-time LLVM/JIT set-up started on a background thread (it overlaps tracing and the passes).
void prepare_before_first_trace();
// While a compiled function's graph is compiled with debug_dir set: the directory its dumps go
// to (backends add theirs there); empty otherwise. Per thread.
std::string& debug_dump_dir();
// Every node on the cpu and no empty tensor (those run on the reference target).
bool cpu_target_applies(const Graph& g);
// Schedule + LLVM codegen + JIT of an optimised graph, through the compile caches: an in-memory
// cache of executables keyed by the canonical graph and the codegen options, then sdk/cache's
// artifacts and disk layers (plan + object code; docs/cache.md). Counts lookups per layer into
// the compiled function's stats; with assert_no_compile a compile is a kiln::Error.
Executable cpu_executable(const Graph& g);
// The same without the in-memory executable cache (the artifacts and disk layers still apply,
// unless force_disable_caches).
Executable cpu_compile(const Graph& g);
// What the "kiln" backend makes of a traced graph on the CPU (explain): the graph passes and the
// scheduler as cpu_executable runs them (no codegen, no JIT), one line per fused kernel in
// execution order: its name, kind and the ops it computes (inline ones included), with the
// composites they come from, e.g. "k0 reduction: max, sub, exp, sum, div (softmax)". Empty when
// there is no CPU target or the optimised graph does not run on it (cpu_target_applies).
std::vector<std::string> cpu_kernel_list(const Graph& traced);
inline int64_t cpu_kernel_count(const Graph& traced) { return static_cast<int64_t>(cpu_kernel_list(traced).size()); }
// Eager mode: one op on concrete CPU tensors as a compiled single-op kernel, cached by op,
// attributes, dtypes and shape pattern (sizes are symbols, so a new batch size reuses the
// kernel). nullopt when the op should run on the reference interpreter instead: no CPU target,
// views and sources, empty or small outputs (cpu.eager_compile_threshold).
std::optional<TensorData> cpu_eager(OpId op, std::span<const TensorData> inputs, const Attrs& attrs,
                                    const TensorMeta& out);

}  // namespace kiln::detail
