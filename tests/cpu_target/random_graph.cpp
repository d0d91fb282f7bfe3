#include "random_graph.h"

#include <algorithm>
#include <cstring>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <thread>

#include "kiln/format/graph_json.h"
#include "kiln/graph/error.h"
#include "kiln/passes/passes.h"

namespace cpu_test {

namespace {

constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();

// A value the generator may build on.
struct Val {
  NodeId id = -1;
  bool exact = false;    // no target may differ on it (see random_graph.h)
  bool strided = false;  // a strided graph input, or a view of one
};

int precision_rank(DType t) {  // larger: less precise
  switch (t) {
    case DType::f64: return 1;
    case DType::f32: return 2;
    case DType::f16: return 3;
    case DType::bf16: return 4;
    default: return 0;
  }
}

class Gen {
 public:
  Gen(uint64_t seed, const RandomGraphOptions& o) : rng_(seed * 0x9E3779B97F4A7C15ull + 1), o_(o) {}

  RandomCase build() {
    make_inputs();
    const int steps = coin(20) ? 15 + pick(20) : 5 + pick(12);
    for (int k = 0; k < steps; ++k) {
      try {
        step();
      } catch (const kiln::Error&) {
        // operands that do not fit the op: the step added nothing usable
      }
    }
    // Outputs: the newest value that is not an input, and up to two others.
    std::vector<NodeId> outs;
    for (auto it = pool_.rbegin(); it != pool_.rend(); ++it)
      if (g_.node(it->id).op != OpId::input) {
        outs.push_back(it->id);
        break;
      }
    if (outs.empty()) outs.push_back(add(OpId::abs, {pool_.back().id}));
    for (int k = pick(3); k > 0; --k) {
      const NodeId o = pool_[static_cast<size_t>(pick(static_cast<int>(pool_.size())))].id;
      if (std::find(outs.begin(), outs.end(), o) == outs.end()) outs.push_back(o);
    }
    if (coin(10)) outs.push_back(outs[0]);  // one value twice
    g_.set_outputs(outs);
    RandomCase c;
    c.graph = g_;
    c.layouts = layouts_;
    c.symbol_runs = symbol_runs();
    return c;
  }

 private:
  std::mt19937_64 rng_;
  RandomGraphOptions o_;
  Graph g_;
  std::vector<Val> pool_;
  std::vector<TensorData> vals_;  // by node id, at the example sizes
  std::vector<Layout> layouts_;
  std::vector<SymInt> syms_;

  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }
  bool coin(int percent = 50) { return pick(100) < percent; }
  const TensorMeta& meta(NodeId v) const { return g_.node(v).meta; }
  int64_t rank(NodeId v) const { return meta(v).rank(); }
  DType dtype(NodeId v) const { return meta(v).dtype; }
  bool avoid() const { return o_.avoid_known_bugs; }

  // Mostly recent values: chains more than bushes.
  Val any() {
    if (coin(45)) return pool_.back();
    const int n = static_cast<int>(pool_.size());
    return pool_[static_cast<size_t>(coin(60) ? std::max(0, n - 1 - pick(4)) : pick(n))];
  }
  Val any_where(const std::function<bool(const Val&)>& ok) {
    for (int tries = 0; tries < 12; ++tries) {
      const Val v = any();
      if (ok(v)) return v;
    }
    throw kiln::Error("no fitting value");
  }
  Val any_float() {
    try {
      return any_where([&](const Val& v) { return is_floating(dtype(v.id)); });
    } catch (const kiln::Error&) {
      const Val v = any();
      return Val{add(OpId::cast, {v.id}, {DType::f32}), v.exact, false};
    }
  }
  Val any_exact() {
    return any_where([&](const Val& v) { return v.exact; });
  }

  // Adds a node and evaluates it on the reference at the example sizes.
  NodeId add(OpId op, std::vector<NodeId> in, Attrs attrs = {}) {
    const NodeId id = g_.add(op, in, std::move(attrs));
    vals_.resize(g_.size());
    const Node& n = g_.node(id);
    std::vector<TensorData> args;
    for (NodeId i : n.inputs) args.push_back(vals_.at(static_cast<size_t>(i)));
    std::vector<int64_t> sizes;
    const std::vector<int64_t> ex = g_.shapes().examples();
    for (const SymInt& s : n.meta.sizes) sizes.push_back(s.evaluate(ex));
    vals_[static_cast<size_t>(id)] = eval::run_op(n.op, args, n.attrs, n.meta.dtype, sizes);
    return id;
  }
  NodeId scalar(double v, DType t) { return add(OpId::full, {}, {SymShape{}, v, t}); }

  double max_abs(NodeId id) const {
    double m = 0;
    for (double x : elements(vals_.at(static_cast<size_t>(id)))) m = std::max(m, std::fabs(x));
    return m;
  }
  // Finite, not too large (f16 / bf16 overflow when the reference rounds every op), not too many elements.
  bool sane(NodeId id) const {
    const TensorData& v = vals_.at(static_cast<size_t>(id));
    if (v.numel() > 20000 || v.numel() == 0) return false;  // empty tensors stay on the reference target
    const DType t = v.dtype;
    const double limit = t == DType::f16 || t == DType::bf16 ? 200 : is_floating(t) ? 1e4 : 1e12;
    for (double x : elements(v))
      if (!std::isfinite(x) || std::fabs(x) > limit) return false;
    return true;
  }
  bool push(NodeId id, bool exact, bool strided = false) {
    if (!sane(id)) return false;
    pool_.push_back(Val{id, exact, strided});
    return true;
  }

  SymInt new_symbol(int64_t example) {
    syms_.push_back(g_.shapes().create_symbol(example, 2, kEnd, "s" + std::to_string(syms_.size()), false));
    return syms_.back();
  }
  SymInt some_size() {
    switch (pick(8)) {
      case 0: case 1: return 1;
      case 2: return 2 + pick(4);
      case 3: { static const int64_t p[] = {7, 13, 3, 5, 17, 33}; return p[pick(6)]; }
      default:
        if (!syms_.empty() && coin(40)) return syms_[static_cast<size_t>(pick(static_cast<int>(syms_.size())))];
        return new_symbol(2 + pick(5));
    }
  }
  DType some_dtype() {
    const int k = pick(100);
    return k < 62 ? DType::f32 : k < 71 ? DType::f16 : k < 80 ? DType::bf16 : k < 87 ? DType::f64 : k < 94 ? DType::i32 : k < 97 ? DType::i64 : DType::bool_;
  }

