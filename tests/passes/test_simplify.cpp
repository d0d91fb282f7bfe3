// simplify: identities that fire, and the look-alikes that must not (broadcasting, promotion,
// lossy casts, facts the ShapeEnv does not hold).
#include "helpers.h"

using namespace passes_test;
using kiln::passes::simplify;

namespace {
Graph simplify_dce(const Graph& g) { return kiln::passes::eliminate_dead_code(checked(simplify, g)); }
std::vector<int64_t> perm(std::initializer_list<int64_t> v) { return v; }
}  // namespace

BOOST_AUTO_TEST_SUITE(simplify_pass)

BOOST_AUTO_TEST_CASE(neutral_elements_go) {
  G t;
  const SymInt s0 = t.sym(3);
  const NodeId x = t.in(DType::f32, {s0, 4}, "x");
  NodeId y = t.op(OpId::mul, {x, t.full(1)});
  y = t.op(OpId::mul, {t.full(1), y});
  y = t.op(OpId::add, {y, t.full(0)});
  y = t.op(OpId::add, {t.full(-0.0), y});
  y = t.op(OpId::sub, {y, t.full(0)});
  y = t.op(OpId::div, {y, t.full(1)});
  y = t.op(OpId::mul, {y, t.constant(DType::f32, {4}, {1, 1, 1, 1})});          // broadcasts within x's shape
  y = t.op(OpId::mul, {y, t.full(1, DType::f64)});                               // f32[..] * f64 0-d is f32
  y = t.op(OpId::mul, {y, t.op(OpId::expand, {t.full(1)}, {SymShape{s0, 4}})});  // seen through expand
  const Graph& g = t.out({y});
  const Graph d = simplify_dce(g);
  BOOST_TEST(ops(d) == 0, d.str());
  BOOST_TEST(d.outputs()[0] == d.inputs()[0]);
  BOOST_TEST(d.node(d.inputs()[0]).name == "x");
}

BOOST_AUTO_TEST_CASE(neutral_elements_that_change_the_meta_stay) {
  G t;
  const NodeId x = t.in(DType::f32, {3});
  const NodeId s = t.in(DType::f32, {});
  const NodeId i = t.in(DType::i32, {3});
  const Graph& g = t.out({
      t.op(OpId::mul, {x, t.full(1, DType::f32, {2, 3})}),  // 1 broadcasts x to [2, 3]
      t.op(OpId::add, {s, t.full(0, DType::f64)}),          // 0-d f32 + 0-d f64 is f64
      t.op(OpId::mul, {i, t.full(1, DType::f32)}),          // i32 * float scalar is f32
      t.op(OpId::div, {i, t.full(1, DType::i32)}),          // integer division gives f32
      t.op(OpId::sub, {t.full(0), x}),                      // 0 - x is not x
      t.op(OpId::mul, {x, t.full(0)}),                      // x * 0 is not 0 (NaN, inf)
      t.op(OpId::mul, {x, t.constant(DType::f32, {3}, {1, 1, 2})}),
      t.op(OpId::add, {x, t.full(1e-30)}),
  });
  const Graph d = simplify_dce(g);
  BOOST_TEST(ops(d) == ops(g), d.str());
}

