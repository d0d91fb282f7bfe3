// dce: unread nodes go, inputs stay.
#include "helpers.h"

using namespace passes_test;
using kiln::passes::eliminate_dead_code;

BOOST_AUTO_TEST_SUITE(dce_pass)

BOOST_AUTO_TEST_CASE(drops_what_no_output_reads) {
  G t;
  const NodeId x = t.in(DType::f32, {4}, "x");
  const NodeId unused = t.in(DType::f32, {4}, "unused");
  const NodeId e = t.op(OpId::exp, {x});
  t.op(OpId::sin, {e});                                                     // dead
  t.op(OpId::randn, {}, {SymShape{4}, int64_t{1}, DType::f32});             // dead, no side effect
  t.op(OpId::add, {t.op(OpId::neg, {unused}), t.full(2)});                  // dead chain
  const Graph& g = t.out({t.op(OpId::cos, {e})});
  const Graph d = checked(eliminate_dead_code, g);
  BOOST_TEST(ops(d) == 2, d.str());
  BOOST_TEST(d.inputs().size() == 2u);
  BOOST_TEST(d.node(d.inputs()[1]).name == "unused");
}

BOOST_AUTO_TEST_CASE(outputs_may_be_inputs_or_repeated) {
  G t;
  const NodeId x = t.in(DType::f32, {4}, "x");
  const NodeId e = t.op(OpId::exp, {x});
  t.op(OpId::exp, {e});
  const Graph& g = t.out({x, e, e});
  const Graph d = checked(eliminate_dead_code, g);
  BOOST_TEST(ops(d) == 1);
  BOOST_TEST(d.outputs()[0] == d.inputs()[0]);
  BOOST_TEST(d.outputs()[1] == d.outputs()[2]);
}

BOOST_AUTO_TEST_CASE(nothing_dead_means_no_change) {
  G t;
  const NodeId x = t.in(DType::f32, {4});
  const Graph& g = t.out({t.op(OpId::exp, {x})});
  const kiln::passes::PassResult r = kiln::passes::run_pass(kiln::passes::dce_pass, g);
  BOOST_TEST(!r.changed);
  BOOST_TEST(r.summary == "dce: removed 0 dead nodes");
  BOOST_TEST((r.graph == g));
}

BOOST_AUTO_TEST_CASE(needed_nodes_walks_back_from_roots_and_stops_where_told) {
  // x -> e = exp(x) -> s = sin(e) -> c = cos(s); y -> n = neg(y), read by nothing wanted.
  G t;
  const NodeId x = t.in(DType::f32, {4}, "x");
  const NodeId y = t.in(DType::f32, {4}, "y");
  const NodeId e = t.op(OpId::exp, {x});
  const NodeId s = t.op(OpId::sin, {e});
  const NodeId c = t.op(OpId::cos, {s});
  const NodeId n = t.op(OpId::neg, {y});
  const Graph& g = t.out({c, n});
  const std::vector<NodeId> roots{c, -1};  // negative roots are skipped
  const std::vector<char> all = kiln::needed_nodes(g, roots);
  BOOST_TEST((all == std::vector<char>{1, 0, 1, 1, 1, 0}));
  // s is given: it is needed, what it is computed from is not.
  std::vector<char> stop(g.size(), 0);
  stop[static_cast<size_t>(s)] = 1;
  BOOST_TEST((kiln::needed_nodes(g, roots, stop) == std::vector<char>{0, 0, 0, 1, 1, 0}));
  BOOST_TEST((kiln::needed_nodes(g, std::vector<NodeId>{}) == std::vector<char>(g.size(), 0)));
}

BOOST_AUTO_TEST_SUITE_END()
