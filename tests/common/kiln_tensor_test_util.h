// Helpers for suites that compare kiln::Tensors across devices (tests/cuda_target,
// tests/vulkan_target): the largest elementwise difference, read back on the host.
#pragma once

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kiln/tensor.h"

namespace kiln_test_util {

inline double max_abs_diff(const kiln::Tensor& a, const kiln::Tensor& b) {
  const std::vector<double> x = a.to(kiln::Device::cpu()).to_vector<double>();
  const std::vector<double> y = b.to(kiln::Device::cpu()).to_vector<double>();
  BOOST_REQUIRE_EQUAL(x.size(), y.size());
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(x[i] - y[i]));
  return m;
}

}  // namespace kiln_test_util
