// decompose: composites become primitives, recursively; the signature, outputs and ShapeEnv stay.
#include "helpers.h"

using namespace passes_test;
using kiln::passes::decompose;

namespace {

int composites(const Graph& g) {
  int n = 0;
  for (const Node& x : g.nodes()) n += op_def(x.op).decompose != nullptr;
  return n;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(decompose_pass)

BOOST_AUTO_TEST_CASE(every_composite_becomes_primitives) {
  G t;
  const SymInt s0 = t.sym(3);
  const NodeId x = t.in(DType::f32, {s0, 6}, "x");
  const NodeId w = t.in(DType::f32, {6}, "w");
  const NodeId b = t.in(DType::f32, {6}, "b");
  const NodeId lw = t.in(DType::f32, {5, 6}, "lw");
  const NodeId sm = t.op(OpId::softmax, {x}, {int64_t{1}});
  const NodeId ls = t.op(OpId::log_softmax, {x}, {int64_t{0}});
  const NodeId ln = t.op(OpId::layer_norm, {x, w, b}, {int64_t{1}, 1e-5});
  const NodeId rn = t.op(OpId::rms_norm, {x, w}, {int64_t{1}, 1e-6});
  const NodeId li = t.op(OpId::linear, {x, lw, t.in(DType::f32, {5}, "lb")});
  const NodeId tr = t.op(OpId::transpose, {x}, {int64_t{0}, int64_t{1}});
  const NodeId fl = t.op(OpId::flatten, {x}, {int64_t{0}, int64_t{1}});
  const NodeId lse = t.op(OpId::logsumexp, {x}, {std::vector<int64_t>{1}, false});
  const Graph& g = t.out({sm, ls, ln, rn, li, tr, fl, lse});
  BOOST_TEST(composites(g) == 8);
  const Graph d = checked(decompose, g);
  BOOST_TEST(composites(d) == 0, d.str());
  BOOST_TEST(d.inputs().size() == 5u);
  BOOST_TEST(d.node(d.inputs()[0]).name == "x");
  BOOST_TEST(d.node(d.inputs()[4]).name == "lb");
  BOOST_TEST((d.shapes().symbols() == g.shapes().symbols()));
  BOOST_TEST((d.shapes().facts() == g.shapes().facts()));
}

BOOST_AUTO_TEST_CASE(composites_of_composites_and_int_inputs) {
  G t;
  const NodeId x = t.in(DType::i32, {2, 3, 4}, "x");
  // softmax of an integer tensor casts first; transpose inside a flatten inside a softmax.
  const NodeId tr = t.op(OpId::transpose, {x}, {int64_t{1}, int64_t{2}});
  const NodeId fl = t.op(OpId::flatten, {tr}, {int64_t{1}, int64_t{2}});
  const NodeId sm = t.op(OpId::log_softmax, {fl}, {int64_t{1}});
  const NodeId ln = t.op(OpId::layer_norm, {t.op(OpId::cast, {x}, {DType::bf16})}, {int64_t{2}, 1e-3});
  const Graph& g = t.out({sm, ln});
  const Graph d = checked(decompose, g);
  BOOST_TEST(composites(d) == 0, d.str());
}

// A composite over a device input and a generated value (a causal mask the trace built as a
// constant): its decomposition meets them as the graph does, every node on the device.
BOOST_AUTO_TEST_CASE(generated_inputs_meet_the_device_in_the_decomposition) {
  G t;
  const TensorMeta q{DType::f32, Device::cuda(0), SymShape{2, 4, 8}, {}};
  const NodeId qi = t.g.add_input(q, "q"), ki = t.g.add_input(q, "k"), vi = t.g.add_input(q, "v");
  auto mask = std::make_shared<ConstantData>();
  mask->dtype = DType::bool_;
  mask->sizes = {4, 4};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) mask->bytes.push_back(std::byte{j <= i});
  const NodeId m = t.g.add(OpId::constant, {}, Attrs{std::shared_ptr<const ConstantData>(mask)});
  const NodeId a = t.op(OpId::scaled_dot_product_attention, {qi, ki, vi, m}, {0.5});
  const Graph d = checked(decompose, t.out({a}));
  BOOST_TEST(composites(d) == 0, d.str());
  BOOST_TEST(d.node(d.outputs()[0]).meta.device.str() == "cuda:0");
}

BOOST_AUTO_TEST_CASE(a_primitive_graph_is_unchanged) {
  G t;
  const NodeId x = t.in(DType::f32, {4});
  const Graph& g = t.out({t.op(OpId::exp, {x})});
  const kiln::passes::PassResult r = kiln::passes::run_pass(kiln::passes::decompose_pass, g);
  BOOST_TEST(!r.changed);
  BOOST_TEST(r.graph.str() == g.str());
  BOOST_TEST(r.summary == "decompose: expanded 0 composites (1 -> 1 ops)");
}

BOOST_AUTO_TEST_CASE(facts_of_the_original_are_enough) {
  // The weight's size is a second symbol, equated to x's by layer_norm's shape rule; the
  // decomposition's broadcasts then need no other fact.
  G t;
  const SymInt s0 = t.sym(4), s1 = t.sym(4);
  const NodeId x = t.in(DType::f32, {3, s0}, "x");
  const NodeId w = t.in(DType::f32, {s1}, "w");
  const Graph& g = t.out({t.op(OpId::layer_norm, {x, w}, {int64_t{1}, 1e-5})});
  BOOST_TEST(g.shapes().facts().size() == 1u);
  const Graph d = checked(decompose, g);
  BOOST_TEST(composites(d) == 0);
  BOOST_TEST(d.shapes().facts().size() == 1u);
}

BOOST_AUTO_TEST_CASE(inputs_added_between_nodes_keep_their_order) {
  // A segment after a graph break gets inputs in the middle of the graph.
  G t;
  const NodeId a = t.in(DType::f32, {4}, "a");
  const NodeId s = t.op(OpId::softmax, {a}, {int64_t{0}});
  const NodeId b = t.in(DType::f32, {4}, "b");
  const Graph& g = t.out({t.op(OpId::add, {s, b}), b});
  const Graph d = checked(decompose, g);
  BOOST_TEST(d.node(d.inputs()[0]).name == "a");
  BOOST_TEST(d.node(d.inputs()[1]).name == "b");
  BOOST_TEST(d.outputs()[1] == d.inputs()[1]);
}

BOOST_AUTO_TEST_SUITE_END()
