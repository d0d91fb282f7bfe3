// Element types, their sizes and names, numpy/torch-style type promotion, and the
// f16/bf16 <-> float conversions every stage shares.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace kiln {

// Ordered so that promotion within a category picks the later one (except f16/bf16).
enum class DType : uint8_t { bool_, i32, i64, f16, bf16, f32, f64 };
inline constexpr int kNumDTypes = 7;

enum class DTypeCategory : uint8_t { boolean = 0, integral = 1, floating = 2 };

std::string_view dtype_name(DType t);      // "f32", "bool", ...
DType parse_dtype(std::string_view name);  // throws kiln::Error naming the valid names
int64_t dtype_size(DType t);               // bytes per element
DTypeCategory dtype_category(DType t);
inline bool is_floating(DType t) { return dtype_category(t) == DTypeCategory::floating; }
inline bool is_integral(DType t) { return dtype_category(t) == DTypeCategory::integral; }

// Promotion of two dtypes (f16 with bf16 gives f32, as in torch).
DType promote_types(DType a, DType b);

// The dtype a C++ scalar takes next to a tensor of dtype `tensor`: scalars never widen
// a tensor within its category, but lift it to a higher one (int tensor * 0.5 -> f32).
enum class ScalarKind : uint8_t { boolean, integer, floating };
DType weak_scalar_dtype(ScalarKind scalar, DType tensor);

// IEEE half and bfloat16 stored as raw bits; conversions round to nearest even.
uint16_t float_to_half_bits(float f);
float half_bits_to_float(uint16_t h);
uint16_t float_to_bf16_bits(float f);
inline float bf16_bits_to_float(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace kiln
