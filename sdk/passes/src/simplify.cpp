// simplify: algebraic identities that leave every value unchanged. The one exception, as in
// torch.compile's no-op removal: x + 0 (and x - (-0)) gives +0.0 where x is -0.0, and the
// rewrite keeps -0.0; the two compare equal and differ only through a later 1/x or copysign.
// And as ATen's pow does for these exponents, pow(x, 3) is multiplied out: x*x*x rounds twice,
// so it may differ from a correctly rounded cube in the last bit or two (pow(x, 2) is exact);
// a pow call per element is what kept GELU's tanh form (x + 0.044715 x^3) from vectorising on
// the cpu (gpt2: 8.5 ms for each of its 12 [1024, 3072] GELUs on 16 cores).
//
//   mul(x, 1), mul(1, x), div(x, 1)              -> x
//   add(x, 0), add(0, x), sub(x, 0)              -> x
//   neg(neg(x))                                  -> x
//   pow(x, 2), pow(x, 3)                         -> x*x, x*x*x (f32, f64)
//   cast(x, dtype of x)                          -> x
//   cast(cast(x, a), b)                          -> cast(x, b) when x -> a is exact for every value
//   reshape(reshape|squeeze|unsqueeze(x), s)     -> reshape(x, s), or x when s is x's shape
//   permute(permute(x, p), q)                    -> permute(x, p o q), or x when that is identity
//   expand(expand(x, s), t)                      -> expand(x, t)
//   identity permute/reshape/expand/squeeze([])/slice(0, all, 1)/pad(0...)/cat(x)/where(c, x, x) -> x
//   sum/mean/max/min/prod(x) over dims of static size 1  -> x, or reshape(x) without those dims
//     (a gather's gradient sums over its index's size-1 dim: as a reduction kernel of one element
//     per output it took 124 ms of a GPT-2 training step on an H200)
//   unary(reshape(x, s))                         -> reshape(unary(x), s) when s splits x's dims
//     (a one-input pointwise op commutes with any reshape; moved above a split it is computed in
//     its producer's shape: GPT-2's GELU reads a [B*T, 4C] gemm viewed as [B, T, 4C], and only in
//     the gemm's shape can it join the gemm's epilogue; the view back to [B*T, 4C] for the next
//     gemm then composes with the moved reshape to nothing. Not above a merge of dims: a
//     computed value whose dims are merged is stored first, which the unary's reader did not need.
//     Not above a reshape that only inserts or drops size-1 dims: a depthwise convolution's
//     f32 sum [.., C, 1] cast to bf16 after dropping its last dim is stored, for a layer norm's
//     passes, in the norm's shape [.., C]; cast before, it was stored as [.., C, 1], which the
//     norm's row kernel does not take as its prologue: one more kernel per block)
//
// A "1" or "0" is a `full` or a small constant holding only that value, possibly seen through
// layout ops. Every rewrite to x is made only when the node's dtype, device and sizes are x's:
// a 1 that broadcasts x to a bigger shape, or promotes it to another dtype, stays. A rewrite
// that adds a node (a composed reshape, permute, expand or cast) is made only when its shape
// rule accepts it without a new shape fact.
#include <algorithm>
#include <map>

#include "kiln/passes/passes.h"
#include "rewrite.h"

namespace kiln::passes {

namespace {

// Casting any value of `from` to `to` is exact (no rounding, wrapping or truncation).
bool exact_cast(DType from, DType to) {
  if (from == to || from == DType::bool_) return true;
  switch (from) {
    case DType::i32: return to == DType::i64 || to == DType::f64;
    case DType::f16:
    case DType::bf16: return to == DType::f32 || to == DType::f64;
    case DType::f32: return to == DType::f64;
    default: return false;
  }
}

// Whether reshaping `from` to `to` splits a dim in two or more of size > 1, and does nothing
// else but split dims and insert or drop size-1 dims.
bool splits_dims(const SymShape& from, const SymShape& to, const ShapeEnv& env) {
  const auto runs = reshape_split_runs(from, to, env);
  if (!runs) return false;
  for (const auto& [first, last] : *runs)
    if (std::count_if(to.begin() + static_cast<std::ptrdiff_t>(first), to.begin() + static_cast<std::ptrdiff_t>(last),
                      [](const SymInt& s) { return !(s == 1); }) >= 2)
      return true;
  return false;
}

bool is_identity(const std::vector<int64_t>& perm) {
  for (size_t k = 0; k < perm.size(); ++k)
    if (perm[k] != static_cast<int64_t>(k)) return false;
  return true;
}

struct Simplifier {
  detail::Rewriter& rw;
  std::map<std::string, int> fired;

