// targets/cpu/codegen: Schedule -> KernelPlan for the CPU, as LLVM 16 IR text.
//
// Portable C++ (no LLVM library), so it also runs in the browser. Each generated kernel is one
// function `void @name(ptr %buffers, ptr %sizes, i64 %begin, i64 %end)` over a slice of its
// flattened outer domain (docs/cpu-runtime.md has the contract): pointwise kernels walk that
// slice row segment by row segment with the innermost loop contiguous (vectorised by LLVM);
// reductions walk it one outer point at a time with one loop over the inner dims per pass
// (row strategy), or, when the reduced dims are the strided ones, a block of contiguous outer
// points at a time with per-point accumulators (column strategy), so memory is read once per
// pass either way; float sums use `reassoc` so LLVM vectorises them with a tree combine; matmul
// kernels call the BLAS (`kiln_sgemm`, which the runtime provides) on a block of rows and run
// their epilogue over those rows while they are in cache.
//
// Numerics: f16/bf16 values are computed in f32 and rounded where stored or cast (like
// torch.compile; `emulate_precision_casts` rounds after every op instead); integers in i64,
// wrapped to their width after each op; tanh, sigmoid and gelu from exp (vectorisable).
#pragma once

#include <string>

#include "kiln/graph/graph.h"
#include "kiln/plan/plan.h"
#include "kiln/schedule/schedule.h"

namespace kiln::cpu {

struct CodegenOptions {
  bool emulate_precision_casts = false;  // round f16/bf16 after every op
  // max-autotune: also emit each pointwise/reduction kernel for 256- and 512-bit vectors,
  // unrolled once and 4 times (LLVM's interleave count), and column reductions with other block
  // sizes, listed as the kernel's variants
  bool autotune_variants = false;
  // matmul: "blas", "generated" or "auto"; max-autotune (autotune_gemm) emits the other as a
  // variant, and the generated tiles also 2 and 8 rows high, so the runtime can time them all
  std::string matmul = "auto";
  bool autotune_gemm = false;
  int64_t vector_width = 0;  // bits the kernels prefer (128, 256, 512); 0: Kiln's choice for the host
  int64_t pointwise_grain = 32768;       // elements per parallel chunk, at least
  int64_t reduction_grain = 32768;       // elements (outer points x inner extent) per chunk
  static CodegenOptions from_config();
};

// The plan of a schedule. Symbols are bound from the inputs where some input dim is exactly
// that symbol; a schedule with a symbol no input binds is an error.
plan::KernelPlan generate(const schedule::Schedule& s, const CodegenOptions& options = CodegenOptions::from_config());

// Graph -> Schedule -> KernelPlan with the options of sdk/config.
plan::KernelPlan generate_plan(const Graph& g);

}  // namespace kiln::cpu
