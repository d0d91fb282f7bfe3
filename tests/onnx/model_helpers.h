// What the tests of exported models share: a tensor's values as doubles, and whether a device
// can take tensors (a GPU and its driver, a build with its runtime) so that a test runs there too.
#pragma once

#include <boost/test/unit_test.hpp>

#include <vector>

#include "kiln/eval/interpreter.h"
#include "kiln/graph/error.h"
#include "kiln/tensor.h"

namespace onnx_test {

inline std::vector<double> values(const kiln::TensorData& t) {
  const kiln::TensorData d = kiln::eval::convert(kiln::eval::contiguous(t), kiln::DType::f64);
  const double* p = static_cast<const double*>(d.data());
  return std::vector<double>(p, p + d.numel());
}

inline bool available(kiln::Device device) {
  try {
    (void)kiln::Tensor::from_data(kiln::TensorData::empty_host(kiln::DType::f32, {1})).to(device);
    return true;
  } catch (const kiln::Error& e) {
    BOOST_TEST_MESSAGE(device.str() << " skipped: " << e.what());
    return false;
  }
}

}  // namespace onnx_test
