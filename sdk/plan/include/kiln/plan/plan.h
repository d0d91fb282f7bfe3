// KernelPlan: the portable artifact a codegen makes from a Schedule and a runtime runs.
// Versioned JSON, byte-identical for the same graph, config and target wherever it is made
// (natively or in the browser). It holds source text, never binaries: per kernel its source,
// entry point, launch shape and the graph nodes it computes (provenance); the buffers with
// symbolic sizes and the memory slots intermediates share; how each size symbol is read off
// the inputs; the guards the plan assumes; and which buffer is each output.
//
// A plan is native code: a runtime compiles its source and runs it. A plan saved to a file
// carries what made it (PlanOrigin), so that a runtime given one by a user can make it again
// from that and run it only if the two are the same (docs/plan-trust.md).
//
// Takes: nothing but its own fields (codegens fill them). Gives: str(), the readable form
// `kiln show --plan` prints, and module_source(). Beside it: its JSON form (plan_json.h, with the
// graph format's encoders for sizes, symbols, facts, attributes and tensors from sdk/graph's
// json_values.h), and what every runtime checks and computes before running one (bind.h).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/graph/graph.h"

namespace kiln::plan {

inline constexpr int kPlanVersion = 1;

struct PlanBuffer {
  int32_t id = 0;
  std::string kind;  // "input", "constant", "output", "intermediate"
  DType dtype = DType::f32;
  SymShape sizes;
  SymShape strides;   // element strides
  int32_t index = -1; // input: argument position; output: first output it serves
  int32_t slot = -1;  // intermediate: memory slot
  std::shared_ptr<const ConstantData> data;  // constants
};

// A GPU launch: `block` threads per block; blocks = ceil(parallel_extent / items_per_block),
// capped at max_blocks when that is > 0 (the kernel then loops over the rest, grid-stride).
// grid_stride false: the kernel does only its own block's items (no loop; the CUDA codegen's row
// reductions over a static number of rows), so it must get every block: max_blocks must be 0.
struct PlanLaunch {
  int64_t block = 0;             // 0: not a GPU kernel (cpu plans)
  int64_t items_per_block = 1;
  int64_t max_blocks = 0;
  int64_t shared_bytes = 0;      // dynamic shared memory per block
  bool grid_stride = true;
  bool operator==(const PlanLaunch&) const = default;
};

// A matrix product the runtime runs through its BLAS before the kernel's own code (GPU matmul
// kernels: the generated source is the epilogue over c). C[b] = A[b] @ B[b] per batch index b,
// operands given as strided row-major views (element strides; 0 broadcasts over a batch dim).
struct PlanGemm {
  int32_t a = -1, b = -1, c = -1;  // buffers
  DType dtype = DType::f32;        // of a, b and c
  SymInt m = 0, n = 0, k = 0;
  SymShape batch;
  SymShape a_batch_strides, b_batch_strides;
  SymInt a_offset = 0, b_offset = 0;
  SymInt a_row_stride = 0, a_col_stride = 0;
  SymInt b_row_stride = 0, b_col_stride = 0;
  // What the gemm itself applies to its product where the target fuses it (cuBLASLt epilogues):
  // "" (nothing), "bias" (c[.., i, j] += bias[j]), "gelu_bias" (c = gelu_tanh(c + bias[j])) or
  // "gelu" (c = gelu_tanh(c)), rounded once to dtype; bias (not with "gelu") is then a buffer
  // of dtype holding n elements.
  std::string epilogue;
  int32_t bias = -1;
  double alpha = 1.0;  // the product is scaled by alpha (before the epilogue), in the gemm
  // Generated gemm shaders (vulkan): the [rows, cols] of C one workgroup step computes; the
  // runtime dispatches one workgroup per tile and batch element (up to its cap; the shader
  // grid-strides over the rest). {0, 0} where a library multiplies.
  std::array<int64_t, 2> tile = {0, 0};
  bool operator==(const PlanGemm&) const = default;
};

// PlanGemm::epilogue's values, and which of them add a bias.
inline bool gemm_epilogue_known(const std::string& e) { return e == "bias" || e == "gelu_bias" || e == "gelu"; }
inline bool gemm_epilogue_has_bias(const std::string& e) { return e == "bias" || e == "gelu_bias"; }

// A convolution the runtime runs through its library (cuDNN) as the whole kernel: y = conv(x, w)
// over n = x_sizes.size() - 2 spatial dims, x [N, C, *S] and w [M, C/groups, *K] whole contiguous
// buffers, y a contiguous [N, M, *O] (schedule::Convolution says more); or, by `computes`, one
// of its gradients: x's from y's and w (backward data) or w's from x and y's (backward filter),
// the buffers then holding the gradients.
struct PlanConvolution {
  int32_t x = -1, w = -1, y = -1;  // buffers, all of `dtype`
  DType dtype = DType::f32;
  SymShape x_sizes;
  std::vector<int64_t> w_sizes;
  std::vector<int64_t> strides, pads, dilations;  // pads: n begins, then n ends
  int64_t groups = 1;
  // x [N, *S, C], w [M, *K, C/groups] and y [N, *O, M] (the sizes above in that order), as the
  // op convolution_channels_last; else x [N, C, *S], w [M, C/groups, *K], y [N, M, *O]
  bool channels_last = false;
  ConvolutionComputes computes = ConvolutionComputes::y;  // the buffer written; the other two are read
  // y's sizes: [N, M, (S + pads - (K - 1) * dilation - 1) / stride + 1 ...] (channels last: M last)
  SymShape y_sizes() const;
  bool operator==(const PlanConvolution&) const = default;
};

struct PlanKernel {
  std::string name;
  std::string kind;    // "pointwise", "reduction", "matmul", "attention" (generated), "convolution", "reference" or
                       // "custom" (a custom op's own kernel, of fixed signature: kiln/graph/custom_ops.h)
  std::string entry;   // generated: the function to call
  // generated, max-autotune: other functions in the source computing the same thing another way
  // (vector width, block size); the runtime times them on the first call and keeps the fastest
  std::vector<std::string> variants;
  std::string source;  // generated: the kernel's source text (for cpu, an LLVM IR function)
  // The language of `source` where it is not the target's own (cuda: CUDA C in the plan's
  // module): "llvm", a whole LLVM IR module for NVPTX holding this kernel, compiled on its own
  // (not part of module_source()).
  std::string language;
  bool own_module() const { return !language.empty(); }
  SymInt parallel_extent = 1;  // the launch: [0, extent) split over threads
  int64_t grain = 1;           // smallest chunk of that range worth a thread
  PlanLaunch launch;           // GPU targets
  std::optional<PlanGemm> gemm;  // GPU matmul kernels
  std::optional<PlanConvolution> convolution;  // convolution kernels (no source)
  // Generated kernels of a fixed signature (library kernels: one source for every graph of their
  // kind, e.g. CUDA's flash attention per dtype and head dims, so a target may build them ahead
  // of time): their parameters, in order, are these buffers (repeats allowed), then these values
  // evaluated at launch as 64-bit integers, instead of the buffers they read or write in id
  // order followed by every plan symbol. Such a kernel is its own program (kernel_program()).
  std::vector<int32_t> arg_buffers;
  std::vector<SymInt> arg_values;
  bool fixed_signature() const { return !arg_buffers.empty(); }
  std::vector<NodeId> provenance;
  std::vector<int32_t> reads, writes;
  // reference kernels: one op of the op table on whole buffers
  OpId op = OpId::input;
  Attrs attrs;
  std::vector<int32_t> inputs;
  int32_t output = -1;
};

// The buffers a kernel reads or writes, in id order, each once: the buffer parameters of a
// generated kernel (unless fixed_signature()), so that kernels alike but for the buffers they
// touch (a model's repeated layers) have the same source: the CPU's `buffers` array, CUDA's
// pointer arguments, Vulkan's bindings.
std::vector<int32_t> kernel_bindings(const PlanKernel& k);

// Symbol `symbol` is the size of dim `dim` of input `input`.
struct SymbolBinding {
  SymbolId symbol = 0;
  int32_t input = 0;
  int32_t dim = 0;
};

// What made a plan: the graph the codegen scheduled (after the passes), as kiln.graph JSON text;
// the codegen request (device capabilities, e.g. arch=90); the effective value of every option
// that affects codegen, as text config::parse_value reads; and the Kiln that made it. Empty in
// plans that live only in a process or a cache entry (the cache's key covers the same things);
// filled when a plan is written for someone to run later (--save-plan, debug_dir, the browser).
struct PlanOrigin {
  std::string graph;
  std::map<std::string, std::string> request;
  std::map<std::string, std::string> options;
  std::string kiln_version;
  bool empty() const { return graph.empty(); }
};

struct KernelPlan {
  int version = kPlanVersion;
  std::string target;   // "cpu", "cuda"
  std::string prelude;  // module text every kernel's source needs (declarations, helpers)
  // cuda: the compute capability the kernels were generated for (90: they may use sm_90a's
  // instructions); 0: any device. The runtime refuses a plan for another device.
  int arch = 0;
  std::vector<SymbolInfo> symbols;
  std::vector<ShapeFact> facts;
  std::vector<SymbolBinding> bindings;  // one per symbol
  std::vector<PlanBuffer> buffers;
  std::vector<SymInt> slots;            // bytes of each intermediate slot
  std::vector<PlanKernel> kernels;      // in execution order
  std::vector<int32_t> outputs;         // buffer per graph output, then one per check
  // What only a run can know (schedule::Schedule::checks): the last checks.size() entries of
  // `outputs` are 0-d i64 counts that must be 0 after a run, each with the sentence saying what
  // a nonzero count means. Runtimes read them after the kernels (plan::finish_outputs).
  std::vector<std::string> checks;
  int64_t peak_intermediate_bytes = 0;  // at the example sizes
  std::vector<std::string> guards;      // what the plan assumes, one sentence each
  PlanOrigin origin;                    // what made it, where it was written to a file
  // A plan file signed with a key the user trusts (KILN_CACHE_SECRET): the HMAC-SHA256 of the
  // plan's JSON without this field, in hex (plan_signed_text); empty when unsigned.
  std::string signature;

  std::string str() const;
  // The whole module: prelude then every generated kernel's source (a source that an earlier
  // kernel has too, as two attention kernels of one fixed signature do, once); without the
  // kernels of fixed signature (each their own program) unless `fixed_too`, and never with the
  // kernels that are modules of their own (PlanKernel::language).
  std::string module_source(bool fixed_too = true) const;
  // The kernels that are modules of their own (PlanKernel::language), each distinct source once
  // (kernels named by content repeat), concatenated: what one program links.
  std::string own_modules() const;
  // Kernel ki alone: the prelude, then its source (what a kernel of fixed signature compiles as).
  std::string kernel_program(size_t ki) const;
};

}  // namespace kiln::plan