  NodeId new_input(DType t, SymShape sizes, bool allow_strided = true) {
    TensorMeta m;
    m.dtype = t;
    m.sizes = sizes;
    Layout l = Layout::contiguous;
    const std::vector<int64_t> ex = g_.shapes().examples();
    std::vector<int64_t> s;
    for (const SymInt& d : sizes) s.push_back(d.evaluate(ex));
    if (allow_strided && shape_is_static(sizes) && !sizes.empty() && coin(20)) {
      l = sizes.size() >= 2 && coin() ? Layout::permuted : Layout::sliced;
      const TensorData probe = laid_out(t, s, std::vector<double>(static_cast<size_t>(shape_numel(sizes).hint()), 0.0), l);
      if (!probe.is_contiguous())
        for (int64_t st : probe.strides) m.strides.push_back(st);
    }
    const NodeId id = g_.add_input(m, "in" + std::to_string(g_.inputs().size()));
    layouts_.push_back(l);
    vals_.resize(g_.size());
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    vals_[static_cast<size_t>(id)] = tensor(t, s, random_values(t, n, Domain::normal, rng_));
    return id;
  }

  void make_inputs() {
    SymShape base;
    static const int ranks[] = {0, 1, 1, 2, 2, 2, 3, 3, 3, 4};
    const int r = ranks[pick(10)];
    for (int k = 0; k < r; ++k) base.push_back(some_size());
    const int n = 1 + pick(3);
    for (int i = 0; i < n; ++i) {
      SymShape s = base;
      if (i > 0 && !s.empty() && coin(25)) s.erase(s.begin());
      for (SymInt& d : s)
        if (i > 0 && coin(15)) d = 1;
      const NodeId id = new_input(i == 0 && coin(70) ? DType::f32 : some_dtype(), s);
      pool_.push_back(Val{id, true, !meta(id).strides.empty()});
    }
  }

  void step() {
    switch (pick(23)) {
      case 0: case 1: unary(); break;
      case 2: exp_like(); break;
      case 3: log_like(); break;
      case 4: case 5: binary(); break;
      case 6: div_pow(); break;
      case 7: compare_where(); break;
      case 8: discontinuous(); break;
      case 9: cast(); break;
      case 10: case 11: reduce(); break;
      case 12: norm(); break;
      case 13: case 14: case 15: view(); break;
      case 16: matmul(); break;
      case 17: cat_pad_index(); break;
      case 18: sources(); break;
      case 19: if (coin()) { softmax_layer_norm_by_hand(); break; } [[fallthrough]];
      case 20: case 21: if (coin()) { channels_and_windows(any_float().id); break; } [[fallthrough]];
      default: if (coin()) self_combine(); else with_constant(); break;
    }
  }

  void unary() {
    Val v = any();
    if (dtype(v.id) == DType::bool_) v = Val{add(OpId::cast, {v.id}, {DType::f32}), v.exact};
    static const OpId ops[] = {OpId::neg, OpId::abs, OpId::relu, OpId::sigmoid, OpId::tanh, OpId::silu,
                               OpId::gelu, OpId::erf, OpId::sin, OpId::cos};
    const int k = pick(10);
    const OpId op = ops[k];
    const NodeId r = op == OpId::gelu ? add(op, {v.id}, {std::string(coin() ? "none" : "tanh")}) : add(op, {v.id});
    push(r, k < 3 && v.exact);
  }

  void exp_like() {
    const Val v = any_float();
    const NodeId x = max_abs(v.id) < 6 ? v.id : add(OpId::tanh, {v.id});
    push(add(OpId::exp, {x}), false);
  }

  // log / sqrt / rsqrt / reciprocal of |x| + c.
  void log_like() {
    const Val v = any_float();
    const NodeId p = add(OpId::add, {add(OpId::abs, {v.id}), scalar(coin() ? 0.5 : 1.0, dtype(v.id))});
    static const OpId ops[] = {OpId::log, OpId::sqrt, OpId::rsqrt, OpId::reciprocal};
    push(add(ops[pick(4)], {p}), false);
  }

  NodeId partner(const Val& a, bool& exact) {
    const int k = pick(10);
    if (k < 5) {
      const Val b = any();
      exact = b.exact;
      return b.id;
    }
    if (k < 8) {  // a 0-d scalar (promotion)
      static const double values[] = {0.0, 1.0, -1.0, 2.5, 0.5, -3.0};
      static const DType dtypes[] = {DType::f32, DType::f32, DType::f64, DType::i32, DType::i64, DType::f16, DType::bf16};
      exact = true;
      return scalar(values[pick(6)], dtypes[pick(7)]);
    }
    // A new input broadcasting against a.
    SymShape s = meta(a.id).sizes;
    if (!s.empty() && coin(30)) s.erase(s.begin());
    for (SymInt& d : s)
      if (coin(30)) d = 1;
    exact = true;
    const NodeId id = new_input(coin(75) ? dtype(a.id) : some_dtype(), s);
    pool_.push_back(Val{id, true, !meta(id).strides.empty()});
    return id;
  }

  void binary() {
    const Val a = any();
    bool bexact = false;
    const NodeId b = partner(a, bexact);
    static const OpId ops[] = {OpId::add, OpId::sub, OpId::mul, OpId::maximum, OpId::minimum};
    const OpId op = ops[pick(5)];
    const NodeId r = coin(80) ? add(op, {a.id, b}) : add(op, {b, a.id});
    const bool exact = a.exact && bexact && (!is_floating(dtype(r)) || op == OpId::maximum || op == OpId::minimum);
    push(r, exact);
  }

