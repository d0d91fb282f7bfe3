// Custom ops in the C++ API (torch.library.custom_op): register an op once, with its shape
// rule and its host kernel and, optionally, a decomposition into Kiln's ops; then call it with
// kiln::custom_op like any other op, eagerly or inside kiln::compile.
//
// - Eager calls run the op's kernel for their inputs' device where it has one and that device
//   runs eager ops (a single-op plan, as other eager ops), else the host kernel (on device inputs
//   through host copies), or the decomposition where there is no kernel, or where an input
//   requires gradients and the op has no backward of its own.
// - Compiled functions trace the decomposition where there is one, so that it fuses with its
//   neighbours and runs on the device. Otherwise the call is one opaque node of the graph
//   (kiln/graph/custom_ops.h): every target runs it alone, by the op's kernel for its device
//   where it has one (device_kernels), else by the host kernel; caches key it by
//   its name, version and config, and a cache entry or plan that names an op this process has
//   not registered, or registered at another version, is refused, never run.
// - Gradients flow through the op's backward where it has one, else through its
//   decomposition; a gradient that reaches an op with neither is an error naming it.
// A custom op must be a pure function of its inputs and config: compiled graphs may fold it
// over constants, merge two equal calls, or drop an unused one.
#pragma once

#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "kiln/graph/custom_ops.h"
#include "kiln/tensor.h"

namespace kiln {

struct CustomOp {
  std::string name;           // "namespace::name"
  std::string version = "1";  // change it whenever the shape rule or the kernel changes
  int min_inputs = 1;
  int max_inputs = 1;         // -1: any number
  // The output's dtype and sizes (symbolic while tracing: compare them with shapes.decide_equal
  // or pass them on); throw kiln::Error for inputs the op does not take. Unset: input 0's dtype
  // and sizes.
  std::function<TensorMeta(std::span<const TensorMeta* const> inputs, const std::string& config, ShapeEnv& shapes)>
      infer;
  // The host kernel: concrete contiguous host inputs; fills `out` (a zero-filled contiguous host
  // tensor of the dtype and sizes `infer` gave) through out.data().data_as<T>().
  std::function<void(std::span<const Tensor> inputs, const std::string& config, const Tensor& out)> compute;
  // The op written with Kiln's ops (what compiled functions trace, and what gradients flow through).
  std::function<Tensor(std::span<const Tensor> inputs, const std::string& config)> decomposition;
  // The op's own derivative (torch.library's register_autograd): each input's gradient from the
  // inputs, the output and the output's gradient `grad`, written with Kiln's ops; one tensor per
  // input, of its sizes, or undefined where it gets none. It is traced, so one rule serves eager
  // backward(), backward passes traced inside compiled functions and compiled calls' backward
  // graphs; it must not need values (no item(), no branching on data). With it, gradients flow
  // through the host kernel: eager calls whose inputs require gradients keep the kernel.
  std::function<std::vector<Tensor>(std::span<const Tensor> inputs, const Tensor& output, const Tensor& grad,
                                    const std::string& config)>
      backward;
  // Kernels for a target's device by target name ("cuda": CUDA C, "vulkan": GLSL;
  // kiln/graph/custom_ops.h gives their signatures): a compiled graph on that device runs the op
  // there, without host copies, and so does an eager call on that device's tensors.
  std::map<std::string, CustomOpKernel, std::less<>> device_kernels;
};

// Registers `op` (a kernel, a decomposition or both), replacing one of the same name. Throws
// kiln::Error for a malformed name, an empty version or bad arities.
void register_op(CustomOp op);
// Removes the op of that name; false when there was none.
bool unregister_op(const std::string& name);
// Calls the registered op `name` on `inputs`, passing `config` to its functions.
Tensor custom_op(const std::string& name, const std::vector<Tensor>& inputs, const std::string& config = "");

}  // namespace kiln
