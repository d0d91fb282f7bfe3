// Convolutions of KernelPlans (plan::PlanConvolution) through cuDNN on a Context's stream:
// y = conv(x, w) or its gradients (backward data: x's from y's and w; backward filter: w's
// from x and y's) over 1 to 3 spatial dims, NCHW-style contiguous buffers (a 1-D convolution runs
// as a 2-D one of height 1), symmetric pads. f32 (TF32 tensor cores only when allowed), f16 and
// bf16 (f32 accumulation, tensor cores). cuDNN is loaded when the first convolution runs.
#pragma once

#include <string>
#include <thread>
#include <vector>

#include "kiln/cuda/device.h"
#include "kiln/plan/plan.h"

namespace kiln::cuda {

// Each problem (sizes, dtype, math) is set up once per process: cuDNN's descriptors and the
// algorithms its heuristic proposes for them that fit the workspace, best first.
//
// `ptrs`: device address of element 0 of each buffer (by buffer id); `syms`: symbol values.
// `stream`: a CUstream of ctx's device to queue on (a capture stream when recording a CUDA
// graph); null means the context's stream. `algorithm`: which of the proposed algorithms (0:
// the heuristic's first choice; max-autotune times the others, convolution_algorithms() says
// how many).
void run_convolution(Context& ctx, const plan::PlanConvolution& c, const std::vector<DevicePtr>& ptrs,
                     const std::vector<int64_t>& syms, bool allow_tf32, const std::string& kernel, void* stream = nullptr,
                     int algorithm = 0);
int convolution_algorithms(Context& ctx, const plan::PlanConvolution& c, const std::vector<int64_t>& syms,
                           bool allow_tf32, const std::string& kernel);
// cuDNN's start-up on a thread of its own, for a plan being loaded (or, ahead of any plan, with
// sample problems): loading cuDNN and its
// handle and workspace on ctx (once per process), then setting up `convolutions` (the plan's;
// each problem once, those of symbolic sizes at their first call), so that their
// heuristics overlap the plan's compile (resnet50 fp32's cold first run on an H100: 0.44 s, of
// which 0.12 s in heuristics; 0.13 s with them done here). An empty thread when there are none.
// The caller joins it before its first run.
std::thread start_convolution(Context& ctx, std::vector<plan::PlanConvolution> convolutions, bool allow_tf32,
                              bool ahead_of_plan = false);
// "cuDNN <algorithm name>" of the algorithm `algorithm` would pick (for autotuning reports).
std::string convolution_algorithm_name(Context& ctx, const plan::PlanConvolution& c, const std::vector<int64_t>& syms,
                                       bool allow_tf32, const std::string& kernel, int algorithm);

}  // namespace kiln::cuda
