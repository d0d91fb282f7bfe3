// plan::kernels_of_nodes and plan::kernel_costs on a plan written by hand over a small graph:
// a matmul kernel, then a kernel that reduces the product's bias-added relu (the add and the
// relu computed inline, in no provenance), at a size symbol's example value.
#include <boost/test/unit_test.hpp>

#include "kiln/plan/cost.h"

using namespace kiln;

namespace {

struct Fixture {
  Graph g;
  plan::KernelPlan p;
  NodeId x, w, b, mm, add, relu, sum;
  Fixture() {
    const SymInt s0 = g.shapes().create_symbol(64, 2, int64_t{1} << 20, "input 0 (x) dim 0", true);
    x = g.add_input(TensorMeta{DType::f32, Device::cpu(), {s0, 128}, {}}, "x");
    w = g.add_input(TensorMeta{DType::f32, Device::cpu(), {128, 32}, {}}, "w");
    b = g.add_input(TensorMeta{DType::f32, Device::cpu(), {32}, {}}, "b");
    mm = g.add(OpId::matmul, {x, w});
    add = g.add(OpId::add, {mm, b});
    relu = g.add(OpId::relu, {add});
    sum = g.add(OpId::sum, {relu}, {std::vector<int64_t>{1}, false});
    g.set_outputs({sum});
    p.symbols = g.shapes().symbols();
    const auto buffer = [&](const char* kind, DType t, SymShape sizes) {
      plan::PlanBuffer buf;
      buf.id = static_cast<int32_t>(p.buffers.size());
      buf.kind = kind;
      buf.dtype = t;
      buf.sizes = std::move(sizes);
      p.buffers.push_back(buf);
      return buf.id;
    };
    const int32_t bx = buffer("input", DType::f32, {s0, 128}), bw = buffer("input", DType::f32, {128, 32}),
                  bb = buffer("input", DType::f32, {32}), bmm = buffer("intermediate", DType::f32, {s0, 32}),
                  bout = buffer("output", DType::f32, {s0});
    plan::PlanKernel k0, k1;
    k0.name = "k0";
    k0.kind = "matmul";
    k0.provenance = {mm};
    k0.reads = {bx, bw};
    k0.writes = {bmm};
    k1.name = "k1";
    k1.kind = "reduction";
    k1.provenance = {sum};
    k1.reads = {bmm, bb};
    k1.writes = {bout};
    p.kernels = {k0, k1};
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(kernel_cost)

BOOST_FIXTURE_TEST_CASE(inline_elementwise_ops_belong_to_the_kernels_of_their_users, Fixture) {
  const std::vector<std::vector<int>> of = plan::kernels_of_nodes(p, g);
  BOOST_TEST(of[static_cast<size_t>(mm)] == std::vector<int>{0});
  BOOST_TEST(of[static_cast<size_t>(add)] == std::vector<int>{1});
  BOOST_TEST(of[static_cast<size_t>(relu)] == std::vector<int>{1});
  BOOST_TEST(of[static_cast<size_t>(sum)] == std::vector<int>{1});
  BOOST_TEST(of[static_cast<size_t>(x)].empty());  // inputs: computed by no kernel
}

BOOST_FIXTURE_TEST_CASE(bytes_and_flops_at_the_example_sizes, Fixture) {
  const std::vector<plan::KernelCost> c = plan::kernel_costs(p, g);
  BOOST_TEST_REQUIRE(c.size() == 2u);
  // x [64, 128] @ w [128, 32]: 2·64·32·128; reads x and w, writes the product.
  BOOST_TEST(c[0].flops == 2.0 * 64 * 32 * 128);
  BOOST_TEST(c[0].bytes == 4.0 * (64 * 128 + 128 * 32 + 64 * 32));
  // add, relu: one per element of [64, 32]; sum: one per input element.
  BOOST_TEST(c[1].flops == 3.0 * 64 * 32);
  BOOST_TEST(c[1].bytes == 4.0 * (64 * 32 + 32 + 64));
  BOOST_TEST(c[0].intensity() == c[0].flops / c[0].bytes);
  // At another example size the costs follow the symbol.
  p.symbols[0].example = 8;
  const std::vector<plan::KernelCost> small = plan::kernel_costs(p, g);
  BOOST_TEST(small[0].flops == 2.0 * 8 * 32 * 128);
  BOOST_TEST(small[1].bytes == 4.0 * (8 * 32 + 32 + 8));
}

BOOST_AUTO_TEST_CASE(a_plan_without_kernels_costs_nothing) {
  const std::vector<plan::KernelCost> c = plan::kernel_costs(plan::KernelPlan{}, Graph{});
  BOOST_TEST(c.empty());
  BOOST_TEST(plan::KernelCost{}.intensity() == 0.0);
}

BOOST_AUTO_TEST_SUITE_END()
