// kiln::register_op and kiln::custom_op: the frontend's registry of decompositions beside the
// graph's registry of shape rules and host kernels (kiln/graph/custom_ops.h).
#include "kiln/custom_op.h"

#include <map>
#include <memory>
#include <mutex>

#include "kiln/capture/grad_mode.h"
#include "kiln/graph/custom_ops.h"
#include "kiln/graph/error.h"
#include "trace.h"

namespace kiln {

namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<const CustomOp>, std::less<>> ops;
};

Registry& registry() {
  static auto* r = new Registry();  // never destroyed, as the graph's registry
  return *r;
}

std::shared_ptr<const CustomOp> find(const std::string& name) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  const auto it = r.ops.find(name);
  return it == r.ops.end() ? nullptr : it->second;
}

}  // namespace

void register_op(CustomOp op) {
  KILN_CHECK(op.compute != nullptr || op.decomposition != nullptr, "register_op(", op.name,
             "): needs a host kernel (compute), a decomposition or both");
  CustomOpDef def;
  def.name = op.name;
  def.version = op.version;
  def.min_inputs = op.min_inputs;
  def.max_inputs = op.max_inputs;
  if (op.infer) {
    def.infer = op.infer;
  } else {
    const std::string name = op.name;
    def.infer = [name](std::span<const TensorMeta* const> in, const std::string&, ShapeEnv&) {
      KILN_CHECK(!in.empty(), "custom op ", name, " has no shape rule, so it gives input 0's dtype and sizes, ",
                 "but it was called without inputs");
      return TensorMeta{in[0]->dtype, in[0]->device, in[0]->sizes, {}};
    };
  }
  if (op.compute) {
    def.compute = [compute = op.compute](std::span<const TensorData> in, const std::string& config,
                                         const TensorData& out) {
      std::vector<Tensor> inputs;
      inputs.reserve(in.size());
      for (const TensorData& t : in) inputs.push_back(Tensor::from_data(t));
      compute(inputs, config, Tensor::from_data(out));
    };
  } else {  // a decomposition alone: the graph never holds the op, but eager calls check its shape rule
    const std::string name = op.name;
    def.compute = [name](std::span<const TensorData>, const std::string&, const TensorData&) {
      fail("custom op ", name, " has no host kernel (it runs as its decomposition)");
    };
  }
  def.device_kernels = op.device_kernels;
  std::string name = op.name;
  register_custom_op(std::move(def));  // checks the name, version, arities and kernels
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  r.ops[std::move(name)] = std::make_shared<const CustomOp>(std::move(op));
}

bool unregister_op(const std::string& name) {
  const bool had = unregister_custom_op(name);
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  return r.ops.erase(name) > 0 || had;
}

Tensor custom_op(const std::string& name, const std::vector<Tensor>& inputs, const std::string& config) {
  std::vector<const Tensor*> ptrs;
  ptrs.reserve(inputs.size());
  // Graphs name the graph registry's version (the given one with the device kernels' hash).
  const std::shared_ptr<const CustomOpDef> def = find_custom_op(name);
  KILN_CHECK(def != nullptr, "custom_op: no op named ", name, " is registered (kiln::register_op)");
  const Attrs attrs{name, def->version, config};
  const std::shared_ptr<const CustomOp> op = find(name);
  if (!op) {  // registered with the graph's registry alone (register_custom_op): its node
    for (const Tensor& t : inputs) ptrs.push_back(&t);
    return detail::dispatch(OpId::custom, ptrs, attrs);
  }
  bool wants_grad = false;
  for (const Tensor& t : inputs) {
    KILN_CHECK(t.defined(), "custom op ", name, ": an input tensor is undefined (default-constructed)");
    ptrs.push_back(&t);
    wants_grad = wants_grad || (grad_enabled() && t.requires_grad());
  }
  detail::Trace* trace = detail::current_trace();
  if (op->decomposition && (trace != nullptr || !op->compute || wants_grad)) {
    // The shape rule holds the decomposition to what the op promises.
    std::vector<const TensorMeta*> metas;
    for (const Tensor& t : inputs) metas.push_back(&t.meta());
    ShapeEnv eager_shapes;
    const TensorMeta want =
        op_def(OpId::custom).infer(InferContext{OpId::custom, metas, attrs, trace ? trace->graph.shapes() : eager_shapes});
    Tensor y = op->decomposition(inputs, config);
    KILN_CHECK(y.defined(), "custom op ", name, ": its decomposition returned an undefined tensor");
    KILN_CHECK(y.dtype() == want.dtype && y.meta().sizes == want.sizes, "custom op ", name, ": its decomposition gave ",
               y.meta().str(), ", but its shape rule says ", want.str());
    return y;
  }
  return detail::dispatch(OpId::custom, ptrs, attrs);
}

}  // namespace kiln