  void div_pow() {
    const Val a = any();
    if (coin()) {
      const Val b = any_float();
      const NodeId den = add(OpId::add, {add(OpId::abs, {b.id}), scalar(0.5, dtype(b.id))});
      push(coin(80) ? add(OpId::div, {a.id, den}) : add(OpId::div, {a.id, scalar(coin() ? 4.0 : -3.0, DType::f32)}), false);
      return;
    }
    const Val x = any_float();
    const NodeId base = add(OpId::add, {add(OpId::abs, {x.id}), scalar(0.5, dtype(x.id))});
    NodeId e;
    if (coin(70)) {
      static const double ex[] = {2.0, 0.5, -1.0, 3.0, 1.5, -0.5};
      e = scalar(ex[pick(6)], coin(80) ? DType::f32 : DType::i32);
    } else {
      e = add(OpId::tanh, {any_float().id});
    }
    push(add(OpId::pow, {base, e}), false);
  }

  void compare_where() {
    const Val a = any_exact();
    NodeId b;
    if (coin(60)) {
      b = any_exact().id;
    } else {
      b = scalar(coin() ? 0.0 : 0.5, coin() ? dtype(a.id) : DType::f32);
    }
    static const OpId ops[] = {OpId::lt, OpId::le, OpId::gt, OpId::ge, OpId::eq, OpId::ne};
    const NodeId c = add(ops[pick(6)], {a.id, b});
    if (!coin(70)) {
      push(c, true);
      return;
    }
    const Val x = any();
    bool yexact = false;
    const NodeId y = coin() ? any().id : partner(x, yexact);
    if (y == x.id) yexact = x.exact;
    push(add(OpId::where, {c, x.id, y}), x.exact && yexact);
  }

  void discontinuous() {
    const Val a = any_exact();
    if (coin(20)) {
      push(add(OpId::logical_not, {a.id}), true);
      return;
    }
    if (dtype(a.id) == DType::bool_) {
      const Val b = any_exact();
      push(add(coin() ? OpId::logical_and : OpId::logical_or, {a.id, b.id}), true);
      return;
    }
    static const OpId ops[] = {OpId::floor, OpId::ceil, OpId::round, OpId::sign, OpId::isnan};
    push(add(ops[pick(5)], {a.id}), true);
  }

  void cast() {
    const Val v = any();
    static const DType ds[] = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::bool_};
    const DType to = ds[pick(7)];
    if (!is_floating(to) && is_floating(dtype(v.id)) && !v.exact) return;  // discontinuous
    push(add(OpId::cast, {v.id}, {to}), v.exact, v.strided);
  }

  std::vector<int64_t> some_dims(NodeId x, bool allow_empty = true) {
    std::vector<int64_t> d;
    const TensorMeta& m = meta(x);
    for (int64_t k = 0; k < m.rank(); ++k)
      if (coin()) d.push_back(k);
    if (d.empty() && !allow_empty && m.rank() > 0) d.push_back(m.rank() - 1);
    return d;
  }
  // Whether the example value of x is the same at every index of dim d (broadcast along it).
  bool invariant_along(NodeId x, int64_t d) const {
    const TensorData& v = vals_.at(static_cast<size_t>(x));
    const std::vector<double> e = elements(v);
    int64_t inner = 1;
    for (int64_t k = d + 1; k < v.rank(); ++k) inner *= v.sizes[static_cast<size_t>(k)];
    const int64_t n = v.sizes[static_cast<size_t>(d)];
    for (size_t i = 0; i < e.size(); ++i) {
      const int64_t pos = static_cast<int64_t>(i) / inner % n;
      if (pos == 0) continue;
      const double a = e[i], b = e[i - static_cast<size_t>(pos * inner)];
      if (!(a == b || (std::isnan(a) && std::isnan(b)))) return false;
    }
    return true;
  }
  // Known bug 2: a reduction over a dim of size > 1 that the value does not vary along (a
  // broadcast value), whose kernel stores such a value along the reduced dim (dims empty = all).
  bool reducible(NodeId x, const std::vector<int64_t>& dims) const {
    if (!avoid()) return true;
    const TensorMeta& m = meta(x);
    for (int64_t k = 0; k < m.rank(); ++k) {
      const bool reduced = dims.empty() || std::find(dims.begin(), dims.end(), k) != dims.end();
      if (reduced && !(m.sizes[static_cast<size_t>(k)] == 1) && invariant_along(x, k)) return false;
    }
    return true;
  }
  // Known bug 7: a matmul operand with a size-1 dim among its matrix dims (transposed views of
  // them get a leading dimension BLAS rejects).
  bool gemm_ok(NodeId x) const {
    if (!avoid()) return true;
    const TensorMeta& m = meta(x);
    for (int64_t k = std::max<int64_t>(0, m.rank() - 2); k < m.rank(); ++k)
      if (m.sizes[static_cast<size_t>(k)] == 1) return false;
    return true;
  }

  void reduce() {
    const Val v = any();
    const NodeId x = v.id;
    std::vector<int64_t> dims = some_dims(x);
    if (!reducible(x, dims)) return;
    const bool keep = coin();
    const DType t = dtype(x);
    switch (pick(8)) {
      case 0: case 1: push(add(OpId::sum, {x}, {dims, keep}), v.exact && !is_floating(t)); break;
      case 2: push(add(OpId::mean, {x}, {dims, keep}), false); break;
      case 3: push(add(coin() ? OpId::max : OpId::min, {x}, {dims, keep}), v.exact); break;
      case 4: push(add(OpId::var, {x}, {dims, keep, int64_t{pick(2)}}), false); break;
      case 5: push(add(OpId::logsumexp, {x}, {dims, keep}), false); break;
      case 6: {
        if (!v.exact) return;
        if (dims.size() > 1) dims.resize(1);
        push(add(coin() ? OpId::argmax : OpId::argmin, {x}, {dims, keep}), true);
        break;
      }
      default: {  // prod of values in [0.75, 1.25], in f32 or f64: f16 / bf16 factors rounded after every op
                  // (the reference) or not (fused) drift apart over long products
        if (!is_floating(t)) return;
        const NodeId y = t == DType::f64 ? x : add(OpId::cast, {x}, {DType::f32});
        const DType u = dtype(y);
        const NodeId b = add(OpId::add, {add(OpId::mul, {add(OpId::tanh, {y}), scalar(0.25, u)}), scalar(1.0, u)});
        push(add(OpId::prod, {b}, {dims, keep}), false);
      }
    }
  }

