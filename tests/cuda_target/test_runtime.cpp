// targets/cuda/runtime without the codegen: what happens without a device (CI: a clear "no CUDA
// device" error, never a crash), and with one: device info, round trips of strided tensors,
// the caching allocator, errors naming the call and the kernel.
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <random>

#include "kiln/cuda/device.h"
#include "kiln/cuda/executable.h"
#include "kiln/cuda/nvrtc.h"
#include "kiln/graph/error.h"
#include "cuda_test_util.h"
#include "kiln_test_util.h"

using namespace kiln;
using cuda_test::have_device;
using kiln_test_util::contains;
using kiln_test_util::error_of;

namespace {

TensorData iota(DType t, std::vector<int64_t> sizes) {
  TensorData d = TensorData::empty_host(t, std::move(sizes));
  for (int64_t k = 0; k < d.numel(); ++k) d.data_as<float>()[k] = static_cast<float>(k) * 0.5f - 3.0f;
  return d;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cuda_runtime)

BOOST_AUTO_TEST_CASE(no_device_is_reported_clearly) {
  std::string why;
  if (cuda::available(&why)) {
    BOOST_TEST(why.empty());
    BOOST_TEST(cuda::device_count() >= 1);
    const std::string e = error_of([] { cuda::Context::get(cuda::device_count() + 3); });
    BOOST_TEST(contains(e, "no CUDA device cuda:"), e);
    return;
  }
  BOOST_TEST_MESSAGE("no device here: " << why);
  BOOST_TEST(why.rfind("no CUDA device", 0) == 0, why);
  BOOST_TEST(cuda::device_count() == 0);
  const std::string e = error_of([] { cuda::Context::get(0); });
  BOOST_TEST(e.rfind("no CUDA device", 0) == 0, e);
  const std::string e2 = error_of([] { cuda::to_device(iota(DType::f32, {4}), 0); });
  BOOST_TEST(e2.rfind("no CUDA device", 0) == 0, e2);
  plan::KernelPlan p;
  p.target = "cuda";
  const std::string e3 = error_of([&] { cuda::PlanExecutable::load(p); });
  BOOST_TEST(e3.rfind("no CUDA device", 0) == 0, e3);
}

BOOST_AUTO_TEST_CASE(device_info_and_round_trips) {
  if (!have_device()) return;
  cuda::Context& c = cuda::Context::get(0);
  BOOST_TEST_MESSAGE("cuda:0 is " << c.info().str());
  BOOST_TEST(c.info().arch() >= 50);
  // A strided host view (transposed) to the device and back.
  TensorData h = iota(DType::f32, {3, 5});
  TensorData t = h;
  t.sizes = {5, 3};
  t.strides = {1, 5};
  const TensorData d = cuda::to_device(t, 0);
  BOOST_TEST((d.device() == Device::cuda(0)));
  const TensorData back = cuda::to_host(d);
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 3; ++j) BOOST_TEST(back.data_as<float>()[i * 3 + j] == h.data_as<float>()[j * 5 + i]);
  // A strided device view back to the host.
  TensorData dv = d;
  dv.sizes = {3, 5};
  dv.strides = {1, 3};
  const TensorData back2 = cuda::to_host(dv);
  for (int64_t k = 0; k < 15; ++k) BOOST_TEST(back2.data_as<float>()[k] == h.data_as<float>()[k]);
  // Larger than the staging buffer.
  TensorData big = iota(DType::f32, {3 << 20});
  const TensorData bb = cuda::to_host(cuda::to_device(big, 0));
  BOOST_TEST(std::memcmp(bb.data(), big.data(), static_cast<size_t>(big.numel()) * 4) == 0);
}

BOOST_AUTO_TEST_CASE(caching_allocator_reuses_blocks) {
  if (!have_device()) return;
  cuda::Context& c = cuda::Context::get(0);
  const cuda::DevicePtr a = c.alloc(1000);
  c.free(a, 1000);
  const cuda::DevicePtr b = c.alloc(900);  // the same 1024-byte class
  BOOST_TEST(a == b);
  c.free(b, 900);
  BOOST_TEST(c.cached_bytes() >= 1024);
}

