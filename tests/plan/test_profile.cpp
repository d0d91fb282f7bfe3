// plan::KernelProfile (KILN_LOGS=profile): medians over the calls after the first, kernels by
// time with kind and share, the rest summed past `top`, totals per kind, and when a report is due.
#include <boost/test/unit_test.hpp>

#include "kiln/plan/profile.h"
#include "kiln_test_util.h"

using namespace kiln;
using kiln_test_util::contains;
using kiln_test_util::error_of;

namespace {

plan::KernelPlan three_kernels() {
  plan::KernelPlan p;
  for (const char* kind : {"pointwise", "matmul", "reduction"}) {
    plan::PlanKernel k;
    k.name = std::string("k") + std::to_string(p.kernels.size()) + "_" + kind;
    k.kind = kind;
    p.kernels.push_back(k);
  }
  return p;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(kernel_profile)

BOOST_AUTO_TEST_CASE(medians_leave_out_the_first_call_and_sort_by_time) {
  const plan::KernelPlan p = three_kernels();
  plan::KernelProfile prof(3);
  const std::vector<std::vector<double>> calls{{10, 1, 5}, {1, 2, 3}, {1, 4, 3}, {1, 2, 9}};
  std::vector<bool> due;
  for (const auto& c : calls) {
    prof.add_call(c);
    due.push_back(prof.report_due());
  }
  BOOST_TEST((due == std::vector<bool>{false, false, false, true}));
  BOOST_TEST(prof.calls() == 4);
  const std::string r = prof.report(p, "cuda:0 (test)");
  // Medians over calls 2-4: k0 1, k1 2, k2 3 (6 in all), so k2 first, k0 last.
  BOOST_TEST(contains(r, "3 kernels on cuda:0 (test), 6.000 ms in all (sum of per-kernel medians over calls 2-4)"), r);
  const size_t k2 = r.find("k2_reduction"), k1 = r.find("k1_matmul"), k0 = r.find("k0_pointwise");
  BOOST_TEST((k2 < k1 && k1 < k0 && k0 != std::string::npos), r);
  BOOST_TEST(contains(r, "   3.000  50.0%   1    3.0000  reduction             k2_reduction: over 1\n"), r);
  BOOST_TEST(contains(r, "by kind:"), r);
  BOOST_TEST(contains(r, "   2.000  33.3%  matmul                1 kernels"), r);
}

BOOST_AUTO_TEST_CASE(kernels_past_top_are_summed_and_library_gemms_named) {
  plan::KernelPlan p = three_kernels();
  p.kernels[1].gemm = plan::PlanGemm{};
  plan::KernelProfile prof(3);
  prof.add_call(std::vector<double>{1, 2, 3});
  const std::string r = prof.report(p, "cpu", 2);
  BOOST_TEST(contains(r, "over calls 1-1"), r);  // one call: nothing to leave out
  BOOST_TEST(contains(r, "   1.000  16.7%  (1 more kernels)"), r);
  BOOST_TEST(contains(r, "matmul (library)"), r);
  BOOST_TEST(contains(r, "k1_matmul: gemm 0x0x0 f32\n"), r);
}

BOOST_AUTO_TEST_CASE(kernels_doing_the_same_work_are_one_row) {
  plan::KernelPlan p;
  for (const char* name : {"k0", "k1", "k2"}) {
    plan::PlanKernel k;
    k.name = k.entry = name;
    k.kind = "pointwise";
    k.parallel_extent = 64;
    // k0 and k1 differ only by their names; k2 computes something else.
    k.source = std::string("void ") + name + "(float* x) { x[i] = " + (k.name == "k2" ? "2" : "1") + "; }";
    p.kernels.push_back(k);
  }
  plan::KernelProfile prof(3);
  prof.add_call(std::vector<double>{1, 2, 2.5});
  const std::string r = prof.report(p, "cpu");
  BOOST_TEST(contains(r, "   3.000  54.5%   2    1.5000  pointwise             k0: over 64\n"), r);
  BOOST_TEST(contains(r, "   2.500  45.5%   1    2.5000  pointwise             k2: over 64\n"), r);
  BOOST_TEST(!contains(r, "k1:"), r);
}

BOOST_AUTO_TEST_CASE(a_call_of_another_plan_is_an_error) {
  plan::KernelProfile prof(3);
  const std::string e = error_of([&] { prof.add_call(std::vector<double>{1, 2}); });
  BOOST_TEST(contains(e, "a call timed 2 kernels; the plan has 3"), e);
  BOOST_TEST(prof.calls() == 0);
  const std::string f = error_of([&] { (void)prof.report(plan::KernelPlan{}, "cpu"); });
  BOOST_TEST(contains(f, "the plan has 0 kernels; the profile 3"), f);
}

BOOST_AUTO_TEST_SUITE_END()