  // The composites over a random / the last dims.
  void norm() {
    const Val v = any_float();
    const NodeId x = v.id;
    const TensorMeta m = meta(x);
    if (m.rank() == 0) return;
    const int64_t last = m.rank() - 1;
    const DType t = m.dtype;
    switch (pick(4)) {
      case 0: {
        const int64_t d = pick(static_cast<int>(m.rank()));
        if (!reducible(x, {d})) return;
        push(add(coin() ? OpId::softmax : OpId::log_softmax, {x}, {d}), false);
        break;
      }
      case 1: case 2: {
        const int64_t nd = m.rank() >= 2 && coin(30) && reducible(x, {last - 1, last}) ? 2 : 1;
        if (!reducible(x, {last})) return;
        const SymShape ws(m.sizes.end() - nd, m.sizes.end());
        std::vector<NodeId> in{x};
        const OpId op = coin() ? OpId::layer_norm : OpId::rms_norm;
        if (coin(60)) in.push_back(new_input(coin(80) ? t : DType::f32, ws, false));
        if (op == OpId::layer_norm && in.size() == 2 && coin()) in.push_back(new_input(t, ws, false));
        for (size_t k = 1; k < in.size(); ++k) pool_.push_back(Val{in[k], true, false});
        push(add(op, in, {nd, coin() ? 1e-5 : 1e-3}), false);
        break;
      }
      default: {
        std::vector<int64_t> dims = some_dims(x, false);
        if (!reducible(x, dims)) return;
        push(add(OpId::logsumexp, {x}, {dims, coin()}), false);
      }
    }
    (void)t;
  }

  // The ops of images over x as [N, C, *spatial]: batch_norm and group_norm over dim 1, or
  // max_pool / avg_pool over the static trailing dims (1 or 2 of them) with random windows.
  void channels_and_windows(NodeId x) {
    const TensorMeta m = meta(x);
    if (m.rank() < 3) return;
    const DType t = m.dtype;
    const SymInt& ch = m.sizes[1];
    switch (pick(3)) {
      case 0: {  // batch_norm: statistics (var positive via abs + eps) and optional affine params
        if (!reducible(x, {})) return;
        std::vector<NodeId> in{x, new_input(t, {ch}, false), new_input(t, {ch}, false)};
        in[2] = add(OpId::abs, {in[2]});
        for (int k = pick(3); k > 0; --k) in.push_back(new_input(coin(80) ? t : DType::f32, {ch}, false));
        for (size_t k = 1; k < in.size(); ++k) pool_.push_back(Val{in[k], true, false});
        push(add(OpId::batch_norm, in, {coin() ? 1e-3 : 1e-2}), false);
        break;
      }
      case 1: {  // group_norm: a divisor of the (static) channels as the group count
        if (!ch.is_static() || ch.hint() < 1 || !reducible(x, {})) return;
        std::vector<int64_t> divisors;
        for (int64_t g = 1; g <= ch.hint(); ++g)
          if (ch.hint() % g == 0) divisors.push_back(g);
        std::vector<NodeId> in{x};
        for (int k = pick(3); k > 0; --k) in.push_back(new_input(t, {ch}, false));
        for (size_t k = 1; k < in.size(); ++k) pool_.push_back(Val{in[k], true, false});
        push(add(OpId::group_norm, in, {divisors[static_cast<size_t>(pick(static_cast<int>(divisors.size())))], 1e-5}),
             false);
        break;
      }
      default: {  // pooling over the last n static dims (each at least 2)
        const int64_t n = m.rank() >= 4 && coin() ? 2 : 1;
        if (m.rank() - 2 < n) return;
        NodeId img = x;
        if (m.rank() - 2 > n) {  // fold the extra leading dims into the channels: [N, rest, *S]
          SymInt rest = 1;
          for (int64_t d = 1; d < m.rank() - n; ++d) rest = rest * m.sizes[static_cast<size_t>(d)];
          SymShape s{m.sizes[0], rest};
          s.insert(s.end(), m.sizes.end() - n, m.sizes.end());
          img = add(OpId::reshape, {x}, {s});
        }
        std::vector<int64_t> kernel, strides, pads, dil;
        for (int64_t d = m.rank() - n; d < m.rank(); ++d) {
          const SymInt& size = m.sizes[static_cast<size_t>(d)];
          if (!size.is_static() || size.hint() < 2) return;
          kernel.push_back(2 + pick(2));
          strides.push_back(1 + pick(2));
          dil.push_back(1);
          pads.push_back(pick(2));
          if (kernel.back() > size.hint() + 2 * pads.back()) return;
        }
        pads.insert(pads.end(), pads.begin(), pads.end());  // the same at both ends
        const bool ceil_mode = coin();
        if (coin()) {
          push(add(OpId::max_pool, {img}, {kernel, strides, pads, dil, ceil_mode}), false);
        } else {
          push(add(OpId::avg_pool, {img}, {kernel, strides, pads, dil, ceil_mode, coin()}), false);
        }
      }
    }
  }

  // v op view(v): a value read at other elements than the one being written (transposed, sliced),
  // which must not share memory with the result (in-place slots).
  void self_combine() {
    const Val v = any();
    const TensorMeta m = meta(v.id);
    std::vector<std::pair<int64_t, int64_t>> same;
    for (int64_t a = 0; a < m.rank(); ++a)
      for (int64_t b = a + 1; b < m.rank(); ++b)
        if (m.sizes[static_cast<size_t>(a)] == m.sizes[static_cast<size_t>(b)]) same.emplace_back(a, b);
    NodeId other;
    if (!same.empty() && coin(70)) {
      const auto [a, b] = same[static_cast<size_t>(pick(static_cast<int>(same.size())))];
      other = add(OpId::transpose, {v.id}, {a, b});
    } else {
      if (m.rank() == 0) return;
      const int64_t d = pick(static_cast<int>(m.rank()));
      other = add(OpId::slice, {v.id}, {d, int64_t{0}, int64_t{1}, int64_t{1}});  // broadcasts back
    }
    const OpId op = dtype(v.id) == DType::bool_ ? OpId::logical_or : coin() ? OpId::add : OpId::maximum;
    push(add(op, {v.id, other}), v.exact && (op != OpId::add || !is_floating(dtype(v.id))));
  }

