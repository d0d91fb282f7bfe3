// The CUDA toolkit libraries the CUDA target calls (NVRTC, nvJitLink, cuBLASLt, cuDNN), resolved with
// dlsym when first used (internal), as the driver is (driver_api.h). Linked directly, they cost
// every process that links Kiln about 0.5 s and 200 MB at start (cuBLASLt's static
// initialisers alone take 0.4 s), CPU-only ones and `kiln --help` included, and a binary would
// not start on a machine without the toolkit; loaded here, only a process that compiles or runs
// CUDA work pays, and one without the toolkit gets a kiln::Error naming the library it lacks.
#pragma once

#include <cublasLt.h>
#include <cudnn.h>
#include <nvJitLink.h>
#include <nvrtc.h>

namespace kiln::cuda::detail {

// Each library's entry points, listed once: X(name) for every function Kiln calls.
#define KILN_NVRTC_FUNCTIONS(X)                                                                          \
  X(nvrtcGetErrorString) X(nvrtcVersion) X(nvrtcGetNumSupportedArchs) X(nvrtcGetSupportedArchs)          \
  X(nvrtcCreateProgram) X(nvrtcDestroyProgram) X(nvrtcCompileProgram) X(nvrtcGetProgramLogSize)          \
  X(nvrtcGetProgramLog) X(nvrtcGetPTXSize) X(nvrtcGetPTX) X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN)
#define KILN_NVJITLINK_FUNCTIONS(X)                                                                      \
  X(nvJitLinkCreate) X(nvJitLinkDestroy) X(nvJitLinkAddData) X(nvJitLinkComplete)                        \
  X(nvJitLinkGetLinkedCubinSize) X(nvJitLinkGetLinkedCubin) X(nvJitLinkGetErrorLogSize) X(nvJitLinkGetErrorLog)
#define KILN_CUBLASLT_FUNCTIONS(X)                                                                       \
  X(cublasLtGetStatusName) X(cublasLtGetStatusString) X(cublasLtCreate) X(cublasLtMatrixLayoutCreate)   \
  X(cublasLtMatrixLayoutDestroy) X(cublasLtMatrixLayoutSetAttribute) X(cublasLtMatmulDescCreate)         \
  X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute) X(cublasLtMatmulPreferenceCreate)      \
  X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulPreferenceSetAttribute)                             \
  X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul)

// cuDNN's convolution API (the "legacy" one of cuDNN 9: descriptors, heuristics, one call).
#define KILN_CUDNN_FUNCTIONS(X)                                                                          \
  X(cudnnGetVersion) X(cudnnGetErrorString) X(cudnnCreate) X(cudnnSetStream)                             \
  X(cudnnCreateTensorDescriptor) X(cudnnSetTensorNdDescriptor) X(cudnnDestroyTensorDescriptor)           \
  X(cudnnCreateFilterDescriptor) X(cudnnSetFilterNdDescriptor) X(cudnnDestroyFilterDescriptor)           \
  X(cudnnCreateConvolutionDescriptor) X(cudnnSetConvolutionNdDescriptor)                                 \
  X(cudnnSetConvolutionGroupCount) X(cudnnSetConvolutionMathType) X(cudnnDestroyConvolutionDescriptor)   \
  X(cudnnGetConvolutionNdForwardOutputDim) X(cudnnGetConvolutionForwardAlgorithm_v7)                     \
  X(cudnnGetConvolutionForwardWorkspaceSize) X(cudnnConvolutionForward)                                  \
  X(cudnnGetConvolutionBackwardDataAlgorithm_v7) X(cudnnGetConvolutionBackwardDataWorkspaceSize)         \
  X(cudnnConvolutionBackwardData) X(cudnnGetConvolutionBackwardFilterAlgorithm_v7)                       \
  X(cudnnGetConvolutionBackwardFilterWorkspaceSize) X(cudnnConvolutionBackwardFilter)

#define KILN_TOOLKIT_MEMBER(f) decltype(&::f) f = nullptr;
struct NvrtcApi {
  KILN_NVRTC_FUNCTIONS(KILN_TOOLKIT_MEMBER)
};
struct NvJitLinkApi {
  KILN_NVJITLINK_FUNCTIONS(KILN_TOOLKIT_MEMBER)
};
struct CublasLtApi {
  KILN_CUBLASLT_FUNCTIONS(KILN_TOOLKIT_MEMBER)
};
struct CudnnApi {
  KILN_CUDNN_FUNCTIONS(KILN_TOOLKIT_MEMBER)
};
#undef KILN_TOOLKIT_MEMBER

// Each loaded on first call (thread-safe), or a kiln::Error "the CUDA target needs the CUDA
// toolkit's NVRTC (libnvrtc.so.13), which could not be loaded: <why>".
const NvrtcApi& nvrtc_api();
const NvJitLinkApi& nvjitlink_api();
const CublasLtApi& cublaslt_api();
// cuDNN (libcudnn.so.9, beside the toolkit or where the loader finds it, e.g. the lib folder of
// pip's nvidia-cudnn package on LD_LIBRARY_PATH): only plans with convolution kernels load it.
const CudnnApi& cudnn_api();

}  // namespace kiln::cuda::detail
