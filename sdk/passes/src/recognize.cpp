// recognize: hand-written normalisations -> the composite op, so later stages see one op (and
// give it one kernel); recognize_attention: the same for attention, a pass of its own that only
// targets with a fused attention kernel run (the scheduler, for Target::fused_attention), so
// that other targets and the graph views keep the two products and the softmax as written.
// Recognised forms (operands of add and mul in either order):
//
//   softmax(x, d)      exp(x - max(x, [d], keep)) / sum(that exp, [d], keep)
//   log_softmax(x, d)  z - log(sum(exp(z), [d], keep))   with z = x - max(x, [d], keep)
//   layer_norm(x[, w[, b]], n, eps)
//                      (x - mean(x, D, keep)) * rsqrt(var(x, D, keep, correction 0) + eps) [* w] [+ b]
//                      (x - mean(x, D, keep)) / sqrt(var(x, D, keep, correction 0) + eps) [* w] [+ b]
//   rms_norm(x[, w], n, eps)
//                      x * rsqrt(mean(x * x, D, keep) + eps) [* w]     (x * x or pow(x, 2))
//   gelu(x, "tanh")    x * 0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))   (GPT-2's
//                      gelu_new as transformers and exporters write it: the product of x, 0.5
//                      and the 1 + tanh term grouped any way; x^3 as pow(x, 3), x * x * x
//                      either way; each constant a `full` or uniform constant equal to the
//                      value as x's dtype holds it, so a bf16 export's 0.0446777 counts)
//   scaled_dot_product_attention(q, k, v[, mask], scale)
//                      softmax(q' @ k'^T [* c | / c], -1) @ v, or with a mask
//                      where(isnan(p), 0, p) @ v, p = softmax(scores + m | where(m, scores, -inf), -1)
//                      (a float m added, a bool m keeping; the NaN rows zeroed as the op does
//                      with a mask, and as torch's export of a masked attention writes it)
//                      (k^T: k's last two dims swapped by
//                      transpose or permute, or by reshape(swap(x)) where the reshape only regroups
//                      the leading dims, as torch's exporter writes k.transpose(-2, -1); q' and k'^T
//                      are q and k^T or either times a scalar, as torch's decomposition scales both
//                      by sqrt(scale); c a scalar `full`; scale the product of the scalars)
//
// where D is the last n dims and eps a `full` of x's dtype. These are exactly the ops the
// composites decompose into, so the values are the same, except for the (x - mean) / sqrt(...)
// form (rounded differently from the * rsqrt(...) the composite computes: about an ulp) and
// attention's `/ c` (a multiplication by 1/c in the composite) and a scale split between q and
// k^T (one multiplication of the scores instead of two of the operands). Attention needs q, k, v and every
// value of the pattern in one floating dtype, q, k, v of one rank with the same batch sizes.
// Conditions: x is floating, w, b and eps have x's dtype (so the composite computes in the same
// dtype the hand-written ops did), the composite's shape rule accepts the operands without a
// new shape fact and gives the root's dtype, device and sizes, and every intermediate value is
// used only inside the pattern and is not an output (else it would be computed twice). Reads
// by dead nodes do not count; such dead readers are dropped with the pattern's interior.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>

#include "kiln/graph/error.h"
#include "kiln/passes/passes.h"
#include "rewrite.h"

namespace kiln::passes {

namespace {

// A leaf permuted (perm, unless empty) then reshaped (sizes, unless empty).
struct LeafView {
  std::vector<int64_t> perm;
  SymShape sizes;
};

struct Match {
  OpId op;
  std::vector<NodeId> leaves;   // the composite's operands (nodes of the input graph)
  Attrs attrs;
  std::vector<NodeId> interior;  // nodes that only the pattern reads
  // Per leaf: the view the composite reads it through (empty: as it is).
  std::vector<LeafView> views = {};
};

class Recognizer {
 public:
  // Reads by dead nodes do not count: dce removes them, and recognize drops those that read
  // a pattern's interior.
  // attention_only: match attention alone (recognize_attention) instead of the other patterns.
  Recognizer(const Graph& g, bool attention_only)
      : g_(g), attention_only_(attention_only), live_(g.size(), 0), uses_(g.size(), 0), output_(g.size(), 0) {
    for (NodeId o : g.outputs()) live_[static_cast<size_t>(o)] = output_[static_cast<size_t>(o)] = 1;
    for (size_t id = g.size(); id-- > 0;)
      if (live_[id])
        for (NodeId i : g.node(static_cast<NodeId>(id)).inputs) {
          live_[static_cast<size_t>(i)] = 1;
          ++uses_[static_cast<size_t>(i)];
        }
  }

