// The C++ frontend on CUDA: Tensor::to(Device::cuda(0)) and back, eager ops on CUDA tensors, and
// kiln::compile of a function whose inputs live on the device (the "kiln" backend's CUDA path),
// each compared with the same computation on the CPU. Without a device: to(cuda) says why.
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <string>

#include "kiln/cache/cache.h"
#include "kiln/config/config.h"
#include "kiln/config/log.h"
#include "kiln/cuda/device.h"
#include "kiln/cuda/executable.h"
#include "kiln/plan/plan_json.h"
#include "kiln/kiln.h"
#include "cuda_test_util.h"
#include "device_frontend_checks.h"
#include "kiln_test_util.h"
#include "kiln_tensor_test_util.h"

using namespace kiln;
using cuda_test::have_device;
using kiln_test_util::contains;
using kiln_test_util::error_of;


BOOST_AUTO_TEST_SUITE(frontend_cuda)

BOOST_AUTO_TEST_CASE(to_cuda_without_a_device_says_why) {
  if (cuda::available()) return;
  const std::string e = error_of([] { ones({2}).to(Device::cuda(0)); });
  BOOST_TEST(contains(e, "to(cuda:0): no CUDA device"), e);
}

BOOST_AUTO_TEST_CASE(round_trip_and_eager_ops) {
  if (!have_device()) return;
  const Tensor x = randn({64, 33}, DType::f32, Device::cpu(), 3);
  const Tensor d = x.to(Device::cuda(0));
  BOOST_TEST((d.device() == Device::cuda(0)));
  BOOST_TEST(kiln_test_util::max_abs_diff(d, x) == 0.0);
  // Eager ops on the device (views stay views of device memory).
  const Tensor y = softmax(transpose(d, 0, 1) * 2.0f, -1);
  BOOST_TEST((y.device() == Device::cuda(0)));
  const Tensor y_cpu = softmax(transpose(x, 0, 1) * 2.0f, -1);
  BOOST_TEST(kiln_test_util::max_abs_diff(y, y_cpu) < 1e-6);
  const Tensor s = sum(exp(d), {0});
  BOOST_TEST(kiln_test_util::max_abs_diff(s, sum(exp(x), {0})) < 1e-4);
}

BOOST_AUTO_TEST_CASE(compiled_function_on_cuda_inputs) {
  if (!have_device()) return;
  const Tensor x = randn({128, 256}, DType::f32, Device::cpu(), 1);
  const Tensor w = randn({256, 64}, DType::f32, Device::cpu(), 2);
  const Tensor b = randn({64}, DType::f32, Device::cpu(), 3);
  auto f = kiln::compile([](const Tensor& x, const Tensor& w, const Tensor& b) {
    return layer_norm(gelu(matmul(x, w) + b), {64}, Tensor(), Tensor(), 1e-5);
  });
  const Tensor want = f(x, w, b);  // compiled for the CPU
  const Tensor got = f(x.to(Device::cuda(0)), w.to(Device::cuda(0)), b.to(Device::cuda(0)));
  BOOST_TEST((got.device() == Device::cuda(0)));
  BOOST_TEST(kiln_test_util::max_abs_diff(got, want) < 1e-4);
  BOOST_TEST(f.stats().compiles == 2);  // one per device (the device is guarded)
}

// GPT-2's MLP as transformers writes it: a [B*T, C] @ [C, 4C] product (with and without its
// bias) viewed as [B, T, 4C] and a hand-written tanh GELU. The passes make it gelu(x @ w [+ b])
// and cuBLASLt's GELU / GELU_BIAS epilogue computes it (test_codegen checks the plan): the values
// against the same function compiled for the CPU, in f32 and bf16.
BOOST_AUTO_TEST_CASE(gelu_new_after_a_viewed_gemm) {
  if (!have_device()) return;
  auto gelu_new = [](const Tensor& h) { return h * 0.5 * (tanh((h + pow(h, 3.0) * 0.044715) * 0.7978845608028654) + 1.0); };
  auto with_bias = kiln::compile([&](const Tensor& x, const Tensor& w, const Tensor& b) {
    return gelu_new((matmul(x, w) + b).view({2, 64, 256}));
  });
  auto without = kiln::compile([&](const Tensor& x, const Tensor& w) { return gelu_new(matmul(x, w).view({2, 64, 256})); });
  for (const DType t : {DType::f32, DType::bf16}) {
    const Tensor x = randn({128, 96}, DType::f32, Device::cpu(), 4).to(t);
    const Tensor w = (randn({96, 256}, DType::f32, Device::cpu(), 5) * 0.1).to(t);
    const Tensor b = randn({256}, DType::f32, Device::cpu(), 6).to(t);
    const Device gpu = Device::cuda(0);
    const std::pair<Tensor, Tensor> outs[] = {{with_bias(x, w, b), with_bias(x.to(gpu), w.to(gpu), b.to(gpu))},
                                              {without(x, w), without(x.to(gpu), w.to(gpu))}};
    for (const auto& [want, got] : outs) {
      BOOST_TEST((got.device() == gpu));
      BOOST_TEST((got.dtype() == t));
      double scale = 0;
      for (double v : want.to(DType::f32).to_vector<double>()) scale = std::max(scale, std::fabs(v));
      BOOST_TEST(scale > 0.5);
      BOOST_TEST(kiln_test_util::max_abs_diff(got.to(DType::f32), want.to(DType::f32)) < (t == DType::f32 ? 1e-4 : 2e-2) * scale,
                 dtype_name(t));
    }
  }
}

