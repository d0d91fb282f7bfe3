#include "values.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "kiln/graph/error.h"

namespace kiln::eval::detail {

namespace {

template <class T>
T read(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <class T>
void write(std::byte* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

// The raw stored value of a floating element, exactly.
double raw_float(const std::byte* p, DType t) {
  switch (t) {
    case DType::f16: return half_bits_to_float(read<uint16_t>(p));
    case DType::bf16: return bf16_bits_to_float(read<uint16_t>(p));
    case DType::f32: return read<float>(p);
    case DType::f64: return read<double>(p);
    default: break;
  }
  internal_fail("reference: ", dtype_name(t), " is not a floating dtype");
}

// The raw stored value of an integral or bool element, exactly.
int64_t raw_int(const std::byte* p, DType t) {
  switch (t) {
    case DType::bool_: return read<uint8_t>(p) != 0 ? 1 : 0;
    case DType::i32: return read<int32_t>(p);
    case DType::i64: return read<int64_t>(p);
    default: break;
  }
  internal_fail("reference: ", dtype_name(t), " is not an integral dtype");
}

// v rounded to float with round-to-odd: truncate toward zero, and when inexact set the last
// mantissa bit. Rounding that to a format of at most 22 bits of precision (f16, bf16) to
// nearest even gives the same result as rounding v to it directly (no double rounding).
float round_to_odd_float(double v) {
  if (std::isnan(v) || std::isinf(v)) return static_cast<float>(v);
  constexpr double kMax = std::numeric_limits<float>::max();
  float f;
  if (std::fabs(v) > kMax) {
    f = v > 0 ? std::numeric_limits<float>::max() : -std::numeric_limits<float>::max();
  } else {
    f = static_cast<float>(v);
    if (static_cast<double>(f) == v) return f;
    if (std::fabs(static_cast<double>(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
  }
  return std::bit_cast<float>(std::bit_cast<uint32_t>(f) | 1u);
}

// An integer converted to a floating dtype as torch does (through float for f16/bf16).
double float_from_int(int64_t v, DType t) {
  switch (t) {
    case DType::f16: return half_bits_to_float(float_to_half_bits(static_cast<float>(v)));
    case DType::bf16: return bf16_bits_to_float(float_to_bf16_bits(static_cast<float>(v)));
    case DType::f32: return static_cast<float>(v);
    default: return static_cast<double>(v);
  }
}

}  // namespace

double round_to(double v, DType t) {
  switch (t) {
    case DType::f16: return half_bits_to_float(float_to_half_bits(round_to_odd_float(v)));
    case DType::bf16: return bf16_bits_to_float(float_to_bf16_bits(round_to_odd_float(v)));
    case DType::f32: return static_cast<float>(v);
    default: return v;
  }
}

int64_t int_from_double(double v, DType t) {
  switch (t) {
    case DType::bool_: return v != 0 ? 1 : 0;  // NaN is true, as in torch
    case DType::i32:
      if (v > -2147483649.0 && v < 2147483648.0) return static_cast<int32_t>(v);
      return std::numeric_limits<int32_t>::min();
    default:
      if (v >= -0x1p63 && v < 0x1p63) return static_cast<int64_t>(v);
      return std::numeric_limits<int64_t>::min();
  }
}

int64_t wrap_int(int64_t v, DType t) {
  switch (t) {
    case DType::bool_: return v != 0 ? 1 : 0;
    case DType::i32: return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v)));
    default: return v;
  }
}

double load_float(const std::byte* p, DType src, DType compute) {
  if (!is_floating(src)) return float_from_int(raw_int(p, src), compute);
  const double v = raw_float(p, src);
  const bool exact = src == compute || compute == DType::f64 || !is_floating(compute) ||
                     (compute == DType::f32 && (src == DType::f16 || src == DType::bf16));
  return exact ? v : round_to(v, compute);
}

int64_t load_int(const std::byte* p, DType src, DType compute) {
  if (is_floating(src)) return int_from_double(raw_float(p, src), compute);
  return wrap_int(raw_int(p, src), compute);
}

void store_float(std::byte* p, DType dst, double v) {
  switch (dst) {
    case DType::bool_: write<uint8_t>(p, v != 0 ? 1 : 0); return;
    case DType::i32: write<int32_t>(p, static_cast<int32_t>(int_from_double(v, dst))); return;
    case DType::i64: write<int64_t>(p, int_from_double(v, dst)); return;
    case DType::f16: write<uint16_t>(p, float_to_half_bits(round_to_odd_float(v))); return;
    case DType::bf16: write<uint16_t>(p, float_to_bf16_bits(round_to_odd_float(v))); return;
    case DType::f32: write<float>(p, static_cast<float>(v)); return;
    case DType::f64: write<double>(p, v); return;
  }
}

void store_int(std::byte* p, DType dst, int64_t v) {
  switch (dst) {
    case DType::bool_: write<uint8_t>(p, v != 0 ? 1 : 0); return;
    case DType::i32: write<int32_t>(p, static_cast<int32_t>(wrap_int(v, dst))); return;
    case DType::i64: write<int64_t>(p, v); return;
    case DType::f16: write<uint16_t>(p, float_to_half_bits(static_cast<float>(v))); return;
    case DType::bf16: write<uint16_t>(p, float_to_bf16_bits(static_cast<float>(v))); return;
    case DType::f32: write<float>(p, static_cast<float>(v)); return;
    case DType::f64: write<double>(p, static_cast<double>(v)); return;
  }
}

void cast_element(const std::byte* from, DType src, std::byte* to, DType dst) {
  if (src == dst) {
    std::memcpy(to, from, static_cast<size_t>(dtype_size(src)));
  } else if (is_floating(src)) {
    store_float(to, dst, raw_float(from, src));
  } else {
    store_int(to, dst, raw_int(from, src));
  }
}

Elements::Elements(const TensorData& t) : dtype(t.dtype), itemsize(dtype_size(t.dtype)) {
  if (t.storage) base = static_cast<std::byte*>(t.storage->data()) + t.offset * itemsize;
}

void check_host(const TensorData& t, std::string_view what) {
  KILN_CHECK(t.device().type == DeviceType::cpu, "reference: ", what, " lives on ", t.device().str(),
             "; the reference target reads host tensors only");
  KILN_CHECK(t.strides.size() == t.sizes.size(), "reference: ", what, " has ", t.sizes.size(), " sizes but ",
             t.strides.size(), " strides");
  int64_t lo = 0, hi = 0;  // smallest and largest element offset reached
  for (size_t d = 0; d < t.sizes.size(); ++d) {
    KILN_CHECK(t.sizes[d] >= 0, "reference: ", what, " has negative size ", t.sizes[d], " at dim ", d);
    if (t.sizes[d] == 0) return;  // no elements, nothing to read
    const int64_t reach = (t.sizes[d] - 1) * t.strides[d];
    (reach < 0 ? lo : hi) += reach;
  }
  KILN_CHECK(t.storage != nullptr, "reference: ", what, " has no storage");
  const int64_t elements = static_cast<int64_t>(t.storage->nbytes()) / dtype_size(t.dtype);
  KILN_CHECK(t.offset + lo >= 0 && t.offset + hi < elements, "reference: ", what, " (sizes ",
             sizes_str(t.sizes), ", strides ", sizes_str(t.strides), ", offset ", t.offset,
             ") reaches outside its storage of ", elements, " elements");
}

std::vector<int64_t> broadcast_strides(const TensorData& t, std::span<const int64_t> out_sizes,
                                       std::string_view what) {
  const size_t out_rank = out_sizes.size(), rank = t.sizes.size();
  KILN_CHECK(rank <= out_rank, "reference: ", what, " of sizes ", sizes_str(t.sizes),
             " does not broadcast to ", sizes_str(out_sizes));
  std::vector<int64_t> strides(out_rank, 0);
  for (size_t k = 0; k < rank; ++k) {
    const size_t d = out_rank - rank + k;
    if (t.sizes[k] == out_sizes[d]) {
      strides[d] = t.strides[k];
    } else {
      KILN_CHECK(t.sizes[k] == 1, "reference: ", what, " of sizes ", sizes_str(t.sizes),
                 " does not broadcast to ", sizes_str(out_sizes), " (dim ", k, ")");
    }
  }
  return strides;
}

void copy_elements(const TensorData& src, const TensorData& dst) {
  KILN_CHECK(src.sizes == dst.sizes, "reference: copying ", sizes_str(src.sizes), " into ",
             sizes_str(dst.sizes));
  const Elements in(src), out(dst);
  if (src.is_contiguous() && dst.is_contiguous()) {
    // Both dense (a whole tensor converted, e.g. a model's weights to its compute type at
    // import): one linear loop; the same dtype is a copy, f32 to bf16 and f16 typed.
    const int64_t n = product(src.sizes);
    if (n == 0) return;
    if (src.dtype == dst.dtype) {
      std::memmove(out.base, in.base, static_cast<size_t>(n * in.itemsize));
    } else if (src.dtype == DType::f32 && (dst.dtype == DType::bf16 || dst.dtype == DType::f16)) {
      const auto* f = reinterpret_cast<const float*>(in.base);
      auto* h = reinterpret_cast<uint16_t*>(out.base);
      if (dst.dtype == DType::bf16)
        for (int64_t k = 0; k < n; ++k) h[k] = float_to_bf16_bits(f[k]);
      else
        for (int64_t k = 0; k < n; ++k) h[k] = float_to_half_bits(f[k]);
    } else {
      for (int64_t k = 0; k < n; ++k) cast_element(in.at(k), in.dtype, out.at(k), out.dtype);
    }
    return;
  }
  for_each_index<2>(src.sizes, {src.strides, dst.strides}, [&](const std::array<int64_t, 2>& o) {
    cast_element(in.at(o[0]), in.dtype, out.at(o[1]), out.dtype);
  });
}

TensorData make_view(const TensorData& t, std::vector<int64_t> sizes, std::vector<int64_t> strides,
                     int64_t offset) {
  TensorData v;
  v.storage = t.storage;
  v.dtype = t.dtype;
  v.sizes = std::move(sizes);
  v.strides = std::move(strides);
  v.offset = offset;
  return v;
}

size_t attr_slot(OpId op, std::string_view name) {
  const auto& specs = op_def(op).attrs;
  for (size_t k = 0; k < specs.size(); ++k)
    if (specs[k].name == name) return k;
  internal_fail("reference: op ", op_name(op), " has no attribute '", name, "'");
}

int64_t product(std::span<const int64_t> sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

std::string sizes_str(std::span<const int64_t> sizes) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < sizes.size(); ++i) out << (i ? ", " : "") << sizes[i];
  out << ']';
  return out.str();
}

}  // namespace kiln::eval::detail
