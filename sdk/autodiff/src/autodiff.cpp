#include "kiln/autodiff/autodiff.h"

#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include "kiln/graph/custom_ops.h"
#include "kiln/graph/error.h"

namespace kiln::autodiff {

bool differentiable(DType t) { return is_floating(t); }

NodeId sum_to(Graph& g, NodeId v, const TensorMeta& target) {
  // A copy: `target` may be a node's meta in g, which the nodes added here can move.
  const TensorMeta to = target;
  const TensorMeta vm = g.node(v).meta;
  const int64_t extra = vm.rank() - to.rank();
  KILN_INTERNAL_CHECK(extra >= 0, "autodiff: a gradient ", shape_str(vm.sizes), " has fewer dims than its input ",
                      shape_str(to.sizes));
  std::vector<int64_t> lead(static_cast<size_t>(extra));
  std::iota(lead.begin(), lead.end(), 0);
  if (extra > 0) v = g.add(OpId::sum, {v}, {lead, false});
  std::vector<int64_t> ones;
  for (int64_t d = 0; d < to.rank(); ++d) {
    const SymInt& want = to.sizes[static_cast<size_t>(d)];
    const SymInt& have = vm.sizes[static_cast<size_t>(d + extra)];
    if (want == have) continue;
    KILN_INTERNAL_CHECK(want == 1, "autodiff: a gradient ", shape_str(vm.sizes), " does not broadcast from its input ",
                        shape_str(to.sizes));
    ones.push_back(d);
  }
  if (!ones.empty()) v = g.add(OpId::sum, {v}, {ones, true});
  if (g.node(v).meta.dtype != to.dtype) v = g.add(OpId::cast, {v}, {to.dtype});
  return v;
}

namespace {

struct Accumulator {
  Graph& g;
  std::unordered_map<NodeId, NodeId> grads;

