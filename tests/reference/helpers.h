// Test helpers: tensors written and read element by element with plain typed memory access
// (independent of the reference target's own load/store code), and tolerance checks.
#pragma once

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kiln/graph/error.h"
#include "kiln/graph/graph.h"
#include "kiln/eval/interpreter.h"

namespace ref_test {

using kiln::Attrs;
using kiln::DType;
using kiln::OpId;
using kiln::TensorData;

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();  // slice "to the end"

// A contiguous host tensor of dtype t holding `values` (converted with plain C++ casts).
inline TensorData tensor(DType t, std::vector<int64_t> sizes, const std::vector<double>& values) {
  TensorData d = TensorData::empty_host(t, std::move(sizes));
  BOOST_REQUIRE_EQUAL(static_cast<size_t>(d.numel()), values.size());
  for (size_t k = 0; k < values.size(); ++k) {
    const double v = values[k];
    switch (t) {
      case DType::bool_: d.data_as<uint8_t>()[k] = v != 0; break;
      case DType::i32: d.data_as<int32_t>()[k] = static_cast<int32_t>(v); break;
      case DType::i64: d.data_as<int64_t>()[k] = static_cast<int64_t>(v); break;
      case DType::f16: d.data_as<uint16_t>()[k] = kiln::float_to_half_bits(static_cast<float>(v)); break;
      case DType::bf16: d.data_as<uint16_t>()[k] = kiln::float_to_bf16_bits(static_cast<float>(v)); break;
      case DType::f32: d.data_as<float>()[k] = static_cast<float>(v); break;
      case DType::f64: d.data_as<double>()[k] = v; break;
    }
  }
  return d;
}
inline TensorData f32(std::vector<int64_t> s, const std::vector<double>& v) { return tensor(DType::f32, std::move(s), v); }
inline TensorData f64(std::vector<int64_t> s, const std::vector<double>& v) { return tensor(DType::f64, std::move(s), v); }
inline TensorData i32(std::vector<int64_t> s, const std::vector<double>& v) { return tensor(DType::i32, std::move(s), v); }
inline TensorData i64(std::vector<int64_t> s, const std::vector<double>& v) { return tensor(DType::i64, std::move(s), v); }
inline TensorData boolean(std::vector<int64_t> s, const std::vector<double>& v) {
  return tensor(DType::bool_, std::move(s), v);
}
inline TensorData scalar(DType t, double v) { return tensor(t, {}, {v}); }

// The elements of a contiguous tensor, in order, as doubles.
inline std::vector<double> values(const TensorData& d) {
  BOOST_REQUIRE(d.is_contiguous());
  std::vector<double> out;
  for (int64_t k = 0; k < d.numel(); ++k) {
    switch (d.dtype) {
      case DType::bool_: out.push_back(d.data_as<uint8_t>()[k]); break;
      case DType::i32: out.push_back(d.data_as<int32_t>()[k]); break;
      case DType::i64: out.push_back(static_cast<double>(d.data_as<int64_t>()[k])); break;
      case DType::f16: out.push_back(kiln::half_bits_to_float(d.data_as<uint16_t>()[k])); break;
      case DType::bf16: out.push_back(kiln::bf16_bits_to_float(d.data_as<uint16_t>()[k])); break;
      case DType::f32: out.push_back(d.data_as<float>()[k]); break;
      case DType::f64: out.push_back(d.data_as<double>()[k]); break;
    }
  }
  return out;
}

inline std::vector<int64_t> ints(const TensorData& d) {
  BOOST_REQUIRE(d.dtype == DType::i64);
  return std::vector<int64_t>(d.data_as<int64_t>(), d.data_as<int64_t>() + d.numel());
}

inline std::string str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// Checks dtype, sizes and every element: |got - want| <= tol * max(1, |want|); NaN matches NaN,
// infinities match exactly.
inline void check(const TensorData& got, DType dtype, const std::vector<int64_t>& sizes,
                  const std::vector<double>& want, double tol = 1e-6) {
  BOOST_TEST(kiln::dtype_name(got.dtype) == kiln::dtype_name(dtype));
  BOOST_TEST(str(got.sizes) == str(sizes));
  const std::vector<double> v = values(got);
  BOOST_REQUIRE_EQUAL(v.size(), want.size());
  for (size_t k = 0; k < v.size(); ++k) {
    const double g = v[k], w = want[k];
    bool ok;
    if (std::isnan(w)) {
      ok = std::isnan(g);
    } else if (std::isinf(w)) {
      ok = g == w;
    } else {
      ok = std::fabs(g - w) <= tol * std::max(1.0, std::fabs(w));
    }
    BOOST_TEST(ok, "element " << k << ": got " << g << ", want " << w << " (tol " << tol << ")");
  }
}

inline TensorData eval(OpId op, std::vector<TensorData> in, Attrs attrs = {}) {
  return kiln::eval::eval_op(op, in, attrs);
}

// Runs `fn` and checks it throws kiln::Error whose message contains every one of `parts`.
template <class Fn>
void check_error(Fn&& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    BOOST_ERROR("expected kiln::Error");
  } catch (const kiln::Error& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts) BOOST_TEST(msg.find(p) != std::string::npos, "'" << msg << "' lacks '" << p << "'");
  }
}

}  // namespace ref_test