  // A small constant tensor as an operand.
  void with_constant() {
    const Val v = any();
    const TensorMeta m = meta(v.id);
    SymShape s;
    std::vector<int64_t> sizes;
    for (int64_t d = std::max<int64_t>(0, m.rank() - 2); d < m.rank(); ++d) {
      const SymInt& n = m.sizes[static_cast<size_t>(d)];
      sizes.push_back(n.is_static() && coin(70) ? n.hint() : 1);
    }
    auto c = std::make_shared<ConstantData>();
    c->dtype = coin(80) ? DType::f32 : dtype(v.id);
    c->sizes = sizes;
    int64_t n = 1;
    for (int64_t x : sizes) n *= x;
    const TensorData d = tensor(c->dtype, sizes, random_values(c->dtype, n, Domain::grid, rng_));
    const auto* b = static_cast<const std::byte*>(d.data());
    c->bytes.assign(b, b + n * dtype_size(c->dtype));
    const NodeId k = add(OpId::constant, {}, {std::shared_ptr<const ConstantData>(c)});
    static const OpId ops[] = {OpId::add, OpId::mul, OpId::maximum, OpId::sub};
    const OpId op = ops[pick(4)];
    const NodeId r = coin() ? add(op, {v.id, k}) : add(op, {k, v.id});
    push(r, v.exact && (!is_floating(dtype(r)) || op == OpId::maximum));
  }

  void softmax_layer_norm_by_hand() {
    const Val v = any_float();
    const NodeId x = v.id;
    const TensorMeta m = meta(x);
    if (m.rank() == 0) return;
    const DType t = m.dtype;
    int64_t d = m.rank() - 1;
    if (coin(30)) d = pick(static_cast<int>(m.rank()));
    if (!reducible(x, {d})) return;
    const std::vector<int64_t> dims{d};
    if (coin()) {
      const NodeId mx = add(OpId::max, {x}, {dims, true});
      const NodeId e = add(OpId::exp, {add(OpId::sub, {x, mx})});
      push(add(OpId::div, {e, add(OpId::sum, {e}, {dims, true})}), false);
    } else {
      const NodeId mean = add(OpId::mean, {x}, {dims, true});
      const NodeId xc = add(OpId::sub, {x, mean});
      const NodeId var = coin() ? add(OpId::mean, {add(OpId::mul, {xc, xc})}, {dims, true})
                                : add(OpId::var, {x}, {dims, true, int64_t{0}});
      const NodeId inv = add(OpId::rsqrt, {add(OpId::add, {var, scalar(1e-5, t)})});
      NodeId y = add(OpId::mul, {xc, inv});
      if (coin()) y = add(OpId::add, {add(OpId::mul, {y, scalar(1.5, t)}), scalar(-0.25, t)});
      push(y, false);
    }
  }

  void view() {
    const Val v = any();
    const NodeId x = v.id;
    const TensorMeta m = meta(x);
    const int64_t r = m.rank();
    auto keep = [&](NodeId id) { push(id, v.exact, v.strided); };
    switch (pick(10)) {
      case 0: {  // reshape: flatten, merge two dims, or split a static dim
        SymShape s = m.sizes;
        const int kind = pick(3);
        if (kind == 0 || r < 2) {
          s = SymShape{m.numel()};
        } else if (kind == 1) {
          const size_t d = static_cast<size_t>(pick(static_cast<int>(r - 1)));
          s[d] = s[d] * s[d + 1];
          s.erase(s.begin() + static_cast<std::ptrdiff_t>(d) + 1);
        } else {
          const size_t d = static_cast<size_t>(pick(static_cast<int>(r)));
          if (!s[d].is_static() || s[d].hint() % 2 != 0) return;
          const int64_t n = s[d].hint();
          s[d] = n / 2;
          s.insert(s.begin() + static_cast<std::ptrdiff_t>(d), SymInt(2));
        }
        keep(add(OpId::reshape, {x}, {s}));
        break;
      }
      case 1: {
        if (r == 0) return;
        const int64_t a = pick(static_cast<int>(r)), b = a + pick(static_cast<int>(r - a));
        keep(add(OpId::flatten, {x}, {a, b}));
        break;
      }
      case 2: keep(add(OpId::unsqueeze, {x}, {int64_t{pick(static_cast<int>(r) + 1)}})); break;
      case 3: {
        std::vector<int64_t> ones;
        for (int64_t d = 0; d < r; ++d)
          if (m.sizes[static_cast<size_t>(d)] == 1 && coin(70)) ones.push_back(d);
        keep(add(OpId::squeeze, {x}, {ones}));
        break;
      }
      case 4: case 5: {
        std::vector<int64_t> p(static_cast<size_t>(r));
        std::iota(p.begin(), p.end(), 0);
        std::shuffle(p.begin(), p.end(), rng_);
        keep(add(OpId::permute, {x}, {p}));
        break;
      }
      case 6: {
        if (r < 2) return;
        keep(add(OpId::transpose, {x}, {int64_t{pick(static_cast<int>(r))}, int64_t{pick(static_cast<int>(r))}}));
        break;
      }
      case 7: {
        SymShape to = m.sizes;
        for (SymInt& s : to)
          if (s == 1 && coin(70)) s = coin() || syms_.empty() ? SymInt(2 + pick(4)) : syms_[static_cast<size_t>(pick(static_cast<int>(syms_.size())))];
        if (coin(30)) to.insert(to.begin(), SymInt(1 + pick(3)));
        keep(add(OpId::expand, {x}, {to}));
        break;
      }
      default: {  // slice
        if (r == 0) return;
        const int64_t d = pick(static_cast<int>(r));
        const SymInt& n = m.sizes[static_cast<size_t>(d)];
        if (!n.is_static()) {
          keep(add(OpId::slice, {x}, {d, int64_t{0}, kEnd, int64_t{1}}));
          return;
        }
        const int64_t len = n.hint();
        const int64_t start = pick(static_cast<int>(std::max<int64_t>(1, len))) - (coin(20) ? len : 0);
        const int64_t end = coin(30) ? kEnd : start + 1 + pick(static_cast<int>(len) + 1);
        keep(add(OpId::slice, {x}, {d, start, end, int64_t{1 + pick(3)}}));
      }
    }
  }