  void add(NodeId node, NodeId grad) {
    grad = sum_to(g, grad, g.node(node).meta);
    auto [it, fresh] = grads.try_emplace(node, grad);
    if (fresh) return;
    NodeId sum = scatter_into(it->second, grad);
    if (sum < 0) sum = scatter_into(grad, it->second);
    it->second = sum >= 0 ? sum : g.add(OpId::add, {it->second, grad});
  }
  // base + scatter_add(zeros, index, src) as scatter_add(base, index, src): the rows add into
  // base's buffer instead of into a table of zeros added to base after (a tied embedding's
  // gradients, one from the lookup and one from the output projection); -1 when `scattered` is
  // not such a scatter of base's meta.
  NodeId scatter_into(NodeId base, NodeId scattered) {
    const Node& s = g.node(scattered);
    if (s.op != OpId::scatter_add) return -1;
    const Node& zeros = g.node(s.inputs[0]);
    if (zeros.op != OpId::full || zeros.attrs.f(1) != 0.0) return -1;
    const TensorMeta& b = g.node(base).meta;
    if (!(b.sizes == s.meta.sizes) || b.dtype != s.meta.dtype) return -1;
    return g.add(OpId::scatter_add, {base, s.inputs[1], s.inputs[2]}, s.attrs);
  }
  NodeId get(NodeId node) const {
    const auto it = grads.find(node);
    return it == grads.end() ? -1 : it->second;
  }
};

// `from` and every node whose value depends on one of them through the steps: only their
// gradients are worth computing.
std::unordered_set<NodeId> dependents(std::span<const Step> steps, std::unordered_set<NodeId> from) {
  for (const Step& s : steps)
    for (NodeId in : s.inputs)
      if (from.count(in)) {
        from.insert(s.output);
        break;
      }
  return from;
}

void backward(Graph& g, std::span<const Step> steps, Accumulator& acc, const std::unordered_set<NodeId>& live);

// One step: its rule, or its decomposition differentiated in place.
void backward_step(Graph& g, const Step& s, NodeId gy, Accumulator& acc, const std::unordered_set<NodeId>& live) {
  const OpDef& def = op_def(s.op);
  const GradContext c{s.op, s.inputs, s.output, gy, s.attrs};
  const auto take = [&](const std::vector<NodeId>& gx) {
    for (size_t i = 0; i < gx.size(); ++i)
      if (gx[i] >= 0 && live.count(s.inputs[i]) && differentiable(g.node(s.inputs[i]).meta.dtype))
        acc.add(s.inputs[i], gx[i]);
  };
  if (def.grad) {
    const std::vector<NodeId> gx = def.grad(g, c);
    KILN_INTERNAL_CHECK(gx.size() == s.inputs.size(), "autodiff: the rule of ", def.name, " gave ", gx.size(),
                        " gradients for ", s.inputs.size(), " inputs");
    take(gx);
    return;
  }
  if (s.op == OpId::custom) {  // the registered op's own rule (kiln/graph/custom_ops.h)
    const std::string& name = s.attrs.s(0);
    const std::shared_ptr<const CustomOpDef> op = find_custom_op(name, s.attrs.s(1));
    KILN_CHECK(op->grad != nullptr, "backward: custom op ", name, " has no derivative, and a gradient flows ",
               "through it (into ", g.node(s.output).meta.str(), "): register it with a backward or a decomposition ",
               "(kiln::register_op)");
    std::vector<NodeId> gx;
    run_custom_op_function(name, "backward", [&] { gx = op->grad(g, c); });
    KILN_CHECK(gx.size() == s.inputs.size(), "custom op ", name, ": its backward gave ", gx.size(), " gradients for ",
               s.inputs.size(), " inputs");
    take(gx);
    return;
  }
  KILN_CHECK(def.decompose != nullptr, "backward: ", def.name, " has no derivative rule, and a gradient flows ",
             "through it (into ", g.node(s.output).meta.str(), ")");
  const size_t first = g.size();
  const NodeId result = def.decompose(g, s.inputs, s.attrs);
  std::vector<Step> inner;
  for (size_t id = first; id < g.size(); ++id) {
    const Node& n = g.node(static_cast<NodeId>(id));
    if (!n.inputs.empty()) inner.push_back(Step{n.op, n.attrs, n.inputs, static_cast<NodeId>(id)});
  }
  // The composite's gradient is its decomposition's; a decomposition may return an input as is.
  acc.add(result, gy);
  std::unordered_set<NodeId> from;
  for (NodeId in : s.inputs)
    if (live.count(in)) from.insert(in);
  const std::unordered_set<NodeId> inner_live = dependents(inner, std::move(from));
  backward(g, inner, acc, inner_live);
}

void backward(Graph& g, std::span<const Step> steps, Accumulator& acc, const std::unordered_set<NodeId>& live) {
  for (size_t k = steps.size(); k-- > 0;) {
    const Step& s = steps[k];
    if (!live.count(s.output) || !differentiable(g.node(s.output).meta.dtype)) continue;
    const NodeId gy = acc.get(s.output);
    if (gy < 0) continue;
    bool wanted = false;
    for (NodeId in : s.inputs) wanted |= live.count(in) && differentiable(g.node(in).meta.dtype);
    if (wanted) backward_step(g, s, gy, acc, live);
  }
}

}  // namespace

std::vector<NodeId> gradients(Graph& g, std::span<const Step> steps, std::span<const Seed> seeds,
                              std::span<const NodeId> wrt) {
  Accumulator acc{g, {}};
  for (const Seed& s : seeds) acc.add(s.output, s.grad);
  backward(g, steps, acc, dependents(steps, {wrt.begin(), wrt.end()}));
  std::vector<NodeId> out;
  out.reserve(wrt.size());
  for (NodeId w : wrt) out.push_back(acc.get(w));
  return out;
}

std::vector<Step> steps_of(const Graph& g) {
  std::vector<Step> out;
  for (size_t id = 0; id < g.size(); ++id) {
    const Node& n = g.node(static_cast<NodeId>(id));
    if (!n.inputs.empty()) out.push_back(Step{n.op, n.attrs, n.inputs, static_cast<NodeId>(id)});
  }
  return out;
}

}  // namespace kiln::autodiff
