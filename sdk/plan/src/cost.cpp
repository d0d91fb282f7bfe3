#include "kiln/plan/cost.h"

#include <algorithm>

namespace kiln::plan {

std::vector<std::vector<int>> kernels_of_nodes(const KernelPlan& p, const Graph& g) {
  std::vector<std::vector<int>> of(g.size());
  for (size_t k = 0; k < p.kernels.size(); ++k)
    for (NodeId n : p.kernels[k].provenance)
      if (n >= 0 && static_cast<size_t>(n) < g.size()) of[static_cast<size_t>(n)].push_back(static_cast<int>(k));
  // A kernel's provenance names the values it stores and reduces; the elementwise ops computed
  // inline on the way are in the kernels of their users (users come later: walk backwards).
  std::vector<std::vector<NodeId>> users(g.size());
  for (NodeId id = 0; id < static_cast<NodeId>(g.size()); ++id)
    for (NodeId i : g.node(id).inputs) users[static_cast<size_t>(i)].push_back(id);
  for (NodeId id = static_cast<NodeId>(g.size()); id-- > 0;) {
    std::vector<int>& ks = of[static_cast<size_t>(id)];
    const OpCategory c = op_def(g.node(id).op).category;
    if (ks.empty() && c != OpCategory::source && c != OpCategory::layout)
      for (NodeId u : users[static_cast<size_t>(id)])
        for (int k : of[static_cast<size_t>(u)])
          if (std::find(ks.begin(), ks.end(), k) == ks.end()) ks.push_back(k);
    std::sort(ks.begin(), ks.end());
    ks.erase(std::unique(ks.begin(), ks.end()), ks.end());
  }
  return of;
}

namespace {

double numel(const SymShape& sizes, const std::vector<int64_t>& examples) {
  double n = 1;
  for (const SymInt& s : sizes) n *= static_cast<double>(s.evaluate(examples));
  return n;
}

double node_flops(const Graph& g, NodeId id, const std::vector<int64_t>& ex) {
  const Node& n = g.node(id);
  const double out = numel(n.meta.sizes, ex);
  const auto in = [&](size_t i) -> const TensorMeta& { return g.node(n.inputs[i]).meta; };
  switch (n.op) {
    case OpId::matmul: {
      const SymShape& a = in(0).sizes;
      return a.empty() ? 2 * out : 2 * out * static_cast<double>(a.back().evaluate(ex));
    }
    case OpId::scaled_dot_product_attention: {
      // q [.., Lq, D], k [.., Lk, D]: scores and the weighted sum, a multiply-add each.
      const SymShape& k = in(1).sizes;
      return k.size() < 2 ? 2 * out : 4 * numel(in(0).sizes, ex) * static_cast<double>(k[k.size() - 2].evaluate(ex));
    }
    case OpId::convolution:
    case OpId::convolution_channels_last: {
      // Each output element sums Cin/groups x kernel taps: the weight's elements per output channel.
      const SymShape& w = in(1).sizes;
      const double per_out = w.empty() ? 1 : numel(w, ex) / static_cast<double>(std::max<int64_t>(1, w[0].evaluate(ex)));
      return 2 * out * per_out;
    }
    default: break;
  }
  switch (op_def(n.op).category) {
    case OpCategory::source:
    case OpCategory::layout: return 0;
    case OpCategory::reduction: return n.inputs.empty() ? out : numel(in(0).sizes, ex);
    default: return out;
  }
}

}  // namespace

std::vector<KernelCost> kernel_costs(const KernelPlan& p, const Graph& g) {
  return kernel_costs(p, g, kernels_of_nodes(p, g));
}

std::vector<KernelCost> kernel_costs(const KernelPlan& p, const Graph& g, const std::vector<std::vector<int>>& of) {
  std::vector<int64_t> examples;
  for (const SymbolInfo& s : p.symbols) examples.push_back(s.example);
  std::vector<KernelCost> costs(p.kernels.size());
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    const PlanKernel& pk = p.kernels[k];
    std::vector<int32_t> touched = pk.reads;
    touched.insert(touched.end(), pk.writes.begin(), pk.writes.end());
    touched.insert(touched.end(), pk.inputs.begin(), pk.inputs.end());
    if (pk.output >= 0) touched.push_back(pk.output);
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (int32_t b : touched) {
      if (b < 0 || static_cast<size_t>(b) >= p.buffers.size()) continue;
      const PlanBuffer& buf = p.buffers[static_cast<size_t>(b)];
      costs[k].bytes += numel(buf.sizes, examples) * static_cast<double>(dtype_size(buf.dtype));
    }
  }
  for (NodeId id = 0; id < static_cast<NodeId>(g.size()); ++id) {
    if (of[static_cast<size_t>(id)].empty()) continue;
    const double f = node_flops(g, id, examples);
    for (int k : of[static_cast<size_t>(id)]) costs[static_cast<size_t>(k)].flops += f;
  }
  return costs;
}

}  // namespace kiln::plan
