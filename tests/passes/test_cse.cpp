// cse: equal nodes merge; nodes that differ in any attribute, inputs, or operand order (for
// non-commutative ops) never do.
#include "helpers.h"

using namespace passes_test;
using kiln::passes::eliminate_common_subexpressions;

namespace {
Graph cse_dce(const Graph& g) {
  return kiln::passes::eliminate_dead_code(checked(eliminate_common_subexpressions, g));
}
}  // namespace

BOOST_AUTO_TEST_SUITE(cse_pass)

BOOST_AUTO_TEST_CASE(merges_equal_nodes_transitively) {
  G t;
  const SymInt s0 = t.sym(3);
  const NodeId x = t.in(DType::f32, {s0, 4});
  const NodeId a = t.op(OpId::exp, {t.op(OpId::exp, {x})});
  const NodeId b = t.op(OpId::exp, {t.op(OpId::exp, {x})});
  const Graph& g = t.out({t.op(OpId::add, {a, b})});
  const Graph d = cse_dce(g);
  BOOST_TEST(ops(d) == 3, d.str());
  const kiln::passes::PassResult r = kiln::passes::run_pass(kiln::passes::cse_pass, g);
  BOOST_TEST(r.summary == "cse: merged 2 nodes");
}

BOOST_AUTO_TEST_CASE(commutative_ops_match_swapped) {
  G t;
  const NodeId x = t.in(DType::f32, {4}), y = t.in(DType::f32, {4});
  const NodeId o1 = t.op(OpId::add, {x, y}), o2 = t.op(OpId::add, {y, x});
  const NodeId o3 = t.op(OpId::mul, {x, y}), o4 = t.op(OpId::mul, {y, x});
  const NodeId o5 = t.op(OpId::sub, {x, y}), o6 = t.op(OpId::sub, {y, x});        // not commutative
  const NodeId o7 = t.op(OpId::maximum, {x, y}), o8 = t.op(OpId::maximum, {y, x});  // max(+0, -0) is not symmetric
  const Graph& g = t.out({o1, o2, o3, o4, o5, o6, o7, o8});
  const Graph d = cse_dce(g);
  BOOST_TEST(ops(d) == 6, d.str());
  BOOST_TEST(d.outputs()[0] == d.outputs()[1]);
  BOOST_TEST(d.outputs()[2] == d.outputs()[3]);
  BOOST_TEST(d.outputs()[4] != d.outputs()[5]);
  BOOST_TEST(d.outputs()[6] != d.outputs()[7]);
}

BOOST_AUTO_TEST_CASE(sources_merge_by_value) {
  G t;
  const NodeId x = t.in(DType::f32, {4});
  const NodeId h1 = t.full(0.5), h2 = t.full(0.5);
  const NodeId c1 = t.constant(DType::f32, {4}, {1, 2, 3, 4}), c2 = t.constant(DType::f32, {4}, {1, 2, 3, 4});
  const NodeId r1 = t.op(OpId::randn, {}, {SymShape{4}, int64_t{7}, DType::f32});
  const NodeId r2 = t.op(OpId::randn, {}, {SymShape{4}, int64_t{7}, DType::f32});  // deterministic: merges
  const NodeId r3 = t.op(OpId::randn, {}, {SymShape{4}, int64_t{8}, DType::f32});  // another seed: stays
  const NodeId sum = t.op(OpId::add, {t.op(OpId::mul, {x, h1}), t.op(OpId::mul, {x, h2})});
  const Graph& g = t.out({sum, c1, c2, r1, r2, r3});
  const Graph d = cse_dce(g);
  BOOST_TEST(count(d, OpId::full) == 1);
  BOOST_TEST(count(d, OpId::mul) == 1);
  BOOST_TEST(d.outputs()[1] == d.outputs()[2]);
  BOOST_TEST(d.outputs()[3] == d.outputs()[4]);
  BOOST_TEST(d.outputs()[3] != d.outputs()[5]);
  BOOST_TEST(count(d, OpId::randn) == 2);
}

BOOST_AUTO_TEST_CASE(different_attributes_never_merge) {
  G t;
  const NodeId x = t.in(DType::f32, {3, 4});
  const Graph& g = t.out({
      t.reduce(OpId::sum, x, {0}), t.reduce(OpId::sum, x, {1}),          // dims
      t.reduce(OpId::sum, x, {1}, false),                                 // keepdim
      t.op(OpId::cast, {x}, {DType::f64}), t.op(OpId::cast, {x}, {DType::f16}),
      t.full(0.0), t.full(-0.0),                                          // x + -0 keeps -0: not the same value
      t.full(1.0, DType::f32), t.full(1.0, DType::f64), t.full(1.0, DType::f32, {1}),
      t.op(OpId::var, {x}, {std::vector<int64_t>{1}, true, int64_t{0}}),
      t.op(OpId::var, {x}, {std::vector<int64_t>{1}, true, int64_t{1}}),
      t.constant(DType::f32, {2}, {1, 2}), t.constant(DType::f32, {2}, {2, 1}), t.constant(DType::i32, {2}, {1, 2}),
  });
  const Graph d = cse_dce(g);
  BOOST_TEST(ops(d) == ops(g), d.str());
}

BOOST_AUTO_TEST_CASE(inputs_never_merge) {
  G t;
  const NodeId x = t.in(DType::f32, {4}, "x"), y = t.in(DType::f32, {4}, "y");
  const Graph& g = t.out({t.op(OpId::exp, {x}), t.op(OpId::exp, {y})});
  const Graph d = cse_dce(g);
  BOOST_TEST(d.inputs().size() == 2u);
  BOOST_TEST(ops(d) == 2);
}

BOOST_AUTO_TEST_SUITE_END()
