// Source kernels: ops with no tensor inputs. (rand and randn run as their decomposition, as
// every composite does: philox and float ops.) Their output sizes come from the caller (the
// shape rule's result, with symbolic sizes already evaluated), never from the attributes.
#include <cstring>

#include "kernels.h"
#include "kiln/graph/error.h"
#include "values.h"

namespace kiln::eval::detail {

// The captured bytes, converted to the output dtype if it differs.
void constant_kernel(const KernelArgs& a) {
  const ConstantData& c = a.attrs.tensor(attr_slot(a.op, "value"));
  const int64_t n = product(c.sizes);
  KILN_CHECK(static_cast<int64_t>(c.bytes.size()) == n * dtype_size(c.dtype), "constant: ", c.bytes.size(),
             " bytes do not hold ", dtype_name(c.dtype), sizes_str(c.sizes));
  KILN_CHECK(n == a.out.numel(), "constant: the value ", dtype_name(c.dtype), sizes_str(c.sizes),
             " does not fill the output ", sizes_str(a.out.sizes));
  const int64_t itemsize = dtype_size(c.dtype);
  const Elements out(a.out);
  for (int64_t k = 0; k < n; ++k)
    cast_element(c.bytes.data() + k * itemsize, c.dtype, out.at(k), out.dtype);
}

// `value` cast to the dtype (truncated toward zero for integers, != 0 for bool).
void full_kernel(const KernelArgs& a) {
  const double value = a.attrs.f(attr_slot(a.op, "value"));
  const Elements out(a.out);
  for (int64_t k = 0; k < a.out.numel(); ++k) store_float(out.at(k), out.dtype, value);
}

// Element i is start + i * step, computed in double and cast to the dtype.
void arange_kernel(const KernelArgs& a) {
  const double start = a.attrs.f(attr_slot(a.op, "start"));
  const double step = a.attrs.f(attr_slot(a.op, "step"));
  const Elements out(a.out);
  for (int64_t k = 0; k < a.out.numel(); ++k)
    store_float(out.at(k), out.dtype, start + static_cast<double>(k) * step);
}

// Each element's position along `dim`.
void iota_kernel(const KernelArgs& a) {
  const size_t dim = static_cast<size_t>(a.attrs.i(attr_slot(a.op, "dim")));
  KILN_CHECK(dim < a.out.sizes.size(), "iota: dim ", dim, " is out of range for rank ", a.out.sizes.size());
  int64_t inner = 1;  // elements per step along dim
  for (size_t d = dim + 1; d < a.out.sizes.size(); ++d) inner *= a.out.sizes[d];
  const int64_t n = a.out.sizes[dim];
  const Elements out(a.out);
  for (int64_t k = 0; k < a.out.numel(); ++k) store_float(out.at(k), out.dtype, static_cast<double>(k / inner % n));
}

}  // namespace kiln::eval::detail