  Graph& out() { return rw.out(); }
  const Node& node(NodeId i) { return rw.out_graph().node(i); }
  const TensorMeta& meta(NodeId i) { return node(i).meta; }
  bool holds(NodeId i, double v) {
    const std::optional<double> u = detail::uniform_value(rw.out_graph(), i);
    return u && *u == v;
  }
  // x, when the node's value has x's meta; else -1.
  NodeId same(const Node& n, NodeId x) { return detail::same_value_meta(n.meta, meta(x)) ? x : -1; }
  // A new node computing n's value, when it can be added without a new fact; else -1.
  NodeId add(const Node& n, OpId op, std::vector<NodeId> ins, Attrs attrs) {
    const std::optional<TensorMeta> m = detail::probe(rw.out_graph(), op, ins, attrs);
    if (!m || !detail::same_value_meta(*m, n.meta)) return -1;
    return out().add(op, std::move(ins), std::move(attrs));
  }

  NodeId rewrite(const Node& n, const std::vector<NodeId>& ins) {
    const NodeId r = identity(n, ins);
    if (r >= 0 || op_def(n.op).category != OpCategory::unary) return r;
    return unary_above_reshape(n, ins[0]);
  }

  NodeId identity(const Node& n, const std::vector<NodeId>& ins) {
    switch (n.op) {
      case OpId::mul: {
        NodeId r = holds(ins[1], 1) ? same(n, ins[0]) : -1;
        if (r < 0 && holds(ins[0], 1)) r = same(n, ins[1]);
        return note(r, "x*1");
      }
      case OpId::div: return note(holds(ins[1], 1) ? same(n, ins[0]) : -1, "x/1");
      case OpId::add: {
        NodeId r = holds(ins[1], 0) ? same(n, ins[0]) : -1;
        if (r < 0 && holds(ins[0], 0)) r = same(n, ins[1]);
        return note(r, "x+0");
      }
      case OpId::sub: return note(holds(ins[1], 0) ? same(n, ins[0]) : -1, "x-0");
      case OpId::pow: {
        const NodeId x = ins[0];
        // f32 and f64 only: in bf16 or f16 each product would round to the narrow type.
        const DType t = meta(x).dtype;
        if ((t != DType::f32 && t != DType::f64) || !detail::same_value_meta(n.meta, meta(x))) return -1;
        if (holds(ins[1], 2)) return note(add(n, OpId::mul, {x, x}, {}), "pow(x, 2)");
        if (!holds(ins[1], 3)) return -1;
        const NodeId square = add(n, OpId::mul, {x, x}, {});
        return note(square < 0 ? -1 : add(n, OpId::mul, {square, x}, {}), "pow(x, 3)");
      }
      case OpId::neg: {
        const Node& p = node(ins[0]);
        return note(p.op == OpId::neg ? same(n, p.inputs[0]) : -1, "neg(neg x)");
      }
      case OpId::cast: {
        const DType to = n.attrs.dtype(0);
        if (meta(ins[0]).dtype == to) return note(same(n, ins[0]), "identity cast");
        const Node& p = node(ins[0]);
        if (p.op != OpId::cast || !exact_cast(meta(p.inputs[0]).dtype, p.attrs.dtype(0))) return -1;
        const NodeId x = p.inputs[0];
        if (meta(x).dtype == to) return note(same(n, x), "cast(cast x)");
        return note(add(n, OpId::cast, {x}, {to}), "cast(cast x)");
      }
      case OpId::reshape: {
        NodeId x = ins[0];
        while (node(x).op == OpId::reshape || node(x).op == OpId::squeeze || node(x).op == OpId::unsqueeze)
          x = node(x).inputs[0];
        if (n.attrs.symints(0) == meta(x).sizes) return note(same(n, x), "identity reshape");
        return x == ins[0] ? -1 : note(add(n, OpId::reshape, {x}, n.attrs), "reshape chain");
      }
      case OpId::permute: {
        const std::vector<int64_t>& q = n.attrs.ints(0);
        if (is_identity(q)) return note(same(n, ins[0]), "identity permute");
        const Node& p = node(ins[0]);
        if (p.op != OpId::permute) return -1;
        const std::vector<int64_t>& perm = p.attrs.ints(0);
        std::vector<int64_t> composed(q.size());
        for (size_t k = 0; k < q.size(); ++k) composed[k] = perm[static_cast<size_t>(q[k])];
        if (is_identity(composed)) return note(same(n, p.inputs[0]), "permute chain");
        return note(add(n, OpId::permute, {p.inputs[0]}, {composed}), "permute chain");
      }
      case OpId::expand: {
        if (n.attrs.symints(0) == meta(ins[0]).sizes) return note(same(n, ins[0]), "identity expand");
        const Node& p = node(ins[0]);
        return p.op == OpId::expand ? note(add(n, OpId::expand, {p.inputs[0]}, n.attrs), "expand chain") : -1;
      }
      case OpId::squeeze: return n.attrs.ints(0).empty() ? note(same(n, ins[0]), "identity squeeze") : -1;
      case OpId::slice:
        return n.attrs.i(1) == 0 && n.attrs.i(3) == 1 ? note(same(n, ins[0]), "identity slice") : -1;
      case OpId::pad: {
        for (int64_t p : n.attrs.ints(0))
          if (p != 0) return -1;
        return note(same(n, ins[0]), "identity pad");
      }
      case OpId::cat: return ins.size() == 1 ? note(same(n, ins[0]), "cat of one") : -1;
      case OpId::where: return ins[1] == ins[2] ? note(same(n, ins[1]), "where(c, x, x)") : -1;
      case OpId::sum:
      case OpId::mean:
      case OpId::max:
      case OpId::min:
      case OpId::prod: {
        const TensorMeta& x = meta(ins[0]);
        const std::vector<int64_t>& dims = n.attrs.ints(0);
        for (int64_t d = 0; d < x.rank(); ++d)
          if ((dims.empty() || std::find(dims.begin(), dims.end(), d) != dims.end()) && !(x.sizes[static_cast<size_t>(d)] == 1))
            return -1;
        if (n.attrs.b(1) || n.meta.sizes == x.sizes) return note(same(n, ins[0]), "reduction over size-1 dims");
        return note(add(n, OpId::reshape, {ins[0]}, {n.meta.sizes}), "reduction over size-1 dims");
      }
      default: return -1;
    }
  }

