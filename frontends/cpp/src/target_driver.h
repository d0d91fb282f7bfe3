// Internal to frontends/cpp: the one driver between the "kiln" backend, eager mode and device
// moves on one side and the targets of sdk/target's registry on the other. It does for every
// target what each used to do itself: picks the target of a graph from its devices, keeps
// compiled plans in an in-memory cache and in sdk/cache's layers (with the target's device
// identity, toolchain and artifacts), checks assert_no_compile, keeps max-autotune's choices in
// the autotune cache, writes debug_dir dumps, and runs eager ops as cached single-op kernels.
// It names no target.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kiln/capture/backend.h"
#include "kiln/graph/tensor_data.h"
#include "kiln/target/target.h"

namespace kiln::detail {

// Called before the first trace of a process: install_remote_cache(), the dynamic-shape profile
// store, and every runtime's one-time set-up (Runtime::prepare: the CPU's LLVM set-up on a
// background thread, which overlaps tracing and the passes).
void prepare_before_first_trace();
// While a compiled function's graph is compiled with debug_dir set: the directory its dumps go
// to (the driver adds the plan, its code and the fusion decisions); empty otherwise. Per thread.
std::string& debug_dump_dir();
// The runtime that compiles an optimised graph, and the device: every input on one device of
// one type that has a runtime (the host when there are no inputs), no node on a device of
// another kind (nodes on the host are fine off the host), no empty tensor. nullptr: the graph
// runs on the reference interpreter.
target::Runtime* target_of(const Graph& g, Device* device = nullptr);
// Schedule + codegen + load of an optimised graph on `rt` and `device`, through the compile
// caches: an in-memory cache of executables keyed by the canonical graph, the codegen options
// and the device, then sdk/cache's artifacts, disk and remote layers (plan + the target's
// artifacts; docs/cache.md). Counts lookups per layer into the compiled function's stats; with
// assert_no_compile a compile is a kiln::Error.
Executable target_executable(target::Runtime& rt, Device device, const Graph& g);
// What the "kiln" backend makes of a traced graph (explain): the graph passes and the scheduler
// for the graph's target (no codegen), one line per fused kernel in execution order: its name,
// kind and the ops it computes (inline ones included), with the composites they come from, e.g.
// "k0 reduction: max, sub, exp, sum, div (softmax)". Empty when no target takes the graph.
std::vector<std::string> kernel_list(const Graph& traced);
// Eager mode: one op on concrete tensors of one device (0-d host scalars may join device
// tensors) as a compiled single-op kernel of that device's target, cached by op, attributes,
// dtypes and sizes (or shape pattern: EagerPolicy::symbolic_sizes). Composites run as their
// decomposition op by op. nullopt: run it on the reference interpreter (host tensors only; on a
// device the driver runs the reference itself and moves the result back).
std::optional<TensorData> eager(OpId op, std::span<const TensorData> inputs, const Attrs& attrs, const TensorMeta& out);

}  // namespace kiln::detail
