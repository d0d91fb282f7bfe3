// plan::KernelProfile (KILN_LOGS=profile): medians over the calls after the first, kernels by
// time with kind and share, the rest summed past `top`, totals per kind, and when a report is due;
// its kiln.profile JSON (kiln run --profile): every kernel in plan order.
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

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
  plan::KernelProfile prof(3, "cuda:0 (test)");
  const std::vector<std::vector<double>> calls{{10, 1, 5}, {1, 2, 3}, {1, 4, 3}, {1, 2, 9}};
  std::vector<bool> due;
  for (const auto& c : calls) {
    prof.add_call(c);
    due.push_back(prof.report_due());
  }
  BOOST_TEST((due == std::vector<bool>{false, false, false, true}));
  BOOST_TEST(prof.calls() == 4);
  const std::string r = prof.report(p);
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
  plan::KernelProfile prof(3, "cpu");
  prof.add_call(std::vector<double>{1, 2, 3});
  const std::string r = prof.report(p, 2);
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
  plan::KernelProfile prof(3, "cpu");
  prof.add_call(std::vector<double>{1, 2, 2.5});
  const std::string r = prof.report(p);
  BOOST_TEST(contains(r, "   3.000  54.5%   2    1.5000  pointwise             k0: over 64\n"), r);
  BOOST_TEST(contains(r, "   2.500  45.5%   1    2.5000  pointwise             k2: over 64\n"), r);
  BOOST_TEST(!contains(r, "k1:"), r);
}

BOOST_AUTO_TEST_CASE(a_call_of_another_plan_is_an_error) {
  plan::KernelProfile prof(3, "cpu");
  const std::string e = error_of([&] { prof.add_call(std::vector<double>{1, 2}); });
  BOOST_TEST(contains(e, "a call timed 2 kernels; the plan has 3"), e);
  BOOST_TEST(prof.calls() == 0);
  const std::string f = error_of([&] { (void)prof.report(plan::KernelPlan{}); });
  BOOST_TEST(contains(f, "the plan has 0 kernels; the profile 3"), f);
  const std::string g = error_of([&] { (void)prof.to_json(plan::KernelPlan{}); });
  BOOST_TEST(contains(g, "the plan has 0 kernels; the profile 3"), g);
}

BOOST_AUTO_TEST_CASE(json_has_every_kernel_in_plan_order) {
  plan::KernelPlan p = three_kernels();
  p.target = "cuda";
  p.kernels[1].gemm = plan::PlanGemm{};  // a library gemm keeps the plan's kind
  p.kernels[2].provenance = {4, 7};
  plan::KernelProfile prof(3, "cuda:0 (test)");
  for (const std::vector<double>& c : std::vector<std::vector<double>>{{10, 1, 5}, {1, 2, 3}, {1, 4, 3}, {1, 2, 9}})
    prof.add_call(c);
  const std::string text = prof.to_json(p);
  const nlohmann::json j = nlohmann::json::parse(text);
  BOOST_TEST(j["format"] == "kiln.profile");
  BOOST_TEST(j["version"] == 1);
  BOOST_TEST(j["target"] == "cuda");
  BOOST_TEST(j["device"] == "cuda:0 (test)");
  BOOST_TEST(j["calls"] == 4);
  BOOST_TEST(j["first_call_left_out"] == true);
  BOOST_TEST(j["kernel_count"] == 3);
  BOOST_TEST(!j.contains("plan_signature"));
  // Medians over calls 2-4 (k0 1, k1 2, k2 3), in plan order, not by time; mins over the same calls.
  const nlohmann::json& ks = j["kernels"];
  BOOST_TEST_REQUIRE(ks.size() == 3u);
  const std::vector<std::string> names{"k0_pointwise", "k1_matmul", "k2_reduction"};
  const std::vector<double> med{1, 2, 3}, mins{1, 2, 3}, share{1 / 6.0, 2 / 6.0, 3 / 6.0};
  for (size_t k = 0; k < 3; ++k) {
    BOOST_TEST(ks[k]["index"] == k);
    BOOST_TEST(ks[k]["name"] == names[k]);
    BOOST_TEST(ks[k]["median_ms"].get<double>() == med[k]);
    BOOST_TEST(ks[k]["min_ms"].get<double>() == mins[k]);
    BOOST_TEST(ks[k]["share"].get<double>() == share[k], boost::test_tools::tolerance(1e-12));
  }
  BOOST_TEST(ks[1]["kind"] == "matmul");
  BOOST_TEST(ks[2]["nodes"] == nlohmann::json::array({4, 7}));
  BOOST_TEST(ks[0]["nodes"] == nlohmann::json::array());
  BOOST_TEST(j["total_ms"].get<double>() == 6.0);
  // A signed plan's signature, for a reader to match the file to the plan.
  p.signature = std::string(64, 'a');
  BOOST_TEST(nlohmann::json::parse(prof.to_json(p))["plan_signature"] == p.signature);
}

BOOST_AUTO_TEST_CASE(json_of_one_call_keeps_it_and_of_none_is_an_error) {
  const plan::KernelPlan p = three_kernels();
  plan::KernelProfile prof(3, "cpu (2 threads)");
  const std::string e = error_of([&] { (void)prof.to_json(p); });
  BOOST_TEST(contains(e, "kernel profile on cpu (2 threads): no call of the plan's 3 kernels was timed"), e);
  prof.add_call(std::vector<double>{0.5, 0.25, 0.25});
  const nlohmann::json j = nlohmann::json::parse(prof.to_json(p));
  BOOST_TEST(j["first_call_left_out"] == false);
  BOOST_TEST(j["kernels"][0]["median_ms"].get<double>() == 0.5);
  BOOST_TEST(j["total_ms"].get<double>() == 1.0);
}

BOOST_AUTO_TEST_SUITE_END()
