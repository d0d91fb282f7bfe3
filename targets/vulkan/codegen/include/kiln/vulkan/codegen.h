// targets/vulkan/codegen: Schedule -> KernelPlan for Vulkan compute, as GLSL 450 text (compiled to
// SPIR-V by the runtime with shaderc).
//
// Portable C++ (no Vulkan header), so it also runs in the browser. Values are printed by the
// C-style printer shared with the CUDA codegen (targets/cstyle) through a GLSL dialect; this file
// writes the shaders around them. Every generated kernel is one complete compute shader:
// - bindings: set 0, binding i = the i-th buffer of sorted(reads ∪ writes) of the PlanKernel, a
//   std430 storage buffer of the buffer's storage type (readonly where only read);
// - push constants: every plan symbol as int64_t, in id order (`pc.s<id>`), then, for input
//   buffers the plan reads with a negative stride, the element offset of element 0 in the bound
//   range (`pc.o<buffer>`), then an int64 zero (`pc.kz`, see GlslDialect::int_literal);
// - workgroup size: specialization constant 0 (`local_size_x_id = 0`); the runtime passes
//   PlanLaunch::block;
// - pointwise: a grid-stride loop over the flattened domain; grid-, row- and column-stride loops
//   are unrolled by CodegenOptions::unroll (independent loads in flight; same combine order) and
//   buffers are declared restrict;
// - float controls: f32 DenormPreserve / SignedZeroInfNanPreserve execution modes where the device
//   supports them (DeviceCaps::denorm_preserve, nan_preserve);
// - reductions, row strategy: one workgroup per outer point (grid-stride over them), invocations
//   stride over the inner dims, partials combined by a shared-memory tree (fixed order, so results
//   are deterministic), or where the device has subgroup arithmetic (DeviceCaps::subgroup) and the
//   states are floats, within each subgroup by subgroupAdd/Max/... first and by the tree over the
//   subgroups' partials; each pass's result is broadcast to the workgroup for the next pass;
// - vector accesses: f32/i32 buffers read or written with unit stride along a last dim whose
//   extent is a static multiple of 4 also get a vec4/ivec4 view of their binding, and each
//   invocation takes 4 consecutive elements per step as one access (pointwise kernels, row passes);
// - row cache: a row reduction of several passes over a static row of at most 32 elements per
//   invocation keeps them in registers from the pass that first loads them;
// - reductions, column strategy (reduced dims strided): 32 consecutive outer points per workgroup,
//   8 or 32 groups of invocations splitting the inner dims, combined in shared memory;
// - matmul: a generated tiled GEMM shader (16x16 output tiles, operands staged through shared
//   memory; a PlanKernel named `<kernel>_gemm` of kind "matmul" with PlanKernel::gemm describing
//   the product and its 3-D dispatch), then the epilogue as a pointwise kernel over the product.
// Numerics are the CPU codegen's (f16/bf16 computed in f32 and rounded where stored or cast,
// integers in 64 bits wrapped to 32 where the dtype says, NaN-propagating max/min; f32 sin/cos/tanh
// written out in f32, sin/cos falling back to f64 for |x| > 8192); f16/bf16 are
// stored as 16-bit words (GL_EXT_shader_16bit_storage) or, without it, packed two to a uint and
// converted in the shader; bool as bytes (8-bit storage) or packed four to a uint. f64 and int64
// need the device's shaderFloat64 / shaderInt64 (lavapipe has both): a plan using f64 for a
// device without it is a kiln::Error naming the kernel.
#pragma once

#include <string>

#include "kiln/graph/graph.h"
#include "kiln/plan/plan.h"
#include "kiln/schedule/schedule.h"

