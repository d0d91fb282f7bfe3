// The CUDA toolkit libraries the CUDA target calls (NVRTC, nvJitLink, cuBLASLt), resolved with
// dlsym when first used (internal), as the driver is (driver_api.h). Linked directly, they cost
// every process that links Kiln about 0.5 s and 200 MB at start (cuBLASLt's static
// initialisers alone take 0.4 s), CPU-only ones and `kiln --help` included, and a binary would
// not start on a machine without the toolkit; loaded here, only a process that compiles or runs
// CUDA work pays, and one without the toolkit gets a kiln::Error naming the library it lacks.
#pragma once

#include <cublasLt.h>
#include <nvJitLink.h>
#include <nvrtc.h>

namespace kiln::cuda::detail {

struct NvrtcApi {
  decltype(&::nvrtcGetErrorString) nvrtcGetErrorString = nullptr;
  decltype(&::nvrtcVersion) nvrtcVersion = nullptr;
  decltype(&::nvrtcGetNumSupportedArchs) nvrtcGetNumSupportedArchs = nullptr;
  decltype(&::nvrtcGetSupportedArchs) nvrtcGetSupportedArchs = nullptr;
  decltype(&::nvrtcCreateProgram) nvrtcCreateProgram = nullptr;
  decltype(&::nvrtcDestroyProgram) nvrtcDestroyProgram = nullptr;
  decltype(&::nvrtcCompileProgram) nvrtcCompileProgram = nullptr;
  decltype(&::nvrtcGetProgramLogSize) nvrtcGetProgramLogSize = nullptr;
  decltype(&::nvrtcGetProgramLog) nvrtcGetProgramLog = nullptr;
  decltype(&::nvrtcGetPTXSize) nvrtcGetPTXSize = nullptr;
  decltype(&::nvrtcGetPTX) nvrtcGetPTX = nullptr;
  decltype(&::nvrtcGetCUBINSize) nvrtcGetCUBINSize = nullptr;
  decltype(&::nvrtcGetCUBIN) nvrtcGetCUBIN = nullptr;
};

struct NvJitLinkApi {
  decltype(&::nvJitLinkCreate) nvJitLinkCreate = nullptr;
  decltype(&::nvJitLinkDestroy) nvJitLinkDestroy = nullptr;
  decltype(&::nvJitLinkAddData) nvJitLinkAddData = nullptr;
  decltype(&::nvJitLinkComplete) nvJitLinkComplete = nullptr;
  decltype(&::nvJitLinkGetLinkedCubinSize) nvJitLinkGetLinkedCubinSize = nullptr;
  decltype(&::nvJitLinkGetLinkedCubin) nvJitLinkGetLinkedCubin = nullptr;
  decltype(&::nvJitLinkGetErrorLogSize) nvJitLinkGetErrorLogSize = nullptr;
  decltype(&::nvJitLinkGetErrorLog) nvJitLinkGetErrorLog = nullptr;
};

struct CublasLtApi {
  decltype(&::cublasLtGetStatusName) cublasLtGetStatusName = nullptr;
  decltype(&::cublasLtGetStatusString) cublasLtGetStatusString = nullptr;
  decltype(&::cublasLtCreate) cublasLtCreate = nullptr;
  decltype(&::cublasLtMatrixLayoutCreate) cublasLtMatrixLayoutCreate = nullptr;
  decltype(&::cublasLtMatrixLayoutDestroy) cublasLtMatrixLayoutDestroy = nullptr;
  decltype(&::cublasLtMatrixLayoutSetAttribute) cublasLtMatrixLayoutSetAttribute = nullptr;
  decltype(&::cublasLtMatmulDescCreate) cublasLtMatmulDescCreate = nullptr;
  decltype(&::cublasLtMatmulDescDestroy) cublasLtMatmulDescDestroy = nullptr;
  decltype(&::cublasLtMatmulDescSetAttribute) cublasLtMatmulDescSetAttribute = nullptr;
  decltype(&::cublasLtMatmulPreferenceCreate) cublasLtMatmulPreferenceCreate = nullptr;
  decltype(&::cublasLtMatmulPreferenceDestroy) cublasLtMatmulPreferenceDestroy = nullptr;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) cublasLtMatmulPreferenceSetAttribute = nullptr;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) cublasLtMatmulAlgoGetHeuristic = nullptr;
  decltype(&::cublasLtMatmul) cublasLtMatmul = nullptr;
};

// Each loaded on first call (thread-safe), or a kiln::Error "the CUDA target needs the CUDA
// toolkit's NVRTC (libnvrtc.so.13), which could not be loaded: <why>".
const NvrtcApi& nvrtc_api();
const NvJitLinkApi& nvjitlink_api();
const CublasLtApi& cublaslt_api();

}  // namespace kiln::cuda::detail
