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

using BackwardFn = decltype(CustomOp::backward);

// The graph-level rule (kiln/graph/custom_ops.h's CustomOpDef::grad) of a Tensor-level backward:
// the backward traced on tensors standing for the rule's nodes, then its nodes copied into the
// graph being differentiated (constants it captured included), with what it decided about
// symbolic sizes.
std::vector<NodeId> traced_backward(const std::string& name, const BackwardFn& backward, Graph& g,
                                    const GradContext& c) {
  detail::Trace t;
  t.id = detail::next_trace_id();
  t.fullgraph = true;  // a value it needs is an error, not a graph break
  t.label = "the backward of custom op " + name;
  t.graph.shapes() = g.shapes();
  const size_t facts_before = t.graph.shapes().facts().size();
  std::vector<NodeId> stands_for;  // per input of t.graph, the node of g
  const auto stand_in = [&](NodeId id) {
    TensorMeta m = g.node(id).meta;
    m.strides.clear();
    stands_for.push_back(id);
    return detail::wrap_node(t, t.graph.add_input(std::move(m)));
  };
  std::vector<Tensor> inputs;
  for (NodeId id : c.inputs) inputs.push_back(stand_in(id));
  const Tensor output = stand_in(c.output);
  const Tensor grad = stand_in(c.grad);
  std::vector<Tensor> grads;
  std::vector<NodeId> results;
  {
    detail::TraceScope scope(t);
    NoGrad off;
    grads = backward(inputs, output, grad, c.attrs.s(2));
    KILN_CHECK(grads.size() == inputs.size(), "custom op ", name, ": its backward gave ", grads.size(),
               " gradients for ", inputs.size(), " inputs");
    for (size_t k = 0; k < grads.size(); ++k) {
      if (!grads[k].defined()) {
        results.push_back(-1);
        continue;
      }
      KILN_CHECK(grads[k].meta().sizes == inputs[k].meta().sizes, "custom op ", name, ": its backward gave ",
                 grads[k].meta().str(), " as the gradient of input ", k, ", which is ", inputs[k].meta().str(),
                 "; a gradient has its input's sizes");
      results.push_back(detail::node_of(t, grads[k], t.label));
    }
  }
  std::vector<NodeId> into(t.graph.size(), -1);
  for (size_t id = 0; id < t.graph.size(); ++id) {
    const Node& n = t.graph.node(static_cast<NodeId>(id));
    if (n.op == OpId::input) {
      into[id] = stands_for[static_cast<size_t>(n.attrs.i(0))];
      continue;
    }
    std::vector<NodeId> in;
    for (NodeId i : n.inputs) in.push_back(into[static_cast<size_t>(i)]);
    into[id] = g.add(n.op, std::move(in), n.attrs);
  }
  for (size_t f = facts_before; f < t.graph.shapes().facts().size(); ++f) g.shapes().add_fact(t.graph.shapes().facts()[f]);
  for (NodeId& r : results)
    if (r >= 0) r = into[static_cast<size_t>(r)];
  return results;
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
  if (op.backward) {
    def.grad = [name = op.name, backward = op.backward](Graph& g, const GradContext& c) {
      return traced_backward(name, backward, g, c);
    };
  }
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
  if (op->decomposition && (trace != nullptr || !op->compute || (wants_grad && !op->backward))) {
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