namespace kiln::vulkan {

// What the device offers that the shaders may use (the runtime fills it from the device's
// features: vulkan::Device::caps()). The defaults are lavapipe's.
struct DeviceCaps {
  bool storage16 = true;  // storageBuffer16BitAccess: f16/bf16 buffers as uint16_t
  bool storage8 = true;   // storageBuffer8BitAccess: bool buffers as uint8_t
  bool float64 = true;    // shaderFloat64
  bool int64 = true;      // shaderInt64 (required: sizes and integer values are 64-bit)
  // Subgroup basic, vote and arithmetic operations in compute shaders: row reductions of float
  // states combine each subgroup with subgroupAdd/Mul/Max/Min (flags with subgroupAny) before
  // the shared-memory tree over the subgroups. Off: the shared-memory tree alone.
  bool subgroup = false;
  // Float controls (SPIR-V execution modes, Vulkan 1.2): f32 denormals kept instead of flushed
  // (shaderDenormPreserveFloat32; NVIDIA flushes them by default) and signed zeros, infinities
  // and NaN kept through the driver's optimisations (shaderSignedZeroInfNanPreserveFloat32;
  // without it NVIDIA turned relu's select into a max that drops NaN).
  bool denorm_preserve = false;
  bool nan_preserve = false;
  int64_t max_workgroup = 256;  // largest workgroup the codegen asks for
  // The most storage buffers one kernel binds (maxPerStageDescriptorStorageBuffers; Mesa's
  // lavapipe allows 32, NVIDIA millions): the scheduler fuses no kernel past it.
  int64_t max_storage_buffers = 32;
  std::string str() const;      // "16bit-storage 8bit-storage f64 int64 wg<=256 sb<=32"
};

struct CodegenOptions {
  bool emulate_precision_casts = false;  // round f16/bf16 after every op
  int64_t pointwise_block = 256;         // invocations per workgroup of pointwise kernels
  int64_t pointwise_items_per_thread = 4;
  int64_t unroll = 4;                    // bodies per iteration of the grid- and row-stride loops
  // f32/i32 loads and stores of 4 consecutive elements as one vec4/ivec4 access (pointwise
  // kernels and row reductions; the last dim a static multiple of 4).
  bool vector_accesses = true;
  // Row reductions of several passes over a static row of at most 32 elements per invocation keep
  // those elements in registers after the first pass loads them (softmax reads its row once).
  bool cache_rows = true;
  // The gemm shader loads an f32 operand whose k stride is 1 as vec4s of 4 consecutive k where
  // its base, other stride and K are multiples of 4 (checked per tile), beside vector_accesses.
  // Off: on an H100 (driver 580) bert, vit_b_16 and resnet50 ran 10-20% slower with them
  // (docs/vulkan.md); KILN_VULKAN_GEMM_VECTORS=1 turns them on for measuring.
  bool gemm_vector_loads = false;
  // A gemm's pointwise epilogue (bias, activation, residual) computed in the gemm shader from the
  // values it holds, where the epilogue reads C element for element in C's order: C is then
  // not stored (unless another kernel reads it) nor read back by a pointwise kernel.
  // Config vulkan.fuse_gemm_epilogue.
  bool fuse_gemm_epilogue = true;
  // Every gemm shader's blocking, "BMxBN/TMxTN/BK", or "auto" for the rule per product (config
  // vulkan.gemm_blocking; for measuring tiles).
  std::string gemm_blocking = "auto";
  int64_t max_workgroups = 65535;        // dispatch cap (maxComputeWorkGroupCount's guaranteed minimum)
  // A GPU (discrete, integrated or virtual; not a CPU driver like lavapipe): full reductions are
  // split into thousands of partials (schedule_target) instead of the CPU's few dozen.
  bool gpu = false;
  DeviceCaps caps;
  static CodegenOptions from_config();
};

// The plan of a schedule for target "vulkan". Its prelude is one comment line naming the caps the
// shaders assume (the runtime checks them against the device).
plan::KernelPlan generate(const schedule::Schedule& s, const CodegenOptions& options = CodegenOptions::from_config());

// What the scheduler is told about the device: on a GPU schedule::Target::gpu()'s split factors
// (sum(x) of 2^26 elements in 2048 partials, one workgroup each, rather than 64 that leave most
// of an H100's 132 SMs idle) but not its low-precision gemm (the GEMM shader multiplies f32 and
// f64, so f16/bf16 operands are cast first); on a CPU driver Target::cpu().
schedule::Target schedule_target(const CodegenOptions& options);

// Graph -> Schedule (schedule_target) -> KernelPlan with the options of sdk/config.
plan::KernelPlan generate_plan(const Graph& g, const CodegenOptions& options = CodegenOptions::from_config());

// The bindings of a generated kernel: plan::kernel_bindings (sorted(reads ∪ writes)).
using plan::kernel_bindings;
// Input buffers whose element 0 is not at the start of their bound range (a negative stride):
// their offsets follow the symbols in the push constants, in this order.
std::vector<int32_t> offset_buffers(const plan::KernelPlan& p);

}  // namespace kiln::vulkan