  bool live(NodeId id) const { return live_[static_cast<size_t>(id)] != 0; }

  std::optional<Match> match(NodeId root) {
    for (auto fn : {&Recognizer::softmax, &Recognizer::log_softmax, &Recognizer::layer_norm, &Recognizer::rms_norm,
                    &Recognizer::gelu_tanh, &Recognizer::attention}) {
      if (attention_only_ != (fn == &Recognizer::attention)) continue;
      interior_.clear();
      std::optional<Match> m = (this->*fn)(root);
      if (m && valid(root, *m)) return m;
    }
    return std::nullopt;
  }

 private:
  const Graph& g_;
  bool attention_only_;
  std::vector<char> live_;
  std::vector<int> uses_;
  std::vector<char> output_;
  std::vector<NodeId> interior_;

  const Node& n(NodeId i) const { return g_.node(i); }
  bool is(NodeId i, OpId op) const { return n(i).op == op; }
  // An intermediate of the pattern: read exactly `reads` times, all by the pattern; not an output.
  bool inner(NodeId i, int reads) {
    if (output_[static_cast<size_t>(i)] || uses_[static_cast<size_t>(i)] != reads) return false;
    interior_.push_back(i);
    return true;
  }
  bool floating(NodeId i) const { return is_floating(n(i).meta.dtype); }
  DType dtype(NodeId i) const { return n(i).meta.dtype; }
  // A keepdim reduction `op` of `x` over exactly `dims`.
  bool reduction(NodeId r, OpId op, NodeId x, const std::vector<int64_t>& dims) const {
    return is(r, op) && n(r).inputs[0] == x && n(r).attrs.b(1) && n(r).attrs.ints(0) == dims;
  }
  // dims are the last k dims of a rank-r tensor (k >= 1); returns k or 0.
  static int64_t last_dims(const std::vector<int64_t>& dims, int64_t rank) {
    const auto k = static_cast<int64_t>(dims.size());
    if (k == 0 || k > rank) return 0;
    for (int64_t j = 0; j < k; ++j)
      if (dims[static_cast<size_t>(j)] != rank - k + j) return 0;
    return k;
  }
  // add(v, eps) or add(eps, v) with eps a full of dtype t that leaves v's meta as it is.
  std::optional<double> plus_eps(NodeId a, NodeId v, DType t) const {
    if (!is(a, OpId::add)) return std::nullopt;
    const std::vector<NodeId>& in = n(a).inputs;
    const NodeId e = in[0] == v ? in[1] : in[1] == v ? in[0] : -1;
    if (e < 0 || !is(e, OpId::full) || dtype(e) != t || !detail::same_value_meta(n(a).meta, n(v).meta))
      return std::nullopt;
    return n(e).attrs.f(1);
  }

  bool valid(NodeId root, Match& m) const {
    m.views.resize(m.leaves.size());
    std::vector<TensorMeta> metas;
    for (size_t i = 0; i < m.leaves.size(); ++i) {
      metas.push_back(n(m.leaves[i]).meta);
      auto through = [&](OpId op, const Attrs& attrs) {
        const std::optional<TensorMeta> r = detail::probe(g_, op, std::span<const TensorMeta>(&metas.back(), 1), attrs);
        if (r) metas.back() = *r;
        return r.has_value();
      };
      const LeafView& view = m.views[i];
      if (!view.perm.empty() && !through(OpId::permute, {view.perm})) return false;
      if (!view.sizes.empty() && !through(OpId::reshape, {view.sizes})) return false;
    }
    const std::optional<TensorMeta> meta = detail::probe(g_, m.op, std::span<const TensorMeta>(metas), m.attrs);
    if (!meta || !detail::same_value_meta(*meta, n(root).meta)) return false;
    m.interior = interior_;
    return true;
  }

