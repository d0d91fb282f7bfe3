// Custom ops: ops a program registers while it runs (torch.library's custom_op): a name, a
// version, a shape rule and a host kernel. A graph holds a call of one as a `custom` node whose
// attributes name it, give the version it was traced against and a config string for its
// functions; the shape rule, the host kernel and the derivative rule are looked up here by name
// wherever the node is checked, run or differentiated. Every target runs such a node alone, on
// the host (a plan's reference kernel: inputs copied from the device and the result back), or
// by the op's own device kernel where it registered one for the target (CustomOpKernel), so the
// compiler never looks inside it.
//
// The registry belongs to the process. A graph, plan or cache entry naming an op that is not
// registered here, or registered at another version, is a kiln::Error where its shape rule runs
// (reading, binding or running it), never a wrong result: a version is the promise that the
// shape rule and the kernel behave as they did when the graph was made, so change it with them.
// The C++ frontend (kiln/ops.h: kiln::register_op, kiln::custom_op) adds decompositions and
// Tensor-level signatures on top of this.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "kiln/graph/graph.h"
#include "kiln/graph/meta.h"
#include "kiln/graph/shape_env.h"
#include "kiln/graph/tensor_data.h"

namespace kiln {

// A kernel of a custom op for one target's device, compiled with the plan's generated kernels
// and run there without host copies. "cuda": CUDA C source holding `extern "C" __global__ void
// <entry>(...)`, whose parameters are the inputs' pointers (const, of their dtypes: float,
// double, int, long long, bool, __half, __nv_bfloat16 as the plan's prelude names them), the
// output's pointer, then as long long: the thread count, the output's sizes, each input's sizes
// in order. It runs on `threads` threads (default: one per output element) in blocks of
// `block`; a thread's index is blockIdx.x * blockDim.x + threadIdx.x, and those at or past the
// count must do nothing. The output is not zero-filled: the kernel writes every element.
// "vulkan": GLSL 450 source defining `void <entry>(int64_t thread, ...)`, called once for each
// thread index below the thread count, its other parameters as CUDA's after the pointers (the
// thread count, the output's sizes, each input's sizes, all int64_t); it reads input i as
// `kiln_in<i>(j)` and writes the output as `kiln_out(j) = v` (element j, contiguous; float,
// double, int, int64_t, uint8_t for bool, uint16_t bits for f16/bf16, converted where they are
// read and written: 8- and 16-bit variables need features Kiln does not enable). Kiln writes the
// shader's buffers, push constants and main around it (names starting kiln_ or kbind are taken)
// in workgroups of `block`. Where an input is a strided view or the device lacks 8-/16-bit
// storage for its dtype, the host kernel runs instead.
struct CustomOpKernel {
  std::string source;
  std::string entry;
  int64_t block = 256;
  std::function<SymInt(std::span<const TensorMeta* const> inputs, const TensorMeta& out, const std::string& config)>
      threads;  // unset: out's element count
};

struct CustomOpDef {
  std::string name;     // "namespace::name": letters, digits and '_' on each side of one "::", and '.'
                        // in the namespace (an ONNX node of domain D and type T calls "D::T")
  std::string version;  // any text; part of every graph (and so every cache key) that calls the op
  int min_inputs = 1;
  int max_inputs = 1;   // -1: any number
  // The output's dtype and sizes from the inputs' (sizes may be symbolic: compare them through
  // `shapes`, e.g. shapes.decide_equal, or pass them on) and the call's config; throws
  // kiln::Error for inputs the op does not take. The device is the inputs'.
  std::function<TensorMeta(std::span<const TensorMeta* const> inputs, const std::string& config, ShapeEnv& shapes)>
      infer;
  // Computes the output on the host: the inputs contiguous host tensors, `out` a zero-filled
  // contiguous host tensor of the dtype and sizes the shape rule gave. May throw kiln::Error.
  std::function<void(std::span<const TensorData> inputs, const std::string& config, const TensorData& out)> compute;
  // Device kernels by target name ("cuda", "vulkan"); a target without one runs `compute` on the host.
  // Registering folds a hash of their sources into `version`, so a changed source is a new
  // version (and a cache miss) even where the version given is not changed.
  std::map<std::string, CustomOpKernel, std::less<>> device_kernels;
  // The op's derivative rule (as an op table's, ops.h's GradFn): appends to `g` the nodes of
  // each input's gradient from the output's (c.grad), one id per input, -1 where it gets none.
  // sdk/autodiff calls it wherever a gradient flows through the op (eager autograd, traced
  // backward passes, compiled calls' backward graphs). Unset: that is an error naming the op.
  std::function<std::vector<NodeId>(Graph& g, const GradContext& c)> grad;
};

// Registers `op`, replacing an op of the same name (the graphs that name the old version then
// fail to bind, unless the version is the same). Throws kiln::Error for a malformed name, an
// empty version, bad arities, or a missing shape rule or kernel.
void register_custom_op(CustomOpDef op);
// Removes the op of that name; false when there was none.
bool unregister_custom_op(std::string_view name);
// The registered op `name` at `version`; throws kiln::Error saying which of the two is wrong.
std::shared_ptr<const CustomOpDef> find_custom_op(std::string_view name, std::string_view version);
// The registered op `name` at whatever version; null when there is none.
std::shared_ptr<const CustomOpDef> find_custom_op(std::string_view name);
// Runs `f`, which calls one of op `name`'s functions (`role`: "shape rule", "host kernel", ...):
// a kiln::Error it throws comes out naming the op, any other exception as a kiln::Error saying
// that function threw.
void run_custom_op_function(std::string_view name, std::string_view role, const std::function<void()>& f);

}  // namespace kiln
