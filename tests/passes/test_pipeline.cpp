// The default pipeline, run_pass's invariant checks and the graph log.
#include <kiln/config/log.h>

#include "helpers.h"

using namespace passes_test;
namespace passes = kiln::passes;

BOOST_AUTO_TEST_SUITE(pipeline)

BOOST_AUTO_TEST_CASE(order_of_the_default_pipeline) {
  std::string names;
  for (const passes::Pass& p : passes::default_pipeline()) names += std::string(p.name) + " ";
  BOOST_TEST(names == "recognize fold_constants simplify cse recognize dce ");
}

BOOST_AUTO_TEST_CASE(suite_rmsnorm_and_small_chain) {
  // rmsnorm as written in suite.md, with a dead value and a redundant scalar.
  G t;
  const SymInt s0 = t.sym(4);
  const NodeId x = t.in(DType::f32, {s0, 32}, "x");
  const NodeId g = t.in(DType::f32, {32}, "g");
  const NodeId ms = t.reduce(OpId::mean, t.op(OpId::mul, {x, x}), {1});
  const NodeId y = t.op(OpId::mul, {t.op(OpId::mul, {x, t.op(OpId::rsqrt, {t.op(OpId::add, {ms, t.full(1e-6)})})}), g});
  t.op(OpId::exp, {x});
  const Graph& gr = t.out({t.op(OpId::mul, {y, t.full(1)})});
  const Graph d = checked(passes::run_default_pipeline, gr);
  BOOST_TEST(ops(d) == 1, d.str());
  BOOST_TEST(count(d, OpId::rms_norm) == 1);

  // small_chain: 5 x (x = tanh(x) * 0.5 + sigmoid(x)): the five 0.5 scalars become one.
  G u;
  NodeId v = u.in(DType::f32, {1024}, "x");
  for (int k = 0; k < 5; ++k)
    v = u.op(OpId::add, {u.op(OpId::mul, {u.op(OpId::tanh, {v}), u.full(0.5)}), u.op(OpId::sigmoid, {v})});
  const Graph& ch = u.out({v});
  const Graph e = checked(passes::run_default_pipeline, ch);
  BOOST_TEST(ops(e) == 21, e.str());
  BOOST_TEST(count(e, OpId::full) == 1);

  // A 1 that only folding reveals: fold_constants runs before simplify.
  G w;
  const NodeId z = w.in(DType::f32, {s0.hint()}, "z");
  const NodeId one = w.op(OpId::add, {w.full(0.25), w.op(OpId::mul, {w.full(1.5), w.full(0.5)})});
  const Graph& gw = w.out({w.op(OpId::mul, {z, one})});
  const Graph f = checked(passes::run_default_pipeline, gw);
  BOOST_TEST(ops(f) == 0, f.str());
}

BOOST_AUTO_TEST_CASE(every_pass_is_logged_with_before_after_and_a_summary) {
  std::string log;
  kiln::logs::set_categories_for_testing("graph");
  kiln::logs::set_sink_for_testing([&](std::string_view s) { log += s; });
  G t;
  const NodeId x = t.in(DType::f32, {4}, "x");
  const Graph& g = t.out({t.op(OpId::add, {t.op(OpId::exp, {x}), t.op(OpId::exp, {x})})});
  const Graph d = passes::run_default_pipeline(g);
  kiln::logs::set_sink_for_testing({});
  kiln::logs::reset_for_testing();
  BOOST_TEST(ops(d) == 2);
  for (const char* part : {"[kiln:graph] recognize: no pattern", "[kiln:graph] simplify: 0 rewrites",
                           "[kiln:graph] fold_constants: folded 0 nodes", "[kiln:graph] cse: merged 1 node (3 -> 2 ops)",
                           "[kiln:graph] dce: removed 0 dead nodes (2 -> 2 ops)", "[kiln:graph] cse before:",
                           "[kiln:graph] dce after:", "%0 = input 0 (x) : f32[4]"})
    BOOST_TEST(log.find(part) != std::string::npos, "log lacks '" << part << "':\n" << log);
}

namespace {
// Passes with bugs, to see run_pass catch them.
passes::PassResult drops_an_input(const Graph& g) {
  Graph out;
  out.add_input(g.node(g.inputs()[0]).meta, "x");
  out.set_outputs({0});
  return {std::move(out), true, {}};
}
passes::PassResult changes_an_output(const Graph& g) {
  Graph out;
  out.shapes() = g.shapes();
  for (NodeId i : g.inputs()) out.add_input(g.node(i).meta, g.node(i).name);
  out.set_outputs({out.add(OpId::cast, {0}, {DType::f64})});
  return {std::move(out), true, {}};
}
passes::PassResult adds_a_fact(const Graph& g) {
  Graph out;
  out.shapes() = g.shapes();
  for (NodeId i : g.inputs()) out.add_input(g.node(i).meta, g.node(i).name);
  out.shapes().add_fact({SymExpr::symbol(0), SymExpr::constant(3), Relation::eq, "bug"});
  out.set_outputs({0});
  return {std::move(out), true, {}};
}
}  // namespace

BOOST_AUTO_TEST_CASE(run_pass_catches_broken_invariants) {
  G t;
  const SymInt s0 = t.sym(3);
  const NodeId x = t.in(DType::f32, {s0}, "x");
  t.in(DType::f32, {s0}, "y");
  const Graph& g = t.out({x});
  auto says = [](std::string part) {
    return [part](const kiln::InternalError& e) { return std::string(e.what()).find(part) != std::string::npos; };
  };
  // A broken invariant is a bug in Kiln's pass: kiln::InternalError, which no kiln::Error
  // recovery path (graph breaks, eager fallback) catches.
  BOOST_CHECK_EXCEPTION(passes::run_pass({"drops", drops_an_input}, g), kiln::InternalError,
                        says("passes: drops changed the number of inputs from 2 to 1 (this is a bug in Kiln)"));
  BOOST_CHECK_EXCEPTION(passes::run_pass({"retypes", changes_an_output}, g), kiln::InternalError,
                        says("passes: retypes changed output 0 from f32[s0] to f64[s0]"));
  BOOST_CHECK_EXCEPTION(passes::run_pass({"assumes", adds_a_fact}, g), kiln::InternalError,
                        says("passes: assumes changed the shape facts"));
}

BOOST_AUTO_TEST_CASE(user_dynamic_symbols_and_strided_inputs_pass_through) {
  G t;
  const SymInt d0 = t.sym(6, true);
  TensorMeta strided = meta(DType::f32, {4, 3});
  strided.strides = {1, 4};
  const NodeId s = t.g.add_input(strided, "s");
  const NodeId x = t.in(DType::f32, {d0, 3}, "x");
  const NodeId y = t.op(OpId::add, {t.op(OpId::mul, {x, t.full(1)}), t.op(OpId::sum, {s}, {std::vector<int64_t>{0}, false})});
  const Graph& g = t.out({y, t.op(OpId::mul, {s, t.full(1)})});
  const Graph d = checked(passes::run_default_pipeline, g);
  BOOST_TEST(ops(d) == 2, d.str());
  BOOST_TEST((d.node(d.inputs()[0]).meta == g.node(g.inputs()[0]).meta));
  BOOST_TEST(d.outputs()[1] == d.inputs()[0]);  // an output may be a (strided) input
  const Graph e = checked(passes::decompose, d);
  BOOST_TEST(ops(e) == 2);
}

BOOST_AUTO_TEST_SUITE_END()