  // Whether node i holds v everywhere, as its dtype rounds v (within half a unit in its last place).
  bool holds(NodeId i, double v) const {
    const std::optional<double> u = detail::uniform_value(g_, i);
    if (!u) return false;
    const DType t = dtype(i);
    const double ulp = t == DType::bf16 ? 0x1p-8 : t == DType::f16 ? 0x1p-11 : t == DType::f32 ? 0x1p-24 : 0x1p-53;
    return std::fabs(*u - v) <= std::fabs(v) * ulp;
  }
  // The two operands of a binary `op` node as (the one satisfying `first`, the other), either order.
  template <class F>
  std::optional<std::pair<NodeId, NodeId>> operands(NodeId i, OpId op, F first) const {
    if (!is(i, op)) return std::nullopt;
    const NodeId a = n(i).inputs[0], b = n(i).inputs[1];
    if (first(a)) return std::pair{a, b};
    if (first(b)) return std::pair{b, a};
    return std::nullopt;
  }
  // x^3: pow(x, 3), (x * x) * x or x * (x * x); marks its products interior.
  bool cube_of(NodeId c, NodeId x) {
    if (is(c, OpId::pow)) return n(c).inputs[0] == x && holds(n(c).inputs[1], 3.0) && inner(c, 1);
    auto square = [&](NodeId s) { return is(s, OpId::mul) && n(s).inputs[0] == x && n(s).inputs[1] == x; };
    const auto p = operands(c, OpId::mul, square);
    return p && p->second == x && inner(p->first, 1) && inner(c, 1);
  }
  // sqrt(2/pi) * (x + 0.044715 * x^3), either order in each product and sum; gives x.
  std::optional<NodeId> gelu_tanh_argument(NodeId a) {
    constexpr double kSqrt2OverPi = 0.7978845608028654, kCubic = 0.044715;
    const auto scaled = operands(a, OpId::mul, [&](NodeId i) { return holds(i, kSqrt2OverPi); });
    if (!scaled || !is(scaled->second, OpId::add)) return std::nullopt;
    const NodeId sum = scaled->second;
    for (int k = 0; k < 2; ++k) {
      const NodeId x = n(sum).inputs[static_cast<size_t>(k)], term = n(sum).inputs[static_cast<size_t>(1 - k)];
      const auto cubic = operands(term, OpId::mul, [&](NodeId i) { return holds(i, kCubic); });
      if (!cubic || !floating(x)) continue;
      const size_t mark = interior_.size();
      if (cube_of(cubic->second, x) && inner(term, 1) && inner(sum, 1) && inner(a, 1)) return x;
      interior_.resize(mark);
    }
    return std::nullopt;
  }
  // 1 + tanh(arg) or tanh(arg) + 1; gives x of the argument.
  std::optional<NodeId> one_plus_tanh(NodeId o) {
    const auto p = operands(o, OpId::add, [&](NodeId i) { return holds(i, 1.0); });
    if (!p || !is(p->second, OpId::tanh)) return std::nullopt;
    const std::optional<NodeId> x = gelu_tanh_argument(n(p->second).inputs[0]);
    if (!x || !inner(p->second, 1) || !inner(o, 1)) return std::nullopt;
    return x;
  }
  // gelu(x, "tanh"): the product of x, 0.5 and 1 + tanh(...) as (x * 0.5) * t, x * (0.5 * t),
  // (x * t) * 0.5, each product either order.
  std::optional<Match> gelu_tanh(NodeId r) {
    if (!is(r, OpId::mul) || !floating(r)) return std::nullopt;
    const DType t = dtype(r);
    // One operand of r is a product: its two factors and r's other operand are x, 0.5 and the
    // 1 + tanh term in some order (x may itself be a sum or a product: every split is tried).
    for (size_t p = 0; p < 2; ++p) {
      const NodeId prod = n(r).inputs[p];
      if (!is(prod, OpId::mul) || dtype(prod) != t) continue;
      const std::array<NodeId, 3> f{n(r).inputs[1 - p], n(prod).inputs[0], n(prod).inputs[1]};
      for (size_t h = 0; h < 3; ++h) {
        if (!holds(f[h], 0.5)) continue;
        for (size_t k = 0; k < 3; ++k) {
          if (k == h) continue;
          const NodeId x = f[3 - h - k];
          const size_t mark = interior_.size();
          const std::optional<NodeId> tx = one_plus_tanh(f[k]);
          if (tx && *tx == x && dtype(x) == t && inner(prod, 1) &&
              std::all_of(interior_.begin(), interior_.end(), [&](NodeId i) { return dtype(i) == t; }))
            return Match{OpId::gelu, {x}, {std::string("tanh")}, {}};
          interior_.resize(mark);
        }
      }
    }
    return std::nullopt;
  }

