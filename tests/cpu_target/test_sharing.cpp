// Kernels alike but for their buffers (a model's repeated layers) share one function: the later
// ones get the first one's entry, variants and source, and the runtime compiles it once and calls
// it with each kernel's own buffers. Only where their buffers sort alike by id (bindings are in id
// order): the first layer, which reads a graph input (ids first), and the last, which writes the
// graph output (ids before intermediates), keep functions of their own. Pointwise rows are parallel loops (an output written in its
// input's slot still vectorises).
#include <random>

#include "harness.h"

using namespace cpu_test;

namespace {

TensorMeta f32(std::vector<int64_t> sizes) {
  SymShape s;
  for (int64_t d : sizes) s.push_back(d);
  return TensorMeta{DType::f32, Device::cpu(), s, {}};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(sharing)

BOOST_AUTO_TEST_CASE(repeated_layers_share_one_function_and_bind_their_own_buffers) {
  // Four layers x = tanh(x @ w_i) + x, alike but for their weights.
  Graph g;
  NodeId x = g.add_input(f32({8, 16}), "x");
  std::vector<NodeId> ws;
  for (int i = 0; i < 4; ++i) ws.push_back(g.add_input(f32({16, 16}), "w" + std::to_string(i)));
  for (NodeId w : ws) x = g.add(OpId::add, {g.add(OpId::tanh, {g.add(OpId::matmul, {x, w})}), x});
  g.set_outputs({x});
  const Compiled c = compile(g);
  BOOST_REQUIRE(c.error.empty());

  std::vector<const plan::PlanKernel*> matmuls;
  for (const plan::PlanKernel& k : c.plan.kernels)
    if (k.kind == "matmul") matmuls.push_back(&k);
  BOOST_REQUIRE(matmuls.size() == 4u);
  // The middle layers: one function, each its own buffers.
  BOOST_TEST(matmuls[2]->entry == matmuls[1]->entry);
  BOOST_TEST(matmuls[2]->source == matmuls[1]->source);
  BOOST_TEST(matmuls[2]->name != matmuls[1]->name);
  BOOST_TEST(plan::kernel_bindings(*matmuls[2]) != plan::kernel_bindings(*matmuls[1]));
  // The first reads the graph input x, whose id sorts before its weight's: a function of its own.
  BOOST_TEST(matmuls[0]->entry != matmuls[1]->entry);

  std::mt19937_64 rng(3);
  std::vector<TensorData> inputs{tensor(DType::f32, {8, 16}, random_values(DType::f32, 128, Domain::normal, rng))};
  for (int i = 0; i < 4; ++i) inputs.push_back(tensor(DType::f32, {16, 16}, random_values(DType::f32, 256, Domain::normal, rng)));
  const std::string details = run_and_compare(c, inputs, {tolerance_for(DType::f32, true)});
  BOOST_TEST(details.empty(), failure_report("shared layers vs reference", g, inputs, {}, details));
}

BOOST_AUTO_TEST_CASE(pointwise_rows_are_parallel_loops) {
  Graph g;
  const NodeId x = g.add_input(f32({4, 64}), "x");
  g.set_outputs({g.add(OpId::exp, {g.add(OpId::neg, {x})})});
  const Compiled c = compile(g);
  BOOST_REQUIRE(c.error.empty());
  std::string all;
  for (const plan::PlanKernel& k : c.plan.kernels) all += k.source;
  BOOST_TEST(all.find("llvm.loop.parallel_accesses") != std::string::npos);
  BOOST_TEST(all.find("!llvm.access.group") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
