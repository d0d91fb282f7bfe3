// Layout kernels. Most build a strided view of the input (sharing its storage: a permuted,
// broadcast or sliced TensorData) and copy it into the contiguous output; nothing is
// computed, only elements moved (with a dtype conversion where cat promotes).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels.h"
#include "kiln/graph/error.h"
#include "values.h"

namespace kiln::eval::detail {

namespace {

int64_t dim_attr(const KernelArgs& a, std::string_view name, int64_t rank) {
  const int64_t d = a.attrs.i(attr_slot(a.op, name));
  KILN_CHECK(d >= 0 && d < rank, op_name(a.op), ": ", name, " ", d, " is out of range for a tensor of rank ",
             rank);
  return d;
}

// The output viewed with one dim narrowed to [start, start + length).
TensorData narrow(const TensorData& t, size_t dim, int64_t start, int64_t length) {
  std::vector<int64_t> sizes = t.sizes;
  sizes[dim] = length;
  return make_view(t, std::move(sizes), t.strides, t.offset + start * t.strides[dim]);
}

// The tensor viewed with one dim removed, at position `index` of it.
TensorData select(const TensorData& t, size_t dim, int64_t index) {
  std::vector<int64_t> sizes = t.sizes, strides = t.strides;
  sizes.erase(sizes.begin() + static_cast<std::ptrdiff_t>(dim));
  strides.erase(strides.begin() + static_cast<std::ptrdiff_t>(dim));
  return make_view(t, std::move(sizes), std::move(strides), t.offset + index * t.strides[dim]);
}

}  // namespace

// reshape, squeeze, unsqueeze: the elements in row-major order are unchanged; only the sizes
// (given by the output) differ.
void reshape_kernel(const KernelArgs& a) {
  const TensorData& x = a.inputs[0];
  KILN_CHECK(x.numel() == a.out.numel(), op_name(a.op), ": cannot view ", sizes_str(x.sizes), " (", x.numel(),
             " elements) as ", sizes_str(a.out.sizes), " (", a.out.numel(), " elements)");
  const Elements in(x), out(a.out);
  int64_t k = 0;
  for_each_index<1>(x.sizes, {x.strides}, [&](const std::array<int64_t, 1>& o) {
    cast_element(in.at(o[0]), in.dtype, out.at(k++), out.dtype);
  });
}

void permute_kernel(const KernelArgs& a) {
  const TensorData& x = a.inputs[0];
  const std::vector<int64_t>& dims = a.attrs.ints(attr_slot(a.op, "dims"));
  KILN_CHECK(static_cast<int64_t>(dims.size()) == x.rank(), "permute: dims ", sizes_str(dims),
             " is not a permutation of the ", x.rank(), " dims of ", sizes_str(x.sizes));
  std::vector<bool> seen(dims.size(), false);
  std::vector<int64_t> sizes, strides;
  for (int64_t d : dims) {
    KILN_CHECK(d >= 0 && d < x.rank() && !seen[static_cast<size_t>(d)], "permute: dims ", sizes_str(dims),
               " is not a permutation of the ", x.rank(), " dims of ", sizes_str(x.sizes));
    seen[static_cast<size_t>(d)] = true;
    sizes.push_back(x.sizes[static_cast<size_t>(d)]);
    strides.push_back(x.strides[static_cast<size_t>(d)]);
  }
  copy_elements(make_view(x, std::move(sizes), std::move(strides), x.offset), a.out);
}

// Reads the input with stride 0 along broadcast dims.
void expand_kernel(const KernelArgs& a) {
  const TensorData& x = a.inputs[0];
  std::vector<int64_t> strides = broadcast_strides(x, a.out.sizes, "the input of expand");
  copy_elements(make_view(x, a.out.sizes, std::move(strides), x.offset), a.out);
}

// Python slicing: negative start/end count from the end, then both clamp to [0, size];
// length = ceil((end - start) / step) when end > start, else 0.
void slice_kernel(const KernelArgs& a) {
  const TensorData& x = a.inputs[0];
  const size_t dim = static_cast<size_t>(dim_attr(a, "dim", x.rank()));
  const int64_t n = x.sizes[dim];
  int64_t start = a.attrs.i(attr_slot(a.op, "start"));
  int64_t end = a.attrs.i(attr_slot(a.op, "end"));
  const int64_t step = a.attrs.i(attr_slot(a.op, "step"));
  KILN_CHECK(step >= 1, "slice: step must be at least 1, got ", step);
  auto resolve = [n](int64_t i) {
    if (i < 0) i = i < -n ? 0 : i + n;
    return std::min(i, n);
  };
  start = resolve(start);
  end = resolve(end);
  const int64_t length = end > start ? (end - start + step - 1) / step : 0;
  std::vector<int64_t> sizes = x.sizes, strides = x.strides;
  sizes[dim] = length;
  strides[dim] *= step;
  copy_elements(make_view(x, std::move(sizes), std::move(strides), x.offset + start * x.strides[dim]), a.out);
}

// The windows of dim as a strided view (window i starts at i * step; its elements are the dim's
// own stride apart), copied out.
void unfold_kernel(const KernelArgs& a) {
  const TensorData& x = a.inputs[0];
  const size_t dim = static_cast<size_t>(dim_attr(a, "dim", x.rank()));
  const int64_t size = a.attrs.i(attr_slot(a.op, "size"));
  const int64_t step = a.attrs.i(attr_slot(a.op, "step"));
  KILN_CHECK(size >= 1 && step >= 1 && x.sizes[dim] >= size, "unfold: windows of ", size, " every ", step,
             " do not fit dim ", dim, " of size ", x.sizes[dim]);
  std::vector<int64_t> sizes = x.sizes, strides = x.strides;
  sizes[dim] = (x.sizes[dim] - size) / step + 1;
  strides[dim] = x.strides[dim] * step;
  sizes.push_back(size);
  strides.push_back(x.strides[dim]);
  copy_elements(make_view(x, std::move(sizes), std::move(strides), x.offset), a.out);
}

// Each input is copied (converted to the output dtype) into its stretch of the output along
// `dim`. Empty 1-D inputs of another rank are skipped, as torch allows.
void cat_kernel(const KernelArgs& a) {
  KILN_CHECK(!a.inputs.empty(), "cat: needs at least one input");
  const size_t dim = static_cast<size_t>(dim_attr(a, "dim", a.out.rank()));
  int64_t at = 0;
  for (size_t k = 0; k < a.inputs.size(); ++k) {
    const TensorData& x = a.inputs[k];
    if (x.rank() != a.out.rank() && x.numel() == 0) continue;
    KILN_CHECK(x.rank() == a.out.rank() && at + x.sizes[dim] <= a.out.sizes[dim], "cat: input ", k, " of sizes ",
               sizes_str(x.sizes), " does not fit the output ", sizes_str(a.out.sizes), " at offset ", at,
               " along dim ", dim);
    copy_elements(x, narrow(a.out, dim, at, x.sizes[dim]));
    at += x.sizes[dim];
  }
  KILN_CHECK(at == a.out.sizes[dim], "cat: the inputs fill ", at, " of the output's ", a.out.sizes[dim],
             " along dim ", dim);
}

// Fills the output with `value`, then copies the part of the input that survives the pads:
// along each padded dim d (pads[2k], pads[2k+1] are the low and high pads of dim rank-1-k),
// input range [max(0, -low), size - max(0, -high)) lands at output position max(0, low).
void pad_kernel(const KernelArgs& a) {
  const TensorData& x = a.inputs[0];
  const std::vector<int64_t>& pads = a.attrs.ints(attr_slot(a.op, "pads"));
  const double value = a.attrs.f(attr_slot(a.op, "value"));
  const size_t rank = x.sizes.size();
  KILN_CHECK(pads.size() % 2 == 0 && pads.size() / 2 <= rank, "pad: ", pads.size(),
             " pad values do not form pairs over the ", rank, " dims of ", sizes_str(x.sizes));
  KILN_CHECK(a.out.rank() == x.rank(), "pad: output rank ", a.out.rank(), " differs from input rank ", x.rank());

  const Elements out(a.out);
  for (int64_t k = 0; k < a.out.numel(); ++k) store_float(out.at(k), out.dtype, value);

  TensorData src = x, dst = a.out;
  for (size_t k = 0; k < pads.size() / 2; ++k) {
    const size_t d = rank - 1 - k;
    const int64_t low = pads[2 * k], high = pads[2 * k + 1];
    KILN_CHECK(a.out.sizes[d] == x.sizes[d] + low + high, "pad: output size ", a.out.sizes[d], " at dim ", d,
               " is not ", x.sizes[d], " + ", low, " + ", high);
    const int64_t from = std::max<int64_t>(0, -low);
    const int64_t length = std::max<int64_t>(0, x.sizes[d] - from - std::max<int64_t>(0, -high));
    src = narrow(src, d, from, length);
    dst = narrow(dst, d, std::max<int64_t>(0, low), length);
  }
  copy_elements(src, dst);
}

void index_select_kernel(const KernelArgs& a) {
  KILN_CHECK(a.inputs.size() == 2, "index_select: takes 2 inputs (x, index), got ", a.inputs.size());
  const TensorData& x = a.inputs[0];
  const TensorData& index = a.inputs[1];
  const size_t dim = static_cast<size_t>(dim_attr(a, "dim", x.rank()));
  KILN_CHECK(is_integral(index.dtype) && index.rank() <= 1, "index_select: the index must be a 1-D i32 or i64 ",
             "tensor, got ", dtype_name(index.dtype), sizes_str(index.sizes));
  const int64_t count = index.numel();
  std::vector<int64_t> expected = x.sizes;
  expected[dim] = count;
  KILN_CHECK(a.out.sizes == expected, "index_select: output sizes ", sizes_str(a.out.sizes), " should be ",
             sizes_str(expected));
  const Elements idx(index);
  const int64_t idx_stride = index.rank() == 1 ? index.strides[0] : 0;
  for (int64_t j = 0; j < count; ++j) {
    const int64_t i = load_int(idx.at(j * idx_stride), index.dtype, DType::i64);
    KILN_CHECK(i >= 0 && i < x.sizes[dim], "index_select: index ", i, " (at position ", j,
               ") is out of range for dim ", dim, " of size ", x.sizes[dim]);
    copy_elements(select(x, dim, i), select(a.out, dim, j));
  }
}

// y[i] = x[i with i[dim] = index[i]] over the index's positions.
void gather_kernel(const KernelArgs& a) {
  KILN_CHECK(a.inputs.size() == 2, "gather: takes 2 inputs (x, index), got ", a.inputs.size());
  const TensorData& x = a.inputs[0];
  const TensorData& index = a.inputs[1];
  const size_t dim = static_cast<size_t>(dim_attr(a, "dim", x.rank()));
  KILN_CHECK(is_integral(index.dtype) && index.rank() == x.rank(), "gather: the index must be an i32 or i64 tensor ",
             "of x's rank ", x.rank(), ", got ", dtype_name(index.dtype), sizes_str(index.sizes));
  KILN_CHECK(a.out.sizes == index.sizes, "gather: output sizes ", sizes_str(a.out.sizes), " should be the index's ",
             sizes_str(index.sizes));
  for (size_t d = 0; d < x.sizes.size(); ++d)
    KILN_CHECK(d == dim || index.sizes[d] <= x.sizes[d], "gather: index ", sizes_str(index.sizes), " is larger than x ",
               sizes_str(x.sizes), " at dim ", d);
  std::vector<int64_t> x_strides = x.strides;  // x at the index's position, dim `dim` added per element
  x_strides[dim] = 0;
  const Elements in(x), idx(index), out(a.out);
  int64_t position = 0;
  for_each_index<3>(index.sizes, {a.out.strides, index.strides, x_strides}, [&](const std::array<int64_t, 3>& o) {
    const int64_t i = load_int(idx.at(o[1]), index.dtype, DType::i64);
    KILN_CHECK(i >= 0 && i < x.sizes[dim], "gather: index ", i, " (at element ", position,
               " of the index) is out of range for dim ", dim, " of size ", x.sizes[dim]);
    std::memcpy(out.at(o[0]), in.at(o[2] + i * x.strides[dim]), static_cast<size_t>(in.itemsize));
    ++position;
  });
}

// y = x, then y[i with i[dim] = index[i]] += src[i] (scatter_add), = src[i] (scatter: the last
// position wins) or = reduce(y[..], src[i]) (scatter_reduce) over the index's positions, in order.
void scatter_kernel(const KernelArgs& a) {
  const std::string op(op_name(a.op));
  KILN_CHECK(a.inputs.size() == 3, op, ": takes 3 inputs (x, index, src), got ", a.inputs.size());
  const TensorData& x = a.inputs[0];
  const TensorData& index = a.inputs[1];
  const TensorData& src = a.inputs[2];
  const size_t dim = static_cast<size_t>(dim_attr(a, "dim", x.rank()));
  KILN_CHECK(is_integral(index.dtype) && index.rank() == x.rank(), op, ": the index must be an i32 or i64 ",
             "tensor of x's rank ", x.rank(), ", got ", dtype_name(index.dtype), sizes_str(index.sizes));
  KILN_CHECK(src.sizes == index.sizes && src.dtype == x.dtype, op, ": src ", dtype_name(src.dtype),
             sizes_str(src.sizes), " should have the index's sizes ", sizes_str(index.sizes), " and x's dtype ",
             dtype_name(x.dtype));
  KILN_CHECK(a.out.sizes == x.sizes && a.out.dtype == x.dtype, op, ": the output should be x's ",
             dtype_name(x.dtype), sizes_str(x.sizes));
  for (size_t d = 0; d < x.sizes.size(); ++d)
    KILN_CHECK(d == dim || index.sizes[d] <= x.sizes[d], op, ": index ", sizes_str(index.sizes),
               " is larger than x ", sizes_str(x.sizes), " at dim ", d);
  // How a src value meets the element it reaches: written over it (scatter), added (scatter_add)
  // or folded by scatter_reduce's reduction.
  const bool write = a.op == OpId::scatter, add = a.op == OpId::scatter_add;
  ScatterReduction reduction = ScatterReduction::prod;
  if (a.op == OpId::scatter_reduce) {
    const std::string& reduce = a.attrs.s(attr_slot(a.op, "reduce"));
    const auto r = parse_scatter_reduction(reduce);
    KILN_CHECK(r, op, ": unknown reduce \"", reduce, "\"");
    reduction = *r;
  }
  copy_elements(x, a.out);
  std::vector<int64_t> out_strides = a.out.strides;  // y at the index's position, dim `dim` added per element
  out_strides[dim] = 0;
  const Elements idx(index), from(src), out(a.out);
  const DType t = x.dtype;
  // Floats fold in double and round once (kernels fold f16/bf16 in f32 and round once too); a
  // NaN on either side of a maximum or minimum is kept, as the maximum and minimum ops do.
  std::vector<double> acc;
  if (!write && is_floating(t))
    for (int64_t k = 0; k < a.out.numel(); ++k) acc.push_back(load_float(out.at(k), t, DType::f64));
  auto fold_float = [&](double y, double v) {
    if (add) return y + v;
    switch (reduction) {
      case ScatterReduction::prod: return y * v;
      case ScatterReduction::amax: return std::isnan(y) || std::isnan(v) ? std::numeric_limits<double>::quiet_NaN() : std::max(y, v);
      case ScatterReduction::amin: return std::isnan(y) || std::isnan(v) ? std::numeric_limits<double>::quiet_NaN() : std::min(y, v);
    }
    return y;
  };
  auto fold_int = [&](int64_t y, int64_t v) {
    if (add) return wrap_add(y, v);
    switch (reduction) {
      case ScatterReduction::prod: return wrap_mul(y, v);
      case ScatterReduction::amax: return std::max(y, v);
      case ScatterReduction::amin: return std::min(y, v);
    }
    return y;
  };
  int64_t position = 0;
  for_each_index<3>(index.sizes, {out_strides, index.strides, src.strides}, [&](const std::array<int64_t, 3>& o) {
    const int64_t i = load_int(idx.at(o[1]), index.dtype, DType::i64);
    KILN_CHECK(i >= 0 && i < x.sizes[dim], op, ": index ", i, " (at element ", position,
               " of the index) is out of range for dim ", dim, " of size ", x.sizes[dim]);
    const int64_t at = o[0] + i * a.out.strides[dim];  // (the output is contiguous)
    if (write)
      std::memcpy(out.at(at), from.at(o[2]), static_cast<size_t>(out.itemsize));
    else if (is_floating(t))
      acc[static_cast<size_t>(at)] = fold_float(acc[static_cast<size_t>(at)], load_float(from.at(o[2]), t, DType::f64));
    else
      store_int(out.at(at), t, fold_int(load_int(out.at(at), t, t), load_int(from.at(o[2]), t, t)));
    ++position;
  });
  for (size_t k = 0; k < acc.size(); ++k) store_float(out.at(static_cast<int64_t>(k)), t, acc[k]);
}

}  // namespace kiln::eval::detail