  // div(e, sum(e, [d], keep)), e = exp(x - max(x, [d], keep))
  std::optional<Match> softmax(NodeId r) {
    if (!is(r, OpId::div)) return std::nullopt;
    const NodeId e = n(r).inputs[0], s = n(r).inputs[1];
    if (!is(e, OpId::exp) || !is(s, OpId::sum) || n(s).inputs[0] != e || !n(s).attrs.b(1)) return std::nullopt;
    const std::vector<int64_t>& d = n(s).attrs.ints(0);
    if (d.size() != 1) return std::nullopt;
    const NodeId z = n(e).inputs[0];
    if (!is(z, OpId::sub)) return std::nullopt;
    const NodeId x = n(z).inputs[0], m = n(z).inputs[1];
    if (!floating(x) || !reduction(m, OpId::max, x, d)) return std::nullopt;
    if (!inner(e, 2) || !inner(s, 1) || !inner(z, 1) || !inner(m, 1)) return std::nullopt;
    return Match{OpId::softmax, {x}, {d[0]}, {}};
  }

  // sub(z, log(sum(exp(z), [d], keep))), z = x - max(x, [d], keep)
  std::optional<Match> log_softmax(NodeId r) {
    if (!is(r, OpId::sub)) return std::nullopt;
    const NodeId z = n(r).inputs[0], l = n(r).inputs[1];
    if (!is(z, OpId::sub) || !is(l, OpId::log)) return std::nullopt;
    const NodeId s = n(l).inputs[0];
    if (!is(s, OpId::sum) || !n(s).attrs.b(1) || n(s).attrs.ints(0).size() != 1) return std::nullopt;
    const std::vector<int64_t>& d = n(s).attrs.ints(0);
    const NodeId e = n(s).inputs[0];
    if (!is(e, OpId::exp) || n(e).inputs[0] != z) return std::nullopt;
    const NodeId x = n(z).inputs[0], m = n(z).inputs[1];
    if (!floating(x) || !reduction(m, OpId::max, x, d)) return std::nullopt;
    if (!inner(l, 1) || !inner(s, 1) || !inner(e, 1) || !inner(z, 2) || !inner(m, 1)) return std::nullopt;
    return Match{OpId::log_softmax, {x}, {d[0]}, {}};
  }

  // The normalisation without weight and bias, at node c. Gives x, n and eps.
  struct Core {
    NodeId x;
    int64_t ndim;
    double eps;
  };

  // (x - mean) * rsqrt(var + eps), either order, or (x - mean) / sqrt(var + eps).
  std::optional<Core> layer_norm_core(NodeId c) {
    NodeId d, inv;
    OpId root_fn;
    if (is(c, OpId::div)) {
      d = n(c).inputs[0], inv = n(c).inputs[1], root_fn = OpId::sqrt;
    } else if (is(c, OpId::mul)) {
      d = n(c).inputs[0], inv = n(c).inputs[1], root_fn = OpId::rsqrt;
      if (!is(d, OpId::sub)) std::swap(d, inv);
    } else {
      return std::nullopt;
    }
    if (!is(d, OpId::sub) || !is(inv, root_fn)) return std::nullopt;
    const NodeId x = n(d).inputs[0], mean = n(d).inputs[1];
    if (!floating(x) || !is(mean, OpId::mean) || n(mean).inputs[0] != x || !n(mean).attrs.b(1)) return std::nullopt;
    const std::vector<int64_t>& dims = n(mean).attrs.ints(0);
    const int64_t k = last_dims(dims, n(x).meta.rank());
    if (k == 0) return std::nullopt;
    const NodeId a = n(inv).inputs[0];
    if (!is(a, OpId::add)) return std::nullopt;
    const NodeId v = is(n(a).inputs[0], OpId::var) ? n(a).inputs[0] : n(a).inputs[1];
    if (!reduction(v, OpId::var, x, dims) || n(v).attrs.i(2) != 0) return std::nullopt;
    const std::optional<double> eps = plus_eps(a, v, dtype(x));
    if (!eps) return std::nullopt;
    for (NodeId i : {d, inv, a, v, mean, c})
      if (dtype(i) != dtype(x)) return std::nullopt;
    if (!inner(d, 1) || !inner(mean, 1) || !inner(inv, 1) || !inner(a, 1) || !inner(v, 1)) return std::nullopt;
    return Core{x, k, *eps};
  }

