// Internal to the reference target: reading and writing one element of any dtype, the
// strided N-d loop every kernel is built on, and the checks and copies they share.
//
// Values travel in one of two domains: floating (a double holding a value of some floating
// "compute" dtype) or integral (an int64 holding a value of bool/i32/i64). Loads convert the
// stored element to the compute dtype with torch's cast semantics; stores round or wrap a
// computed value to the destination dtype.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "kiln/graph/dtype.h"
#include "kiln/graph/ops.h"
#include "kiln/graph/tensor_data.h"

namespace kiln::eval::detail {

// ---- One element -------------------------------------------------------------------------

// The element at `p` (stored as `src`) cast to the floating dtype `compute`, as a double.
// An integer is converted to `compute` directly (i64 -> f32 rounds once, as torch does); a
// float is rounded to `compute` when that is narrower.
double load_float(const std::byte* p, DType src, DType compute);
// The element at `p` cast to the integral or bool dtype `compute`, as an int64: floats
// truncate toward zero (NaN and out-of-range values give the type's minimum, as x86 does),
// integers wrap to the width, bool is (value != 0).
int64_t load_int(const std::byte* p, DType src, DType compute);
// Stores a computed double: rounded to nearest even for floats (f16/bf16 through round-to-odd
// float, so the result is rounded once), cast like load_int for integral and bool dtypes.
void store_float(std::byte* p, DType dst, double v);
// Stores a computed int64: wrapped for integral dtypes, (v != 0) for bool, converted like
// torch for floats (to float first for f16/bf16).
void store_int(std::byte* p, DType dst, int64_t v);
// Copies one element from dtype `src` to dtype `dst` with cast semantics.
void cast_element(const std::byte* from, DType src, std::byte* to, DType dst);

// The nearest value of floating dtype `t` to v (identity for f64).
double round_to(double v, DType t);
// Converts a double to an integral/bool dtype with the semantics of load_int.
int64_t int_from_double(double v, DType t);
// Wraps an int64 to an integral/bool dtype.
int64_t wrap_int(int64_t v, DType t);

// Modular int64 arithmetic (two's complement wraparound, no undefined behaviour).
inline int64_t wrap_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
inline int64_t wrap_sub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
inline int64_t wrap_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

// A tensor's elements as the loops address them: element at offset k (in elements, relative
// to the view's first element) lives at base + k * itemsize.
struct Elements {
  std::byte* base = nullptr;
  DType dtype = DType::f32;
  int64_t itemsize = 4;

  Elements() = default;
  explicit Elements(const TensorData& t);
  std::byte* at(int64_t offset) const { return base + offset * itemsize; }
};

// ---- The strided loop --------------------------------------------------------------------

// Visits every index of `sizes` in row-major order and calls fn(offsets), where offsets[k] is
// the element offset of that index in operand k (the sum of index * strides[k][d]). An N-d
// counter: the innermost dimension is a tight loop, the counter carries into the outer ones.
// Rank 0 visits once; any size 0 visits nothing. One allocation per call, none per element.
template <size_t N, class Fn>
void for_each_index(std::span<const int64_t> sizes, const std::array<std::span<const int64_t>, N>& strides,
                    Fn&& fn) {
  const size_t rank = sizes.size();
  for (int64_t s : sizes)
    if (s == 0) return;
  std::array<int64_t, N> offsets{};
  if (rank == 0) {
    fn(offsets);
    return;
  }
  std::vector<int64_t> counter(rank, 0);
  const size_t inner = rank - 1;
  for (;;) {
    std::array<int64_t, N> at = offsets;
    for (int64_t j = 0; j < sizes[inner]; ++j) {
      fn(at);
      for (size_t k = 0; k < N; ++k) at[k] += strides[k][inner];
    }
    // Carry into the outer dimensions.
    size_t d = inner;
    for (;;) {
      if (d == 0) return;
      --d;
      ++counter[d];
      for (size_t k = 0; k < N; ++k) offsets[k] += strides[k][d];
      if (counter[d] < sizes[d]) break;
      for (size_t k = 0; k < N; ++k) offsets[k] -= strides[k][d] * sizes[d];
      counter[d] = 0;
    }
  }
}

// ---- Tensors -----------------------------------------------------------------------------

// Checks that a tensor is a readable host tensor: on the cpu, strides matching the rank, every
// element inside its storage. `what` names it in the error ("input 1 of add").
void check_host(const TensorData& t, std::string_view what);

// Strides to read `t` as if it had sizes `out_sizes` (numpy broadcasting: dims aligned from
// the right, size-1 dims read with stride 0). Throws naming `what` when it does not broadcast.
std::vector<int64_t> broadcast_strides(const TensorData& t, std::span<const int64_t> out_sizes,
                                       std::string_view what);

// Copies src into dst (same sizes, any strides and dtypes) with cast semantics.
void copy_elements(const TensorData& src, const TensorData& dst);

// A view of t with different sizes/strides/offset (sharing storage).
TensorData make_view(const TensorData& t, std::vector<int64_t> sizes, std::vector<int64_t> strides,
                     int64_t offset);

// Index of the attribute called `name` in op's attribute list (throws if the op has none).
size_t attr_slot(OpId op, std::string_view name);

int64_t product(std::span<const int64_t> sizes);
std::string sizes_str(std::span<const int64_t> sizes);  // "[2, 3]"

}  // namespace kiln::eval::detail
