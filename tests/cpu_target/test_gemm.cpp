// The generated gemm (cpu.matmul = generated: register tiles instead of the BLAS call) on every
// matmul, linear and attention-shaped case of the op tests, against the reference: the same
// cases test_ops runs through the BLAS. Shapes cover every tile remainder (rows mod 4, columns
// mod 32), batches with broadcast operands, transposed and strided operands, and 1-row /
// 1-column products.
#include <kiln/config/config.h>

#include "op_cases.h"

using namespace cpu_test;

BOOST_AUTO_TEST_SUITE(generated_gemm)

BOOST_AUTO_TEST_CASE(matmul_cases_match_the_reference) {
  const config::Patch generated{{"cpu.matmul", "generated"}};
  for (OpId op : {OpId::matmul, OpId::linear, OpId::softmax}) {
    int cases = 0, failures = 0;
    for (const Batch& b : op_case_table().at(op)(op)) {
      const BatchStats st = run_batch(b, 7 + static_cast<uint64_t>(op));
      cases += st.cases;
      failures += st.failures;
    }
    BOOST_TEST(cases > 0, op_name(op) << ": no case ran");
    BOOST_TEST_MESSAGE(op_name(op) << " with the generated gemm: " << cases << " cases, " << failures << " failing");
  }
}

BOOST_AUTO_TEST_CASE(every_tile_remainder) {
  const config::Patch generated{{"cpu.matmul", "generated"}};
  const Batch b = matmul_shape_cases("generated gemm remainders", {1, 2, 3, 4, 5, 7, 9}, {1, 15, 16, 17, 31, 32, 33, 70});
  const BatchStats st = run_batch(b, 11);
  BOOST_TEST(st.cases == 56);

  // The plan multiplies with the tiles, not the BLAS; with cpu.matmul = blas, the other way round.
  Graph g;
  const NodeId x = g.add_input(TensorMeta{DType::f32, Device::cpu(), {9, 5}, {}}, "x");
  const NodeId w = g.add_input(TensorMeta{DType::f32, Device::cpu(), {5, 33}, {}}, "w");
  g.set_outputs({g.add(OpId::matmul, {x, w})});
  auto source = [&] {
    const Compiled c = compile(g, {});
    BOOST_REQUIRE(c.error.empty());
    std::string all;
    for (const plan::PlanKernel& k : c.plan.kernels) all += k.source;
    return all;
  };
  const std::string tiled = source();
  BOOST_TEST(tiled.find("@llvm.fmuladd.v16f32") != std::string::npos);
  BOOST_TEST(tiled.find("call void @kiln_sgemm") == std::string::npos);
  const config::Patch blas{{"cpu.matmul", "blas"}};
  const std::string called = source();
  BOOST_TEST(called.find("call void @kiln_sgemm") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