BOOST_AUTO_TEST_CASE(neg_neg_and_casts) {
  G t;
  const NodeId x = t.in(DType::f32, {4});
  const NodeId h = t.in(DType::f16, {4});
  const NodeId i = t.in(DType::i32, {4});
  const NodeId l = t.in(DType::i64, {4});
  auto cast = [&](NodeId v, DType d) { return t.op(OpId::cast, {v}, {d}); };
  const NodeId n3 = t.op(OpId::neg, {t.op(OpId::neg, {t.op(OpId::neg, {x})})});
  const Graph& g = t.out({
      t.op(OpId::neg, {t.op(OpId::neg, {x})}),  // x
      n3,                                       // neg(x)
      cast(x, DType::f32),                      // x
      cast(cast(h, DType::f32), DType::f64),    // cast(h, f64)
      cast(cast(x, DType::f64), DType::f32),    // x
      cast(cast(i, DType::i64), DType::f64),    // cast(i, f64)
      cast(cast(x, DType::f16), DType::f32),    // lossy: stays
      cast(cast(l, DType::f64), DType::i64),    // i64 -> f64 loses: stays
      cast(cast(i, DType::f32), DType::f64),    // i32 -> f32 loses: stays
  });
  const Graph d = simplify_dce(g);
  const auto& o = d.outputs();
  BOOST_TEST(o[0] == d.inputs()[0]);
  BOOST_TEST((d.node(o[1]).op == OpId::neg && d.node(o[1]).inputs[0] == d.inputs()[0]));
  BOOST_TEST(o[2] == d.inputs()[0]);
  BOOST_TEST((d.node(o[3]).op == OpId::cast && d.node(o[3]).inputs[0] == d.inputs()[1]));
  BOOST_TEST(o[4] == d.inputs()[0]);
  BOOST_TEST((d.node(o[5]).op == OpId::cast && d.node(o[5]).inputs[0] == d.inputs()[2]));
  for (size_t k = 6; k < 9; ++k) BOOST_TEST((d.node(d.node(o[k]).inputs[0]).op == OpId::cast), d.str());
}

BOOST_AUTO_TEST_CASE(layout_chains) {
  G t;
  const SymInt s0 = t.sym(3);
  const NodeId x = t.in(DType::f32, {s0, 4, 2});
  const NodeId r1 = t.op(OpId::reshape, {t.op(OpId::reshape, {x}, {SymShape{s0 * 8}})}, {SymShape{s0, 8}});
  const NodeId r2 = t.op(OpId::reshape, {t.op(OpId::reshape, {x}, {SymShape{s0 * 8}})}, {SymShape{s0, 4, 2}});
  const NodeId r3 = t.op(OpId::reshape, {t.op(OpId::unsqueeze, {x}, {int64_t{0}})}, {SymShape{s0, 8}});
  const NodeId p1 = t.op(OpId::permute, {t.op(OpId::permute, {x}, {perm({1, 2, 0})})}, {perm({1, 0, 2})});
  const NodeId p2 = t.op(OpId::permute, {t.op(OpId::permute, {x}, {perm({1, 2, 0})})}, {perm({2, 0, 1})});
  const NodeId p3 = t.op(OpId::permute, {x}, {perm({0, 1, 2})});
  const NodeId e1 = t.op(OpId::expand, {x}, {SymShape{s0, 4, 2}});
  const NodeId one = t.in(DType::f32, {1, 2});
  const NodeId e2 = t.op(OpId::expand, {t.op(OpId::expand, {one}, {SymShape{4, 2}})}, {SymShape{s0, 4, 2}});
  const NodeId sl = t.op(OpId::slice, {x}, {int64_t{0}, int64_t{0}, std::numeric_limits<int64_t>::max(), int64_t{1}});
  const NodeId sq = t.op(OpId::squeeze, {x}, {std::vector<int64_t>{}});
  const Graph& g = t.out({r1, r2, r3, p1, p2, p3, e1, e2, sl, sq});
  const Graph d = simplify_dce(g);
  const auto& o = d.outputs();
  const NodeId xi = d.inputs()[0];
  BOOST_TEST((d.node(o[0]).op == OpId::reshape && d.node(o[0]).inputs[0] == xi), d.str());
  BOOST_TEST(o[1] == xi);
  BOOST_TEST((d.node(o[2]).op == OpId::reshape && d.node(o[2]).inputs[0] == xi));
  BOOST_TEST((d.node(o[3]).op == OpId::permute && d.node(o[3]).inputs[0] == xi));
  BOOST_TEST((d.node(o[3]).attrs.ints(0) == perm({2, 1, 0})));
  BOOST_TEST(o[4] == xi);
  BOOST_TEST(o[5] == xi);
  BOOST_TEST(o[6] == xi);
  BOOST_TEST((d.node(o[7]).op == OpId::expand && d.node(o[7]).inputs[0] == d.inputs()[1]));
  BOOST_TEST(o[8] == xi);
  BOOST_TEST(o[9] == xi);
  BOOST_TEST(ops(d) == 4, d.str());
}

