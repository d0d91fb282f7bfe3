// Internal to sdk/graph: what decompositions and derivative rules use to append nodes to a graph.
#pragma once

#include <algorithm>
#include <numeric>
#include <span>
#include <vector>

#include "kiln/graph/graph.h"
#include "kiln/graph/ops.h"

namespace kiln::graph_detail {

inline DType float_of(DType t) { return is_floating(t) ? t : DType::f32; }

// Whether reducing `x` over `dims` (empty: all) reduces a static empty dim.
inline bool reduces_empty(const TensorMeta& x, const std::vector<int64_t>& dims) {
  for (int64_t d = 0; d < x.rank(); ++d)
    if ((dims.empty() || std::binary_search(dims.begin(), dims.end(), d)) && x.sizes[d] == 0) return true;
  return false;
}

// Appends nodes; metas are copied because adding a node may move the node list.
struct Builder {
  Graph& g;

  TensorMeta meta(NodeId x) const { return g.node(x).meta; }
  // The inputs' metas, and the dtype they promote to.
  std::vector<TensorMeta> metas(std::span<const NodeId> in) const {
    std::vector<TensorMeta> out;
    for (NodeId i : in) out.push_back(meta(i));
    return out;
  }
  DType promoted(std::span<const NodeId> in) const {
    const std::vector<TensorMeta> m = metas(in);
    std::vector<const TensorMeta*> ptrs;
    for (const TensorMeta& x : m) ptrs.push_back(&x);
    return result_type(ptrs);
  }
  NodeId add(OpId op, std::vector<NodeId> in, Attrs attrs = {}) { return g.add(op, std::move(in), std::move(attrs)); }
  NodeId scalar(double v, DType t) { return add(OpId::full, {}, {SymShape{}, v, t}); }
  NodeId cast(NodeId x, DType t) { return meta(x).dtype == t ? x : add(OpId::cast, {x}, {t}); }
  NodeId reduce(OpId op, NodeId x, std::vector<int64_t> dims, bool keepdim) {
    return add(op, {x}, {std::move(dims), keepdim});
  }
  // x - max(x): keeps exp in range. An empty reduction has no max and nothing to shift.
  NodeId shift_by_max(NodeId x, const std::vector<int64_t>& dims) {
    if (reduces_empty(meta(x), dims)) return x;
    return add(OpId::sub, {x, reduce(OpId::max, x, dims, true)});
  }
};

inline std::vector<int64_t> iota(int64_t from, int64_t to) {
  std::vector<int64_t> v(static_cast<size_t>(std::max<int64_t>(0, to - from)));
  std::iota(v.begin(), v.end(), from);
  return v;
}

// max_pool's derivative rule (src/op_table.cpp, beside its decomposition and windows).
std::vector<NodeId> grad_max_pool(Graph& g, const GradContext& c);

// The derivative rule of an op table entry, or null (src/derivatives.cpp; the table fills
// OpDef::grad with it).
GradFn derivative_rule(const OpDef& d);

}  // namespace kiln::graph_detail
