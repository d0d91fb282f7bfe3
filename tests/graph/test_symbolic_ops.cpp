// Symbolic sizes through shape rules: what stays symbolic, and which facts get recorded.
#include <limits>

#include "helpers.h"

using namespace kiln;
using kiln_test::dims;
using kiln_test::G;

namespace {
using D = DType;
constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();

std::string facts(const Graph& g) {
  std::string s;
  for (const ShapeFact& f : g.shapes().facts())
    s += f.str() + " (" + f.reason + "); ";
  return s;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(symbolic_ops)

BOOST_AUTO_TEST_CASE(broadcast_with_a_static_one_needs_no_fact) {
  G t;
  const SymInt s0 = t.sym(5);
  const NodeId x = t.in(D::f32, {s0, 4});
  BOOST_TEST(t.out(OpId::add, {x, t.in(D::f32, {1})}) == "f32[s0, 4]");
  BOOST_TEST(t.out(OpId::mul, {t.in(D::f32, {1, 1}), x}) == "f32[s0, 4]");
  BOOST_TEST(t.out(OpId::add, {x, t.in(D::f32, {})}) == "f32[s0, 4]");
  BOOST_TEST(t.g.shapes().facts().empty(), facts(t.g));
}

BOOST_AUTO_TEST_CASE(broadcast_of_two_symbols_records_a_fact) {
  G t;
  const SymInt s0 = t.sym(6);
  const SymInt s1 = t.sym(6);
  BOOST_TEST(t.out(OpId::add, {t.in(D::f32, {s0}), t.in(D::f32, {s1})}) == "f32[s0]");
  BOOST_REQUIRE(t.g.shapes().facts().size() == 1u);
  const ShapeFact& f = t.g.shapes().facts()[0];
  BOOST_TEST((f.relation == Relation::eq));
  BOOST_TEST(f.reason == "add");
  BOOST_TEST(((f.lhs == s0.expr() && f.rhs == s1.expr()) || (f.lhs == s1.expr() && f.rhs == s0.expr())), facts(t.g));
  // The same symbol twice is equal without a fact.
  BOOST_TEST(t.out(OpId::sub, {t.in(D::f32, {s0, 2}), t.in(D::f32, {s0, 1})}) == "f32[s0, 2]");
  BOOST_TEST(t.g.shapes().facts().size() == 1u, facts(t.g));
}

BOOST_AUTO_TEST_CASE(broadcast_of_different_symbols_fails_and_names_them) {
  G t;
  const SymInt s0 = t.sym(3);
  const SymInt s1 = t.sym(4);
  CHECK_KILN_ERROR(t.op(OpId::mul, {t.in(D::f32, {s0}), t.in(D::f32, {s1})}),
                   "mul: shapes [s0] and [s1] do not broadcast at dim 0 (sizes s0 and s1)");
}

BOOST_AUTO_TEST_CASE(broadcast_against_an_equal_constant_keeps_the_symbol) {
  G t;
  const SymInt s0 = t.sym(5);
  BOOST_TEST(t.out(OpId::add, {t.in(D::f32, {s0}), t.in(D::f32, {5})}) == "f32[s0]");
  BOOST_TEST(t.out(OpId::add, {t.in(D::f32, {5}), t.in(D::f32, {s0})}) == "f32[s0]");
  BOOST_TEST(!t.g.shapes().facts().empty(), "the equality s0 == 5 must be recorded");
  // A marked-dynamic symbol may not be pinned to a constant.
  G u;
  const SymInt d0 = u.sym(5, true);
  CHECK_KILN_ERROR(u.op(OpId::add, {u.in(D::f32, {d0}), u.in(D::f32, {5})}), "add", "mark_dynamic");
}

BOOST_AUTO_TEST_CASE(reshape_with_symbols) {
  G t;
  const SymInt s0 = t.sym(3);
  const NodeId x = t.in(D::f32, {s0, 4});
  BOOST_TEST(t.out(OpId::reshape, {x}, {SymShape{s0 * 4}}) == "f32[4*s0]");
  BOOST_TEST(t.out(OpId::reshape, {x}, {SymShape{s0, 2, 2}}) == "f32[s0, 2, 2]");
  BOOST_TEST(t.out(OpId::reshape, {x}, {SymShape{2, s0 * 2}}) == "f32[2, 2*s0]");
  BOOST_TEST(t.g.shapes().facts().empty(), facts(t.g));
  // Reshaping to a constant pins the symbol, and says so.
  BOOST_TEST(t.out(OpId::reshape, {x}, {SymShape{12}}) == "f32[12]");
  BOOST_TEST(t.g.shapes().facts().size() == 1u, facts(t.g));
  CHECK_KILN_ERROR(t.op(OpId::reshape, {x}, {SymShape{s0 * 3}}), "reshape: cannot reshape [s0, 4] (4*s0 elements)");
  G u;
  const SymInt d0 = u.sym(3, true);
  CHECK_KILN_ERROR(u.op(OpId::reshape, {u.in(D::f32, {d0, 4})}, {SymShape{12}}), "reshape", "mark_dynamic");
}

BOOST_AUTO_TEST_CASE(matmul_with_symbols) {
  G t;
  const SymInt s0 = t.sym(7);
  BOOST_TEST(t.out(OpId::matmul, {t.in(D::f32, {s0, 8}), t.in(D::f32, {8, 3})}) == "f32[s0, 3]");
  BOOST_TEST(t.out(OpId::matmul, {t.in(D::f32, {2, s0}), t.in(D::f32, {s0, 3})}) == "f32[2, 3]");
  BOOST_TEST(t.out(OpId::matmul, {t.in(D::f32, {s0, 2, 8}), t.in(D::f32, {1, 8, 3})}) == "f32[s0, 2, 3]");
  BOOST_TEST(t.g.shapes().facts().empty(), facts(t.g));
  const SymInt s1 = t.sym(7);
  BOOST_TEST(t.out(OpId::matmul, {t.in(D::f32, {4, s0}), t.in(D::f32, {s1, 3})}) == "f32[4, 3]");
  BOOST_TEST(t.g.shapes().facts().size() == 1u, facts(t.g));
  const SymInt s2 = t.sym(9);
  CHECK_KILN_ERROR(t.op(OpId::matmul, {t.in(D::f32, {4, s0}), t.in(D::f32, {s2, 3})}),
                   "matmul: inner dimensions differ: [4, s0] @ [s2, 3]");
}

BOOST_AUTO_TEST_CASE(slice_with_symbols) {
  G t;
  const SymInt s0 = t.sym(10);
  const NodeId x = t.in(D::f32, {s0, 4});
  BOOST_TEST(t.out(OpId::slice, {x}, {int64_t{0}, int64_t{0}, kEnd, int64_t{1}}) == "f32[s0, 4]");
  BOOST_TEST(t.g.shapes().facts().empty(), facts(t.g));
  BOOST_TEST(t.out(OpId::slice, {x}, {int64_t{1}, int64_t{1}, int64_t{3}, int64_t{1}}) == "f32[s0, 2]");
  BOOST_TEST(t.out(OpId::slice, {x}, {int64_t{0}, int64_t{2}, kEnd, int64_t{2}}) == "f32[4, 4]");
  BOOST_TEST(t.g.shapes().facts().size() == 1u, facts(t.g));
  // Parts that keep the dim symbolic, under >= facts: from a start to the end, within it, and to an
  // end beyond the example's size.
  G v;
  const SymInt n = v.sym(10, true);
  const NodeId y = v.in(D::f32, {n, 4});
  BOOST_TEST(v.out(OpId::slice, {y}, {int64_t{0}, int64_t{1}, kEnd, int64_t{1}}) == "f32[s0 - 1, 4]");
  BOOST_TEST(v.out(OpId::slice, {y}, {int64_t{0}, int64_t{2}, int64_t{7}, int64_t{2}}) == "f32[3, 4]");
  BOOST_TEST(v.out(OpId::slice, {y}, {int64_t{0}, int64_t{0}, int64_t{40}, int64_t{1}}) == "f32[s0, 4]");
  BOOST_TEST(facts(v.g) == "s0 >= 3 (slice); s0 >= 7 (slice); -s0 + 40 >= 0 (slice); ", facts(v.g));
  // One that needs the size: a negative start (counted from an end that moves).
  G u;
  const SymInt d0 = u.sym(10, true);
  CHECK_KILN_ERROR(u.op(OpId::slice, {u.in(D::f32, {d0})}, {int64_t{0}, int64_t{-3}, kEnd, int64_t{1}}),
                   "slice", "mark_dynamic");
}

BOOST_AUTO_TEST_CASE(layout_ops_with_symbols) {
  G t;
  const SymInt s0 = t.sym(3);
  const SymInt s1 = t.sym(5);
  const NodeId x = t.in(D::f16, {s0, s1, 4});
  BOOST_TEST(t.out(OpId::flatten, {x}, {int64_t{0}, int64_t{1}}) == "f16[s0*s1, 4]");
  BOOST_TEST(t.out(OpId::flatten, {x}, {int64_t{1}, int64_t{2}}) == "f16[s0, 4*s1]");
  BOOST_TEST(t.out(OpId::transpose, {x}, {int64_t{0}, int64_t{2}}) == "f16[4, s1, s0]");
  BOOST_TEST(t.out(OpId::cat, {x, x}, {int64_t{0}}) == "f16[2*s0, s1, 4]");
  BOOST_TEST(t.out(OpId::cat, {x, t.in(D::f16, {s0, 2, 4})}, {int64_t{1}}) == "f16[s0, s1 + 2, 4]");
  BOOST_TEST(t.out(OpId::expand, {t.in(D::f16, {1, 4})}, {SymShape{s0, 4}}) == "f16[s0, 4]");
  BOOST_TEST(t.out(OpId::expand, {t.in(D::f16, {s0, 1})}, {SymShape{2, s0, s1}}) == "f16[2, s0, s1]");
  BOOST_TEST(t.out(OpId::pad, {x}, {dims({1, 1, 0, 2}), 0.0}) == "f16[s0, s1 + 2, 6]");
  BOOST_TEST(t.out(OpId::sum, {x}, {dims({1}), true}) == "f16[s0, 1, 4]");
  BOOST_TEST(t.out(OpId::index_select, {x, t.in(D::i64, {s1})}, {int64_t{0}}) == "f16[s1, s1, 4]");
  BOOST_TEST(t.out(OpId::full, {}, {SymShape{s0, s1}, 0.0, D::f32}) == "f32[s0, s1]");
  BOOST_TEST(t.g.shapes().facts().empty(), facts(t.g));
  CHECK_KILN_ERROR(t.op(OpId::squeeze, {x}, {dims({0})}), "squeeze: dim 0 of [s0, s1, 4] has size s0, not 1");
  CHECK_KILN_ERROR(t.op(OpId::expand, {t.in(D::f16, {s0})}, {SymShape{s1}}), "expand: cannot expand [s0] to [s1]");
}

BOOST_AUTO_TEST_CASE(composites_with_symbols) {
  G t;
  const SymInt s0 = t.sym(4);
  const NodeId x = t.in(D::f32, {s0, 16});
  BOOST_TEST(t.out(OpId::softmax, {x}, {int64_t{1}}) == "f32[s0, 16]");
  BOOST_TEST(t.out(OpId::layer_norm, {x, t.in(D::f32, {16})}, {int64_t{1}, 1e-5}) == "f32[s0, 16]");
  BOOST_TEST(t.out(OpId::linear, {x, t.in(D::f32, {8, 16}), t.in(D::f32, {8})}) == "f32[s0, 8]");
  BOOST_TEST(t.g.shapes().facts().empty(), facts(t.g));
}

BOOST_AUTO_TEST_SUITE_END()
