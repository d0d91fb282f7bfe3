// kiln::schedule: turns an optimised Graph into a Schedule: a few fused kernels in the kernel
// IR (kernel_ir.h), the buffers they read and write, and a plan of where intermediates live.
//
// Takes: a Graph as sdk/passes leaves it (composites are decomposed here), static or symbolic,
//   and the fusion options of sdk/config (fusion.*).
// Gives: kernels in execution order; buffers (graph inputs, constants, outputs, intermediates)
//   with symbolic sizes; intermediates assigned to reusable slots (in place when an input dies
//   at its consumer); the peak intermediate bytes. Sizes stay symbolic: kernels index through
//   SymInts and take the symbols' values at run time; the schedule assumes nothing about sizes
//   beyond the graph's own shape facts, which become the plan's guards.
//
// How nodes become kernels (docs/schedule.md has the cost rule): a node is either inline
// (recomputed inside every kernel that reads it) or realized (stored to a buffer by some kernel).
// Realized nodes are grouped greedily into kernels over one iteration domain: pointwise chains,
// reductions with their prologue and epilogue (softmax, layer_norm: one kernel), matmul with its
// pointwise epilogue, siblings over the same domain. Every decision and refusal is logged under
// KILN_LOGS=fusion with its reason.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/graph/graph.h"
#include "kiln/schedule/kernel_ir.h"

