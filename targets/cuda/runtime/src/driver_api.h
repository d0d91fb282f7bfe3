// The driver API entry points Kiln uses, resolved with dlsym from libcuda.so.1 (internal).
#pragma once

#include <cuda.h>

#include <string>

namespace kiln::cuda::detail {

struct DriverApi {
  decltype(&::cuGetErrorName) cuGetErrorName = nullptr;
  decltype(&::cuGetErrorString) cuGetErrorString = nullptr;
  decltype(&::cuInit) cuInit = nullptr;
  decltype(&::cuDriverGetVersion) cuDriverGetVersion = nullptr;
  decltype(&::cuDeviceGetCount) cuDeviceGetCount = nullptr;
  decltype(&::cuDeviceGet) cuDeviceGet = nullptr;
  decltype(&::cuDeviceGetName) cuDeviceGetName = nullptr;
  decltype(&::cuDeviceGetAttribute) cuDeviceGetAttribute = nullptr;
  decltype(&::cuDeviceTotalMem_v2) cuDeviceTotalMem = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) cuDevicePrimaryCtxRetain = nullptr;
  decltype(&::cuCtxSetCurrent) cuCtxSetCurrent = nullptr;
  decltype(&::cuStreamCreate) cuStreamCreate = nullptr;
  decltype(&::cuStreamSynchronize) cuStreamSynchronize = nullptr;
  decltype(&::cuMemAlloc_v2) cuMemAlloc = nullptr;
  decltype(&::cuMemFree_v2) cuMemFree = nullptr;
  decltype(&::cuMemHostAlloc) cuMemHostAlloc = nullptr;
  decltype(&::cuMemFreeHost) cuMemFreeHost = nullptr;
  decltype(&::cuMemcpyHtoDAsync_v2) cuMemcpyHtoDAsync = nullptr;
  decltype(&::cuMemcpyDtoHAsync_v2) cuMemcpyDtoHAsync = nullptr;
  decltype(&::cuMemcpyDtoDAsync_v2) cuMemcpyDtoDAsync = nullptr;
  decltype(&::cuMemsetD8Async) cuMemsetD8Async = nullptr;
  decltype(&::cuModuleLoadData) cuModuleLoadData = nullptr;
  decltype(&::cuModuleUnload) cuModuleUnload = nullptr;
  decltype(&::cuModuleGetFunction) cuModuleGetFunction = nullptr;
  decltype(&::cuFuncSetAttribute) cuFuncSetAttribute = nullptr;
  decltype(&::cuLaunchKernel) cuLaunchKernel = nullptr;
  decltype(&::cuEventCreate) cuEventCreate = nullptr;
  decltype(&::cuEventDestroy_v2) cuEventDestroy = nullptr;
  decltype(&::cuEventRecord) cuEventRecord = nullptr;
  decltype(&::cuEventSynchronize) cuEventSynchronize = nullptr;
  decltype(&::cuEventElapsedTime_v2) cuEventElapsedTime = nullptr;
  // CUDA graphs (reduce-overhead, backend cudagraphs)
  decltype(&::cuStreamDestroy_v2) cuStreamDestroy = nullptr;
  decltype(&::cuStreamBeginCapture_v2) cuStreamBeginCapture = nullptr;
  decltype(&::cuStreamEndCapture) cuStreamEndCapture = nullptr;
  decltype(&::cuGraphCreate) cuGraphCreate = nullptr;
  decltype(&::cuGraphDestroy) cuGraphDestroy = nullptr;
  decltype(&::cuGraphAddKernelNode_v2) cuGraphAddKernelNode = nullptr;
  decltype(&::cuGraphAddChildGraphNode) cuGraphAddChildGraphNode = nullptr;
  decltype(&::cuGraphInstantiateWithFlags) cuGraphInstantiate = nullptr;
  decltype(&::cuGraphExecDestroy) cuGraphExecDestroy = nullptr;
  decltype(&::cuGraphLaunch) cuGraphLaunch = nullptr;
  decltype(&::cuGraphExecKernelNodeSetParams_v2) cuGraphExecKernelNodeSetParams = nullptr;
  decltype(&::cuGraphExecChildGraphNodeSetParams) cuGraphExecChildGraphNodeSetParams = nullptr;
};

// The loaded driver (after a successful cuInit), or a kiln::Error "no CUDA device: ...".
const DriverApi& driver();

// Throws kiln::Error "CUDA: <call> failed: CUDA_ERROR_X (message) <context>" unless r is success.
void check(CUresult r, const char* call, const std::string& context = {});

}  // namespace kiln::cuda::detail
