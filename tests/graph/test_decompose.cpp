// Decompositions of composites: the primitives they emit compute a tensor with the same
// meta as the composite, and no composite is left.
#include <functional>
#include <limits>

#include "helpers.h"

using namespace kiln;
using kiln_test::dims;
using kiln_test::G;

namespace {
using D = DType;
using MakeInputs = std::function<std::vector<NodeId>(G&)>;

// Builds the composite in one graph and its decomposition in a fresh one from the same
// inputs; returns the decomposed graph's listing for further checks.
std::string check_decomposes(OpId op, const MakeInputs& make, const Attrs& attrs) {
  G whole;
  const NodeId c = whole.op(op, make(whole), attrs);
  G parts;
  const std::vector<NodeId> in = make(parts);
  const size_t before = parts.g.size();
  const OpDef& def = op_def(op);
  BOOST_REQUIRE(def.decompose != nullptr);
  const NodeId r = def.decompose(parts.g, in, attrs);
  BOOST_TEST(parts.g.size() > before, op_name(op) << " emitted no nodes");
  BOOST_TEST(parts.g.node(r).meta.str() == whole.g.node(c).meta.str(), op_name(op));
  BOOST_TEST((parts.g.node(r).meta == whole.g.node(c).meta), op_name(op));
  for (const Node& n : parts.g.nodes())
    BOOST_TEST((op_def(n.op).decompose == nullptr), op_name(op) << " left a composite " << op_name(n.op));
  parts.g.set_outputs({r});
  return parts.g.str();
}

// Inputs of the given metas.
MakeInputs inputs(std::vector<std::pair<D, SymShape>> specs) {
  return [specs](G& t) {
    std::vector<NodeId> ids;
    for (const auto& [d, s] : specs) ids.push_back(t.in(d, s));
    return ids;
  };
}

int count(const std::string& listing, const std::string& op) {
  int n = 0;
  for (size_t at = listing.find(" = " + op + "("); at != std::string::npos;
       at = listing.find(" = " + op + "(", at + 1))
    ++n;
  return n;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(decompose)

BOOST_AUTO_TEST_CASE(transpose_becomes_permute) {
  const std::string s = check_decomposes(OpId::transpose, inputs({{D::f32, {2, 3, 4}}}), {int64_t{2}, int64_t{0}});
  BOOST_TEST(count(s, "permute") == 1, s);
  BOOST_TEST(kiln_test::contains(s, "dims=[2, 1, 0]"), s);
  check_decomposes(OpId::transpose, inputs({{D::i32, {5}}}), {int64_t{0}, int64_t{0}});
}

BOOST_AUTO_TEST_CASE(flatten_becomes_reshape) {
  const std::string s = check_decomposes(OpId::flatten, inputs({{D::f32, {2, 3, 4}}}), {int64_t{1}, int64_t{2}});
  BOOST_TEST(count(s, "reshape") == 1, s);
  check_decomposes(OpId::flatten, inputs({{D::f32, {2, 3, 4}}}), {int64_t{0}, int64_t{2}});
  check_decomposes(OpId::flatten, inputs({{D::f32, {}}}), {int64_t{0}, int64_t{0}});
  check_decomposes(OpId::flatten, inputs({{D::f32, {2, 0, 4}}}), {int64_t{0}, int64_t{1}});
}

BOOST_AUTO_TEST_CASE(softmax_and_log_softmax) {
  for (OpId op : {OpId::softmax, OpId::log_softmax}) {
    const std::string s = check_decomposes(op, inputs({{D::f32, {2, 5}}}), {int64_t{1}});
    BOOST_TEST(count(s, "max") == 1, s);
    BOOST_TEST(count(s, "exp") == 1, s);
    BOOST_TEST(count(s, "sum") == 1, s);
    check_decomposes(op, inputs({{D::f16, {3, 4, 5}}}), {int64_t{0}});
    const std::string i = check_decomposes(op, inputs({{D::i32, {4}}}), {int64_t{0}});
    BOOST_TEST(count(i, "cast") == 1, i);
    // An empty dim has no max; the result is empty either way.
    const std::string e = check_decomposes(op, inputs({{D::f32, {3, 0}}}), {int64_t{1}});
    BOOST_TEST(count(e, "max") == 0, e);
    check_decomposes(op, inputs({{D::f32, {0, 3}}}), {int64_t{1}});
  }
}

BOOST_AUTO_TEST_CASE(logsumexp) {
  for (bool keepdim : {false, true}) {
    check_decomposes(OpId::logsumexp, inputs({{D::f32, {2, 3, 4}}}), {dims({1}), keepdim});
    check_decomposes(OpId::logsumexp, inputs({{D::f32, {2, 3, 4}}}), {dims({0, 2}), keepdim});
    check_decomposes(OpId::logsumexp, inputs({{D::bf16, {2, 3}}}), {dims({}), keepdim});
    check_decomposes(OpId::logsumexp, inputs({{D::i64, {6}}}), {dims({0}), keepdim});
    check_decomposes(OpId::logsumexp, inputs({{D::f32, {}}}), {dims({}), keepdim});
    check_decomposes(OpId::logsumexp, inputs({{D::f32, {0, 3}}}), {dims({0}), keepdim});
  }
  const std::string s = check_decomposes(OpId::logsumexp, inputs({{D::f32, {2, 3}}}), {dims({1}), false});
  BOOST_TEST(count(s, "where") == 1, s);  // the guard against an infinite max
  BOOST_TEST(count(s, "squeeze") == 1, s);
}

BOOST_AUTO_TEST_CASE(layer_norm) {
  const Attrs a{int64_t{1}, 1e-5};
  const std::string s = check_decomposes(OpId::layer_norm, inputs({{D::f32, {2, 8}}}), a);
  BOOST_TEST(count(s, "mean") == 1, s);
  BOOST_TEST(count(s, "var") == 1, s);
  BOOST_TEST(kiln_test::contains(s, "correction=0"), s);
  BOOST_TEST(count(s, "rsqrt") == 1, s);
  check_decomposes(OpId::layer_norm, inputs({{D::f32, {2, 8}}, {D::f32, {8}}}), a);
  check_decomposes(OpId::layer_norm, inputs({{D::f16, {2, 3, 8}}, {D::f16, {3, 8}}, {D::f16, {3, 8}}}),
                   {int64_t{2}, 1e-6});
  check_decomposes(OpId::layer_norm, inputs({{D::f16, {2, 8}}, {D::f32, {8}}, {D::bf16, {8}}}), a);
  check_decomposes(OpId::layer_norm, inputs({{D::i32, {2, 8}}, {D::f16, {8}}}), a);
  check_decomposes(OpId::layer_norm, inputs({{D::f32, {2, 1}}, {D::f32, {1}}}), a);
}

BOOST_AUTO_TEST_CASE(rms_norm) {
  const Attrs a{int64_t{1}, 1e-6};
  const std::string s = check_decomposes(OpId::rms_norm, inputs({{D::f32, {2, 8}}, {D::f32, {8}}}), a);
  BOOST_TEST(count(s, "mean") == 1, s);
  BOOST_TEST(count(s, "rsqrt") == 1, s);
  check_decomposes(OpId::rms_norm, inputs({{D::bf16, {4, 2, 8}}}), {int64_t{2}, 1e-6});
  check_decomposes(OpId::rms_norm, inputs({{D::i64, {8}}, {D::f16, {8}}}), a);
}

BOOST_AUTO_TEST_CASE(linear) {
  const std::string s = check_decomposes(OpId::linear, inputs({{D::f32, {4, 3}}, {D::f32, {5, 3}}, {D::f32, {5}}}), {});
  BOOST_TEST(count(s, "permute") == 1, s);
  BOOST_TEST(count(s, "matmul") == 1, s);
  BOOST_TEST(count(s, "add") == 1, s);
  check_decomposes(OpId::linear, inputs({{D::f32, {2, 7, 3}}, {D::f32, {5, 3}}}), {});
  check_decomposes(OpId::linear, inputs({{D::f16, {3}}, {D::f16, {5, 3}}, {D::f16, {5}}}), {});
  check_decomposes(OpId::linear, inputs({{D::i32, {2, 3}}, {D::f16, {5, 3}}, {D::f32, {5}}}), {});
}

BOOST_AUTO_TEST_CASE(with_symbolic_sizes) {
  // Each graph gets the same symbols, in the same order, so s0 and s1 mean the same.
  auto sym_inputs = [](D dt, int extra) {
    return [dt, extra](G& t) {
      const SymInt s0 = t.sym(6);
      const SymInt s1 = t.sym(3);
      std::vector<NodeId> ids{t.in(dt, {s0, s1, 8})};
      if (extra >= 1) ids.push_back(t.in(dt, {8}));
      if (extra >= 2) ids.push_back(t.in(dt, {8}));
      return ids;
    };
  };
  check_decomposes(OpId::softmax, sym_inputs(D::f32, 0), {int64_t{1}});
  check_decomposes(OpId::log_softmax, sym_inputs(D::f32, 0), {int64_t{0}});
  check_decomposes(OpId::logsumexp, sym_inputs(D::f32, 0), {dims({0, 1}), false});
  check_decomposes(OpId::layer_norm, sym_inputs(D::f32, 2), {int64_t{1}, 1e-5});
  check_decomposes(OpId::rms_norm, sym_inputs(D::f32, 1), {int64_t{1}, 1e-5});
  check_decomposes(OpId::flatten, sym_inputs(D::f32, 0), {int64_t{0}, int64_t{1}});
  check_decomposes(OpId::flatten, sym_inputs(D::f32, 0), {int64_t{0}, int64_t{2}});
  check_decomposes(OpId::transpose, sym_inputs(D::f32, 0), {int64_t{0}, int64_t{1}});
  check_decomposes(OpId::linear,
                   [](G& t) {
                     const SymInt s0 = t.sym(6);
                     return std::vector<NodeId>{t.in(D::f32, {s0, 8}), t.in(D::f32, {4, 8}), t.in(D::f32, {4})};
                   },
                   {});
}

BOOST_AUTO_TEST_CASE(on_a_gpu) {
  auto gpu = [](G& t) {
    return std::vector<NodeId>{t.g.add_input(kiln_test::meta(D::f32, {2, 8}, Device::cuda(0))),
                               t.g.add_input(kiln_test::meta(D::f32, {8}, Device::cuda(0)))};
  };
  check_decomposes(OpId::layer_norm, gpu, {int64_t{1}, 1e-5});
  check_decomposes(OpId::rms_norm, gpu, {int64_t{1}, 1e-5});
  auto one = [](G& t) { return std::vector<NodeId>{t.g.add_input(kiln_test::meta(D::f32, {2, 8}, Device::cuda(0)))}; };
  check_decomposes(OpId::logsumexp, one, {dims({1}), false});
  check_decomposes(OpId::softmax, one, {int64_t{1}});
  // The mask of iotas is generated in the graph: it takes the input's device.
  check_decomposes(OpId::tril, one, {int64_t{0}});
  check_decomposes(OpId::triu, one, {int64_t{-1}});
}

BOOST_AUTO_TEST_SUITE_END()
