// The rules of reductions (see reduction.h).
#include "kiln/lower/reduction.h"

#include <cmath>
#include <limits>

#include "kiln/graph/error.h"

namespace kiln::lower {

using schedule::ReduceKind;
using Op = Node::Op;

CT compute_type(DType t) {
  switch (t) {
    case DType::f32: case DType::f16: case DType::bf16: return CT::f32;
    case DType::f64: return CT::f64;
    case DType::i32: case DType::i64: return CT::i64;
    case DType::bool_: return CT::b;
  }
  return CT::f32;
}

namespace {

// Builds a rule's nodes.
struct Builder {
  Rule& r;
  int32_t add(Node n) {
    r.nodes.push_back(n);
    return static_cast<int32_t>(r.nodes.size() - 1);
  }
  int32_t leaf(Op op, CT ct, int32_t index = 0) {
    Node n{op, ct};
    n.index = index;
    return add(n);
  }
  int32_t a(int32_t i) { return leaf(Op::a, r.state[static_cast<size_t>(i)].ct, i); }
  int32_t b(int32_t i) { return leaf(Op::b, r.state[static_cast<size_t>(i)].ct, i); }
  int32_t literal(double v, CT ct) {
    Node n{Op::literal, ct};
    n.value = v;
    return add(n);
  }
  int32_t integer(int64_t v) {
    Node n{Op::literal, CT::i64};
    n.integer = v;
    return add(n);
  }
  int32_t binary(Op op, CT ct, int32_t x, int32_t y) {
    Node n{op, ct};
    n.args[0] = x;
    n.args[1] = y;
    return add(n);
  }
  int32_t compare(Op op, int32_t x, int32_t y) {
    Node n{op, CT::b};
    n.operand = r.at(x).ct;
    n.args[0] = x;
    n.args[1] = y;
    return add(n);
  }
  int32_t extremum(bool max, int32_t x, int32_t y, bool propagate_nan) {
    Node n{max ? Op::max : Op::min, r.at(x).ct};
    n.args[0] = x;
    n.args[1] = y;
    n.propagate_nan = propagate_nan;
    return add(n);
  }
  int32_t lnot(int32_t x) {
    Node n{Op::lnot, CT::b};
    n.args[0] = x;
    return add(n);
  }
  int32_t isnan(int32_t x) {
    Node n{Op::isnan, CT::b};
    n.operand = r.at(x).ct;
    n.args[0] = x;
    return add(n);
  }
  int32_t select(int32_t c, int32_t x, int32_t y) {
    Node n{Op::select, r.at(x).ct};
    n.args[0] = c;
    n.args[1] = x;
    n.args[2] = y;
    return add(n);
  }
  // The extreme value max starts from (-inf, the least integer, false) or min (the opposite).
  int32_t extreme(bool max, CT c) {
    if (is_float(c)) return literal(max ? -INFINITY : INFINITY, c);
    if (c == CT::i64) return integer(max ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max());
    return literal(max ? 0 : 1, c);
  }
};

// A float sum with Neumaier's compensation: the state is the sum s and the rounding error c lost
// so far; folding (s_b, c_b) into (s_a, c_a) adds t = s_a + s_b and to c the error of that add,
// exactly (|s_a| >= |s_b| ? (s_a - t) + s_b : (s_b - t) + s_a), plus c_b. The finish is s + c,
// except where that is NaN (s reached +-inf, so c's error terms are inf - inf): then s as is.
Rule compensated_sum(CT c) {
  using Role = Rule::Role;
  Rule r;
  Builder bld{r};
  r.state = {{c, Role::value}, {c, Role::compensation}};
  r.identity = {bld.literal(0, c), bld.literal(0, c)};
  r.element = {bld.leaf(Op::x, c), bld.literal(0, c)};
  const int32_t sa = bld.a(0), ca = bld.a(1), sb = bld.b(0), cb = bld.b(1);
  const int32_t minus_one = bld.literal(-1, c), zero = bld.literal(0, c);
  auto sub = [&](int32_t x, int32_t y) { return bld.binary(Op::add, c, x, bld.binary(Op::mul, c, y, minus_one)); };
  auto abs = [&](int32_t x) { return bld.select(bld.compare(Op::lt, x, zero), bld.binary(Op::mul, c, x, minus_one), x); };
  const int32_t t = bld.binary(Op::add, c, sa, sb);
  const int32_t a_smaller = bld.compare(Op::lt, abs(sa), abs(sb));
  const int32_t err = bld.select(a_smaller, bld.binary(Op::add, c, sub(sb, t), sa), bld.binary(Op::add, c, sub(sa, t), sb));
  r.fold = {t, bld.binary(Op::add, c, bld.binary(Op::add, c, ca, cb), err)};
  const int32_t total = bld.binary(Op::add, c, bld.a(0), bld.a(1));
  r.finish = bld.select(bld.isnan(total), bld.a(0), total);
  r.finish_ct = c;
  return r;
}

}  // namespace

Rule reduction_rule(ReduceKind k, CT arg, DType result, const Caps& caps, bool long_sum) {
  Rule r;
  Builder bld{r};
  const CT c = compute_type(result);
  const bool max = k == ReduceKind::max || k == ReduceKind::argmax;
  using Role = Rule::Role;
  switch (k) {
    case ReduceKind::sum:
      if (is_float(c) && long_sum && caps.compensate_long_sums) return compensated_sum(c);
      [[fallthrough]];
    case ReduceKind::prod: {
      r.state = {{c, Role::value}};
      const int v = k == ReduceKind::sum ? 0 : 1;
      r.identity = {c == CT::i64 ? bld.integer(v) : bld.literal(v, c)};
      r.element = {bld.leaf(Op::x, c)};
      r.fold = {bld.binary(k == ReduceKind::sum ? Op::add : Op::mul, c, bld.a(0), bld.b(0))};
      r.finish = bld.a(0);
      r.finish_ct = c;
      return r;
    }
    case ReduceKind::max:
    case ReduceKind::min: {
      const bool propagating = arg == CT::f32 ? caps.nan_extremum_f32 : arg == CT::f64 && caps.nan_extremum_f64;
      const bool flag = is_float(arg) && !propagating;
      r.state = {{arg, Role::value}};
      if (flag) r.state.push_back({CT::b, Role::nan_seen});
      r.identity = {bld.extreme(max, arg)};
      const int32_t x = bld.leaf(Op::x, arg);
      r.element = {x};
      // A flagged value skips NaN (the flag remembers it); an unflagged float propagates it.
      r.fold = {bld.extremum(max, bld.a(0), bld.b(0), !flag)};
      if (flag) {
        r.identity.push_back(bld.literal(0, CT::b));
        r.element.push_back(bld.isnan(x));
        r.fold.push_back(bld.binary(Op::lor, CT::b, bld.a(1), bld.b(1)));
        r.finish = bld.select(bld.a(1), bld.literal(NAN, arg), bld.a(0));
      } else {
        r.finish = bld.a(0);
      }
      r.finish_ct = arg;
      return r;
    }
    case ReduceKind::argmax:
    case ReduceKind::argmin: {
      const CT vc = arg == CT::b ? CT::i64 : arg;  // bools compared as 0 and 1
      const bool flag = is_float(vc);
      r.state = {{vc, Role::value}, {CT::i64, Role::position}};
      if (flag) r.state.push_back({CT::b, Role::nan_seen});
      r.identity = {bld.extreme(max, vc), bld.integer(std::numeric_limits<int64_t>::max())};
      const int32_t x = bld.leaf(Op::x, vc);
      r.element = {x, bld.leaf(Op::j, CT::i64)};
      if (flag) {
        r.identity.push_back(bld.literal(0, CT::b));
        r.element.push_back(bld.isnan(x));
      }
      // b is taken when better, or equal at a smaller position; with NaN flags a NaN wins over
      // every number and the first NaN over later ones.
      const int32_t a0 = bld.a(0), a1 = bld.a(1), b0 = bld.b(0), b1 = bld.b(1);
      const int32_t better = bld.compare(max ? Op::gt : Op::lt, b0, a0);
      const int32_t earlier = bld.compare(Op::lt, b1, a1);
      const int32_t tie = bld.binary(Op::land, CT::b, bld.compare(Op::eq, b0, a0), earlier);
      r.take = bld.binary(Op::lor, CT::b, better, tie);
      if (flag) {
        const int32_t not_a_nan = bld.lnot(bld.a(2));
        r.take = bld.select(bld.b(2), bld.binary(Op::lor, CT::b, not_a_nan, earlier),
                            bld.binary(Op::land, CT::b, not_a_nan, r.take));
      }
      for (size_t i = 0; i < r.state.size(); ++i) r.fold.push_back(bld.b(static_cast<int32_t>(i)));
      r.finish = a1;
      r.finish_ct = CT::i64;
      return r;
    }
  }
  internal_fail("lower: reduce kind ", static_cast<int>(k), " has no rule");
}

Rule reduction_rule(const schedule::Kernel& k, int32_t r, const Caps& caps) {
  const schedule::Instr& in = k.instrs[static_cast<size_t>(r)];
  KILN_INTERNAL_CHECK(in.kind == schedule::InstrKind::reduce, "lower: instruction ", r, " of kernel ", k.name,
                      " is not a reduction");
  SymInt inner = 1;
  for (size_t d = static_cast<size_t>(k.num_outer); d < k.domain.size(); ++d) inner = inner * k.domain[d];
  const bool long_sum = !inner.is_static() || inner.hint() > kLongSum;
  return reduction_rule(in.reduce, compute_type(k.instrs[static_cast<size_t>(in.args[0])].dtype), in.dtype, caps, long_sum);
}

}  // namespace kiln::lower