BOOST_AUTO_TEST_CASE(launch_errors_name_the_kernel) {
  if (!have_device()) return;
  cuda::Context& c = cuda::Context::get(0);
  const std::string src = "extern \"C\" __global__ void k_fill(float* a) { a[threadIdx.x] = 1.0f; }\n";
  const cuda::CompiledModule m = cuda::compile_module(src, c.info().arch(), "fill");
  auto mod = c.load_module(m.image, "fill");
  const std::string e = error_of([&] { c.function(*mod, "missing_entry"); });
  BOOST_TEST(contains(e, "cuModuleGetFunction failed"), e);
  BOOST_TEST(contains(e, "missing_entry"), e);
  void* f = c.function(*mod, "k_fill");
  const std::string e2 = error_of([&] { c.launch(f, 1, 2048, 0, nullptr, "k_fill"); });
  BOOST_TEST(contains(e2, "kernel k_fill"), e2);
}

BOOST_AUTO_TEST_SUITE_END()

// The comparison with the reference catches a wrong kernel: the same plan with `+` turned into
// `-` in its kernel must fail the check that the right one passes (a test that cannot fail
// proves nothing).
#include "harness.h"

BOOST_AUTO_TEST_SUITE(cuda_runtime_checks)

BOOST_AUTO_TEST_CASE(a_wrong_kernel_is_caught) {
  if (!have_device()) return;
  Graph g;
  const NodeId x = g.add_input(TensorMeta{DType::f32, Device::cpu(), {1000}, {}}, "x");
  const NodeId y = g.add_input(TensorMeta{DType::f32, Device::cpu(), {1000}, {}}, "y");
  g.set_outputs({g.add(OpId::add, {x, y})});
  cpu_test::Compiled c = cpu_test::compile(g);
  BOOST_REQUIRE_MESSAGE(c.error.empty(), c.error);
  BOOST_REQUIRE(c.exe != nullptr);
  std::mt19937_64 rng(7);
  const std::vector<TensorData> in = {
      cpu_test::tensor(DType::f32, {1000}, cpu_test::random_values(DType::f32, 1000, cpu_test::Domain::normal, rng)),
      cpu_test::tensor(DType::f32, {1000}, cpu_test::random_values(DType::f32, 1000, cpu_test::Domain::normal, rng))};
  const std::vector<cpu_test::Tolerance> tol = {cpu_test::tolerance_for(DType::f32)};
  const std::string right = cpu_test::run_and_compare(c, in, tol);
  BOOST_TEST(right.empty(), right);
  plan::KernelPlan wrong = c.plan;
  int changed = 0;
  for (plan::PlanKernel& k : wrong.kernels) {
    // The first addition of two values (CUDA C, scalar code: "= (t1 + t2)", vector code:
    // "= (vl0.x + vl2.x)"; LLVM IR: "= fadd float"): one element of four, or all of them, comes
    // out wrong.
    if (k.own_module()) {
      const size_t add = k.source.find("= fadd float ");
      if (add == std::string::npos) continue;
      k.source.replace(add, 6, "= fsub");
    } else {
      const size_t plus = k.source.find(" + ", k.source.find("const float t"));
      if (plus == std::string::npos) continue;
      k.source[plus + 1] = '-';
    }
    ++changed;
  }
  BOOST_REQUIRE_MESSAGE(changed == 1, c.plan.module_source());
  struct Runner final : cpu_test::Runner {
    std::shared_ptr<cuda::PlanExecutable> exe;
    std::vector<TensorData> run(std::span<const TensorData> inputs) override { return exe->run_host(inputs); }
  };
  auto r = std::make_shared<Runner>();
  r->exe = cuda::PlanExecutable::load(wrong);
  c.exe = r;
  const std::string caught = cpu_test::run_and_compare(c, in, tol);
  BOOST_TEST(contains(caught, "output 0"), "the wrong kernel was not caught:\n" << wrong.module_source() << wrong.kernels[0].source);
}

BOOST_AUTO_TEST_SUITE_END()
