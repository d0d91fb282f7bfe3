// sdk/autodiff: reverse-mode differentiation over graph nodes. Given the ops that computed some
// values (steps, in the order they ran) and the gradients flowing into some of their outputs
// (seeds), it appends to the graph the nodes computing the gradient of each wanted node, walking
// the steps backwards with the op table's derivative rules (OpDef::grad). A composite without a
// rule is decomposed into the graph and differentiated through its primitives (the compiler's
// CSE merges that copy with the composite's own decomposition). Gradients are summed over every
// use, summed back to each input's shape where the op broadcast it, and cast to its dtype.
//
// The C++ frontend's autograd records steps as ops run (eagerly or traced) and replays what this
// appends; `steps_of` turns a whole graph into steps for differentiating it as a graph.
#pragma once

#include <span>
#include <vector>

#include "kiln/graph/graph.h"

namespace kiln::autodiff {

// One op as it ran: output = op(inputs; attrs), ids in the graph the gradients go into.
struct Step {
  OpId op;
  Attrs attrs;
  std::vector<NodeId> inputs;
  NodeId output;
};

// The gradient of the differentiated value with respect to `output`.
struct Seed {
  NodeId output;
  NodeId grad;
};

// Only floating values carry gradients (as in torch).
bool differentiable(DType t);

// Appends to `g` the gradient of each node of `wrt`; -1 where no step connects it to a seed.
// Steps must be in an order where each step's inputs come before it (the order ops ran).
// Throws a kiln::Error naming the op when a step on a path has no derivative rule.
std::vector<NodeId> gradients(Graph& g, std::span<const Step> steps, std::span<const Seed> seeds,
                              std::span<const NodeId> wrt);

// Every node of `g` that is not a source, as a step.
std::vector<Step> steps_of(const Graph& g);

// `v` summed over the dims it was broadcast along, so that it has `to`'s shape, and cast to
// `to`'s dtype.
NodeId sum_to(Graph& g, NodeId v, const TensorMeta& to);

}  // namespace kiln::autodiff
