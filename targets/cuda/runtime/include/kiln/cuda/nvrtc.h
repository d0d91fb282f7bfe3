// NVRTC: CUDA C source -> cubin (or PTX) for one compute capability, in process. Needs no GPU:
// CI compiles every generated kernel with it. Errors are kiln::Errors that name the program and
// the architecture and carry NVRTC's log and the numbered source.
#pragma once

#include <string>
#include <vector>

namespace kiln::cuda {

struct NvrtcOutput {
  std::string image;  // cubin (ELF) bytes, or PTX text
  bool cubin = true;
  std::string log;    // warnings (empty when none)
  double seconds = 0;
};

// Compiles `source` (a whole translation unit) for compute capability `arch` (80 = sm_80, 90 =
// sm_90, ...): to a cubin for that exact device (`cubin`; sm_90 as sm_90a, so Hopper's own
// instructions are available), else to PTX for compute_<arch>.
// Options: -std=c++17, --use_fast_math off (the numerics are the reference's), -default-device,
// -minimal, --no-cache (NVRTC's own image cache off: Kiln's plan cache is the one cache); `extra`
// adds more (e.g. "-lineinfo"), then KILN_NVRTC_OPTIONS (space-separated, read once; for
// measuring options such as --Ofast-compile=mid).
NvrtcOutput nvrtc_compile(const std::string& source, const std::string& name, int arch, bool cubin = true,
                          const std::vector<std::string>& extra = {});

// "13.0": the NVRTC this process uses (part of every compiled-code cache key).
std::string nvrtc_version();
// KILN_NVRTC_OPTIONS as nvrtc_compile adds it ("" when unset; also part of the cache keys).
std::string nvrtc_env_options();
// Compute capabilities NVRTC can target (e.g. 75, 80, 86, 89, 90, 100, 120).
std::vector<int> nvrtc_supported_archs();

// Starts (once per process) a background compile of an empty program for `arch`, so that NVRTC's
// one-time start (loading its builtins, initialising the compiler) is done before the first
// plan needs it. Context::get calls it when it makes a device's context.
void nvrtc_prewarm(int arch);

// `source` with line numbers, for error messages.
std::string numbered_source(const std::string& source);

}  // namespace kiln::cuda
