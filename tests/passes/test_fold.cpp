// fold_constants: known values computed at compile time; randn, large and symbolic results left.
#include "helpers.h"

using namespace passes_test;
using kiln::passes::fold_constants;

namespace {
Graph fold_dce(const Graph& g) { return kiln::passes::eliminate_dead_code(checked(fold_constants, g)); }
}  // namespace

BOOST_AUTO_TEST_SUITE(fold_pass)

BOOST_AUTO_TEST_CASE(pointwise_over_fulls_becomes_a_full_of_any_shape) {
  G t;
  const SymInt s0 = t.sym(5);
  const NodeId x = t.in(DType::f32, {s0, 3});
  const NodeId k = t.op(OpId::mul, {t.full(2), t.full(3)});                             // 6, 0-d
  const NodeId e = t.op(OpId::expand, {t.op(OpId::sqrt, {k})}, {SymShape{s0, 3}});        // [s0, 3]
  const NodeId big = t.op(OpId::exp, {t.full(1, DType::f32, {s0, 1000})});              // large, uniform
  const Graph& g = t.out({t.op(OpId::add, {x, e}), big, k});
  const Graph d = fold_dce(g);
  BOOST_TEST(count(d, OpId::full) == 3, d.str());
  BOOST_TEST(ops(d) == 4, d.str());
  BOOST_TEST((d.node(d.outputs()[1]).op == OpId::full));
  BOOST_TEST(d.node(d.outputs()[2]).attrs.f(1) == 6.0);
}

BOOST_AUTO_TEST_CASE(promotion_is_kept_when_folding_fulls) {
  // eq(f32[3] 2.5, f64 0-d 2.5000000001) compares in f32 (dims dominate): true. Computed on
  // two 0-d values it would compare in f64 and give false.
  G t;
  const NodeId a = t.full(2.5, DType::f32, {3});
  const NodeId b = t.full(2.5000000001, DType::f64);
  const NodeId i = t.op(OpId::add, {t.full(3, DType::i32, {2}), t.full(0.7, DType::f64)});   // i32[2] + f64 -> f64
  const Graph& g = t.out({t.op(OpId::eq, {a, b}), i, t.op(OpId::div, {t.full(7, DType::i64, {2}), t.full(2, DType::i64)})});
  const Graph d = fold_dce(g);
  BOOST_TEST(ops(d) == 3);
  BOOST_TEST(d.node(d.outputs()[0]).attrs.f(1) == 1.0);
  BOOST_TEST(d.node(d.outputs()[1]).attrs.f(1) == 3.7);
  BOOST_TEST(d.node(d.outputs()[2]).attrs.f(1) == 3.5);
}

BOOST_AUTO_TEST_CASE(small_static_results_become_constants) {
  G t;
  const NodeId x = t.in(DType::f32, {3});
  const NodeId ar = t.op(OpId::arange, {}, {0.0, 10.0, 1.0, DType::f32});
  const NodeId s = t.reduce(OpId::sum, ar, {}, false);                                       // 45: uniform -> full
  const NodeId c = t.constant(DType::f32, {2, 3}, {1, 2, 3, 4, 5, 6});
  const NodeId m = t.op(OpId::matmul, {c, t.op(OpId::permute, {c}, {std::vector<int64_t>{1, 0}})});
  const NodeId sm = t.op(OpId::softmax, {t.op(OpId::slice, {ar}, {int64_t{0}, int64_t{0}, int64_t{3}, int64_t{1}})},
                         {int64_t{0}});
  const Graph& g = t.out({t.op(OpId::add, {x, sm}), s, m});
  const Graph d = fold_dce(g);
  BOOST_TEST((d.node(d.outputs()[1]).op == OpId::full), d.str());
  BOOST_TEST(d.node(d.outputs()[1]).attrs.f(1) == 45.0);
  BOOST_TEST((d.node(d.outputs()[2]).op == OpId::constant));
  BOOST_TEST(ops(d) == 4, d.str());  // add, a softmax constant, the sum full, the matmul constant
  BOOST_TEST(count(d, OpId::arange) == 0);
}

BOOST_AUTO_TEST_CASE(what_is_never_folded) {
  G t;
  const SymInt s0 = t.sym(4);
  const NodeId r = t.op(OpId::randn, {}, {SymShape{4}, int64_t{3}, DType::f32});
  const NodeId er = t.op(OpId::exp, {r});                                                       // randn: kept
  const NodeId big = t.op(OpId::expand, {t.constant(DType::f32, {4}, {1, 2, 3, 4})}, {SymShape{2000, 4}});  // 8000 elements
  const NodeId sym = t.reduce(OpId::sum, t.full(1, DType::f32, {s0}), {}, false);               // symbolic input
  const NodeId bad = t.op(OpId::index_select, {t.constant(DType::f32, {3}, {1, 2, 3}), t.constant(DType::i64, {1}, {5})},
                          {int64_t{0}});                                                        // fails when run
  const NodeId x = t.in(DType::f32, {s0});
  const Graph& g = t.out({er, big, t.op(OpId::add, {x, sym})});
  const Graph d = fold_dce(g);
  BOOST_TEST(count(d, OpId::randn) == 1);
  BOOST_TEST(count(d, OpId::exp) == 1);
  BOOST_TEST(count(d, OpId::expand) == 1);
  BOOST_TEST(count(d, OpId::sum) == 1);
  // The failing index_select stays for the run to report.
  G u;
  const Graph& h = u.out({u.op(OpId::index_select, {u.constant(DType::f32, {3}, {1, 2, 3}), u.constant(DType::i64, {1}, {5})},
                              {int64_t{0}})});
  const Graph e = fold_constants(h);
  BOOST_TEST(count(e, OpId::index_select) == 1);
  BOOST_CHECK_THROW(eval::run_graph(e, {}), kiln::Error);
  (void)bad;
}

BOOST_AUTO_TEST_CASE(sources_stay_as_they_are) {
  G t;
  const Graph& g = t.out({t.full(1.5, DType::f32, {64, 64}), t.op(OpId::arange, {}, {0.0, 5.0, 1.0, DType::i64}),
                          t.constant(DType::f32, {2}, {1, 2})});
  const kiln::passes::PassResult r = kiln::passes::run_pass(kiln::passes::fold_constants_pass, g);
  BOOST_TEST(!r.changed);
  BOOST_TEST((r.graph == g));
}

BOOST_AUTO_TEST_CASE(integer_and_bool_results_are_exact) {
  G t;
  const NodeId a = t.constant(DType::i64, {3}, {1, -2, 3});
  const NodeId big = t.op(OpId::mul, {t.full(3037000499.0, DType::i64), t.full(3037000499.0, DType::i64)});  // > 2^53
  const Graph& g = t.out({t.op(OpId::mul, {a, a}), t.op(OpId::gt, {a, t.full(0, DType::i64)}), big});
  const Graph d = fold_dce(g);
  // No double holds 3037000499^2, so that one becomes a constant rather than a full.
  BOOST_TEST(ops(d) == 3, d.str());
  BOOST_TEST(count(d, OpId::constant) == 3);
}

BOOST_AUTO_TEST_SUITE_END()
