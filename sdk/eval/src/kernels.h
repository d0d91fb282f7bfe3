// Internal to the reference target: the kernel signature and the kernel families. The
// interpreter (interpreter.cpp) maps each OpId to one of these.
#pragma once

#include <cstdint>
#include <span>

#include "kiln/graph/ops.h"
#include "kiln/graph/tensor_data.h"

namespace kiln::eval::detail {

// What a kernel gets: the op (a family kernel serves several), its checked host inputs and
// attributes, and the output, already allocated (contiguous, of the requested dtype and sizes).
struct KernelArgs {
  OpId op;
  std::span<const TensorData> inputs;
  const Attrs& attrs;
  const TensorData& out;
};
using Kernel = void (*)(const KernelArgs&);

// pointwise.cpp
void unary_kernel(const KernelArgs& a);    // neg ... isnan, cast
void binary_kernel(const KernelArgs& a);   // add ... logical_or, philox
void where_kernel(const KernelArgs& a);
// reduce.cpp
void reduce_kernel(const KernelArgs& a);   // sum, mean, max, min, prod, argmax, argmin, var, logsumexp
// layout.cpp
void reshape_kernel(const KernelArgs& a);  // reshape, squeeze, unsqueeze (row-major order is kept)
void permute_kernel(const KernelArgs& a);
void expand_kernel(const KernelArgs& a);
void slice_kernel(const KernelArgs& a);
void unfold_kernel(const KernelArgs& a);
void cat_kernel(const KernelArgs& a);
void pad_kernel(const KernelArgs& a);
void index_select_kernel(const KernelArgs& a);
void gather_kernel(const KernelArgs& a);
void scatter_kernel(const KernelArgs& a);      // scatter_add, scatter, scatter_reduce
// matmul.cpp
void matmul_kernel(const KernelArgs& a);
// sources.cpp
void constant_kernel(const KernelArgs& a);
void full_kernel(const KernelArgs& a);
void arange_kernel(const KernelArgs& a);
void iota_kernel(const KernelArgs& a);
// custom.cpp
void custom_kernel(const KernelArgs& a);   // custom: the registered op's host kernel

}  // namespace kiln::eval::detail
