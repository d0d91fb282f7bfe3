// Internal to sdk/passes: what every pass shares. A Rewriter builds the new graph node by node
// (inputs and ShapeEnv copied first), binding each old node to the new node holding its value
// and checking that the value's meta did not change; probe() asks whether a node could be added
// without failing or needing a new shape fact; uniform_value() reads the one value of a `full`
// or small constant.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "kiln/graph/graph.h"
#include "kiln/graph/tensor_data.h"

namespace kiln::passes::detail {

// What a value is, as opposed to how it is laid out: dtype, device and sizes (strides ignored:
// node outputs are contiguous, an input may be strided, and either is the same value).
bool same_value_meta(const TensorMeta& a, const TensorMeta& b);

class Rewriter {
 public:
  // Copies the ShapeEnv and the input nodes (meta, name, order) of `in`.
  Rewriter(const Graph& in, std::string_view pass);

  const Graph& in() const { return in_; }
  Graph& out() { return out_; }
  const Graph& out_graph() const { return out_; }
  // The new node holding old node `id`'s value (-1 when not bound yet).
  NodeId map(NodeId id) const { return map_[static_cast<size_t>(id)]; }
  // Old node `id`'s inputs, mapped (each must be bound).
  std::vector<NodeId> mapped_inputs(NodeId id) const;
  // Copies old node `id` (op, attrs, name) over its mapped inputs and binds it.
  NodeId copy(NodeId id);
  // Binds old node `id` to new node `to`; throws naming the pass when their values' metas differ.
  void bind(NodeId id, NodeId to);
  // The rewritten graph, outputs mapped (each must be bound).
  Graph finish();

 private:
  const Graph& in_;
  std::string_view pass_;
  Graph out_;
  std::vector<NodeId> map_;
};

// A pass of local rules: `rewrite(node, mapped inputs)` gives the new node holding an old node's
// value, or -1 to copy it; each old node but the inputs in order. Then the summary line
// "<pass>: <total> <noun>s[ <verb>] (rule: count, ...)" of the rules' counts.
template <class Rewrite>
void rewrite_each(Rewriter& rw, Rewrite&& rewrite) {
  const Graph& g = rw.in();
  for (NodeId id = 0; id < static_cast<NodeId>(g.size()); ++id) {
    const Node& n = g.node(id);
    if (n.op == OpId::input) continue;
    const NodeId r = rewrite(n, rw.mapped_inputs(id));
    if (r >= 0) {
      rw.bind(id, r);
    } else {
      rw.copy(id);
    }
  }
}
std::string rules_summary(std::string_view pass, const std::map<std::string, int>& fired, std::string_view noun,
                          std::string_view verb, int& total);

// The meta `op` would get in `g` over existing nodes `inputs`, or nullopt when its shape rule
// rejects them or would record a shape fact `g` does not hold yet. `g` is not changed.
std::optional<TensorMeta> probe(const Graph& g, OpId op, std::span<const NodeId> inputs, const Attrs& attrs);
// ... over inputs of these metas (values a rewrite would add before `op`).
std::optional<TensorMeta> probe(const Graph& g, OpId op, std::span<const TensorMeta> inputs, const Attrs& attrs);

// The value every element of node `id` holds, looking through value-preserving layout ops
// (reshape, expand, permute, squeeze, unsqueeze): a `full` (its value as stored in its dtype)
// or a constant of at most kMaxFoldElements elements that are all equal. nullopt otherwise
// (also for NaN).
std::optional<double> uniform_value(const Graph& g, NodeId id);

// Element k of a contiguous host tensor as a double, when a double holds it exactly (every
// value of every dtype but i64 values beyond 2^53); so `full(*v, dtype)` stores that element.
std::optional<double> exact_element(const TensorData& t, int64_t k);
// A constant's bytes as a host tensor, and back.
TensorData tensor_of(const ConstantData& c);
ConstantData constant_of(const TensorData& t);

}  // namespace kiln::passes::detail
