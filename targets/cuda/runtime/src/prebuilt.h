// Kernel images built together with this library: the programs of CUDA kernels with a fixed
// signature (plan::PlanKernel::arg_buffers; today the flash attention kernel) in their most
// common configurations, compiled at build time by prebuild_kernels.cpp for sm_80 and sm_90 (and
// the sm_90 plans' own wgmma kernels for sm_90a).
// compile_module() loads one of these instead of running NVRTC when a program's text is exactly
// one of theirs (NVRTC takes 0.2-0.5 s on a flash kernel), so a graph's first call with
// attention starts in milliseconds. They are part of the library, as cuBLAS's kernels are, not
// a cache: the text is the key, so a change to the codegen can never load a stale image.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

namespace kiln::cuda::detail {

struct PrebuiltImage {
  int arch = 0;                 // 80 = sm_80, ...
  std::string_view source;      // the program's text
  std::string_view image;       // its cubin
};

// Defined in the generated prebuilt_kernels.cpp.
std::span<const PrebuiltImage> prebuilt_images();

// The image for `source` that runs on a device of compute capability `arch` (built for that
// arch, or for a lower minor of the same major: cubins run there), or nullptr.
const PrebuiltImage* find_prebuilt(std::string_view source, int arch);

}  // namespace kiln::cuda::detail