  // x * rsqrt(mean(x * x, D, keep) + eps), either order; x * x may be pow(x, 2).
  std::optional<Core> rms_norm_core(NodeId c) {
    if (!is(c, OpId::mul)) return std::nullopt;
    NodeId x = n(c).inputs[0], inv = n(c).inputs[1];
    if (!is(inv, OpId::rsqrt)) std::swap(x, inv);
    if (!is(inv, OpId::rsqrt) || !floating(x)) return std::nullopt;
    const NodeId a = n(inv).inputs[0];
    if (!is(a, OpId::add)) return std::nullopt;
    const NodeId ms = is(n(a).inputs[0], OpId::mean) ? n(a).inputs[0] : n(a).inputs[1];
    if (!is(ms, OpId::mean) || !n(ms).attrs.b(1)) return std::nullopt;
    const NodeId sq = n(ms).inputs[0];
    const bool square = (is(sq, OpId::mul) && n(sq).inputs[0] == x && n(sq).inputs[1] == x) ||
                        (is(sq, OpId::pow) && n(sq).inputs[0] == x && dtype(x) != DType::f64 &&
                         detail::uniform_value(g_, n(sq).inputs[1]) == 2.0);
    if (!square || !detail::same_value_meta(n(sq).meta, n(x).meta)) return std::nullopt;
    const int64_t k = last_dims(n(ms).attrs.ints(0), n(x).meta.rank());
    if (k == 0) return std::nullopt;
    const std::optional<double> eps = plus_eps(a, ms, dtype(x));
    if (!eps) return std::nullopt;
    for (NodeId i : {sq, ms, a, inv, c})
      if (dtype(i) != dtype(x)) return std::nullopt;
    if (!inner(sq, 1) || !inner(ms, 1) || !inner(a, 1) || !inner(inv, 1)) return std::nullopt;
    return Core{x, k, *eps};
  }

  // Tries `core` at c, then at either operand of a mul (the other is the weight). Gives the
  // core and the weight (-1 when none).
  template <class CoreFn>
  std::optional<std::pair<Core, NodeId>> weighted(NodeId c, CoreFn core) {
    const size_t mark = interior_.size();
    if (std::optional<Core> k = (this->*core)(c)) return std::pair{*k, NodeId{-1}};
    interior_.resize(mark);
    if (!is(c, OpId::mul)) return std::nullopt;
    for (int side = 0; side < 2; ++side) {
      const NodeId inner_c = n(c).inputs[static_cast<size_t>(side)];
      const NodeId w = n(c).inputs[static_cast<size_t>(1 - side)];
      if (std::optional<Core> k = (this->*core)(inner_c)) {
        if (dtype(w) == dtype(k->x) && inner(inner_c, 1)) return std::pair{*k, w};
      }
      interior_.resize(mark);
    }
    return std::nullopt;
  }

  std::optional<Match> layer_norm(NodeId r) {
    if (auto k = weighted(r, &Recognizer::layer_norm_core)) {
      std::vector<NodeId> leaves{k->first.x};
      if (k->second >= 0) leaves.push_back(k->second);
      return Match{OpId::layer_norm, leaves, {k->first.ndim, k->first.eps}, {}};
    }
    // A bias: add(weighted, b) either order, with a weight (the composite has no bias alone).
    if (!is(r, OpId::add)) return std::nullopt;
    for (int side = 0; side < 2; ++side) {
      const NodeId y = n(r).inputs[static_cast<size_t>(side)];
      const NodeId b = n(r).inputs[static_cast<size_t>(1 - side)];
      interior_.clear();
      if (!is(y, OpId::mul)) continue;
      auto k = weighted(y, &Recognizer::layer_norm_core);
      if (k && k->second >= 0 && dtype(b) == dtype(k->first.x) && inner(y, 1))
        return Match{OpId::layer_norm, {k->first.x, k->second, b}, {k->first.ndim, k->first.eps}, {}};
    }
    return std::nullopt;
  }

