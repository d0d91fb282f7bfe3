#include "toolkit_api.h"

#include <cuda.h>
#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include "background.h"
#include "kiln/graph/error.h"

// KILN_CUDA_TOOLKIT_LIBDIR (set by CMakeLists.txt): the toolkit's library folder at build time,
// tried after the loader's own search (LD_LIBRARY_PATH, ld.so.cache), where the toolkit is not
// registered with ldconfig.
#ifndef KILN_CUDA_TOOLKIT_LIBDIR
#define KILN_CUDA_TOOLKIT_LIBDIR ""
#endif

namespace kiln::cuda::detail {
namespace {

// The library's handle, or a kiln::Error saying which library is missing and why.
void* open_library(const char* what, const std::string& soname) {
  void* h = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::string why = h ? "" : (dlerror() ?: "?");
  if (!h && *KILN_CUDA_TOOLKIT_LIBDIR) {
    h = dlopen((std::string(KILN_CUDA_TOOLKIT_LIBDIR) + "/" + soname).c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) why += std::string("; ") + (dlerror() ?: "?");
  }
  if (!h)
    fail("the CUDA target needs the CUDA toolkit's ", what, " (", soname, "), which could not be loaded: ", why,
         std::string(what) == "cuDNN"
             ? " (put the folder holding it on LD_LIBRARY_PATH, or set the option cuda.cudnn to false to run convolutions as "
               "their windows times the weights)"
             : "");
  // After the library's own exit handlers: the exit waits for background work inside it first.
  std::atexit(wait_for_background_work);
  return h;
}

// The library's entry points: `list` applies X(name) to each (the lists in toolkit_api.h).
#define KILN_TOOLKIT_LOAD(Api, list, what, stem, major)                                                   \
  [] {                                                                                                    \
    const std::string soname = std::string(stem) + ".so." + std::to_string(major);                       \
    const char* const library = what;                                                                     \
    void* h = open_library(library, soname);                                                              \
    Api a;                                                                                                \
    list(KILN_TOOLKIT_SYMBOL)                                                                             \
    return a;                                                                                             \
  }()
#define KILN_TOOLKIT_SYMBOL(f)                                                                            \
  a.f = reinterpret_cast<decltype(a.f)>(dlsym(h, #f));                                                    \
  if (!a.f) fail("the CUDA target needs ", #f, ", which ", library, " (", soname, ") lacks (an older toolkit?)");

}  // namespace

const NvrtcApi& nvrtc_api() {
  static const NvrtcApi api = KILN_TOOLKIT_LOAD(NvrtcApi, KILN_NVRTC_FUNCTIONS, "NVRTC", "libnvrtc", CUDA_VERSION / 1000);
  return api;
}

const NvJitLinkApi& nvjitlink_api() {
  static const NvJitLinkApi api = KILN_TOOLKIT_LOAD(NvJitLinkApi, KILN_NVJITLINK_FUNCTIONS, "nvJitLink", "libnvJitLink", CUDA_VERSION / 1000);
  return api;
}

const CublasLtApi& cublaslt_api() {
  static const CublasLtApi api = KILN_TOOLKIT_LOAD(CublasLtApi, KILN_CUBLASLT_FUNCTIONS, "cuBLASLt", "libcublasLt", CUDA_VERSION / 1000);
  return api;
}

const CudnnApi& cudnn_api() {
  static const CudnnApi api = KILN_TOOLKIT_LOAD(CudnnApi, KILN_CUDNN_FUNCTIONS, "cuDNN", "libcudnn", CUDNN_MAJOR);
  return api;
}

}  // namespace kiln::cuda::detail
