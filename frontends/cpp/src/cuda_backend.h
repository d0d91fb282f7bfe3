// Internal to frontends/cpp: the CUDA target behind Tensor::to(Device::cuda(i)), eager ops on
// CUDA tensors and the "kiln" backend for graphs whose inputs live on a CUDA device.
#pragma once

#include <optional>
#include <span>

#include "kiln/capture/backend.h"
#include "kiln/graph/tensor_data.h"

namespace kiln::detail {

bool cuda_target_available();  // built with KILN_WITH_CUDA (a device may still be absent)
// A copy of `t` on `to` (cpu <-> cuda:i, cuda:i -> cuda:j). Throws "no CUDA device: ..." where
// there is none, or when this build has no CUDA target.
TensorData cuda_move(const TensorData& t, Device to);
// Every graph input on one CUDA device (and no empty tensor): the graph compiles for it.
bool cuda_target_applies(const Graph& g);
// Schedule + CUDA C + NVRTC + module load of an optimised graph, through an in-memory cache of
// plans keyed by the canonical graph and the codegen options.
Executable cuda_executable(const Graph& g);
// Backend "cudagraphs": the graph's ops as unfused kernels (one per op, as eager mode runs them),
// recorded once as a CUDA graph and replayed (cudagraphs on: see cuda/executable.h).
Executable cuda_graphs_executable(const Graph& g);
// Eager mode on CUDA tensors: one op as a compiled single-op kernel on the device, cached by op,
// attributes, dtypes and sizes. Composites run as their decomposition op by op.
TensorData cuda_eager(OpId op, std::span<const TensorData> inputs, const Attrs& attrs);

}  // namespace kiln::detail