  // matmul(softmax(s, -1), v) with s = q @ k^T, (q @ k^T) * c, c * (q @ k^T) or (q @ k^T) / c.
  std::optional<Match> attention(NodeId r) {
    if (!is(r, OpId::matmul)) return std::nullopt;
    NodeId p = n(r).inputs[0];
    const NodeId v = n(r).inputs[1];
    const int64_t rank = n(r).meta.rank();
    const DType t = dtype(r);
    if (!is_floating(t) || rank < 2) return std::nullopt;
    // where(isnan(p), 0, p): the zeroed NaN rows of a masked attention (which the mask must be).
    const bool masked = is(p, OpId::where);
    NodeId zero_mask = -1;  // the where's 0, a mask that adds nothing (the pipeline drops a + 0)
    if (masked) {
      zero_mask = n(p).inputs[1];
      const std::vector<NodeId>& w = n(p).inputs;
      const std::optional<double> zero = detail::uniform_value(g_, w[1]);
      if (!is(w[0], OpId::isnan) || n(w[0]).inputs[0] != w[2] || !zero || *zero != 0.0 ||
          !detail::same_value_meta(n(p).meta, n(w[2]).meta) || !inner(p, 1) || !inner(w[0], 1))
        return std::nullopt;
      p = w[2];
    }
    if (!is(p, OpId::softmax) || n(p).attrs.i(0) != rank - 1 || !inner(p, masked ? 2 : 1)) return std::nullopt;
    NodeId s = n(p).inputs[0];
    NodeId mask = -1;
    if (masked) {
      // s = scores + m (either side; m broadcast, of the scores' dtype) or where(m, scores, -inf).
      if (is(s, OpId::add)) {
        for (int side = 0; side < 2 && mask < 0; ++side) {
          const NodeId a = n(s).inputs[static_cast<size_t>(side)], m = n(s).inputs[static_cast<size_t>(1 - side)];
          if (dtype(m) == t && detail::same_value_meta(n(s).meta, n(a).meta) && (is(a, OpId::matmul) || is(a, OpId::mul) || is(a, OpId::div)))
            mask = m;
        }
      } else if (is(s, OpId::where)) {
        const std::vector<NodeId>& w = n(s).inputs;
        const std::optional<double> fill = detail::uniform_value(g_, w[2]);
        if (dtype(w[0]) == DType::bool_ && fill && *fill == -std::numeric_limits<double>::infinity() &&
            detail::same_value_meta(n(s).meta, n(w[1]).meta))
          mask = w[0];
      }
      if (mask >= 0) {
        if (!inner(s, 1)) return std::nullopt;
        s = is(s, OpId::add) ? n(s).inputs[n(s).inputs[0] == mask ? 1 : 0] : n(s).inputs[1];
      } else {
        mask = zero_mask;  // an all-zero mask folded away (BERT's without padding): scores + 0
      }
    }
    NodeId qk = s;
    double scale = 1.0;
    if (is(s, OpId::mul) || is(s, OpId::div)) {
      const std::vector<NodeId>& in = n(s).inputs;
      const bool left = is(in[0], OpId::matmul);
      if (is(s, OpId::div) && !left) return std::nullopt;
      qk = left ? in[0] : in[1];
      const std::optional<double> c = detail::uniform_value(g_, left ? in[1] : in[0]);
      if (!c || !is(qk, OpId::matmul) || !detail::same_value_meta(n(s).meta, n(qk).meta)) return std::nullopt;
      scale = is(s, OpId::div) ? 1.0 / *c : *c;
      if (!inner(s, 1)) return std::nullopt;
    }
    if (!is(qk, OpId::matmul) || !inner(qk, 1)) return std::nullopt;
    const NodeId q = unscaled(n(qk).inputs[0], scale), kt = unscaled(n(qk).inputs[1], scale);
    const std::optional<Transposed> k = transposed(kt);
    if (!k) return std::nullopt;
    // k's sizes: those of kt with the last two swapped.
    SymShape ks = n(kt).meta.sizes;
    std::swap(ks[ks.size() - 1], ks[ks.size() - 2]);
    for (NodeId i : {p, s, qk, q, k->node, v})
      if (dtype(i) != t || (i != k->node && n(i).meta.rank() != rank)) return std::nullopt;
    for (size_t d = 0; d + 2 < static_cast<size_t>(rank); ++d)
      if (!(n(q).meta.sizes[d] == ks[d]) || !(n(q).meta.sizes[d] == n(v).meta.sizes[d])) return std::nullopt;
    Match m{OpId::scaled_dot_product_attention, {q, k->node, v}, {scale}, {}};
    m.views = {{}, k->view, {}};
    if (mask >= 0) {
      m.leaves.push_back(mask);
      m.views.push_back({});
    }
    return m;
  }