namespace kiln::schedule {

enum class BufferKind : uint8_t { input, constant, output, intermediate };
std::string_view buffer_kind_name(BufferKind k);

struct Buffer {
  int32_t id = 0;
  BufferKind kind = BufferKind::intermediate;
  DType dtype = DType::f32;
  SymShape sizes;
  SymShape strides;   // element strides (inputs may be strided; everything else is contiguous)
  int32_t index = -1; // input: graph input position; output: first output position it serves
  NodeId node = -1;   // the graph node it holds (-1 for scratch)
  std::shared_ptr<const ConstantData> data;  // constants
  int32_t slot = -1;  // intermediates: the memory slot (several buffers may share one)
  SymInt bytes() const;
};

// Memory for intermediates: buffers whose lifetimes do not overlap share a slot.
struct Slot {
  SymInt bytes = 0;
};

// What the scheduler needs to know about the target it schedules for: how wide to split full
// reductions (a GPU needs thousands of partials to fill its SMs, a CPU a few dozen) and whether
// f16/bf16 matmul operands reach the gemm in their own dtype (tensor cores) or as f32 (the CPU's
// sgemm). cpu() is the default; every GPU target passes gpu() or its own values.
struct Target {
  // Split factors for full reductions, tried in order: the first that divides the element count
  // and leaves slices of at least min_split_chunk elements wins.
  std::vector<int64_t> split_parts = {64, 48, 32, 16, 8};
  int64_t min_split_elements = int64_t{1} << 16;  // full reductions below this stay one kernel
  int64_t min_split_chunk = 1;
  // A reduction with outputs that would run in fewer thread blocks than this splits its first
  // reduced dim as well (0: only full reductions split), into the fewest parts that give this
  // many blocks: a GPU would keep a few SMs busy for a batch norm's per-channel statistics. A
  // block is one output, or column_lanes side by side in the column strategy
  // (uses_column_strategy). Every slice keeps a block min_split_chunk elements.
  int64_t split_blocks_below = 0;
  int64_t column_lanes = 32;
  // f16/bf16 matmuls multiply their operands as they are (f32 accumulation in the gemm, the
  // result in the graph's dtype) instead of casting them to f32 first.
  bool low_precision_gemm = false;
  // The target's gemm is a library call with one batch stride per operand (strided batched):
  // a product with two or more batch dims whose operand is a view (attention's [B, S, H, D]
  // read as [B, H, S, D]) would loop over the outer batch indices on the host, one call each,
  // so such operands are copied contiguous first.
  bool one_batch_stride = false;
  // scaled_dot_product_attention of f16/bf16 whose head dims are static multiples of 16 up to
  // 128 and whose scale * log2(e) is a normal float keeps one attention kernel (the target prints a fused kernel for it) instead of being
  // decomposed into two matmuls and a softmax like on every other target.
  bool fused_attention = false;
  bool fuses_attention(const Graph& g, const Node& n) const;
  // The target convolves through a library of its own (CUDA: cuDNN): a convolution of f32, f16
  // or bf16 over 1 to 3 spatial dims stays one kernel (KernelKind::convolution) instead of being
  // decomposed into its windows and a matmul like on every other target; depthwise, unit-stride
  // 1x1 and tiling ones over an image's few channels still decompose (a fused sum over taps; a
  // gemm reading x in place; a gemm over x's patches).
  bool convolution = false;
  bool runs_convolution(const Graph& g, const Node& n) const;
  // Convolutions run channels last (the library's fastest kernels take NHWC operands): the
  // graph's convolutions become convolution_channels_last between permutes, which are moved
  // past the ops between convolutions until they cancel (passes::to_channels_last,
  // sink_permutes), so everything from one convolution to the next runs channels last.
  bool channels_last = false;
  // Only f16/bf16 convolutions count towards channels last (the library's NHWC kernels are
  // tensor-core kernels), and f32 ones where they run on tensor cores too (CUDA: TF32,
  // cuda.allow_tf32): with FMA math cuDNN's f32 NHWC input gradients of ResNet-50's strided and
  // 64-channel 3x3 convolutions took 29-36 ms each on an H200 (262 of a 300 ms training step).
  bool channels_last_f32 = false;
  // Bytes the gemm wants each matrix row (every leading dim) aligned to, 0 for any: a large
  // product x @ w by a 2-D w whose K or N breaks it is padded with zeros to aligned sizes and its
  // result sliced back (CUDA: 16, cuBLASLt's vector loads; torch inductor's pad_mm).
  int64_t gemm_row_alignment = 0;
  // Most buffers one kernel may read and write (0: no limit): Vulkan's storage-buffer bindings
  // per shader stage. Fusion refuses kernels past it.
  int64_t max_kernel_buffers = 0;
  // Kernels can combine 64-bit values atomically (f64, i64): a scatter_add or scatter_reduce of
  // them runs generated; otherwise on the reference kernel (Vulkan without 64-bit atomics).
  bool atomic_64 = true;
  static Target cpu() { return {}; }
  static Target gpu();
};

struct Options {
  Target target;                 // what the schedule is for (Target::cpu() unless a target says)
  int64_t max_fusion_size = 64;  // most realized nodes in one kernel
  // Most ops on one path of values a kernel computes without storing them (a chain of pointwise
  // ops): a longer chain is stored and read again every so many ops. It bounds the depth of
  // every walk over a kernel's values (lowering and the codegens recurse along it) and the size
  // of one kernel's code (LLVM's optimisers grow faster than linearly with it): a 100k-op chain
  // is 100k / 256 kernels, not one kernel of 100k ops.
  int64_t max_inline_depth = 256;
  bool epilogue_fusion = true;   // pointwise consumers join reductions and matmuls
  bool aggressive_fusion = false;  // recompute more rather than store intermediates
  bool horizontal = true;        // siblings over one domain share a kernel
  bool split_reductions = true;  // full reductions of large static size run in two stages
  // Reads the fusion.* options of sdk/config.
  static Options from_config();
};

struct Schedule {
  Graph graph;  // the graph actually scheduled (decomposed, prepared); provenance refers to it
  std::vector<Buffer> buffers;
  std::vector<Slot> slots;
  std::vector<Kernel> kernels;
  std::vector<int32_t> outputs;  // buffer per graph output (an input's buffer when it is one)
  // Checks of what only a run can know (a gathering op's run-time indices lie inside the
  // selected dim): the last checks.size() entries of `outputs` are i64 counts of what went
  // wrong, which must be 0 after a run; each message says what a nonzero count means. The
  // kernels stay memory-safe meanwhile (indices are clamped), so a runtime reads the counts
  // after the kernels and reports the first nonzero one as a kiln::Error.
  std::vector<std::string> checks;
  int64_t peak_intermediate_bytes = 0;  // at the graph's example sizes
  std::vector<std::string> decisions;   // the fusion log, one line each

  std::string str() const;  // kernels, buffers and slots, readably
};

// The layout a schedule for `target` gives `g` where it turns it channels last (where its
// library convolutions dominate, or where that leaves fewer elements under permutes; the
// first steps of scheduling: convolutions channels last, composites decomposed, permutes sunk
// until they cancel), or nothing where the target keeps the graph's layout. A graph that is
// cut in two before scheduling (a compiled call's forward and backward) is cut on this one, so
// that a value one part stores for the other is the channels-last value both compute, not a
// copy back to the graph's layout and again.
std::optional<Graph> channels_last_layout(const Graph& g, const Target& target);

// Schedules a graph; throws kiln::Error for a graph it cannot schedule (naming node and op).
Schedule schedule_graph(const Graph& g, const Options& options = Options::from_config());
// The same with the options of sdk/config and the given target description.
Schedule schedule_graph(const Graph& g, const Target& target);

}  // namespace kiln::schedule
