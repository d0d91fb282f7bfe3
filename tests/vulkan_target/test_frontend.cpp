// The C++ frontend on Vulkan: Tensor::to(Device::vulkan(0)) and back, and kiln::compile of a
// function whose inputs live on vulkan:0 (the "kiln" backend's Vulkan path), compared with the
// same function compiled for the CPU.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>

#include <filesystem>
#include <unistd.h>

#include "kiln/cache/cache.h"
#include "kiln/config/config.h"
#include "kiln/plan/plan_json.h"
#include "kiln/kiln.h"
#include "kiln/vulkan/runtime.h"
#include "device_frontend_checks.h"
#include "kiln_test_util.h"
#include "kiln_tensor_test_util.h"

using namespace kiln;


BOOST_AUTO_TEST_SUITE(frontend_vulkan)

BOOST_AUTO_TEST_CASE(round_trip) {
  const Tensor x = randn({64, 33}, DType::f32, Device::cpu(), 3);
  const Tensor d = x.to(Device::vulkan(0));
  BOOST_TEST((d.device() == Device::vulkan(0)));
  BOOST_TEST(kiln_test_util::max_abs_diff(d, x) == 0.0);
  const Tensor t = transpose(x, 0, 1).contiguous();
  BOOST_TEST(kiln_test_util::max_abs_diff(transpose(x, 0, 1).to(Device::vulkan(0)), t) == 0.0);
}

// Eager ops on Vulkan tensors: single-op plans on the device, views of device memory staying
// views, results on the device; a second size of the same ops reuses their plans (made for a
// shape pattern).
BOOST_AUTO_TEST_CASE(round_trip_and_eager_ops) {
  const std::string dir = (std::filesystem::temp_directory_path() / ("kiln-vk-eager-" + std::to_string(getpid()))).string();
  std::filesystem::remove_all(dir);
  config::Patch patch({{"cache_dir", dir}, {"cache.plan_cache", true}});
  auto eager_plans = [&] {  // the single-op plans on the device the cache holds
    int n = 0;
    for (const cache::StoredInfo& info : cache::DiskStore(dir, uint64_t{1} << 30).list())
      n += cache::decode_entry(*cache::DiskStore(dir, uint64_t{1} << 30).get(info.key), info.key).description.rfind(
               "vulkan.eager", 0) == 0;
    return n;
  };
  std::vector<int> plans;
  for (int64_t rows : {64, 40}) {
    const Tensor x = randn({rows, 33}, DType::f32, Device::cpu(), 3);
    const Tensor d = x.to(Device::vulkan(0));
    const Tensor y = softmax(transpose(d, 0, 1) * 2.0f, -1);
    BOOST_TEST((y.device() == Device::vulkan(0)));
    BOOST_TEST(kiln_test_util::max_abs_diff(y, softmax(transpose(x, 0, 1) * 2.0f, -1)) < 1e-6);
    const Tensor s = sum(exp(d), {0});
    BOOST_TEST((s.device() == Device::vulkan(0)));
    BOOST_TEST(kiln_test_util::max_abs_diff(s, sum(exp(x), {0})) < 1e-4);
    const Tensor w = randn({33, 17}, DType::f32, Device::cpu(), 4);
    const Tensor h = gelu(matmul(d, w.to(Device::vulkan(0))));
    BOOST_TEST((h.device() == Device::vulkan(0)));
    BOOST_TEST(kiln_test_util::max_abs_diff(h, gelu(matmul(x, w))) < 1e-4);
    // A slice of device memory at an offset, and an integer result.
    const Tensor a = argmax(slice(d, 0, 3, rows - 2), 1, false);
    BOOST_TEST((a.device() == Device::vulkan(0)));
    BOOST_TEST(kiln_test_util::max_abs_diff(a, argmax(slice(x, 0, 3, rows - 2), 1, false)) == 0.0);
    plans.push_back(eager_plans());
  }
  BOOST_TEST(plans[0] >= 5);
  BOOST_TEST(plans[1] == plans[0]);  // the second size made none
  std::filesystem::remove_all(dir);
  const std::vector<std::string> msgs = vulkan::take_validation_messages();
  BOOST_TEST(msgs.empty(), (msgs.empty() ? "" : msgs[0]));
}

