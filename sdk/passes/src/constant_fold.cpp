// fold_constants: nodes whose value is known before the graph runs are computed now, with the
// reference interpreter (the oracle every target agrees with), and replaced by a source node.
//
// Two cases:
// - Uniform: a pointwise op (unary, binary, where) whose inputs are all `full` nodes, or a
//   value-preserving layout op (reshape, permute, expand, squeeze, unsqueeze, slice) of a
//   `full`, has one value everywhere, whatever its shape (symbolic too): it is computed once on
//   size-1 operands of the same ranks (so type promotion sees the same operands) and becomes
//   full(shape, value, dtype).
// - Small: any other op (reductions, matmul, composites, cat, pad, index_select, ...) whose
//   inputs are all constant, full, arange or folded nodes of static shape with at most
//   kMaxFoldElements elements, and whose result is static and that small: computed with
//   eval::run_op; a uniform result becomes a `full`, any other a `constant`.
// Sources stay as they are (a full of a scalar is not turned into data; arange is cheaper than
// its data), and iota is not folded at all: a mask built from iotas (tril, one-hot) costs an
// index comparison inside the kernel that uses it, its data a load. Random numbers are never folded: randn and rand
// are sources, and what they decompose into is philox over an iota, which is not folded either.
// randn's values are the one place targets may differ by an ulp (logf/cosf), so baking the
// reference's values in would change what a target computes.
// A node whose evaluation fails (an index out of range) is left for the run to report.
#include <cmath>
#include <optional>

#include "kiln/graph/error.h"
#include "kiln/passes/passes.h"
#include "kiln/eval/interpreter.h"
#include "rewrite.h"

namespace kiln::passes {

namespace {

bool uniform_layout(OpId op) {
  switch (op) {
    case OpId::reshape:
    case OpId::permute:
    case OpId::expand:
    case OpId::squeeze:
    case OpId::unsqueeze:
    case OpId::slice:
    case OpId::unfold: return true;
    default: return false;
  }
}

bool pointwise(OpId op) {
  const OpCategory c = op_def(op).category;
  return c == OpCategory::unary || c == OpCategory::binary || c == OpCategory::ternary;
}

std::optional<std::vector<int64_t>> static_sizes(const TensorMeta& m) {
  std::vector<int64_t> s;
  for (const SymInt& v : m.sizes) {
    if (!v.is_static()) return std::nullopt;
    s.push_back(v.hint());
  }
  return s;
}

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t v : s) n *= v;
  return n;
}

struct Folder {
  detail::Rewriter& rw;
  std::vector<std::optional<TensorData>> known;  // by node of out: its value, once computed
  int to_full = 0, to_constant = 0;

  const Graph& out() const { return rw.out_graph(); }

  // The value of node `id` of out when it is a small static source or a folded node.
  const TensorData* value(NodeId id) {
    if (known.size() < out().size()) known.resize(out().size());
    std::optional<TensorData>& slot = known[static_cast<size_t>(id)];
    if (slot) return &*slot;
    const Node& n = out().node(id);
    if (n.op != OpId::constant && n.op != OpId::full && n.op != OpId::arange) return nullptr;
    const std::optional<std::vector<int64_t>> sizes = static_sizes(n.meta);
    if (!sizes || numel(*sizes) > kMaxFoldElements) return nullptr;
    slot = n.op == OpId::constant ? detail::tensor_of(n.attrs.tensor(0))
                                  : eval::run_op(n.op, {}, n.attrs, n.meta.dtype, *sizes);
    return &*slot;
  }

