// Shared by the frontend tests: comparing a tensor's values and shape with hand-computed
// ones, reading an error's message, and printing Kiln's enums in failed checks.
#pragma once

#include "kiln_test_util.h"

#include <kiln/kiln.h>

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace kiln {
inline std::ostream& boost_test_print_type(std::ostream& out, DType t) { return out << dtype_name(t); }
inline std::ostream& boost_test_print_type(std::ostream& out, const Device& d) { return out << d.str(); }
inline std::ostream& boost_test_print_type(std::ostream& out, const SymInt& s) { return out << s.str(); }
}  // namespace kiln

namespace frontend_test {

// A tensor of `sizes` filled with a deterministic pattern of small multiples of 1/8 in [-1, 1]
// that differs with `salt` (so two operands differ).
inline kiln::Tensor pattern_tensor(const std::vector<int64_t>& sizes, int salt) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(((i * 7 + salt * 5) % 17) * 0.125 - 1.0);
  kiln::Shape shape;
  for (int64_t s : sizes) shape.push_back(kiln::SymInt(s));
  return kiln::from_vector(v, shape);
}

using Sizes = std::vector<int64_t>;

inline Sizes sizes_of(const kiln::Tensor& t) { return kiln::shape_hints(t.shape()); }

// Values (read as double, in row-major order of the tensor's shape), with a relative
// tolerance; NaN matches NaN and infinities must match exactly.
inline void check_values(const kiln::Tensor& t, const std::vector<double>& expected, double tol = 1e-6) {
  const std::vector<double> got = t.to_vector<double>();
  BOOST_REQUIRE_EQUAL(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = expected[i];
    const bool ok = std::isnan(e)   ? std::isnan(got[i])
                    : std::isinf(e) ? got[i] == e
                                    : std::abs(got[i] - e) <= tol * (1 + std::abs(e));
    BOOST_CHECK_MESSAGE(ok, "element " << i << ": got " << got[i] << ", expected " << e);
  }
}

// Shape, dtype and values at once.
inline void check_tensor(const kiln::Tensor& t, const Sizes& sizes, kiln::DType dtype,
                         const std::vector<double>& expected, double tol = 1e-6) {
  BOOST_TEST(sizes_of(t) == sizes, "shape " << kiln::shape_str(t.shape()));
  BOOST_TEST(t.dtype() == dtype);
  check_values(t, expected, tol);
}

using kiln_test_util::contains;
using kiln_test_util::error_of;

inline kiln::Tensor f32(const std::vector<float>& v, const kiln::Shape& shape = {}) {
  return kiln::from_vector(v, shape);
}

inline const void* storage_of(const kiln::Tensor& t) { return t.data().storage.get(); }

}  // namespace frontend_test
