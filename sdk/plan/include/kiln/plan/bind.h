// plan::validate and plan::bind: what every runtime checks and computes before it runs a plan.
//
// A plan is an artifact from outside the process as often as not (a JSON file, a cache entry,
// the browser), so nothing in it is trusted until checked:
// - validate(plan) checks the plan against itself, before anything is compiled: buffer ids are
//   positions, every buffer a kernel, binding, output or gemm names exists, intermediates name
//   existing slots, constants carry data of their buffer's dtype and sizes, every symbol is bound
//   by exactly one input dim that is that symbol, the graph inputs are buffers 0..n-1 of kind
//   input, and a reference kernel's op, arity and attributes pass the op's shape rule and give
//   its output buffer's type. plan_from_json calls it; every runtime's load calls it.
// - bind(plan, inputs) takes the inputs of one call and gives what a runtime needs for it: the
//   symbol values (read off the inputs, checked against the symbols' ranges), each input checked
//   (count, dtype, rank, sizes) and whether it needs a contiguous copy (strides other than the
//   plan's: the runtime makes it on its device), the bytes of every buffer's memory and every
//   slot, and every kernel's parallel extent. With concrete sizes it also checks what only sizes
//   can tell: each buffer's extent (its last element's offset + 1) fits the memory it is given,
//   every gemm's operands stay inside their buffers, and no size wraps int64 or exceeds
//   kMaxBufferBytes.
// - finish_outputs(plan, outputs) reads the plan's checks after a run (what only a run can know,
//   such as run-time indices inside their dim) and drops them from the outputs.
// Every problem is a kiln::Error that starts with the caller's name ("cpu runtime", "plan.json")
// and says which kernel or buffer is wrong and how.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <span>
#include <string_view>
#include <vector>

#include "kiln/graph/tensor_data.h"
#include "kiln/plan/plan.h"

namespace kiln::plan {

// The most bytes one buffer or slot may need (256 TiB): more is an edited or corrupt plan, not a
// tensor, and refusing it keeps every later byte computation far from int64's range.
inline constexpr int64_t kMaxBufferBytes = int64_t{1} << 48;

// Throws kiln::Error "<who>: <path>: <what>" (paths as the plan's JSON names them:
// "kernels[2].reads[0]: buffer 17 does not exist (the plan has 5 buffers)").
void validate(const KernelPlan& p, std::string_view who);

// The buffer of each graph input, by input position (validate makes sure there is one each).
std::vector<int32_t> input_buffers(const KernelPlan& p);

// What a binding computes from the symbol values alone: the same for every call at those values.
struct BoundSizes {
  std::vector<int64_t> symbols;       // by symbol id
  std::vector<int64_t> buffer_bytes;  // by buffer: the bytes its memory holds (outputs: what to allocate,
                                      // numel * dtype size; intermediates: the extent their slot must hold)
  std::vector<int64_t> slot_bytes;    // by slot: what to allocate
  std::vector<int64_t> extents;       // by kernel: the parallel extent (>= 0)
  std::vector<int64_t> sizes, strides;  // every buffer's, buffer after buffer (from first[b] to first[b + 1])
  std::vector<size_t> first;
};

// One call's binding, from bind.
struct Binding {
  std::shared_ptr<const BoundSizes> at;  // shared by every call at the same symbol values
  std::vector<bool> copy_input;          // by input: strides other than the plan's, pass a contiguous copy

  const std::vector<int64_t>& symbols() const { return at->symbols; }
  const std::vector<int64_t>& buffer_bytes() const { return at->buffer_bytes; }
  const std::vector<int64_t>& slot_bytes() const { return at->slot_bytes; }
  const std::vector<int64_t>& extents() const { return at->extents; }
};

// Binds a validated plan to the inputs of its calls. The plan's sizes are evaluated and checked
// once per symbol values (the last ones are kept: a call at the sizes of the one before does
// only the per-input checks), so a runtime keeps one Binder per loaded plan. `who` starts every
// message ("cpu runtime"). Devices are the runtime's to check: bind reads only dtypes, sizes and
// strides. The plan must outlive the Binder; bind may be called from several threads at once.
// `limit`: what one call's slots and outputs may take where the runtime allocates them (the
// host's memory budget for the cpu runtime, a device's memory for the GPU runtimes): a call
// that needs more is a kiln::Error naming the largest allocation and the kernel and graph nodes
// that write it, before anything is allocated. Asked once per new symbol values.
// What a runtime may allocate for one call, and how a refusal names it (after "more than ").
struct MemoryLimit {
  int64_t bytes = 0;
  std::string what;  // "the memory budget of 23.5 GiB (...)", "the 80.0 GiB of memory of cuda:0 (NVIDIA H100)"
};
// The host's: the memory budget (kiln/graph/memory_budget.h).
MemoryLimit host_memory_limit();

class Binder {
 public:
  Binder(const KernelPlan& p, std::string who, std::function<MemoryLimit()> limit = {});
  Binding bind(std::span<const TensorData* const> inputs) const;
  Binding bind(std::span<const TensorData> inputs) const;
  const std::vector<int32_t>& input_buffers() const { return input_buffer_; }

 private:
  std::shared_ptr<const BoundSizes> sizes_at(std::vector<int64_t> symbols) const;

  const KernelPlan* p_;
  std::string who_;
  std::vector<int32_t> input_buffer_;
  std::vector<bool> written_whole_;  // by buffer: a reference kernel writes all of it, contiguously
  std::function<MemoryLimit()> limit_;
  mutable std::mutex mu_;
  mutable std::shared_ptr<const BoundSizes> last_;
};

// After a run: `outs` holds every plan output, the checks' counts last (KernelPlan::checks).
// Reads each count (to_host moves it to the host), throws kiln::Error "<who>: <the check's
// sentence> (<count> of them)" for the first nonzero one, and drops the counts from `outs`.
void finish_outputs(const KernelPlan& p, std::vector<TensorData>& outs,
                    const std::function<TensorData(const TensorData&)>& to_host, std::string_view who);

// One binding without keeping a Binder (tests, tools).
Binding bind(const KernelPlan& p, std::span<const TensorData* const> inputs, std::string_view who);
Binding bind(const KernelPlan& p, std::span<const TensorData> inputs, std::string_view who);

}  // namespace kiln::plan