  // A source node holding t (a full when t is uniform and a double holds it, else a constant).
  NodeId emit(const TensorData& t, const TensorMeta& meta) {
    std::optional<double> v = t.numel() > 0 ? detail::exact_element(t, 0) : std::optional<double>(0.0);
    for (int64_t k = 1; v && k < t.numel(); ++k) {
      const std::optional<double> e = detail::exact_element(t, k);
      if (!e || !(*e == *v || (*e != *e && *v != *v)) || std::signbit(*e) != std::signbit(*v)) v.reset();
    }
    NodeId id;
    if (v) {
      id = rw.out().add(OpId::full, {}, {meta.sizes, *v, meta.dtype});
      ++to_full;
    } else {
      id = rw.out().add(OpId::constant, {},
                        {std::shared_ptr<const ConstantData>(std::make_shared<ConstantData>(detail::constant_of(t)))});
      ++to_constant;
    }
    known.resize(out().size());
    if (!v) known[static_cast<size_t>(id)] = t;
    return id;
  }

  // The uniform case: every input a full. Returns the folded node or -1.
  NodeId fold_uniform(const Node& n, const std::vector<NodeId>& ins) {
    if (!(pointwise(n.op) || uniform_layout(n.op))) return -1;
    for (NodeId i : ins)
      if (out().node(i).op != OpId::full) return -1;
    const Node& first = out().node(ins[0]);
    if (uniform_layout(n.op)) {
      if (n.meta.dtype != first.meta.dtype) return -1;
      ++to_full;
      return rw.out().add(OpId::full, {}, {n.meta.sizes, first.attrs.f(1), n.meta.dtype});
    }
    // One element of each operand, at the operand's rank, so promotion is unchanged.
    std::vector<TensorData> args;
    for (NodeId i : ins) {
      const Node& f = out().node(i);
      const std::vector<int64_t> ones(f.meta.sizes.size(), 1);
      args.push_back(eval::run_op(OpId::full, {}, {static_shape(ones), f.attrs.f(1), f.meta.dtype},
                                       f.meta.dtype, ones));
    }
    const std::vector<int64_t> ones(n.meta.sizes.size(), 1);
    TensorData r;
    try {
      r = eval::run_op(n.op, args, n.attrs, n.meta.dtype, ones);
    } catch (const Error&) {
      return -1;
    }
    const std::optional<double> v = detail::exact_element(r, 0);
    if (!v) return -1;
    ++to_full;
    return rw.out().add(OpId::full, {}, {n.meta.sizes, *v, n.meta.dtype});
  }

  // The small case: every input a known value, the result static and small.
  NodeId fold_small(const Node& n, const std::vector<NodeId>& ins) {
    const std::optional<std::vector<int64_t>> sizes = static_sizes(n.meta);
    if (!sizes || numel(*sizes) > kMaxFoldElements) return -1;
    std::vector<TensorData> args;
    for (NodeId i : ins) {
      const TensorData* v = value(i);
      if (v == nullptr) return -1;
      args.push_back(*v);
    }
    TensorData r;
    try {
      r = eval::run_op(n.op, args, n.attrs, n.meta.dtype, *sizes);
    } catch (const Error&) {
      return -1;
    }
    return emit(eval::contiguous(r), n.meta);
  }
};

PassResult run(const Graph& g) {
  detail::Rewriter rw(g, "fold_constants");
  Folder f{rw, {}};
  for (NodeId id = 0; id < static_cast<NodeId>(g.size()); ++id) {
    const Node& n = g.node(id);
    if (n.op == OpId::input) continue;
    if (op_def(n.op).category == OpCategory::source) {
      rw.copy(id);
      continue;
    }
    const std::vector<NodeId> ins = rw.mapped_inputs(id);
    NodeId r = f.fold_uniform(n, ins);
    if (r < 0) r = f.fold_small(n, ins);
    if (r >= 0) {
      rw.bind(id, r);
    } else {
      rw.copy(id);
    }
  }
  const int folded = f.to_full + f.to_constant;
  return {rw.finish(), folded > 0,
          "fold_constants: folded " + std::to_string(folded) + " node" + (folded == 1 ? "" : "s") +
              (folded == 0 ? std::string()
                           : " (" + std::to_string(f.to_full) + " into full, " + std::to_string(f.to_constant) +
                                 " into constant)")};
}

}  // namespace

const Pass fold_constants_pass{"fold_constants", &run};

Graph fold_constants(const Graph& g) { return run_pass(fold_constants_pass, g).graph; }

}  // namespace kiln::passes
