// matmul with numpy semantics: a 1-D left operand is a row [1, k], a 1-D right operand a
// column [k, 1] (the added dim is absent from the output), leading batch dims broadcast.
// Operands are first gathered into row-major vectors of the compute domain (double for
// floating outputs, int64 with wraparound otherwise); each output element is the sum over k
// in increasing order, rounded once to the output dtype.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "kernels.h"
#include "kiln/graph/error.h"
#include "kiln/graph/meta.h"
#include "values.h"

namespace kiln::eval::detail {

namespace {

// t as a matrix (or a batch of matrices).
TensorData as_matrix(const TensorData& t, bool left) {
  if (t.rank() != 1) return t;
  if (left) return make_view(t, {1, t.sizes[0]}, {0, t.strides[0]}, t.offset);
  return make_view(t, {t.sizes[0], 1}, {t.strides[0], 0}, t.offset);
}

template <class T>
std::vector<T> gather(const TensorData& t, DType compute) {
  std::vector<T> values;
  values.reserve(static_cast<size_t>(t.numel()));
  const Elements in(t);
  for_each_index<1>(t.sizes, {t.strides}, [&](const std::array<int64_t, 1>& o) {
    if constexpr (std::is_same_v<T, double>) {
      values.push_back(load_float(in.at(o[0]), t.dtype, compute));
    } else {
      values.push_back(load_int(in.at(o[0]), t.dtype, compute));
    }
  });
  return values;
}

// Strides of a row-major tensor of `sizes`'s leading (batch) dims, broadcast to `batch`.
std::vector<int64_t> batch_strides(std::span<const int64_t> sizes, std::span<const int64_t> batch) {
  const std::vector<int64_t> strides = contiguous_strides(sizes);
  const size_t rank = sizes.size() - 2;
  std::vector<int64_t> out(batch.size(), 0);
  for (size_t k = 0; k < rank; ++k)
    if (sizes[k] != 1) out[batch.size() - rank + k] = strides[k];
  return out;
}

template <class T>
void multiply(const TensorData& A, const TensorData& B, std::span<const int64_t> batch, const TensorData& out) {
  const DType compute = out.dtype;
  const std::vector<T> av = gather<T>(A, compute), bv = gather<T>(B, compute);
  const int64_t M = A.sizes[A.sizes.size() - 2], K = A.sizes.back(), N = B.sizes.back();
  const std::vector<int64_t> sa = batch_strides(A.sizes, batch), sb = batch_strides(B.sizes, batch);
  const Elements o(out);
  int64_t pos = 0;
  std::vector<T> row(static_cast<size_t>(N));
  for_each_index<2>(batch, {sa, sb}, [&](const std::array<int64_t, 2>& base) {
    const T* a = av.data() + base[0];
    const T* b = bv.data() + base[1];
    for (int64_t i = 0; i < M; ++i) {
      std::fill(row.begin(), row.end(), T{0});
      for (int64_t k = 0; k < K; ++k) {
        const T aik = a[i * K + k];
        for (int64_t j = 0; j < N; ++j) {
          if constexpr (std::is_same_v<T, double>) {
            row[static_cast<size_t>(j)] += aik * b[k * N + j];
          } else {
            row[static_cast<size_t>(j)] = wrap_add(row[static_cast<size_t>(j)], wrap_mul(aik, b[k * N + j]));
          }
        }
      }
      for (int64_t j = 0; j < N; ++j) {
        if constexpr (std::is_same_v<T, double>) {
          store_float(o.at(pos++), out.dtype, row[static_cast<size_t>(j)]);
        } else {
          store_int(o.at(pos++), out.dtype, row[static_cast<size_t>(j)]);
        }
      }
    }
  });
}

}  // namespace

void matmul_kernel(const KernelArgs& a) {
  KILN_CHECK(a.inputs.size() == 2, "matmul: takes 2 inputs, got ", a.inputs.size());
  const TensorData& x = a.inputs[0];
  const TensorData& y = a.inputs[1];
  KILN_CHECK(x.rank() >= 1 && y.rank() >= 1, "matmul: both operands need at least one dim, got ",
             sizes_str(x.sizes), " and ", sizes_str(y.sizes));
  const TensorData A = as_matrix(x, true), B = as_matrix(y, false);
  const int64_t M = A.sizes[A.sizes.size() - 2], K = A.sizes.back(), K2 = B.sizes[B.sizes.size() - 2],
                N = B.sizes.back();
  KILN_CHECK(K == K2, "matmul: ", sizes_str(x.sizes), " @ ", sizes_str(y.sizes), ": inner sizes ", K, " and ", K2,
             " differ");
  // Broadcast the batch dims (all but the last two).
  const size_t ra = A.sizes.size() - 2, rb = B.sizes.size() - 2, rank = std::max(ra, rb);
  std::vector<int64_t> batch(rank, 1);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t sa = d + ra >= rank ? A.sizes[d + ra - rank] : 1;
    const int64_t sb = d + rb >= rank ? B.sizes[d + rb - rank] : 1;
    KILN_CHECK(sa == sb || sa == 1 || sb == 1, "matmul: batch dims of ", sizes_str(x.sizes), " and ",
               sizes_str(y.sizes), " do not broadcast");
    batch[d] = sa == 1 ? sb : sa;
  }
  KILN_CHECK(product(batch) * M * N == a.out.numel(), "matmul: ", sizes_str(x.sizes), " @ ", sizes_str(y.sizes),
             " does not give the output sizes ", sizes_str(a.out.sizes));
  if (is_floating(a.out.dtype)) {
    multiply<double>(A, B, batch, a.out);
  } else {
    multiply<int64_t>(A, B, batch, a.out);
  }
}

}  // namespace kiln::eval::detail
