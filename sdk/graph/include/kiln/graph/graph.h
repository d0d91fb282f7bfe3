// Graph: the unit of capture, caching and display. SSA nodes over the op table, each
// with one output TensorMeta; inputs are `input` nodes, in argument order; outputs are a
// list of node ids. A graph owns the ShapeEnv its symbolic sizes refer to.
//
// Graph::add checks arity and attribute kinds and runs the op's shape rule, so a graph
// that was built is always well-formed; errors name the node and the op.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kiln/graph/ops.h"

namespace kiln {

struct Node {
  OpId op = OpId::input;
  std::vector<NodeId> inputs;
  Attrs attrs;
  TensorMeta meta;
  std::string name;  // argument name for inputs; optional elsewhere
};

class Graph {
 public:
  // Appends an input (argument index = number of inputs so far).
  NodeId add_input(TensorMeta meta, std::string name = {});
  // Appends a node, validating arity and attributes and inferring its meta. Values the graph
  // generates (full, arange, iota, randn and rand without a key, constants, and what is computed from them alone) have
  // no device of their own: their meta says cpu, and where they meet a tensor on a device they
  // count as on it (a tril mask of iotas next to a CUDA input), as 0-d cpu tensors do.
  NodeId add(OpId op, std::vector<NodeId> inputs, Attrs attrs = {});
  // The metas of `inputs` as an op over them sees them (generated values moved to the device
  // they meet). A scratch graph over some of this graph's nodes (a decomposition, a probe)
  // takes its inputs with these, so its ops agree with this graph on devices.
  std::vector<TensorMeta> metas_met(std::span<const NodeId> inputs) const;
  void set_outputs(std::vector<NodeId> outputs);
  // Names a node (shown by str(); stripped by canonical()).
  void set_name(NodeId id, std::string name);

  const Node& node(NodeId id) const { return nodes_[static_cast<size_t>(id)]; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<NodeId>& inputs() const { return inputs_; }
  const std::vector<NodeId>& outputs() const { return outputs_; }
  size_t size() const { return nodes_.size(); }
  ShapeEnv& shapes() { return shapes_; }
  const ShapeEnv& shapes() const { return shapes_; }

  // Readable listing: one line per node, "%3 = add(%1, %2) : f32[s0, 4096]".
  std::string str() const;
  // Number of nodes that are not inputs (what explain() calls op_count).
  size_t op_count() const;

  // The same graph with names stripped and dead nodes removed, nodes in topological
  // order (they always are: ids grow along edges). Cache keys hash this form.
  Graph canonical() const;
  // Hash of canonical(): ops, attrs, edges, metas, symbols and facts.
  uint64_t structural_hash() const;
  bool operator==(const Graph& o) const;

 private:
  bool placeless(NodeId id) const;
  // The meta of the first input that is neither generated nor a 0-d cpu scalar (null if none):
  // the device generated inputs take.
  const TensorMeta* placed_input(std::span<const NodeId> inputs) const;
  std::vector<Node> nodes_;
  mutable std::vector<char> placeless_;  // per node, filled in order on demand (nodes never change)
  std::vector<NodeId> inputs_;
  std::vector<NodeId> outputs_;
  ShapeEnv shapes_;
};

// Per node of `g`: 1 where computing `roots` needs it (a root, or an input of a needed node).
// Negative roots are skipped. The walk stops at nodes `stop` marks (per node; empty: none):
// they are needed, their inputs not through them (values a caller already has).
std::vector<char> needed_nodes(const Graph& g, std::span<const NodeId> roots, std::span<const char> stop = {});

}  // namespace kiln
