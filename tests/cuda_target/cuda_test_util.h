// What the CUDA runtime suites share: whether this machine has a CUDA device (saying why not).
#pragma once

#include <boost/test/unit_test.hpp>

#include <string>

#include "kiln/cuda/device.h"

namespace cuda_test {

inline bool have_device() {
  std::string why;
  const bool ok = kiln::cuda::available(&why);
  if (!ok) BOOST_TEST_MESSAGE("skipped on this machine: " << why);
  return ok;
}

}  // namespace cuda_test