BOOST_AUTO_TEST_CASE(a_chain_that_would_need_a_new_fact_stays) {
  // reshape(reshape(x[s0, s1], [s2]), [s3]): each reshape's element count was equated by a
  // fact (s2 == s0*s1, s3 == s2); reshaping x to [s3] directly would need s3 == s0*s1, which
  // the ShapeEnv does not hold, so the chain stays and the facts stay as they were.
  G t;
  const SymInt s0 = t.sym(2), s1 = t.sym(3), s2 = t.sym(6), s3 = t.sym(6);
  const NodeId x = t.in(DType::f32, {s0, s1});
  t.in(DType::f32, {s2});
  t.in(DType::f32, {s3});
  const NodeId r = t.op(OpId::reshape, {t.op(OpId::reshape, {x}, {SymShape{s2}})}, {SymShape{s3}});
  const Graph& g = t.out({r});
  BOOST_TEST(g.shapes().facts().size() == 2u);
  const Graph d = simplify_dce(g);
  BOOST_TEST(ops(d) == 2, d.str());
  BOOST_TEST(d.shapes().facts().size() == 2u);
}

BOOST_AUTO_TEST_CASE(bool_and_int_identities) {
  G t;
  const NodeId b = t.in(DType::bool_, {3});
  const NodeId i = t.in(DType::i64, {3});
  const Graph& g = t.out({t.op(OpId::add, {b, t.full(0, DType::bool_)}), t.op(OpId::mul, {i, t.full(1, DType::i64)}),
                          t.op(OpId::where, {b, i, i})});
  const Graph d = simplify_dce(g);
  BOOST_TEST(ops(d) == 0, d.str());
}

BOOST_AUTO_TEST_CASE(small_integer_powers_are_multiplied_out) {
  G t;
  const SymInt s0 = t.sym(3);
  const NodeId x = t.in(DType::f32, {s0, 4}, "x");
  const NodeId d = t.in(DType::f64, {4}, "d");
  const NodeId y = t.op(OpId::add, {t.op(OpId::pow, {x, t.full(3)}), t.op(OpId::pow, {x, t.full(2, DType::f64)})});
  const Graph& g = t.out({y, t.op(OpId::pow, {d, t.full(3, DType::f64)})});
  const Graph r = simplify_dce(g);  // checked: the same results on the reference interpreter
  BOOST_TEST(count(r, OpId::pow) == 0, r.str());
  BOOST_TEST(count(r, OpId::mul) == 5, r.str());  // x*x, (x*x)*x, x*x (CSE is another pass), d*d, (d*d)*d
}

BOOST_AUTO_TEST_CASE(powers_that_would_round_or_change_the_meta_stay) {
  G t;
  const NodeId x = t.in(DType::f32, {4});
  const NodeId b = t.in(DType::bf16, {4});
  const NodeId i = t.in(DType::i32, {4});
  const Graph& g = t.out({
      t.op(OpId::pow, {b, t.full(3, DType::bf16)}),          // each product would round to bf16
      t.op(OpId::pow, {x, t.full(3, DType::f32, {2, 4})}),  // the exponent broadcasts x to [2, 4]
      t.op(OpId::pow, {i, t.full(2, DType::f32)}),          // i32 ** float is f32
      t.op(OpId::pow, {x, t.full(4)}),
      t.op(OpId::pow, {x, t.constant(DType::f32, {4}, {3, 3, 3, 2})}),
  });
  const Graph d = simplify_dce(g);
  BOOST_TEST(count(d, OpId::pow) == 5, d.str());
}

