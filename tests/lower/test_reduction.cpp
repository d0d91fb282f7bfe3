// lower::reduction_rule: a small evaluator of the rules' expressions, and the results of every
// reduce kind, argument type and target capability against a direct computation of the
// reference's rules, with the elements split into partial states in random ways and the
// partials folded in random order (as warps, subgroups and shared-memory trees do).
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <kiln/lower/reduction.h>

#include <boost/test/unit_test.hpp>

using namespace kiln;
using lower::CT;
using LNode = lower::Node;
using lower::Rule;
using schedule::ReduceKind;

namespace {

// A value of any compute type: floats and booleans in d, integers in n.
struct V {
  double d = 0;
  int64_t n = 0;
};
bool truth(const V& v) { return v.d != 0; }

struct Eval {
  const Rule& r;
  const std::vector<V>* a = nullptr;
  const std::vector<V>* b = nullptr;
  V x, j;

  V operator()(int32_t i) const {
    const LNode& nd = r.at(i);
    auto arg = [&](int k) { return (*this)(nd.args[k]); };
    auto boolean = [](bool t) { return V{t ? 1.0 : 0.0, 0}; };
    const bool fl = lower::is_float(nd.ct);
    switch (nd.op) {
      case LNode::Op::a: return (*a)[static_cast<size_t>(nd.index)];
      case LNode::Op::b: return (*b)[static_cast<size_t>(nd.index)];
      case LNode::Op::x: return x;
      case LNode::Op::j: return j;
      case LNode::Op::literal: return nd.ct == CT::i64 ? V{0, nd.integer} : V{nd.value, 0};
      case LNode::Op::add: return nd.ct == CT::i64 ? V{0, arg(0).n + arg(1).n} : V{arg(0).d + arg(1).d, 0};
      case LNode::Op::mul: return nd.ct == CT::i64 ? V{0, arg(0).n * arg(1).n} : V{arg(0).d * arg(1).d, 0};
      case LNode::Op::max:
      case LNode::Op::min: {
        const bool mx = nd.op == LNode::Op::max;
        const V p = arg(0), q = arg(1);
        if (nd.ct == CT::i64) return V{0, mx ? std::max(p.n, q.n) : std::min(p.n, q.n)};
        if (!fl) return boolean(mx ? truth(p) || truth(q) : truth(p) && truth(q));
        if (std::isnan(p.d) || std::isnan(q.d)) {
          if (nd.propagate_nan) return V{NAN, 0};
          return std::isnan(p.d) ? q : p;  // NaN-skipping (fmax)
        }
        return V{mx ? std::max(p.d, q.d) : std::min(p.d, q.d), 0};
      }
      case LNode::Op::gt: case LNode::Op::lt: case LNode::Op::eq: {
        const V p = arg(0), q = arg(1);
        const bool f = lower::is_float(nd.operand) || nd.operand == CT::b;
        const double pd = f ? p.d : 0, qd = f ? q.d : 0;
        if (nd.op == LNode::Op::gt) return boolean(f ? pd > qd : p.n > q.n);
        if (nd.op == LNode::Op::lt) return boolean(f ? pd < qd : p.n < q.n);
        return boolean(f ? pd == qd : p.n == q.n);
      }
      case LNode::Op::land: return boolean(truth(arg(0)) && truth(arg(1)));
      case LNode::Op::lor: return boolean(truth(arg(0)) || truth(arg(1)));
      case LNode::Op::lnot: return boolean(!truth(arg(0)));
      case LNode::Op::isnan: return boolean(lower::is_float(nd.operand) && std::isnan(arg(0).d));
      case LNode::Op::select: return truth(arg(0)) ? arg(1) : arg(2);
    }
    return {};
  }
};

std::vector<V> identity(const Rule& r) {
  Eval e{r};
  std::vector<V> s;
  for (int32_t n : r.identity) s.push_back(e(n));
  return s;
}
std::vector<V> element(const Rule& r, const V& x, int64_t j) {
  Eval e{r};
  e.x = x;
  e.j = V{0, j};
  std::vector<V> s;
  for (int32_t n : r.element) s.push_back(e(n));
  return s;
}
void fold(const Rule& r, std::vector<V>& a, const std::vector<V>& b) {
  Eval e{r, &a, &b};
  if (r.take >= 0 && !truth(e(r.take))) return;
  std::vector<V> next;
  for (int32_t n : r.fold) next.push_back(e(n));
  a = next;
}
V finish(const Rule& r, const std::vector<V>& a) {
  Eval e{r, &a};
  return e(r.finish);
}

// The element values of one type, as the rule sees them (converted to its state's first type).
V as_value(double v, CT c) {
  if (c == CT::i64) return V{0, static_cast<int64_t>(v)};
  if (c == CT::b) return V{v != 0 ? 1.0 : 0.0, 0};
  return V{v, 0};
}

// The reference's result, computed directly.
V expected(ReduceKind k, const std::vector<double>& xs, CT arg, CT result) {
  switch (k) {
    case ReduceKind::sum: case ReduceKind::prod: {
      const bool sum = k == ReduceKind::sum;
      if (result == CT::i64) {
        int64_t acc = sum ? 0 : 1;
        for (double x : xs) acc = sum ? acc + as_value(x, arg).n : acc * as_value(x, arg).n;
        return V{0, acc};
      }
      double acc = sum ? 0 : 1;
      for (double x : xs) acc = sum ? acc + x : acc * x;
      return V{acc, 0};
    }
    case ReduceKind::max: case ReduceKind::min: {
      const bool mx = k == ReduceKind::max;
      if (arg == CT::i64) {
        int64_t acc = as_value(xs[0], arg).n;
        for (double x : xs) acc = mx ? std::max(acc, as_value(x, arg).n) : std::min(acc, as_value(x, arg).n);
        return V{0, acc};
      }
      double acc = as_value(xs[0], arg).d;
      for (double x0 : xs) {
        const double x = as_value(x0, arg).d;
        if (std::isnan(x) || std::isnan(acc)) acc = NAN;
        else acc = mx ? std::max(acc, x) : std::min(acc, x);
      }
      return V{acc, 0};
    }
    case ReduceKind::argmax: case ReduceKind::argmin: {
      const bool mx = k == ReduceKind::argmax;
      size_t best = 0;
      for (size_t i = 0; i < xs.size(); ++i) {
        const double x = arg == CT::b ? (xs[i] != 0) : xs[i], y = arg == CT::b ? (xs[best] != 0) : xs[best];
        if (std::isnan(y)) break;  // the first NaN wins
        if (std::isnan(x) || (mx ? x > y : x < y)) best = i;
      }
      return V{0, static_cast<int64_t>(best)};
    }
  }
  return {};
}

bool same(const V& got, const V& want, CT c) {
  if (c == CT::i64) return got.n == want.n;
  if (std::isnan(want.d)) return std::isnan(got.d);
  return got.d == want.d;
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_rule_folds_in_any_order_to_the_reference_result) {
  std::mt19937 rng(7);
  const std::vector<double> floats{0.5, -2, 3, 3, -INFINITY, INFINITY, NAN, 0, -0.0, 1e30};
  const std::vector<double> exact{0.5, -2, 3, 3, -INFINITY, INFINITY, NAN, 0, -0.0};
  const std::vector<double> ints{0, -3, 5, 5, 7, -9, 2};
  const std::vector<double> bools{0, 1, 1, 0};
  struct Case {
    ReduceKind k;
    CT arg;
    DType result;
  };
  std::vector<Case> cases;
  for (ReduceKind k : {ReduceKind::max, ReduceKind::min, ReduceKind::argmax, ReduceKind::argmin})
    for (CT a : {CT::f32, CT::f64, CT::i64, CT::b})
      cases.push_back({k, a, k == ReduceKind::argmax || k == ReduceKind::argmin ? DType::i64
                          : a == CT::f32 ? DType::f32 : a == CT::f64 ? DType::f64 : a == CT::i64 ? DType::i64 : DType::bool_});
  for (ReduceKind k : {ReduceKind::sum, ReduceKind::prod}) {
    cases.push_back({k, CT::f32, DType::f32});
    cases.push_back({k, CT::f64, DType::f64});
    cases.push_back({k, CT::i64, DType::i64});
  }
  int checked = 0;
  for (const Case& c : cases) {
    for (bool propagating : {false, true}) {
      const Rule r = lower::reduction_rule(c.k, c.arg, c.result, {propagating, propagating});
      const CT rc = lower::compute_type(c.result);
      const CT state0 = r.state[0].ct;
      const bool folds_values = c.k == ReduceKind::sum || c.k == ReduceKind::prod;  // (exact: no 1e30)
      const std::vector<double>& pool = c.arg == CT::b ? bools : c.arg == CT::i64 ? ints : folds_values ? exact : floats;
      for (int trial = 0; trial < 300; ++trial) {
        std::vector<double> xs(1 + rng() % 9);
        for (double& x : xs) x = pool[rng() % pool.size()];
        if (c.k == ReduceKind::prod && c.arg == CT::i64)
          for (double& x : xs) x = static_cast<double>(static_cast<int64_t>(x) % 3);
        // Partial states over random consecutive chunks, each folding its elements in order.
        std::vector<std::vector<V>> partials;
        for (size_t at = 0; at < xs.size();) {
          const size_t len = 1 + rng() % (xs.size() - at);
          std::vector<V> s = identity(r);
          for (size_t i = at; i < at + len; ++i) fold(r, s, element(r, as_value(xs[i], state0), static_cast<int64_t>(i)));
          partials.push_back(s);
          at += len;
        }
        // Some idle threads (identity states), then merges in random order.
        for (int idle = static_cast<int>(rng() % 3); idle > 0; --idle) partials.push_back(identity(r));
        std::shuffle(partials.begin(), partials.end(), rng);
        while (partials.size() > 1) {
          const size_t i = rng() % partials.size();
          size_t j = rng() % (partials.size() - 1);
          if (j >= i) ++j;
          fold(r, partials[i], partials[j]);
          partials.erase(partials.begin() + static_cast<std::ptrdiff_t>(j));
        }
        const V got = finish(r, partials[0]);
        const V want = expected(c.k, xs, c.arg, rc);
        const CT got_ct = r.finish_ct;
        BOOST_TEST_CONTEXT("kind " << static_cast<int>(c.k) << " arg " << static_cast<int>(c.arg) << " propagating "
                                   << propagating << " trial " << trial) {
          BOOST_TEST(same(got, want, got_ct));
        }
        ++checked;
      }
    }
  }
  BOOST_TEST(checked > 0);
}

BOOST_AUTO_TEST_CASE(a_nan_flag_is_kept_only_where_the_target_has_no_propagating_extremum) {
  BOOST_TEST(lower::reduction_rule(ReduceKind::max, CT::f32, DType::f32, {false, false}).has_nan_flag());
  BOOST_TEST(!lower::reduction_rule(ReduceKind::max, CT::f32, DType::f32, {true, false}).has_nan_flag());
  BOOST_TEST(lower::reduction_rule(ReduceKind::min, CT::f64, DType::f64, {true, false}).has_nan_flag());
  BOOST_TEST(!lower::reduction_rule(ReduceKind::max, CT::i64, DType::i64, {false, false}).has_nan_flag());
  // Arg reductions of floats always keep one (the first NaN's position wins).
  BOOST_TEST(lower::reduction_rule(ReduceKind::argmax, CT::f32, DType::i64, {true, true}).has_nan_flag());
  BOOST_TEST(!lower::reduction_rule(ReduceKind::argmin, CT::b, DType::i64, {true, true}).has_nan_flag());
}
