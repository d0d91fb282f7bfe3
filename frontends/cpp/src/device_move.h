// Moving tensor data between devices: the one place that knows which runtime copies what
// (the host, CUDA through targets/cuda, Vulkan through targets/vulkan; between two GPUs of
// different kinds through the host). Tensor::to and the reference fallback use it.
#pragma once

#include "kiln/graph/tensor_data.h"

namespace kiln::detail {

// `t` on `to` (t itself when it is there already); throws kiln::Error when no runtime can.
TensorData move_data(const TensorData& t, Device to);

}  // namespace kiln::detail
