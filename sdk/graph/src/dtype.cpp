#include "kiln/graph/dtype.h"

#include <array>
#include <bit>

#include "kiln/graph/error.h"

namespace kiln {

namespace {
struct DTypeInfo {
  std::string_view name;
  int64_t size;
  DTypeCategory category;
};
constexpr std::array<DTypeInfo, kNumDTypes> kInfo = {{
    {"bool", 1, DTypeCategory::boolean},
    {"i32", 4, DTypeCategory::integral},
    {"i64", 8, DTypeCategory::integral},
    {"f16", 2, DTypeCategory::floating},
    {"bf16", 2, DTypeCategory::floating},
    {"f32", 4, DTypeCategory::floating},
    {"f64", 8, DTypeCategory::floating},
}};
const DTypeInfo& info(DType t) { return kInfo[static_cast<size_t>(t)]; }
}  // namespace

std::string_view dtype_name(DType t) { return info(t).name; }
int64_t dtype_size(DType t) { return info(t).size; }
DTypeCategory dtype_category(DType t) { return info(t).category; }

DType parse_dtype(std::string_view name) {
  for (size_t i = 0; i < kInfo.size(); ++i)
    if (kInfo[i].name == name) return static_cast<DType>(i);
  fail("unknown dtype '", name, "'; valid dtypes are bool, i32, i64, f16, bf16, f32, f64");
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  // The two 16-bit floats have no common 16-bit type.
  if ((a == DType::f16 && b == DType::bf16) || (a == DType::bf16 && b == DType::f16)) return DType::f32;
  return static_cast<uint8_t>(a) > static_cast<uint8_t>(b) ? a : b;
}

DType weak_scalar_dtype(ScalarKind scalar, DType tensor) {
  switch (scalar) {
    case ScalarKind::boolean:
      return tensor;
    case ScalarKind::integer:
      return tensor == DType::bool_ ? DType::i64 : tensor;
    case ScalarKind::floating:
      return is_floating(tensor) ? tensor : DType::f32;
  }
  return tensor;
}

uint16_t float_to_half_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7C00u | (abs > 0x7F800000u ? 0x200u | ((abs >> 13) & 0x3FFu) : 0u));
  }
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds to inf
  if (abs < 0x38800000u) {                                                // subnormal half or zero
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);            // below half of min subnormal
    const uint32_t mant = (abs & 0x7FFFFFu) | 0x800000u;
    // value = mant * 2^(e-150) and a half subnormal counts units of 2^-24.
    const uint32_t dropped = 126u - (abs >> 23);  // 14 .. 24 low bits fall off
    const uint32_t half_mant = mant >> dropped;
    const uint32_t rem = mant & ((1u << dropped) - 1u);
    const uint32_t halfway = 1u << (dropped - 1);
    uint32_t r = half_mant;
    if (rem > halfway || (rem == halfway && (r & 1u))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  // Normal: rebias exponent and round the mantissa to 10 bits, half to even.
  uint32_t h = ((abs - 0x38000000u) >> 13);
  const uint32_t rem = abs & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | (static_cast<uint32_t>(112 - e) << 23) | ((mant & 0x3FFu) << 13);
    }
  } else if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t float_to_bf16_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet nan
  const uint32_t rounding = 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

}  // namespace kiln
