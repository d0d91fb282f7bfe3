// Checks of the C++ frontend that every GPU target's tests run on their device (cuda:0,
// vulkan:0): how values a trace generates, rather than receives, come to live there.
#pragma once

#include <boost/test/unit_test.hpp>

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

}  // namespace device_frontend_checks
