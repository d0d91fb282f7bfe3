// A cpu plan edited where validation cannot see it (issue 31; a plan run with --trust-plan, or a
// cache entry): the launch extent and a kernel's signature. A kernel bounds its range by the
// extent it computes from the sizes itself, so a larger launch extent reaches no further and the
// outputs are those of the plan as made; a kernel whose function type is not the one the runtime
// calls it with is refused when the plan loads, not called.
#include <limits>
#include <random>

#include "harness.h"
#include "kiln/cpu/executable.h"
#include "kiln/graph/error.h"

using namespace cpu_test;

BOOST_AUTO_TEST_SUITE(plan_edits)

BOOST_AUTO_TEST_CASE(a_larger_launch_extent_reaches_no_further) {
  // A pointwise kernel, a row reduction and a gemm with its epilogue, over a symbolic batch.
  Graph g;
  const SymInt s0 = g.shapes().create_symbol(6, 2, std::numeric_limits<int64_t>::max(), "batch", false);
  const NodeId x = g.add_input(TensorMeta{DType::f32, Device::cpu(), {s0, 48}, {}}, "x");
  const NodeId w = g.add_input(TensorMeta{DType::f32, Device::cpu(), {48, 32}, {}}, "w");
  const NodeId h = g.add(OpId::tanh, {g.add(OpId::matmul, {g.add(OpId::exp, {g.add(OpId::neg, {x})}), w})});
  g.set_outputs({h, g.add(OpId::sum, {h}, Attrs{std::vector<int64_t>{1}, false})});
  const Compiled c = compile(g);
  BOOST_REQUIRE_MESSAGE(c.error.empty(), c.error);
  if (target().name != "cpu" || !c.exe) return;
  plan::KernelPlan edited = c.plan;
  int generated = 0;
  for (plan::PlanKernel& k : edited.kernels)
    if (!k.source.empty()) k.parallel_extent = k.parallel_extent * SymInt(64), ++generated;
  BOOST_REQUIRE(generated >= 2);
  const std::shared_ptr<cpu::PlanExecutable> exe = cpu::PlanExecutable::load(edited);
  std::mt19937_64 rng(5);
  for (const int64_t batch : {6, 3}) {
    const std::vector<TensorData> in{tensor(DType::f32, {batch, 48}, random_values(DType::f32, batch * 48, Domain::normal, rng)),
                                     tensor(DType::f32, {48, 32}, random_values(DType::f32, 48 * 32, Domain::normal, rng))};
    const std::vector<TensorData> want = c.exe->run(in), got = exe->run(in);
    BOOST_REQUIRE_EQUAL(got.size(), want.size());
    for (size_t o = 0; o < got.size(); ++o)
      BOOST_TEST(elements(got[o]) == elements(want[o]), boost::test_tools::per_element());
  }
}

BOOST_AUTO_TEST_CASE(a_kernel_of_another_signature_is_refused) {
  Graph g;
  const NodeId x = g.add_input(TensorMeta{DType::f32, Device::cpu(), {4, 64}, {}}, "x");
  g.set_outputs({g.add(OpId::exp, {x})});
  const Compiled c = compile(g);
  BOOST_REQUIRE_MESSAGE(c.error.empty(), c.error);
  if (target().name != "cpu") return;
  plan::KernelPlan edited = c.plan;
  plan::PlanKernel& k = edited.kernels.at(0);
  const std::string params = "(ptr noalias %buffers, ptr noalias %sizes, i64 %begin, i64 %end.arg)";
  const size_t at = k.source.find(params);
  BOOST_REQUIRE(at != std::string::npos);
  // The same body with the range's end taken as an i32: the runtime would pass an i64.
  k.source.replace(at, params.size(), "(ptr noalias %buffers, ptr noalias %sizes, i64 %begin, i32 %end.narrow)");
  k.source.insert(k.source.find("entry:\n") + 7, "  %end.arg = sext i32 %end.narrow to i64\n");
  std::string message;
  try {
    cpu::PlanExecutable::load(edited);
  } catch (const kiln::Error& e) {
    message = e.what();
  }
  BOOST_TEST(message.find("has type void (ptr, ptr, i64, i32), not the kernel signature void (ptr, ptr, i64, i64)") !=
                 std::string::npos,
             message);
}

BOOST_AUTO_TEST_SUITE_END()