  NodeId unary_above_reshape(const Node& n, NodeId in) {
    const Node& r = node(in);
    if (r.op != OpId::reshape) return -1;
    const NodeId x = r.inputs[0];
    if (!splits_dims(meta(x).sizes, r.meta.sizes, rw.out_graph().shapes())) return -1;
    const Attrs shape = r.attrs;  // (r is in the node list that adding a node may move)
    const std::optional<TensorMeta> m = detail::probe(rw.out_graph(), n.op, std::span<const NodeId>(&x, 1), n.attrs);
    // The unary keeps x's sizes and gives n's dtype: the reshape of it then gives n's meta, as r
    // did x's, so no node is added for a rewrite that the reshape's probe would refuse.
    if (!m || !(m->sizes == meta(x).sizes) || m->dtype != n.meta.dtype || !(m->device == n.meta.device)) return -1;
    const NodeId u = out().add(n.op, {x}, n.attrs);
    return note(add(n, OpId::reshape, {u}, shape), "unary above a reshape");
  }

  NodeId note(NodeId r, const char* rule) {
    if (r >= 0) ++fired[rule];
    return r;
  }
};

PassResult run(const Graph& g) {
  detail::Rewriter rw(g, "simplify");
  Simplifier s{rw, {}};
  detail::rewrite_each(rw, [&](const Node& n, const std::vector<NodeId>& ins) { return s.rewrite(n, ins); });
  int total = 0;
  std::string summary = detail::rules_summary("simplify", s.fired, "rewrite", "", total);
  return {rw.finish(), total > 0, std::move(summary)};
}

}  // namespace

const Pass simplify_pass{"simplify", &run};

Graph simplify(const Graph& g) { return run_pass(simplify_pass, g).graph; }

}  // namespace kiln::passes