  void matmul() {
    const Val v = any_float();
    NodeId x = v.id;
    const TensorMeta m = meta(x);
    if (m.rank() == 0) return;
    if (!gemm_ok(x)) return;
    const DType t = m.dtype;
    const SymInt k = m.sizes.back();
    auto other_size = [&]() -> SymInt {
      const int c = pick(5);
      if (c == 0) return 1;
      if (c == 1) return 13;
      if (c == 2 || syms_.empty()) return 2 + pick(5);
      return syms_[static_cast<size_t>(pick(static_cast<int>(syms_.size())))];
    };
    switch (pick(5)) {
      case 0: case 1: {  // x @ w
        const NodeId w = new_input(t, {k, other_size()});
        pool_.push_back(Val{w, true, !meta(w).strides.empty()});
        if (!gemm_ok(w)) return;
        push(add(OpId::matmul, {x, w}), false);
        break;
      }
      case 2: {  // x @ x^T (batched when rank > 2)
        if (m.rank() < 2) return;
        const NodeId xt = add(OpId::transpose, {x}, {m.rank() - 2, m.rank() - 1});
        NodeId s = add(OpId::matmul, {x, xt});
        if (coin() && reducible(s, {m.rank() - 1})) {  // attention-like: softmax(x x^T / c) x
          s = add(OpId::softmax, {add(OpId::mul, {s, scalar(0.25, t)})}, {m.rank() - 1});
          s = add(OpId::matmul, {s, x});
        }
        push(s, false);
        break;
      }
      case 3: {  // linear
        const SymInt n = other_size();
        if (avoid() && n == 1) return;
        std::vector<NodeId> in{x, new_input(t, {n, k}, false)};
        if (coin()) in.push_back(new_input(t, {n}, false));
        for (size_t j = 1; j < in.size(); ++j) pool_.push_back(Val{in[j], true, false});
        push(add(OpId::linear, in), false);
        break;
      }
      default: {  // with another value of a fitting shape
        const Val y = any_float();
        if ((avoid() && dtype(y.id) != t) || !gemm_ok(y.id)) return;  // known bug 8: mixed dtypes
        push(add(OpId::matmul, {x, coin() ? y.id : add(OpId::transpose, {y.id}, {int64_t{0}, rank(y.id) - 1})}), false);
      }
    }
  }

  void cat_pad_index() {
    const Val v = any();
    const NodeId x = v.id;
    const TensorMeta m = meta(x);
    if (m.rank() == 0) return;
    const int64_t d = pick(static_cast<int>(m.rank()));
    switch (pick(3)) {
      case 0: {
        const NodeId y = dtype(x) == DType::bool_ ? add(OpId::logical_not, {x}) : add(OpId::neg, {x});
        push(add(OpId::cat, {x, y}, {d}), v.exact);
        break;
      }
      case 1: {
        const int64_t pads = m.rank() >= 2 && coin() ? 4 : 2;
        std::vector<int64_t> p;
        for (int64_t j = 0; j < pads; ++j) p.push_back(pick(3));
        push(add(OpId::pad, {x}, {p, coin() ? 0.0 : 1.5}), v.exact);
        break;
      }
      default: {
        const SymInt& n = m.sizes[static_cast<size_t>(d)];
        if (!n.is_static()) return;
        auto c = std::make_shared<ConstantData>();
        c->dtype = DType::i64;
        const int64_t len = 1 + pick(5);
        c->sizes = {len};
        // gather: the index has x's rank, len at d, and elsewhere x's static size or 1, broadcast
        // to x's size (as take_along_dim does).
        const bool gather = coin();
        if (gather) {
          c->sizes.clear();
          for (int64_t k = 0; k < m.rank(); ++k) {
            const SymInt& s = m.sizes[static_cast<size_t>(k)];
            c->sizes.push_back(k == d ? len : s.is_static() && s.hint() <= 4 && coin() ? s.hint() : 1);
          }
        }
        int64_t count = 1;
        for (int64_t s : c->sizes) count *= s;
        std::vector<int64_t> idx;
        for (int64_t j = 0; j < count; ++j) idx.push_back(pick(static_cast<int>(n.hint())));
        c->bytes.resize(idx.size() * sizeof(int64_t));
        std::memcpy(c->bytes.data(), idx.data(), c->bytes.size());
        NodeId i = add(OpId::constant, {}, {std::shared_ptr<const ConstantData>(c)});
        if (!gather) {
          push(add(OpId::index_select, {x, i}, {d}), v.exact);
          break;
        }
        SymShape to = m.sizes;
        to[static_cast<size_t>(d)] = len;
        if (!(to == meta(i).sizes)) i = add(OpId::expand, {i}, {to});
        push(add(OpId::gather, {x, i}, {d}), v.exact);
      }
    }
  }

  void sources() {
    const Val v = any();
    const NodeId x = v.id;
    const TensorMeta m = meta(x);
    const DType t = dtype(x) == DType::bool_ ? DType::f32 : dtype(x);
    NodeId src;
    bool exact = true;
    switch (pick(3)) {
      case 0: src = add(OpId::full, {}, {m.sizes, 0.5 * pick(5), t}); break;
      case 1: {
        if (m.rank() == 0 || !m.sizes.back().is_static()) return;
        const int64_t n = m.sizes.back().hint();
        src = add(OpId::arange, {}, {0.0, static_cast<double>(n), 1.0, coin() ? t : DType::i64});
        break;
      }
      default:
        // rand, not randn: its numbers are exact on every target (randn's logf and cosf may be an
        // ulp apart, which an f64 graph's tolerance would count).
        src = add(OpId::rand, {}, {m.sizes, int64_t{pick(3)}, is_floating(t) ? t : DType::f32});
        break;
    }
    const OpId op = coin() ? OpId::add : OpId::mul;
    const NodeId r = add(op, {x, src});
    exact = v.exact && !is_floating(dtype(r));
    push(r, exact);
  }

