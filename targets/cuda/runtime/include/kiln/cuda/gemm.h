// Matrix products of KernelPlans (plan::PlanGemm) through cuBLASLt on a Context's stream:
// C[b] = A[b] @ B[b] for every batch index, A and B strided row-major views (one of each
// operand's two matrix strides must be 1, or its dim 1), C contiguous. f32 (TF32 tensor cores
// only when allowed), f16 and bf16 (f32 accumulation), f64. The row-major product is computed as
// the column-major C^T = B^T A^T; the last batch dim is cuBLASLt's strided batch (stride 0
// broadcasts), the others loop.
#pragma once

#include <thread>
#include <vector>

#include "kiln/cuda/device.h"
#include "kiln/plan/plan.h"

namespace kiln::cuda {

// Each problem (shapes, strides, dtype, epilogue) is set up once per thread: cuBLASLt's
// descriptors, and the algorithms its heuristic proposes for them, best first (the heuristic
// runs once per process and problem).
//
// `ptrs`: device address of element 0 of each buffer (by buffer id); `syms`: symbol values.
// `stream`: a CUstream of ctx's device to queue on (a capture stream when recording a CUDA
// graph); null means the context's stream. `algorithm`: which of the heuristic's algorithms
// (0: its first choice; max-autotune times the others, gemm_algorithms() says how many).
void run_gemm(Context& ctx, const plan::PlanGemm& g, const std::vector<DevicePtr>& ptrs, const std::vector<int64_t>& syms,
              bool allow_tf32, const std::string& kernel, void* stream = nullptr, int algorithm = 0);
// cuBLASLt's start-up on a thread the caller must join, for a plan being loaded (or, ahead of any
// plan, for a compile about to begin on ctx's device, with sample problems): loading
// cuBLASLt, its handle and workspace on ctx (once per process), then the heuristics of `gemms`
// (the plan's problems, repeats found in the table; those of symbolic sizes wait for their first call), so that
// they overlap the plan's compile. An empty thread when there are none. PlanExecutable::load
// starts it for a plan with gemms and joins it before the first run: a start-up left running
// when a short process exited crashed inside cuBLASLt, whose state exit tears down.
std::thread start_gemm(Context& ctx, std::vector<plan::PlanGemm> gemms, bool allow_tf32, bool ahead_of_plan = false);
// How many algorithms cuBLASLt's heuristic proposes for the gemm at these sizes (at most 8; 0
// for an empty product).
int gemm_algorithms(Context& ctx, const plan::PlanGemm& g, const std::vector<int64_t>& syms, bool allow_tf32,
                    const std::string& kernel);

}  // namespace kiln::cuda
