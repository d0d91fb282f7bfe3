// cpu.vector_width: every kernel prefers the width asked for, and computes the same results
// (pointwise, row and column reductions, softmax's kept values, and both gemm paths) against
// the reference at each width.
#include <kiln/config/config.h>

#include "op_cases.h"

using namespace cpu_test;

BOOST_AUTO_TEST_SUITE(vector_width)

BOOST_AUTO_TEST_CASE(each_width_matches_the_reference) {
  for (int64_t width : {128, 256, 512}) {
    const config::Patch w{{"cpu.vector_width", width}};
    for (OpId op : {OpId::add, OpId::exp, OpId::sum, OpId::max, OpId::softmax, OpId::layer_norm, OpId::matmul}) {
      int cases = 0;
      for (const Batch& b : op_case_table().at(op)(op)) {
        if (b.cases.empty() || b.cases[0].args.empty() || b.cases[0].args[0].dtype != DType::f32) continue;
        cases += run_batch(b, 3 + static_cast<uint64_t>(op)).cases;
      }
      BOOST_TEST(cases > 0, op_name(op) << " at " << width << " bits: no f32 case ran");
    }
  }
}

BOOST_AUTO_TEST_CASE(kernels_carry_the_width) {
  Graph g;
  const NodeId x = g.add_input(TensorMeta{DType::f32, Device::cpu(), {8, 40}, {}}, "x");
  g.set_outputs({g.add(OpId::softmax, {g.add(OpId::exp, {x}, {})}, {int64_t{1}}), g.add(OpId::tanh, {x}, {})});
  for (const auto& [width, group] : {std::pair{128, "#3"}, std::pair{256, "#1"}, std::pair{512, "#2"}}) {
    const config::Patch w{{"cpu.vector_width", int64_t{width}}};
    const Compiled c = compile(g, {});
    BOOST_REQUIRE(c.error.empty());
    BOOST_REQUIRE(!c.plan.kernels.empty());
    for (const plan::PlanKernel& k : c.plan.kernels)
      BOOST_TEST(k.source.find("i64 %end.arg) " + std::string(group) + " {") != std::string::npos,
                 "kernel " << k.name << " at " << width << " bits");
  }
}

BOOST_AUTO_TEST_SUITE_END()