  // Symbol values to run at: the examples, all 2 (next to 1), primes, and one large.
  std::vector<std::vector<int64_t>> symbol_runs() {
    const std::vector<int64_t> ex = g_.shapes().examples();
    std::vector<std::vector<int64_t>> runs{ex};
    const size_t n = ex.size();
    if (n == 0) return runs;
    // Symbols the graph equates are one class.
    std::vector<size_t> cls(n);
    std::iota(cls.begin(), cls.end(), 0);
    std::function<size_t(size_t)> find = [&](size_t a) { return cls[a] == a ? a : cls[a] = find(cls[a]); };
    for (const ShapeFact& f : g_.shapes().facts()) {
      if (f.relation != Relation::eq) continue;
      const auto l = f.lhs.free_symbols(), r = f.rhs.free_symbols();
      if (l.size() == 1 && r.size() == 1 && f.lhs == SymExpr::symbol(l[0]) && f.rhs == SymExpr::symbol(r[0]))
        cls[find(l[0])] = find(r[0]);
    }
    static const int64_t primes[] = {7, 13, 5, 31, 11, 3};
    std::vector<int64_t> twos(n, 2), pr(n), large(n, 3);
    const size_t big = find(static_cast<size_t>(pick(static_cast<int>(n))));
    static const int64_t bigs[] = {129, 100, 257, 64};
    const int64_t bigv = bigs[pick(4)];
    for (size_t k = 0; k < n; ++k) {
      pr[k] = primes[find(k) % 6];
      if (find(k) == big) large[k] = bigv;
    }
    for (const std::vector<int64_t>& cand : {twos, pr, large}) {
      bool ok = cand != ex;
      for (const ShapeFact& f : g_.shapes().facts()) ok = ok && f.holds(cand);
      for (const Node& nd : g_.nodes()) {
        double elems = 1;
        for (const SymInt& s : nd.meta.sizes) elems *= static_cast<double>(s.evaluate(cand));
        ok = ok && elems <= 300000;
      }
      if (ok) runs.push_back(cand);
    }
    return runs;
  }
};

// All nodes the outputs depend on, in id order.
std::vector<NodeId> cone(const Graph& g, std::vector<NodeId> roots) {
  std::vector<bool> seen(g.size(), false);
  while (!roots.empty()) {
    const NodeId n = roots.back();
    roots.pop_back();
    if (seen[static_cast<size_t>(n)]) continue;
    seen[static_cast<size_t>(n)] = true;
    for (NodeId i : g.node(n).inputs) roots.push_back(i);
  }
  std::vector<NodeId> out;
  for (NodeId n = 0; n < static_cast<NodeId>(g.size()); ++n)
    if (seen[static_cast<size_t>(n)]) out.push_back(n);
  return out;
}

// The graph computing only `out`: every input kept (same signature), dead nodes dropped.
Graph prune(const Graph& g, NodeId out) {
  const std::vector<NodeId> live = cone(g, {out});
  Graph p;
  p.shapes() = g.shapes();
  std::vector<NodeId> map(g.size(), -1);
  for (NodeId id = 0; id < static_cast<NodeId>(g.size()); ++id) {
    const Node& n = g.node(id);
    if (n.op == OpId::input) {
      map[static_cast<size_t>(id)] = p.add_input(n.meta, n.name);
    } else if (std::binary_search(live.begin(), live.end(), id)) {
      std::vector<NodeId> ins;
      for (NodeId i : n.inputs) ins.push_back(map[static_cast<size_t>(i)]);
      map[static_cast<size_t>(id)] = p.add(n.op, ins, n.attrs);
    }
  }
  p.set_outputs({map[static_cast<size_t>(out)]});
  return p;
}

double rtol_for(int precision) {
  switch (precision) {
    case 1: return 1e-9;
    case 2: return 1e-4;
    case 3: return 1e-2;
    case 4: return 6e-2;
    default: return 0;
  }
}

// Compares the compiled graph with the reference on `inputs`; "" when all outputs agree.
std::string check_run(const Graph& g, const Compiled& c, std::span<const TensorData> inputs, double* max_err,
                      const std::vector<TensorData>* results = nullptr) {
  if (!c.error.empty()) return "compile failed: " + c.error + "\n";
  if (!c.exe && !results) return "";  // compile-only target: nothing to compare
  // Every value the outputs depend on, composites decomposed (rsqrt(var + eps) of a nearly
  // constant row is large and amplifies rounding differences), for each output's tolerance.
  Graph all = passes::decompose(g);
  const std::vector<NodeId> outs = all.outputs();
  const std::vector<NodeId> nodes = cone(all, outs);
  all.set_outputs(nodes);
  std::vector<TensorData> vals, wants;
  try {
    vals = eval::run_graph(all, inputs);
    wants = eval::run_graph(g, inputs);
  } catch (const std::exception& e) {
    return std::string("(the reference failed: ") + e.what() + ")";
  }
  std::map<NodeId, size_t> at;
  for (size_t k = 0; k < nodes.size(); ++k) at[nodes[k]] = k;
  std::vector<TensorData> got;
  try {
    got = results ? *results : c.exe->run(inputs);
  } catch (const std::exception& e) {
    return std::string("run failed: ") + e.what() + "\n";
  }
  std::ostringstream os;
  os.precision(6);
  for (size_t o = 0; o < g.outputs().size(); ++o) {
    const NodeId out = g.outputs()[o];
    const TensorData& want = wants[o];
    int precision = 0;
    double scale = 0;
    for (NodeId n : cone(all, {outs[o]})) {
      const DType t = all.node(n).meta.dtype;
      if (!is_floating(t)) continue;
      precision = std::max(precision, precision_rank(t));
      for (double x : elements(vals[at[n]]))
        if (std::isfinite(x)) scale = std::max(scale, std::fabs(x));
    }
    Tolerance tol;
    tol.rtol = rtol_for(precision);
    tol.atol = tol.rtol * scale;
    if (!is_floating(want.dtype)) tol = Tolerance{};
    const OutputDiff d = compare(got[o], want, tol);
    if (max_err) *max_err = std::max(*max_err, d.max_abs);
    if (!d.ok) {
      os << "output " << o << " (%" << out << " " << op_name(g.node(out).op) << ", " << dtype_name(want.dtype)
         << join(want.sizes) << "): " << d.what << "; " << d.bad << " bad of " << want.numel() << ", max abs err "
         << d.max_abs << ", max rel err " << d.max_rel << " (tolerance " << tol.atol << " + " << tol.rtol
         << " * |want|; largest value it depends on " << scale << ")\n";
      if (want.numel() <= 32 && got[o].sizes == want.sizes) {
        os << "    got:  ";
        for (double x : elements(got[o])) os << x << " ";
        os << "\n    want: ";
        for (double x : elements(want)) os << x << " ";
        os << "\n";
      }
    }
  }
  return os.str();
}

}  // namespace