  // x without a multiplication by a scalar c (either side, x's value meta kept) that only the
  // pattern reads, c folded into `scale`; else x.
  NodeId unscaled(NodeId x, double& scale) {
    if (!is(x, OpId::mul) || output_[static_cast<size_t>(x)] || uses_[static_cast<size_t>(x)] != 1) return x;
    for (int side = 0; side < 2; ++side) {
      const NodeId a = n(x).inputs[static_cast<size_t>(side)], c = n(x).inputs[static_cast<size_t>(1 - side)];
      const std::optional<double> v = detail::uniform_value(g_, c);
      if (!v || !detail::same_value_meta(n(x).meta, n(a).meta)) continue;
      scale *= *v;
      interior_.push_back(x);
      return a;
    }
    return x;
  }

  // The node whose last two dims `x` swaps (transpose or permute, nothing else moved), or -1.
  NodeId swapped_last_dims(NodeId x) const {
    const int64_t r = n(x).meta.rank();
    if (r < 2) return -1;
    if (is(x, OpId::transpose)) {
      int64_t a = n(x).attrs.i(0), b = n(x).attrs.i(1);
      a += a < 0 ? r : 0;
      b += b < 0 ? r : 0;
      return std::min(a, b) == r - 2 && std::max(a, b) == r - 1 ? n(x).inputs[0] : -1;
    }
    if (!is(x, OpId::permute)) return -1;
    const std::vector<int64_t>& perm = n(x).attrs.ints(0);
    for (int64_t d = 0; d < r; ++d) {
      const int64_t want = d == r - 2 ? r - 1 : d == r - 1 ? r - 2 : d;
      if (perm[static_cast<size_t>(d)] != want) return -1;
    }
    return n(x).inputs[0];
  }

  // The node y and permutation p (empty: none) with x = swap(permute(y, p)), swap exchanging
  // the last two dims.
  std::optional<std::pair<NodeId, std::vector<int64_t>>> swap_of_permute(NodeId x) const {
    if (const NodeId y = swapped_last_dims(x); y >= 0) return std::pair{y, std::vector<int64_t>{}};
    if (!is(x, OpId::permute) || n(x).meta.rank() < 2) return std::nullopt;
    std::vector<int64_t> p = n(x).attrs.ints(0);
    std::swap(p[p.size() - 1], p[p.size() - 2]);
    return std::pair{n(x).inputs[0], p};
  }

  // The operand k whose last two dims kt swaps, as a view of a node: kt = swap(permute(y)) or
  // reshape(swap(permute(y))) where the reshape only regroups leading dims (torch's exporter
  // writes k.transpose(-2, -1) of a 4-d k as reshape(transpose(reshape(k, [B*H, L, D]))), and
  // the pipeline folds a permute before it into the transpose).
  struct Transposed {
    NodeId node;
    LeafView view;
  };
  // The chain's nodes that only it reads join the interior, outermost first (a node read
  // elsewhere stays, and so does everything it reads).
  std::optional<Transposed> transposed(NodeId kt) {
    bool chain = true;  // every node so far is the pattern's alone
    auto own = [&](NodeId x) {
      chain = chain && !output_[static_cast<size_t>(x)] && uses_[static_cast<size_t>(x)] == 1;
      if (chain) interior_.push_back(x);
    };
    if (auto sp = swap_of_permute(kt)) {
      own(kt);
      return Transposed{sp->first, {sp->second, {}}};
    }
    if (!is(kt, OpId::reshape)) return std::nullopt;
    const NodeId sw = n(kt).inputs[0];
    const auto sp = swap_of_permute(sw);
    const SymShape& outer = n(kt).meta.sizes;
    const SymShape& mid = n(sw).meta.sizes;
    const size_t r = outer.size();
    if (!sp || r < 2 || mid.size() < 2 || !(outer[r - 2] == mid[mid.size() - 2]) || !(outer[r - 1] == mid[mid.size() - 1]))
      return std::nullopt;
    SymShape want(outer.begin(), outer.end() - 2);
    want.push_back(outer[r - 1]);
    want.push_back(outer[r - 2]);
    own(kt);
    own(sw);
    const auto& [y, perm] = *sp;
    if (perm.empty()) {
      // y = reshape(w) with w of the wanted sizes (the exporter's flatten and unflatten).
      if (is(y, OpId::reshape) && n(n(y).inputs[0]).meta.sizes == want) {
        own(y);
        return Transposed{n(y).inputs[0], {}};
      }
      if (n(y).meta.sizes == want) return Transposed{y, {}};
    }
    return Transposed{y, {perm, want}};
  }