// A compiled training step's gradients on the device (tests/common/device_frontend_checks.h).
BOOST_AUTO_TEST_CASE(compiled_gradients_on_the_device) {
  if (have_device()) device_frontend_checks::compiled_gradients_on(Device::cuda(0));
}

// Constants made or captured on the device, creation ops on it over symbolic sizes
// (tests/common/device_frontend_checks.h, shared with the Vulkan target's tests).
BOOST_AUTO_TEST_CASE(constants_made_or_captured_on_the_device) {
  if (have_device()) device_frontend_checks::constants_made_or_captured_on(Device::cuda(0));
}

// A custom op's host kernel between kernels on the device (tests/common/device_frontend_checks.h).
BOOST_AUTO_TEST_CASE(custom_ops_between_device_kernels) {
  if (have_device()) device_frontend_checks::custom_ops_on(Device::cuda(0));
}

BOOST_AUTO_TEST_CASE(random_numbers_with_a_key_on_the_device) {
  if (have_device()) device_frontend_checks::random_numbers_with_a_key_on(Device::cuda(0));
}

BOOST_AUTO_TEST_CASE(creation_ops_on_the_device_over_symbolic_sizes) {
  if (have_device()) device_frontend_checks::creation_ops_over_symbolic_sizes_on(Device::cuda(0));
}

BOOST_AUTO_TEST_CASE(autocast_on_the_device) {
  if (have_device()) device_frontend_checks::autocast_on(Device::cuda(0));
}

// The plan cache's cuda entry holds the kernel plan and the NVRTC images of its programs: the
// plan loads with those images (NVRTC compiles nothing) and computes what the compile did. That
// is what a hit in another process does instead of scheduling and generating again.
// The kernels take every buffer at a 16-byte-aligned address (cuda::kBufferAlignment, no run-time
// check): a view of device memory that starts elsewhere is copied, and the results stay right.
BOOST_AUTO_TEST_CASE(views_at_unaligned_addresses_are_copied) {
  if (!have_device()) return;
  const Tensor x = randn({8, 260}, DType::f32, Device::cpu(), 5);
  const Tensor d = x.to(Device::cuda(0));
  auto f = kiln::compile([](const Tensor& a) { return softmax(a * 2.0f, -1) + a; });
  for (int64_t start : {0, 1, 2, 3, 4}) {
    // Rows of 256 starting `start` elements in: the same plan (static strides) at 5 addresses.
    const Tensor view = slice(d, 1, start, start + 256);
    const Tensor want = softmax(slice(x, 1, start, start + 256) * 2.0f, -1) + slice(x, 1, start, start + 256);
    const Tensor got = f(view);
    BOOST_TEST((got.device() == Device::cuda(0)));
    BOOST_TEST(kiln_test_util::max_abs_diff(got, want) < 1e-5, "view starting at element " << start);
  }
}

BOOST_AUTO_TEST_CASE(plan_cache_entry_holds_the_plan_and_its_images) {
  if (!have_device()) return;
  const std::string dir = (std::filesystem::temp_directory_path() / ("kiln-cuda-cache-" + std::to_string(getpid()))).string();
  std::filesystem::remove_all(dir);
  config::Patch patch({{"cache_dir", dir}, {"cache.plan_cache", true}});
  const Tensor x = randn({33, 70}, DType::f32, Device::cpu(), 7);
  const Tensor w = randn({70, 40}, DType::f32, Device::cpu(), 8);
  auto f = kiln::compile([](const Tensor& x, const Tensor& w) { return softmax(matmul(x, w) * 0.25, -1) + 1.0; });
  const Tensor got = f(x.to(Device::cuda(0)), w.to(Device::cuda(0)));
  BOOST_TEST(kiln_test_util::max_abs_diff(got, softmax(matmul(x, w) * 0.25, -1) + 1.0) < 1e-4);
  cache::DiskStore disk(dir, uint64_t{1} << 30);
  int cuda_entries = 0;
  for (const cache::StoredInfo& info : disk.list()) {
    cache::Entry e = cache::decode_entry(*disk.get(info.key), info.key);
    // The compiled graph's entry ("cuda.graph: ..."), not the CPU's nor the eager ops' ("cuda.eager").
    if (e.description.rfind("cuda.graph:", 0) != 0) continue;
    cuda_entries += 1;
    BOOST_TEST_REQUIRE(!e.plan.empty());
    plan::KernelPlan p = plan::plan_from_json(e.plan, "entry");
    // The plan's module text is kept beside its JSON; the rest are the programs' triples.
    std::erase_if(e.blobs, [&p](auto& blob) { return plan::put_plan_text(p, blob.first, std::move(blob.second)); });
    BOOST_TEST(std::any_of(p.kernels.begin(), p.kernels.end(), [](const plan::PlanKernel& k) { return !k.source.empty(); }));
    BOOST_TEST(p.target == "cuda");
    BOOST_TEST_REQUIRE(e.blobs.size() % 3 == 0);
    const int arch = cuda::Context::get(0).info().arch();
    for (size_t i = 0; i < e.blobs.size(); i += 3) {
      cuda::CompiledModule m;
      m.image = e.blobs[i + 1].second;
      m.arch = std::stoi(e.blobs[i + 2].second);
      m.cubin = e.blobs[i + 2].second.find("cubin") != std::string::npos;
      cuda::remember_module(e.blobs[i].second, arch, m);
    }
    auto exe = cuda::PlanExecutable::load(std::move(p));
    BOOST_TEST(exe->compile_seconds() == 0.0);  // every module from the images
    const std::vector<TensorData> in{x.data(), w.data()};
    const Tensor again = Tensor::from_data(exe->run_host(in).at(0));
    BOOST_TEST(kiln_test_util::max_abs_diff(again, got) == 0.0);
  }
  BOOST_TEST(cuda_entries == 1);
  std::filesystem::remove_all(dir);
}