RandomCase random_graph(uint64_t seed, const RandomGraphOptions& options) { return Gen(seed, options).build(); }

std::vector<TensorData> random_case_inputs(const RandomCase& c, const std::vector<int64_t>& symbols, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<TensorData> out;
  for (size_t i = 0; i < c.graph.inputs().size(); ++i) {
    const TensorMeta& m = c.graph.node(c.graph.inputs()[i]).meta;
    std::vector<int64_t> sizes;
    int64_t n = 1;
    for (const SymInt& s : m.sizes) {
      sizes.push_back(s.evaluate(symbols));
      n *= sizes.back();
    }
    out.push_back(laid_out(m.dtype, sizes, random_values(m.dtype, n, Domain::normal, rng),
                           i < c.layouts.size() ? c.layouts[i] : Layout::contiguous));
  }
  return out;
}

CompileOptions compile_options_for_seed(uint64_t seed) {
  CompileOptions o;
  switch (seed % 6) {
    case 1: case 5: o.small_grains = true; break;
    case 2: o.emulate_precision_casts = true; break;
    case 3: o.small_grains = o.keep_buffers = true; break;
    case 4: o.autotune = true; break;
    default: break;
  }
  return o;
}

std::string differential_check(const RandomCase& c, uint64_t seed, const DiffOptions& options) {
  const CompileOptions& co = options.compile;
  const Compiled compiled = compile(c.graph, co);
  // With state kept between calls (slots, tuning), every run twice and the first run again last.
  std::vector<size_t> order;
  for (size_t run = 0; run < c.symbol_runs.size(); ++run) {
    order.push_back(run);
    if (co.keep_buffers || co.autotune) order.push_back(run);
  }
  if ((co.keep_buffers || co.autotune) && c.symbol_runs.size() > 1) order.push_back(0);
  for (size_t k = 0; k < order.size(); ++k) {
    const size_t run = order[k];
    const std::vector<int64_t>& symbols = c.symbol_runs[run];
    const std::vector<TensorData> inputs = random_case_inputs(c, symbols, seed * 7 + run);
    double err = 0;
    const std::string details = check_run(c.graph, compiled, inputs, &err);
    if (details.empty() || details.rfind("(the reference failed", 0) == 0) continue;
    std::ostringstream os;
    os << failure_report("random graph, seed " + std::to_string(seed) + ", run " + std::to_string(run) + " (call " +
                             std::to_string(k + 1) + "), compiled with " + co.str() +
                             " (replay: KILN_DIFF_FIRST_SEED=" + std::to_string(seed) + " KILN_DIFF_SEEDS=1)",
                         c.graph, inputs, symbols, details);
    if (options.minimize) {
      // The first node (in id order) whose value alone already fails: the smallest failing prefix.
      for (NodeId n : cone(c.graph, c.graph.outputs())) {
        if (c.graph.node(n).op == OpId::input) continue;
        const Graph small = prune(c.graph, n);
        const Compiled cc = compile(small, co);
        std::string d;
        for (size_t j = 0; j <= k && d.empty(); ++j) {  // the same calls, for state kept between them
          const std::vector<TensorData> in = random_case_inputs(c, c.symbol_runs[order[j]], seed * 7 + order[j]);
          d = check_run(small, cc, in, nullptr);
          if (d.rfind("(the reference failed", 0) == 0) d.clear();
        }
        if (d.empty()) continue;
        os << failure_report("smallest failing prefix of seed " + std::to_string(seed) + ": node %" + std::to_string(n) + " (" +
                                 std::string(op_name(c.graph.node(n).op)) + ")",
                             small, {}, symbols, d);
        break;
      }
    }
    return os.str();
  }
  return {};
}

std::string concurrent_check(const RandomCase& c, uint64_t seed, const CompileOptions& co, int threads, int calls) {
  const Compiled compiled = compile(c.graph, co);
  if (!compiled.error.empty()) return "compile failed: " + compiled.error + "\n";
  if (!compiled.exe) return "";  // compile-only target
  struct Call {
    size_t run;
    std::vector<TensorData> inputs, results;
    std::string error;
  };
  std::vector<std::vector<Call>> per_thread(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t)
    for (int k = 0; k < calls; ++k) {
      const size_t run = static_cast<size_t>(t + k) % c.symbol_runs.size();
      per_thread[static_cast<size_t>(t)].push_back(
          Call{run, random_case_inputs(c, c.symbol_runs[run], seed * 7 + run + 1000 * static_cast<uint64_t>(t)), {}, {}});
    }
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (Call& call : per_thread[static_cast<size_t>(t)]) {
        try {
          call.results = compiled.exe->run(call.inputs);
        } catch (const std::exception& e) {
          call.error = e.what();
        }
      }
    });
  for (std::thread& th : pool) th.join();
  for (const std::vector<Call>& calls_of : per_thread)
    for (const Call& call : calls_of) {
      std::string d = call.error.empty() ? check_run(c.graph, compiled, call.inputs, nullptr, &call.results)
                                         : "run failed: " + call.error + "\n";
      if (d.rfind("(the reference failed", 0) == 0) d.clear();
      if (!d.empty())
        return failure_report("random graph, seed " + std::to_string(seed) + ", run " + std::to_string(call.run) + ", " +
                                  std::to_string(threads) + " threads calling run() at once, compiled with " + co.str(),
                              c.graph, call.inputs, c.symbol_runs[call.run], d);
    }
  return {};
}

}  // namespace cpu_test
