// The C++ frontend on CUDA: Tensor::to(Device::cuda(0)) and back, eager ops on CUDA tensors, and
// kiln::compile of a function whose inputs live on the device (the "kiln" backend's CUDA path),
// each compared with the same computation on the CPU. Without a device: to(cuda) says why.
#include <boost/test/unit_test.hpp>

#include <cmath>

#include "kiln/cuda/device.h"
#include "kiln/kiln.h"
#include "cuda_test_util.h"
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

BOOST_AUTO_TEST_SUITE_END()