// A reduction over dims of size 1 is its input (keepdim) or a reshape of it; one over a dim of
// another size, a symbolic one, or that changes the dtype (sum of bool), or var, stays.
BOOST_AUTO_TEST_CASE(reductions_over_size_one_dims_go) {
  G t;
  const SymInt s0 = t.sym(3);
  const NodeId x = t.in(DType::f32, {s0, 1, 4, 1}, "x");
  const NodeId b = t.in(DType::bool_, {2, 1}, "b");
  const Graph& g = t.out({
      t.op(OpId::sum, {x}, {std::vector<int64_t>{1, 3}, false}),  // -> reshape [s0, 4]
      t.op(OpId::max, {x}, {std::vector<int64_t>{1}, true}),      // -> x
      t.op(OpId::mean, {x}, {std::vector<int64_t>{3}, false}),    // -> reshape [s0, 1, 4]
      t.op(OpId::sum, {x}, {std::vector<int64_t>{1, 2}, false}),  // size 4: stays
      t.op(OpId::prod, {x}, {std::vector<int64_t>{0}, true}),     // symbolic: stays
      t.op(OpId::var, {x}, {std::vector<int64_t>{1}, true, int64_t{0}}),  // var of one element is 0: stays
      t.op(OpId::sum, {b}, {std::vector<int64_t>{1}, false}),     // bool -> i64: stays
  });
  const Graph d = simplify_dce(g);  // checked: the same results on the reference interpreter
  BOOST_TEST(count(d, OpId::sum) == 2, d.str());
  BOOST_TEST(count(d, OpId::max) == 0, d.str());
  BOOST_TEST(count(d, OpId::mean) == 0, d.str());
  BOOST_TEST(count(d, OpId::prod) == 1, d.str());
  BOOST_TEST(count(d, OpId::var) == 1, d.str());
  BOOST_TEST(count(d, OpId::reshape) == 2, d.str());
  BOOST_TEST(d.outputs()[1] == d.inputs()[0]);
}

BOOST_AUTO_TEST_CASE(one_input_pointwise_ops_move_above_reshapes_that_split_dims) {
  // GPT-2's MLP: a [B*T, 4C] product viewed as [B, T, 4C], a GELU, viewed back as [B*T, 4C]:
  // the GELU moves above the split and the two views compose to nothing.
  G t;
  const SymInt s0 = t.sym(2);
  t.in(DType::f32, {s0}, "batch");  // gives s0 a value when the test runs the graphs
  const NodeId x = t.in(DType::f32, {s0 * 3, 8}, "x");
  const NodeId split = t.op(OpId::reshape, {x}, {SymShape{s0, 3, 8}});
  const NodeId gelu = t.op(OpId::gelu, {split}, {std::string("tanh")});
  const NodeId back = t.op(OpId::reshape, {gelu}, {SymShape{s0 * 3, 8}});
  const NodeId y = t.in(DType::f32, {4, 6}, "y");
  const NodeId unit = t.op(OpId::cast, {t.op(OpId::reshape, {y}, {SymShape{2, 2, 1, 6}})}, {DType::bf16});  // a split and a size-1 dim
  const NodeId only_unit = t.op(OpId::cast, {t.op(OpId::reshape, {y}, {SymShape{4, 1, 6}})}, {DType::bf16});  // no split: stays
  const NodeId merge = t.op(OpId::exp, {t.op(OpId::reshape, {y}, {SymShape{24}})});       // a merge: stays
  const NodeId regroup = t.op(OpId::exp, {t.op(OpId::reshape, {y}, {SymShape{6, 4}})});  // neither: stays
  const Graph& g = t.out({back, split, unit, merge, regroup, only_unit});
  const Graph d = simplify_dce(g);  // checked: the same results on the reference interpreter
  const auto& o = d.outputs();
  BOOST_TEST((d.node(o[0]).op == OpId::gelu && d.node(o[0]).inputs[0] == d.inputs()[1]), d.str());
  BOOST_TEST((d.node(o[2]).op == OpId::reshape && d.node(d.node(o[2]).inputs[0]).op == OpId::cast), d.str());
  BOOST_TEST((d.node(o[3]).op == OpId::exp && d.node(d.node(o[3]).inputs[0]).op == OpId::reshape), d.str());
  BOOST_TEST((d.node(o[4]).op == OpId::exp && d.node(d.node(o[4]).inputs[0]).op == OpId::reshape), d.str());
  BOOST_TEST((d.node(o[5]).op == OpId::cast && d.node(d.node(o[5]).inputs[0]).op == OpId::reshape), d.str());
}

BOOST_AUTO_TEST_SUITE_END()