// A compile for the device starts the libraries its graph will use before the passes run (an
// ONNX import reads its weights meanwhile): cuBLASLt for products (a 1x1 convolution is a gemm),
// cuDNN for the convolutions the scheduler gives it, none for pointwise ops or depthwise
// convolutions (kernels of ours); the options say no.
BOOST_AUTO_TEST_CASE(a_compile_starts_the_libraries_its_graph_uses) {
  if (!have_device()) return;
  std::mutex mu;
  std::string log;
  logs::set_categories_for_testing("cache");
  logs::set_sink_for_testing([&](std::string_view s) {
    std::lock_guard<std::mutex> lock(mu);
    log += s;
  });
  // The libraries a first call started ahead of its plan (the call waits for them to start).
  auto started_by = [&](auto&& fn, const auto&... args) {
    {
      std::lock_guard<std::mutex> lock(mu);
      log.clear();
    }
    auto f = kiln::compile(fn);
    (void)f(args.to(Device::cuda(0))...);
    std::lock_guard<std::mutex> lock(mu);
    std::string which;
    for (const std::string lib : {"cuBLASLt", "cuDNN"})
      if (contains(log, lib + " started ahead of a plan")) which += (which.empty() ? "" : " ") + lib;
    return which;
  };
  const Tensor x = randn({8, 16}, DType::f32, Device::cpu(), 1), w = randn({16, 4}, DType::f32, Device::cpu(), 2);
  const Tensor image = randn({2, 4, 8, 8}, DType::f32, Device::cpu(), 3);
  const Tensor filters = randn({6, 4, 3, 3}, DType::f32, Device::cpu(), 4), depthwise = randn({4, 1, 3, 3}, DType::f32, Device::cpu(), 5);
  auto product = [](const Tensor& a, const Tensor& b) { return relu(matmul(a, b)); };
  auto convolution = [](const Tensor& a, const Tensor& k) { return conv2d(a, k, {}, {1}, {1}); };
  auto by_channel = [](const Tensor& a, const Tensor& k) { return conv2d(a, k, {}, {1}, {1}, {1}, 4); };
  BOOST_TEST(started_by(product, x, w) == "cuBLASLt");
  BOOST_TEST(started_by([](const Tensor& a) { return exp(a) + 1.0f; }, x) == "");
  BOOST_TEST(started_by(convolution, image, filters) == "cuDNN");
  BOOST_TEST(started_by(by_channel, image, depthwise) == "");
  const Tensor pointwise_filters = randn({6, 4, 1, 1}, DType::f32, Device::cpu(), 6), wt = randn({4, 16}, DType::f32, Device::cpu(), 7);
  BOOST_TEST(started_by([](const Tensor& a, const Tensor& k) { return conv2d(a, k); }, image, pointwise_filters) == "cuBLASLt");
  BOOST_TEST(started_by([](const Tensor& a, const Tensor& k) { return linear(a, k); }, x, wt) == "cuBLASLt");
  BOOST_TEST(started_by([](const Tensor& a, const Tensor& k, const Tensor& b) { return matmul(relu(conv2d(a, k, {}, {1}, {1})), b); },
                        image, filters, randn({8, 3}, DType::f32, Device::cpu(), 8)) == "cuBLASLt cuDNN");
  {
    const config::Patch no_cudnn({{"cuda.cudnn", false}});  // im2col and a gemm
    BOOST_TEST(started_by(convolution, image, filters) == "cuBLASLt");
  }
  {
    const config::Patch later({{"early_library_start", false}});
    BOOST_TEST(started_by(product, x, w) == "");
  }
  logs::set_sink_for_testing({});
  logs::reset_for_testing();
}

BOOST_AUTO_TEST_SUITE_END()