  std::optional<Match> rms_norm(NodeId r) {
    auto k = weighted(r, &Recognizer::rms_norm_core);
    if (!k) return std::nullopt;
    std::vector<NodeId> leaves{k->first.x};
    if (k->second >= 0) leaves.push_back(k->second);
    return Match{OpId::rms_norm, leaves, {k->first.ndim, k->first.eps}, {}};
  }
};

PassResult run_recognizer(const Graph& g, bool attention_only) {
  Recognizer rec(g, attention_only);
  // Greedy from the last node back, so a pattern is matched at its outermost root (with its
  // weight and bias); matches never share nodes.
  std::vector<std::optional<Match>> at(g.size());
  std::vector<char> claimed(g.size(), 0);
  int found[kNumOps] = {};
  for (NodeId id = static_cast<NodeId>(g.size()); id-- > 0;) {
    if (claimed[static_cast<size_t>(id)] || g.node(id).op == OpId::input || !rec.live(id)) continue;
    std::optional<Match> m = rec.match(id);
    if (!m) continue;
    bool free = true;
    for (NodeId i : m->interior) free = free && !claimed[static_cast<size_t>(i)];
    if (!free) continue;
    claimed[static_cast<size_t>(id)] = 1;
    for (NodeId i : m->interior) claimed[static_cast<size_t>(i)] = 2;
    ++found[static_cast<size_t>(m->op)];
    at[static_cast<size_t>(id)] = std::move(m);
  }
  detail::Rewriter rw(g, "recognize");
  for (NodeId id = 0; id < static_cast<NodeId>(g.size()); ++id) {
    const Node& n = g.node(id);
    if (n.op == OpId::input || claimed[static_cast<size_t>(id)] == 2) continue;
    if (const std::optional<Match>& m = at[static_cast<size_t>(id)]) {
      std::vector<NodeId> ins;
      for (size_t i = 0; i < m->leaves.size(); ++i) {
        ins.push_back(rw.map(m->leaves[i]));
        const LeafView& v = m->views[i];
        if (!v.perm.empty()) ins.back() = rw.out().add(OpId::permute, {ins.back()}, {v.perm});
        if (!v.sizes.empty()) ins.back() = rw.out().add(OpId::reshape, {ins.back()}, {v.sizes});
      }
      rw.bind(id, rw.out().add(m->op, std::move(ins), m->attrs));
      continue;
    }
    bool reads_interior = false;
    for (NodeId i : n.inputs) reads_interior = reads_interior || rw.map(i) < 0;
    if (!reads_interior) {
      rw.copy(id);
    } else if (rec.live(id)) {
      internal_fail("passes: recognize: live node %", id, " reads a replaced pattern's interior");
    }  // else a dead node reading into a pattern (or from such a node): dropped
  }
  int total = 0;
  std::string detail;
  for (int op = 0; op < kNumOps; ++op) {
    if (found[op] == 0) continue;
    total += found[op];
    detail += std::string(detail.empty() ? "" : ", ") + std::to_string(found[op]) + " " +
              std::string(op_name(static_cast<OpId>(op)));
  }
  const std::string name = attention_only ? "recognize_attention" : "recognize";
  return {rw.finish(), total > 0, name + ": " + (total == 0 ? std::string("no pattern") : "replaced " + detail)};
}

PassResult run(const Graph& g) { return run_recognizer(g, false); }
PassResult run_attention(const Graph& g) { return run_recognizer(g, true); }

}  // namespace

const Pass recognize_pass{"recognize", &run};
const Pass recognize_attention_pass{"recognize_attention", &run_attention};

Graph recognize_patterns(const Graph& g) { return run_pass(recognize_pass, g).graph; }
Graph recognize_attention(const Graph& g) { return run_pass(recognize_attention_pass, g).graph; }

}  // namespace kiln::passes