BOOST_AUTO_TEST_CASE(compiled_function_on_vulkan_inputs) {
  const Tensor x = randn({128, 96}, DType::f32, Device::cpu(), 1);
  const Tensor w = randn({96, 64}, DType::f32, Device::cpu(), 2);
  const Tensor b = randn({64}, DType::f32, Device::cpu(), 3);
  auto f = kiln::compile([](const Tensor& x, const Tensor& w, const Tensor& b) {
    return layer_norm(gelu(matmul(x, w) + b), {64}, Tensor(), Tensor(), 1e-5);
  });
  const Tensor want = f(x, w, b);  // compiled for the CPU
  const Tensor xv = x.to(Device::vulkan(0)), wv = w.to(Device::vulkan(0)), bv = b.to(Device::vulkan(0));
  const Tensor got = f(xv, wv, bv);
  BOOST_TEST((got.device() == Device::vulkan(0)));
  BOOST_TEST(kiln_test_util::max_abs_diff(got, want) < 1e-4);
  const Tensor again = f(xv, wv, bv);
  BOOST_TEST(kiln_test_util::max_abs_diff(again, want) < 1e-4);
  BOOST_TEST(f.stats().compiles == 2);  // one per device (the device is guarded)
  const std::vector<std::string> msgs = vulkan::take_validation_messages();
  BOOST_TEST(msgs.empty(), (msgs.empty() ? "" : msgs[0]));
}

// A compiled training step's gradients on the device (tests/common/device_frontend_checks.h).
BOOST_AUTO_TEST_CASE(compiled_gradients_on_the_device) {
  device_frontend_checks::compiled_gradients_on(Device::vulkan(0));
  const std::vector<std::string> msgs = vulkan::take_validation_messages();
  BOOST_TEST(msgs.empty(), (msgs.empty() ? "" : msgs[0]));
}

// Constants made or captured on the device, creation ops on it over symbolic sizes
// (tests/common/device_frontend_checks.h, shared with the CUDA target's tests).
BOOST_AUTO_TEST_CASE(constants_made_or_captured_on_the_device) {
  device_frontend_checks::constants_made_or_captured_on(Device::vulkan(0));
  const std::vector<std::string> msgs = vulkan::take_validation_messages();
  BOOST_TEST(msgs.empty(), (msgs.empty() ? "" : msgs[0]));
}

BOOST_AUTO_TEST_CASE(creation_ops_on_the_device_over_symbolic_sizes) {
  device_frontend_checks::creation_ops_over_symbolic_sizes_on(Device::vulkan(0));
  const std::vector<std::string> msgs = vulkan::take_validation_messages();
  BOOST_TEST(msgs.empty(), (msgs.empty() ? "" : msgs[0]));
}

// A custom op's host kernel between kernels on the device (tests/common/device_frontend_checks.h).
BOOST_AUTO_TEST_CASE(custom_ops_between_device_kernels) {
  device_frontend_checks::custom_ops_on(Device::vulkan(0));
  const std::vector<std::string> msgs = vulkan::take_validation_messages();
  BOOST_TEST(msgs.empty(), (msgs.empty() ? "" : msgs[0]));
}

BOOST_AUTO_TEST_CASE(random_numbers_with_a_key_on_the_device) {
  device_frontend_checks::random_numbers_with_a_key_on(Device::vulkan(0));
  const std::vector<std::string> msgs = vulkan::take_validation_messages();
  BOOST_TEST(msgs.empty(), (msgs.empty() ? "" : msgs[0]));
}

BOOST_AUTO_TEST_CASE(autocast_on_the_device) {
  device_frontend_checks::autocast_on(Device::vulkan(0));
  const std::vector<std::string> msgs = vulkan::take_validation_messages();
  BOOST_TEST(msgs.empty(), (msgs.empty() ? "" : msgs[0]));
}

