// Internal to frontends/cpp: the Vulkan target behind Tensor::to(Device::vulkan(i)) and the
// "kiln" backend for graphs whose inputs live on a Vulkan device.
#pragma once

#include "kiln/capture/backend.h"
#include "kiln/graph/tensor_data.h"

namespace kiln::detail {

// A copy of `t` on `to` (cpu <-> vulkan:i, vulkan:i -> vulkan:j). Throws "no Vulkan device: ..."
// where there is none, or when this build has no Vulkan target.
TensorData vulkan_move(const TensorData& t, Device to);
// Every graph input on one Vulkan device (and no empty tensor): the graph compiles for it.
bool vulkan_target_applies(const Graph& g);
// Schedule + GLSL (with the device's caps) + shaderc + pipelines of an optimised graph, through
// an in-memory cache of executables keyed by the canonical graph and the codegen options.
Executable vulkan_executable(const Graph& g);

}  // namespace kiln::detail
