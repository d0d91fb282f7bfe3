// The CUDA target's compile modes (cuda/executable.h): reduce-overhead replays a CUDA graph of the
// plan and updates its nodes when the call's addresses change; max-autotune times each kernel's
// launch configurations on the device and keeps the fastest; backend "cudagraphs" replays unfused
// kernels. Each must give what the default mode gives. Without a device: clear errors, and the
// runtime cases skip saying why.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <random>

#include "harness.h"
#include "kiln/cuda/codegen.h"
#include "kiln/cuda/device.h"
#include "kiln/cuda/executable.h"
#include "kiln/kiln.h"
#include "kiln/schedule/schedule.h"
#include "cuda_test_util.h"
#include "kiln_test_util.h"
#include "kiln_tensor_test_util.h"

using namespace kiln;
using cuda_test::have_device;
using kiln_test_util::contains;
using kiln_test_util::error_of;

namespace {

TensorData random_host(std::vector<int64_t> sizes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return cpu_test::tensor(DType::f32, std::move(sizes), cpu_test::random_values(DType::f32, n, cpu_test::Domain::normal, rng));
}

bool same_bits(const TensorData& a, const TensorData& b) {
  const TensorData x = a.device().type == DeviceType::cuda ? cuda::to_host(a) : a;
  const TensorData y = b.device().type == DeviceType::cuda ? cuda::to_host(b) : b;
  return x.sizes == y.sizes && x.numel() == y.numel() &&
         std::memcmp(x.data(), y.data(), static_cast<size_t>(x.numel() * dtype_size(x.dtype))) == 0;
}

// x [64, 96] @ w [96, 128] -> gelu(+ b) -> softmax over rows: a gemm, its epilogue and a row
// reduction (a child graph and kernel nodes).
cpu_test::Compiled gemm_softmax_plan() {
  Graph g;
  const NodeId x = g.add_input(TensorMeta{DType::f32, Device::cpu(), {64, 96}, {}}, "x");
  const NodeId w = g.add_input(TensorMeta{DType::f32, Device::cpu(), {96, 128}, {}}, "w");
  const NodeId b = g.add_input(TensorMeta{DType::f32, Device::cpu(), {128}, {}}, "b");
  const NodeId mm = g.add(OpId::matmul, {x, w});
  const NodeId h = g.add(OpId::gelu, {g.add(OpId::add, {mm, b})}, Attrs{std::string("none")});
  g.set_outputs({g.add(OpId::softmax, {h}, Attrs{int64_t{1}}), g.add(OpId::sin, {x})});
  return cpu_test::compile(g);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cuda_modes)

BOOST_AUTO_TEST_CASE(backend_cudagraphs_needs_cuda_inputs) {
  auto f = kiln::compile([](const Tensor& x) { return sin(x) * 2.0f; }, CompileOptions{.backend = "cudagraphs"});
  const std::string e = error_of([&] { f(ones({4})); });
  BOOST_TEST(contains(e, "cudagraphs"), e);
}

BOOST_AUTO_TEST_CASE(graph_replay_updates_addresses) {
  if (!have_device()) return;
  cpu_test::Compiled c = gemm_softmax_plan();
  BOOST_REQUIRE_MESSAGE(c.error.empty(), c.error);
  cuda::ExecutableOptions direct_o, graph_o;
  graph_o.cuda_graph = true;
  graph_o.keep_buffers = true;
  auto direct = cuda::PlanExecutable::load(c.plan, direct_o);
  auto graphed = cuda::PlanExecutable::load(c.plan, graph_o);
  // Two sets of device inputs at different addresses, and one on the host (copied each call).
  std::vector<std::vector<TensorData>> sets;
  for (uint64_t s : {1, 2}) {
    std::vector<TensorData> in = {random_host({64, 96}, s), random_host({96, 128}, s + 10), random_host({128}, s + 20)};
    for (TensorData& t : in) t = cuda::to_device(t, 0);
    sets.push_back(std::move(in));
  }
  sets.push_back({random_host({64, 96}, 5), random_host({96, 128}, 6), random_host({128}, 7)});
  const int order[] = {0, 0, 0, 1, 0, 2, 1, 1};
  for (int k : order) {
    const std::vector<TensorData> want = direct->run(sets[static_cast<size_t>(k)]);
    const std::vector<TensorData> got = graphed->run(sets[static_cast<size_t>(k)]);
    BOOST_REQUIRE_EQUAL(got.size(), want.size());
    for (size_t o = 0; o < got.size(); ++o) BOOST_TEST(same_bits(got[o], want[o]), "input set " << k << ", output " << o);
  }
  const cuda::PlanExecutable::GraphStats st = graphed->graph_stats();
  BOOST_TEST_MESSAGE("graphs recorded " << st.recorded << ", replays " << st.replays << ", node updates "
                                        << st.node_updates << ", direct runs " << st.direct_runs);
  BOOST_TEST(st.direct_runs == 1);  // the warm-up call
  BOOST_TEST(st.recorded == 1);
  BOOST_TEST(st.replays == 7);
  BOOST_TEST(st.node_updates >= 3);  // set 1's inputs, the host set's copies, back to set 0's
}

BOOST_AUTO_TEST_CASE(modes_match_the_default_mode) {
  if (!have_device()) return;
  auto fn = [](const Tensor& x, const Tensor& w, const Tensor& b) {
    return layer_norm(gelu(matmul(x, w) + b), {64}, Tensor(), Tensor(), 1e-5) + sin(b);
  };
  auto ref = kiln::compile(fn);
  auto ro = kiln::compile(fn, CompileOptions{.mode = "reduce-overhead"});
  auto ma = kiln::compile(fn, CompileOptions{.mode = "max-autotune"});
  auto manc = kiln::compile(fn, CompileOptions{.mode = "max-autotune-no-cudagraphs"});
  auto cg = kiln::compile(fn, CompileOptions{.backend = "cudagraphs"});
  for (uint64_t seed : {1, 2, 3, 1}) {
    const Tensor x = randn({128, 256}, DType::f32, Device::cpu(), seed).to(Device::cuda(0));
    const Tensor w = randn({256, 64}, DType::f32, Device::cpu(), seed + 1).to(Device::cuda(0));
    const Tensor b = randn({64}, DType::f32, Device::cpu(), seed + 2).to(Device::cuda(0));
    const Tensor want = ref(x, w, b);
    BOOST_TEST(kiln_test_util::max_abs_diff(ro(x, w, b), want) == 0.0);    // the same kernels, replayed
    BOOST_TEST(kiln_test_util::max_abs_diff(ma(x, w, b), want) < 1e-5);    // other launch configurations
    BOOST_TEST(kiln_test_util::max_abs_diff(manc(x, w, b), want) < 1e-5);
    BOOST_TEST(kiln_test_util::max_abs_diff(cg(x, w, b), want) < 1e-4);    // unfused: other rounding
  }
  BOOST_TEST(ro.stats().compiles == 1);
  BOOST_TEST(cg.stats().compiles == 1);
}

BOOST_AUTO_TEST_CASE(autotuned_versions_compute_the_same) {
  if (!have_device()) return;
  cpu_test::Compiled c = gemm_softmax_plan();
  BOOST_REQUIRE_MESSAGE(c.error.empty(), c.error);
  // Alternatives: the same schedule generated with other pointwise blocks and grid sizes (what
  // max-autotune compiles).
  const schedule::Schedule sched = schedule::schedule_graph(c.optimized, cuda::schedule_target());
  std::vector<plan::KernelPlan> alts;
  for (int64_t block : {128, 512}) {
    cuda::CodegenOptions co = cuda::CodegenOptions::from_config();
    co.pointwise_block = block;
    co.pointwise_items_per_thread = block == 128 ? 1 : 8;
    alts.push_back(cuda::generate(sched, co));
  }
  BOOST_TEST_MESSAGE("base plan:\n" << c.plan.str());
  cuda::ExecutableOptions o;
  o.autotune_trials = 3;
  int remembered = 0;
  o.remember = [&](const std::string&, const std::string&, int, const std::string&) { ++remembered; };
  auto tuned = cuda::PlanExecutable::load(c.plan, alts, o);
  auto plain = cuda::PlanExecutable::load(c.plan);
  const std::vector<TensorData> in = {random_host({64, 96}, 3), random_host({96, 128}, 4), random_host({128}, 5)};
  const std::vector<TensorData> want = plain->run_host(in);
  const std::vector<TensorData> got = tuned->run_host(in);
  for (size_t o2 = 0; o2 < got.size(); ++o2) BOOST_TEST(same_bits(got[o2], want[o2]), "output " << o2);
  BOOST_TEST_MESSAGE("tuning:\n" << tuned->tuning_report());
  BOOST_TEST(remembered >= 1);
  BOOST_TEST(contains(tuned->tuning_report(), "version"), tuned->tuning_report());
}

// max-autotune of matmuls: each gemm's other cuBLASLt algorithms are timed and the fastest
// kept; every algorithm computes the product (f32 without TF32: the same within rounding of the
// summation order), and a recalled choice is used without timing.
BOOST_AUTO_TEST_CASE(autotuned_gemm_algorithms_compute_the_same) {
  if (!have_device()) return;
  cpu_test::Compiled c = gemm_softmax_plan();
  BOOST_REQUIRE_MESSAGE(c.error.empty(), c.error);
  cuda::ExecutableOptions o;
  o.autotune_gemm = true;
  o.autotune_trials = 3;
  std::map<std::string, int> remembered;
  o.remember = [&](const std::string& signature, const std::string& problem, int choice, const std::string&) {
    remembered[signature + "|" + problem] = choice;
  };
  auto tuned = cuda::PlanExecutable::load(c.plan, o);
  auto plain = cuda::PlanExecutable::load(c.plan);
  const std::vector<TensorData> in = {random_host({64, 96}, 3), random_host({96, 128}, 4), random_host({128}, 5)};
  const std::vector<TensorData> want = plain->run_host(in);
  const std::vector<TensorData> got = tuned->run_host(in);
  for (size_t i = 0; i < got.size(); ++i)
    BOOST_TEST(kiln_test_util::max_abs_diff(Tensor::from_data(got[i]), Tensor::from_data(want[i])) < 1e-5, "output " << i);
  BOOST_TEST_MESSAGE("tuning:\n" << tuned->tuning_report());
  BOOST_TEST_REQUIRE(remembered.size() == 1u);  // the one gemm (its heuristic offers several algorithms)
  BOOST_TEST(contains(tuned->tuning_report(), "cuBLASLt algorithm"), tuned->tuning_report());
  // A choice the cache holds is taken as it is.
  cuda::ExecutableOptions o2 = o;
  int recalled = 0;
  o2.recall = [&](const std::string& signature, const std::string& problem) -> std::optional<int> {
    auto it = remembered.find(signature + "|" + problem);
    if (it == remembered.end()) return std::nullopt;
    ++recalled;
    return it->second;
  };
  auto again = cuda::PlanExecutable::load(c.plan, o2);
  const std::vector<TensorData> got2 = again->run_host(in);
  BOOST_TEST(recalled == 1);
  BOOST_TEST(contains(again->tuning_report(), "from the autotune cache"), again->tuning_report());
  for (size_t i = 0; i < got2.size(); ++i) BOOST_TEST(same_bits(got2[i], got[i]), "output " << i);
}

BOOST_AUTO_TEST_SUITE_END()
