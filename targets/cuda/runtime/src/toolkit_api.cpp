#include "toolkit_api.h"

#include <cuda.h>
#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <type_traits>

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
  if (!h) fail("the CUDA target needs the CUDA toolkit's ", what, " (", soname, "), which could not be loaded: ", why);
  // After the library's own exit handlers: the exit waits for background work inside it first.
  std::atexit(wait_for_background_work);
  return h;
}

struct Loader {
  void* handle;
  template <class Fn>
  void operator()(Fn& fn, const char* name, const char* what, const std::string& soname) const {
    fn = reinterpret_cast<std::remove_reference_t<Fn>>(dlsym(handle, name));
    if (!fn) fail("the CUDA target needs ", name, ", which ", what, " (", soname, ") lacks (an older toolkit?)");
  }
};

// The major version in the toolkit's sonames: the one Kiln was built against.
std::string so(const char* stem) { return std::string(stem) + ".so." + std::to_string(CUDA_VERSION / 1000); }

}  // namespace

const NvrtcApi& nvrtc_api() {
  static const NvrtcApi api = [] {
    const std::string soname = so("libnvrtc");
    const Loader sym{open_library("NVRTC", soname)};
    NvrtcApi a;
#define KILN_SYM(f) sym(a.f, #f, "NVRTC", soname)
    KILN_SYM(nvrtcGetErrorString);
    KILN_SYM(nvrtcVersion);
    KILN_SYM(nvrtcGetNumSupportedArchs);
    KILN_SYM(nvrtcGetSupportedArchs);
    KILN_SYM(nvrtcCreateProgram);
    KILN_SYM(nvrtcDestroyProgram);
    KILN_SYM(nvrtcCompileProgram);
    KILN_SYM(nvrtcGetProgramLogSize);
    KILN_SYM(nvrtcGetProgramLog);
    KILN_SYM(nvrtcGetPTXSize);
    KILN_SYM(nvrtcGetPTX);
    KILN_SYM(nvrtcGetCUBINSize);
    KILN_SYM(nvrtcGetCUBIN);
#undef KILN_SYM
    return a;
  }();
  return api;
}

const NvJitLinkApi& nvjitlink_api() {
  static const NvJitLinkApi api = [] {
    const std::string soname = so("libnvJitLink");
    const Loader sym{open_library("nvJitLink", soname)};
    NvJitLinkApi a;
#define KILN_SYM(f) sym(a.f, #f, "nvJitLink", soname)
    KILN_SYM(nvJitLinkCreate);
    KILN_SYM(nvJitLinkDestroy);
    KILN_SYM(nvJitLinkAddData);
    KILN_SYM(nvJitLinkComplete);
    KILN_SYM(nvJitLinkGetLinkedCubinSize);
    KILN_SYM(nvJitLinkGetLinkedCubin);
    KILN_SYM(nvJitLinkGetErrorLogSize);
    KILN_SYM(nvJitLinkGetErrorLog);
#undef KILN_SYM
    return a;
  }();
  return api;
}

const CublasLtApi& cublaslt_api() {
  static const CublasLtApi api = [] {
    const std::string soname = so("libcublasLt");
    const Loader sym{open_library("cuBLASLt", soname)};
    CublasLtApi a;
#define KILN_SYM(f) sym(a.f, #f, "cuBLASLt", soname)
    KILN_SYM(cublasLtGetStatusName);
    KILN_SYM(cublasLtGetStatusString);
    KILN_SYM(cublasLtCreate);
    KILN_SYM(cublasLtMatrixLayoutCreate);
    KILN_SYM(cublasLtMatrixLayoutDestroy);
    KILN_SYM(cublasLtMatrixLayoutSetAttribute);
    KILN_SYM(cublasLtMatmulDescCreate);
    KILN_SYM(cublasLtMatmulDescDestroy);
    KILN_SYM(cublasLtMatmulDescSetAttribute);
    KILN_SYM(cublasLtMatmulPreferenceCreate);
    KILN_SYM(cublasLtMatmulPreferenceDestroy);
    KILN_SYM(cublasLtMatmulPreferenceSetAttribute);
    KILN_SYM(cublasLtMatmulAlgoGetHeuristic);
    KILN_SYM(cublasLtMatmul);
#undef KILN_SYM
    return a;
  }();
  return api;
}

}  // namespace kiln::cuda::detail
