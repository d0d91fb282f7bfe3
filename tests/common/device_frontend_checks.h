// Checks of the C++ frontend that every GPU target's tests run on their device (cuda:0,
// vulkan:0): how values a trace generates, rather than receives, come to live there.
#pragma once

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "kiln_tensor_test_util.h"

namespace device_frontend_checks {

using namespace kiln;

// Tensors made on the device while tracing (scaled_dot_product_attention's causal mask, built
// eagerly from static sizes) and device tensors the function captures become graph constants:
// their bytes come to the host, and the graph runs them on the device they meet.
inline void constants_made_or_captured_on(Device device) {
  const Tensor q = randn({2, 3, 16, 8}, DType::f32, Device::cpu(), 4);
  const Tensor k = randn({2, 3, 16, 8}, DType::f32, Device::cpu(), 5);
  const Tensor v = randn({2, 3, 16, 8}, DType::f32, Device::cpu(), 6);
  const Tensor bias_cpu = randn({8}, DType::f32, Device::cpu(), 7);
  const Tensor bias = bias_cpu.to(device);
  AttentionOptions causal;
  causal.is_causal = true;
  auto f = kiln::compile([&](const Tensor& q, const Tensor& k, const Tensor& v) {
    return scaled_dot_product_attention(q, k, v, causal) + bias;
  });
  const Tensor got = f(q.to(device), k.to(device), v.to(device));
  BOOST_TEST((got.device() == device));
  const Tensor want = scaled_dot_product_attention(q, k, v, causal) + bias_cpu;
  BOOST_TEST(kiln_test_util::max_abs_diff(got, want) < 1e-5);
}

// Creation ops on the device over symbolic sizes stay in the graph (one compile serves every
// size, no graph break); with no input on that device, the value still ends up there.
inline void creation_ops_over_symbolic_sizes_on(Device device) {
  auto positions = kiln::compile(
      [](const Tensor& x) { return x + cast(arange(x.shape()[1], DType::i64, x.device()), DType::f32); },
      CompileOptions{.dynamic = true});
  for (int64_t n : {5, 9}) {
    const Tensor x = randn({2, n}, DType::f32, Device::cpu(), 8);
    const Tensor got = positions(x.to(device));
    BOOST_TEST((got.device() == device));
    BOOST_TEST(kiln_test_util::max_abs_diff(got, x + cast(arange(n, DType::i64), DType::f32)) == 0.0);
  }
  BOOST_TEST(positions.stats().compiles == 1);
  BOOST_TEST(positions.stats().graph_breaks == 0);
  auto ramp = kiln::compile([device](const Tensor& x) { return arange(x.shape()[0], DType::f32, device); },
                            CompileOptions{.dynamic = true});
  const Tensor r = ramp(ones({7}));
  BOOST_TEST((r.device() == device));
  BOOST_TEST(kiln_test_util::max_abs_diff(r, arange(7, DType::f32)) == 0.0);
}

// Random numbers drawn on the device with a run-time key (rand, randn, randint, dropout) inside
// one compiled function: the same numbers as eager calls on the CPU (randn within its logf and
// cosf ulps), a new key draws new ones without a recompile; and randint made on the device.
inline void random_numbers_with_a_key_on(Device device) {
  auto draw = kiln::compile([](const Tensor& x, const Tensor& key) {
    return std::vector<Tensor>{rand({300}, key, DType::f32, 1), randn({300}, key, DType::f32, 2),
                               randint(-5, 1000, {300}, key, DType::i64, 3), dropout(x, 0.5, key, 4)};
  });
  const Tensor x = randn({300}, DType::f32, Device::cpu(), 5);
  for (int64_t k : {7, 8}) {
    const Tensor key = full({}, static_cast<double>(k), DType::i64);
    const std::vector<Tensor> got = draw(x.to(device), key.to(device));
    BOOST_TEST((got[0].device() == device));
    BOOST_TEST(kiln_test_util::max_abs_diff(got[0], rand({300}, key, DType::f32, 1)) == 0.0);
    BOOST_TEST(kiln_test_util::max_abs_diff(got[1], randn({300}, key, DType::f32, 2)) < 1e-5);
    BOOST_TEST(got[2].to(Device::cpu()).to_vector<int64_t>() == randint(-5, 1000, {300}, key, DType::i64, 3).to_vector<int64_t>());
    BOOST_TEST(kiln_test_util::max_abs_diff(got[3], dropout(x, 0.5, key, 4)) == 0.0);
  }
  BOOST_TEST(draw.stats().compiles == 1);
  const Tensor made = randint(0, 10, {64}, DType::i32, device, 6);
  BOOST_TEST((made.device() == device));
  BOOST_TEST(made.to(Device::cpu()).to_vector<int32_t>() == randint(0, 10, {64}, DType::i32, Device::cpu(), 6).to_vector<int32_t>());
}

// kiln::autocast on the device: the traced casts put the matmuls in bf16 and the softmax in f32
// there, as eager calls under autocast on the CPU compute them.
inline void autocast_on(Device device) {
  const Tensor x = randn({16, 32}, DType::f32, Device::cpu(), 9);
  const Tensor w = randn({32, 48}, DType::f32, Device::cpu(), 10) * 0.18;
  const Tensor u = randn({48, 24}, DType::f32, Device::cpu(), 11) * 0.15;
  auto mlp = [](const Tensor& x, const Tensor& w, const Tensor& u) { return softmax(matmul(gelu(matmul(x, w)), u), -1); };
  auto f = kiln::compile(mlp);
  const autocast scope(DType::bf16);
  const Tensor got = f(x.to(device), w.to(device), u.to(device));
  const Tensor want = mlp(x, w, u);
  BOOST_TEST((got.device() == device));
  BOOST_TEST((got.dtype() == DType::f32));
  BOOST_TEST((matmul(x, w).dtype() == DType::bf16));
  BOOST_TEST(kiln_test_util::max_abs_diff(got, want) < 2e-3);
}

// A training step's gradients computed on the device inside a compiled function (one graph of
// forward and backward: an embedding lookup, layer norm, causal attention, a convolution and
// pooling, log-softmax and a gather of the targets' log-probabilities) against the same
// gradients computed eagerly on the CPU; then the loss alone compiled and differentiated from
// outside.
inline void compiled_gradients_on(Device device) {
  auto loss_of = [](const std::vector<Tensor>& p, const Tensor& ids, const Tensor& targets) {
    const int64_t batch = ids.shape()[0].hint(), seq = ids.shape()[1].hint();
    Tensor h = reshape(index_select(p[0], 0, reshape(ids, {-1})), {batch, seq, 16});  // [B, T, 16]
    h = layer_norm(h, {16}, p[1]);
    const Tensor q = reshape(linear(h, p[2]), {batch, seq, 2, 8}).transpose(1, 2);  // [B, 2, T, 8]
    const Tensor a = scaled_dot_product_attention(q, q, q, AttentionOptions{.is_causal = true});
    h = h + linear(reshape(a.transpose(1, 2), {batch, seq, 16}), p[3]);
    // A convolution over the sequence, then pooling.
    const Tensor c = gelu(conv1d(h.transpose(1, 2), p[4], {}, {1}, {1}));  // [B, 16, T]
    h = h + max_pool1d(c, {3}, {1}, {1}).transpose(1, 2);
    const Tensor logp = log_softmax(linear(h, p[0]), -1);                       // [B, T, V]
    return neg(mean(gather(logp, 2, unsqueeze(targets, -1))));
  };
  const std::vector<Tensor> params = {randn({11, 16}, DType::f32, Device::cpu(), 1) * 0.5,
                                      randn({16}, DType::f32, Device::cpu(), 2) * 0.1 + 1.0,
                                      randn({16, 16}, DType::f32, Device::cpu(), 3) * 0.25,
                                      randn({16, 16}, DType::f32, Device::cpu(), 4) * 0.25,
                                      randn({16, 16, 3}, DType::f32, Device::cpu(), 5) * 0.15};
  const Tensor ids = from_vector(std::vector<int64_t>{1, 4, 2, 9, 0, 10, 3, 3, 7, 5, 6, 8}, {2, 6});
  const Tensor targets = from_vector(std::vector<int64_t>{4, 2, 9, 0, 10, 3, 3, 7, 5, 6, 8, 1}, {2, 6});
  auto step = kiln::compile([&](const std::vector<Tensor>& p, const Tensor& ids, const Tensor& targets) {
    return value_and_grad([&](const std::vector<Tensor>& q) { return loss_of(q, ids, targets); }, p);
  });
  std::vector<Tensor> on_device;
  for (const Tensor& p : params) on_device.push_back(p.to(device));
  const auto [loss, grads] = step(on_device, ids.to(device), targets.to(device));
  const auto [want_loss, want] = value_and_grad([&](const std::vector<Tensor>& q) { return loss_of(q, ids, targets); }, params);
  BOOST_TEST((loss.device() == device));
  BOOST_TEST(kiln_test_util::max_abs_diff(loss, want_loss) < 1e-4);
  BOOST_REQUIRE_EQUAL(grads.size(), want.size());
  for (size_t k = 0; k < grads.size(); ++k) {
    BOOST_TEST((grads[k].device() == device));
    BOOST_TEST(kiln_test_util::max_abs_diff(grads[k], want[k]) < 1e-4, "gradient " << k);
  }
  BOOST_TEST(step.stats().graph_breaks == 0);

  // The loss compiled alone and differentiated from outside (a forward and a backward graph,
  // torch's AOTAutograd): backward() fills the device leaves' grad() with the same gradients.
  auto compiled_loss = kiln::compile(loss_of);
  std::vector<Tensor> leaves;
  for (const Tensor& p : params) leaves.push_back(p.to(device).requires_grad_());
  const Tensor l = compiled_loss(leaves, ids.to(device), targets.to(device));
  BOOST_TEST(l.requires_grad());
  l.backward();
  BOOST_TEST(kiln_test_util::max_abs_diff(l.detach(), want_loss) < 1e-4);
  for (size_t k = 0; k < leaves.size(); ++k) {
    BOOST_REQUIRE(leaves[k].grad().defined());
    BOOST_TEST((leaves[k].grad().device() == device));
    BOOST_TEST(kiln_test_util::max_abs_diff(leaves[k].grad(), want[k]) < 1e-4, "gradient " << k << " from outside");
  }
}

// A custom op (kiln/custom_op.h), a running maximum along a matrix's rows (a scan Kiln has no
// op for), with a host kernel, a CUDA kernel and a GLSL one, between neighbours computed on the
// device: compiled over symbolic sizes it is one opaque node, run by the device's kernel on cuda
// and vulkan and by the host kernel on the cpu, with one compile for two sizes; eagerly on
// device tensors by the device's kernel, its result on the
// device and equal to the host kernel's.
inline void custom_ops_on(Device device, bool eager_on_device = true) {
  CustomOpKernel cuda;  // one thread per row (CUDA targets run it on the device)
  cuda.entry = "check_cummax_rows";
  cuda.source = R"(
extern "C" __global__ void check_cummax_rows(const float* x, float* y, long long rows, long long y0, long long y1,
                                             long long x0, long long x1) {
  const long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float m = x[r * x1];
  for (long long j = 0; j < x1; ++j) {
    m = fmaxf(m, x[r * x1 + j]);
    y[r * y1 + j] = m;
  }
}
)";
  cuda.block = 64;
  cuda.threads = [](std::span<const TensorMeta* const>, const TensorMeta& out, const std::string&) { return out.sizes[0]; };
  CustomOpKernel vulkan = cuda;  // the same in GLSL (vulkan targets run it on the device)
  vulkan.entry = "check_cummax_rows";
  vulkan.source = R"(
void check_cummax_rows(int64_t r, int64_t rows, int64_t y0, int64_t y1, int64_t x0, int64_t x1) {
  float m = kiln_in0(r * x1);
  for (int64_t j = 0; j < x1; ++j) {
    m = max(m, kiln_in0(r * x1 + j));
    kiln_out(r * y1 + j) = m;
  }
}
)";
  register_op(CustomOp{.name = "check::cummax",
                       .infer = [](std::span<const TensorMeta* const> in, const std::string&, ShapeEnv&) {
                         KILN_CHECK(in[0]->dtype == DType::f32 && in[0]->rank() == 2, "x must be an f32 matrix, got ",
                                    in[0]->str());
                         return TensorMeta{DType::f32, in[0]->device, in[0]->sizes, {}};
                       },
                       .compute = [](std::span<const Tensor> in, const std::string&, const Tensor& out) {
                         const TensorData& x = in[0].data();
                         const int64_t n = x.sizes.back();
                         const float* v = x.data_as<float>();
                         float* y = out.data().data_as<float>();
                         for (int64_t i = 0; i < x.numel(); ++i) y[i] = i % n == 0 ? v[i] : std::max(y[i - 1], v[i]);
                       },
                       .device_kernels = {{"cuda", cuda}, {"vulkan", vulkan}}});
  auto f = kiln::compile([](const Tensor& x) { return custom_op("check::cummax", {x * 2.0f}) + exp(x); },
                         CompileOptions{.dynamic = true});
  for (int64_t n : {5, 9}) {
    const Tensor x = randn({3, n}, DType::f32, Device::cpu(), 11);
    const Tensor got = f(x.to(device));
    BOOST_TEST((got.device() == device));
    const std::vector<float> v = x.to_vector<float>();
    std::vector<float> want(v.size());
    float running = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      running = i % static_cast<size_t>(n) == 0 ? 2 * v[i] : std::max(running, 2 * v[i]);
      want[i] = running + std::exp(v[i]);
    }
    BOOST_TEST(kiln_test_util::max_abs_diff(got, from_vector(want, {3, n})) < 1e-5);
  }
  BOOST_TEST(f.stats().compiles == 1);
  BOOST_TEST(f.stats().graph_breaks == 0);
  if (!eager_on_device) return;
  const Tensor x = randn({2, 4}, DType::f32, Device::cpu(), 12);
  const Tensor eager = custom_op("check::cummax", {x.to(device)});
  BOOST_TEST((eager.device() == device));
  BOOST_TEST(kiln_test_util::max_abs_diff(eager, custom_op("check::cummax", {x})) == 0.0);
}

}  // namespace device_frontend_checks
