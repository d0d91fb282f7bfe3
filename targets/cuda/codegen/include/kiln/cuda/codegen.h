// targets/cuda/codegen: Schedule -> KernelPlan for NVIDIA GPUs, as CUDA C text (for NVRTC).
//
// Portable C++ (no CUDA library), so it also runs in the browser. Values are printed by the
// C-style printer shared with the Vulkan codegen (targets/cstyle); this file writes the thread
// structure around them. Each kernel is `extern "C" __global__ void name(<buffer pointers in
// buffer-id order>, <every plan symbol as long long, in id order>)` with the launch in the
// plan (PlanLaunch):
// - pointwise: a grid-stride loop over the flattened domain, one element per thread per step, or
//   four consecutive elements when the last dim is a static multiple of 4 (unit-stride operands
//   and outputs then move as float4/int4/ushort4, checked for alignment once per launch, with
//   scalar accesses where the check fails);
// - reductions, row strategy (reduced dims contiguous): one block per outer point, threads stride
//   over the inner dims, warp shuffles then shared memory combine each pass's partials, and the
//   result is broadcast to the block for the next pass and the epilogue; with cache_rows, a
//   static row of <= 16 elements per thread is loaded once into registers and later passes read
//   them there; unit-stride rows move four elements at a time as in pointwise kernels; rows not
//   kept in registers take softmax's max and sum in one pass (online, rescaling the running sum);
// - reductions, column strategy (reduced dims strided): a block covers 32 consecutive outer points
//   (coalesced) with 8 or 32 groups of threads splitting the inner dims, combined in shared memory;
// - matmul: the runtime multiplies through cuBLASLt (PlanKernel::gemm); the generated kernel is
//   the epilogue, a pointwise kernel over the product (absent when there is none, or when it is
//   only a bias and a tanh-GELU that cuBLASLt applies itself: PlanGemm::epilogue);
// - attention (f16/bf16, head dims multiples of 16 up to 128, with or without a bool or additive
//   mask): one fused flash-attention kernel
//   (tensor cores, online softmax, scores never stored; src/attention.cpp says how), its body a
//   template in the prelude of plans that have one, of a fixed signature (sizes, strides and the
//   scale are PlanKernel::arg_values), so one program serves every graph of its configuration
//   and the runtime carries the common ones prebuilt.
// - convolution (f32/f16/bf16, 1 to 3 spatial dims): no source; the runtime runs cuDNN's
//   convolution on the kernel's buffers (PlanKernel::convolution), and what follows it (bias,
//   batch norm, activation, residual) is the next pointwise kernel.
// Reductions combine partials in a fixed order, so results are deterministic run to run.
#pragma once

#include "kiln/graph/graph.h"
#include "kiln/plan/plan.h"
#include "kiln/schedule/schedule.h"

namespace kiln::cuda {

// Every buffer a generated kernel takes starts at a multiple of this many bytes: the runtime
// allocates its own buffers so and copies an input bound at another address (PlanExecutable's
// bind). So vector accesses need no run-time alignment check, and NVRTC compiles no scalar
// copy of them (a quarter less time for a row reduction; docs/cuda.md).
inline constexpr int64_t kBufferAlignment = 16;

struct CodegenOptions {
  bool emulate_precision_casts = false;  // round f16/bf16 after every op
  int64_t pointwise_block = 256;         // threads per block of pointwise kernels
  int64_t pointwise_items_per_thread = 4;  // grid sized for this many elements per thread
  // Row reductions of several passes over a static row of at most 16 elements per thread keep
  // each thread's loaded elements in registers after the first pass (softmax, layer_norm read
  // their row from memory once).
  bool cache_rows = true;
  // Pointwise kernels and row reductions access unit-stride operands of a last dim that is a
  // static multiple of 4 four elements at a time (float4/int4, ushort4 for f16/bf16); symbolic
  // offsets and strides are checked per launch, with scalar accesses where they are not
  // multiples of 4 (addresses are, kBufferAlignment).
  bool vector_accesses = true;
  // Rows not kept in registers: max(a) and sum(exp(a - max)) (softmax, log_softmax, logsumexp)
  // in one pass over the row with a running rescaled sum, instead of two.
  bool online_softmax = true;
  // A 2-D gemm followed only by `+ bias[j]` or `gelu_tanh(+ bias[j])` applies them as cuBLASLt
  // epilogues (PlanGemm::epilogue) instead of an epilogue kernel.
  bool gemm_epilogues = true;
  // Attention kernels: 16-row tiles of queries per warp (1 or 2: blocks of 64 or 128 rows);
  // 0 picks 2 when both head dims are at most 64 (registers hold twice the rows), else 1.
  int64_t attention_warp_tiles = 0;
  // Compute capability of the device the plan is for (KernelPlan::arch; 0: any device). 90:
  // attention kernels with head dims of 64 or 128 use Hopper's warpgroup MMA (attention_sm90)
  // unless attention_sm90 is off (max-autotune times the other kernel too).
  int arch = 0;
  bool attention_sm90 = true;
  // f32 exp and division through libdevice's expf and IEEE division instead of the prelude's
  // kiln_exp and kiln_div (torch.compile's Triton kernels' ex2.approx and div.full.f32: a few ulp,
  // and softmax's program compiles in two thirds of the time). Config cuda.precise_math.
  bool precise_math = false;
  // "llvm": pointwise kernels (and matmul epilogues) are printed as LLVM IR modules for NVPTX
  // (PlanKernel::language "llvm", src/nvptx.cpp), which the runtime compiles with LLVM's NVPTX
  // backend and nvJitLink, several times sooner than NVRTC compiles their CUDA C (no C++ front
  // end, no NVVM); reductions and attention stay CUDA C. "nvrtc": every kernel is CUDA C.
  // Config cuda.compiler.
  std::string compiler = "llvm";
  // Column reductions: elements of its column a thread loads before it uses the first (1: one
  // at a time). Config cuda.column_loads_ahead.
  int64_t column_loads_ahead = 4;
  static CodegenOptions from_config();
};

// What the scheduler is told about this target (schedule::Target::gpu(): thousands of partials
// for full reductions, f16/bf16 gemms on tensor cores). Every CUDA caller schedules with it.
schedule::Target schedule_target();

// The plan of a schedule for target "cuda".
plan::KernelPlan generate(const schedule::Schedule& s, const CodegenOptions& options = CodegenOptions::from_config());

// Graph -> Schedule -> KernelPlan with the options of sdk/config.
plan::KernelPlan generate_plan(const Graph& g);

// Declarations and helpers every kernel's source needs (the plan's prelude).
const char* prelude();

// Whether a program's source is LLVM IR for NVPTX (modules of kernels of PlanKernel::language
// "llvm", one after the other) rather than CUDA C.
bool is_nvptx_program(const std::string& source);
// Such a program's modules, in order.
std::vector<std::string> nvptx_modules(const std::string& program);

}  // namespace kiln::cuda
