// values_reused_across_passes: which per-row values a target may keep between the passes of a
// reduction kernel instead of recomputing them.
#include <kiln/graph/graph.h>
#include <kiln/schedule/schedule.h>

#include <boost/test/unit_test.hpp>

using namespace kiln;
using schedule::InstrKind;

namespace {

TensorMeta f32(SymShape s) { return TensorMeta{DType::f32, Device::cpu(), std::move(s), {}}; }

// The one kernel a graph schedules to.
schedule::Kernel only_kernel(const Graph& g) {
  schedule::Schedule s = schedule::schedule_graph(g);
  BOOST_REQUIRE_EQUAL(s.kernels.size(), 1u);
  return s.kernels[0];
}

std::vector<std::string> ops_of(const schedule::Kernel& k, const std::vector<int32_t>& instrs) {
  std::vector<std::string> r;
  for (int32_t i : instrs) {
    BOOST_REQUIRE(k.instrs[static_cast<size_t>(i)].kind == InstrKind::pointwise);
    r.emplace_back(op_name(k.instrs[static_cast<size_t>(i)].op));
  }
  return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(reused_across_passes)

BOOST_AUTO_TEST_CASE(softmax_keeps_its_exp) {
  Graph g;
  const NodeId x = g.add_input(f32({6, 1000}), "x");
  g.set_outputs({g.add(OpId::softmax, {x}, {int64_t{1}})});
  const schedule::Kernel k = only_kernel(g);
  BOOST_TEST(k.num_passes() == 3);
  // exp(x - max) is summed in pass 1 and divided by the sum in pass 2.
  BOOST_TEST(ops_of(k, schedule::values_reused_across_passes(k, 4)) == std::vector<std::string>{"exp"},
             boost::test_tools::per_element());
  // Below exp's cost nothing changes; above it (exp + sub = 5) nothing is worth keeping.
  BOOST_TEST(ops_of(k, schedule::values_reused_across_passes(k, 5)) == std::vector<std::string>{"exp"},
             boost::test_tools::per_element());
  BOOST_TEST(schedule::values_reused_across_passes(k, 6).empty());
}

BOOST_AUTO_TEST_CASE(cheap_values_are_recomputed_and_their_operands_looked_at) {
  // layer_norm: x - mean is read by the variance's pass and by the output's; it costs 1.
  Graph g;
  const NodeId x = g.add_input(f32({8, 64}), "x");
  const NodeId w = g.add_input(f32({64}), "w");
  const NodeId b = g.add_input(f32({64}), "b");
  g.set_outputs({g.add(OpId::layer_norm, {x, w, b}, {int64_t{1}, 1e-5})});
  const schedule::Kernel k = only_kernel(g);
  BOOST_TEST(schedule::values_reused_across_passes(k, 4).empty());
  BOOST_TEST(ops_of(k, schedule::values_reused_across_passes(k, 1)) == std::vector<std::string>{"sub"},
             boost::test_tools::per_element());

  // exp(x) * 2 (cost 5) reused by a later pass is kept whole, not its exp alone.
  Graph h;
  const NodeId y = h.add_input(f32({8, 64}), "y");
  const NodeId e = h.add(OpId::mul, {h.add(OpId::exp, {y}, {}), h.add(OpId::full, {}, {SymShape{}, 2.0, DType::f32})}, {});
  const NodeId s = h.add(OpId::sum, {e}, {std::vector<int64_t>{1}, true});
  h.set_outputs({h.add(OpId::div, {e, s}, {})});
  const schedule::Kernel kh = only_kernel(h);
  BOOST_TEST(ops_of(kh, schedule::values_reused_across_passes(kh, 4)) == std::vector<std::string>{"mul"},
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(single_pass_kernels_keep_nothing) {
  Graph g;
  const NodeId x = g.add_input(f32({16, 32}), "x");
  const NodeId e = g.add(OpId::exp, {x}, {});
  g.set_outputs({g.add(OpId::sum, {e}, {std::vector<int64_t>{1}, false}), g.add(OpId::tanh, {e}, {})});
  for (const schedule::Kernel& k : schedule::schedule_graph(g).kernels)
    BOOST_TEST(schedule::values_reused_across_passes(k, 1).empty(), "kernel " << k.name);
}

BOOST_AUTO_TEST_SUITE_END()