// The plan cache: a compile on Vulkan stores its plan, each kernel's SPIR-V and the pipeline
// cache's data; an executable loaded from that entry (no shaderc) computes the same.
BOOST_AUTO_TEST_CASE(plan_cache_entry_holds_spirv_and_pipeline_cache) {
  const std::string dir = (std::filesystem::temp_directory_path() / ("kiln-vk-cache-" + std::to_string(getpid()))).string();
  std::filesystem::remove_all(dir);
  config::Patch patch({{"cache_dir", dir}, {"cache.plan_cache", true}});
  const Tensor x = randn({33, 70}, DType::f32, Device::cpu(), 7);
  auto f = kiln::compile([](const Tensor& x) { return softmax(x * 3.0, -1) + x; });
  const Tensor got = f(x.to(Device::vulkan(0)));
  BOOST_TEST(kiln_test_util::max_abs_diff(got, softmax(x * 3.0, -1) + x) < 1e-5);
  // The lookup that missed is counted in the function's stats, per layer.
  const auto stats = f.stats().cache;
  BOOST_TEST_REQUIRE(stats.count("disk") == 1u);
  BOOST_TEST(stats.at("disk").misses >= 1);
  cache::DiskStore disk(dir, uint64_t{1} << 30);
  int vulkan_entries = 0;
  for (const cache::StoredInfo& info : disk.list()) {
    const cache::Entry e = cache::decode_entry(*disk.get(info.key), info.key);
    if (e.description.rfind("vulkan.graph", 0) != 0) continue;  // (the CPU's eager entries)
    plan::KernelPlan p = plan::plan_from_json(e.plan, "entry");
    BOOST_TEST(p.target == "vulkan");
    vulkan_entries += 1;
    vulkan::ExecutableOptions o;
    o.spirv.assign(p.kernels.size(), "");
    bool has_pipeline_cache = false;
    for (const auto& [name, bytes] : e.blobs) {
      if (name == "pipeline_cache") {
        has_pipeline_cache = true;
        o.pipeline_cache = bytes;
      } else if (plan::put_plan_text(p, name, std::string(bytes))) {
        // the plan's module text, kept beside its JSON
      } else {
        BOOST_TEST(name.rfind("spirv", 0) == 0);
        o.spirv.at(std::stoul(name.substr(5))) = bytes;
      }
    }
    BOOST_TEST(has_pipeline_cache);
    BOOST_TEST(std::any_of(p.kernels.begin(), p.kernels.end(), [](const plan::PlanKernel& k) { return !k.source.empty(); }));
    auto exe = vulkan::PlanExecutable::load(std::move(p), o);
    BOOST_TEST(exe->spirv() == o.spirv);
    const std::vector<TensorData> in{x.to(Device::vulkan(0)).data()};
    const Tensor again = Tensor::from_data(exe->run_host(in).at(0));
    BOOST_TEST(kiln_test_util::max_abs_diff(again, got) == 0.0);
  }
  BOOST_TEST(vulkan_entries == 1);
  std::filesystem::remove_all(dir);
  const std::vector<std::string> msgs = vulkan::take_validation_messages();
  BOOST_TEST(msgs.empty(), (msgs.empty() ? "" : msgs[0]));
}

// assert_no_compile holds on Vulkan too: a graph no cache holds is an error naming it.
BOOST_AUTO_TEST_CASE(assert_no_compile_refuses_a_vulkan_compile) {
  const std::string dir = (std::filesystem::temp_directory_path() / ("kiln-vk-nocompile-" + std::to_string(getpid()))).string();
  std::filesystem::remove_all(dir);
  config::Patch patch({{"cache_dir", dir}, {"assert_no_compile", true}});
  const Tensor x = randn({17, 9}, DType::f32, Device::cpu(), 3).to(Device::vulkan(0));
  auto f = kiln::compile([](const Tensor& x) { return sigmoid(x) * 5.0 - x; });
  const std::string error = kiln_test_util::error_of([&] { f(x); });
  BOOST_TEST(kiln_test_util::contains(error, "assert_no_compile is set"), error);
  BOOST_TEST(kiln_test_util::contains(error, "vulkan.graph"), error);
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()
