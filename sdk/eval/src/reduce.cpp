// Reductions. The input's dims split into kept ("outer") and reduced ("inner") ones; for each
// output element (an outer index, in row-major order, which is also the contiguous output
// order with or without keepdim) the kernel folds the elements at the inner offsets, visited in
// row-major order of the reduced dims (so argmax over all dims returns the flat index).
//
// Accumulation: floats in double, sums compensated (Neumaier: exact to about one rounding of the
// total at any length, so the reference stays the yardstick of the targets' long sums), integers
// in int64 with wraparound; the result is rounded or wrapped to the output dtype once. NaN propagates through max/min/logsumexp/sum...;
// argmax/argmin take the first NaN as the extreme (as torch). max/min/argmax/argmin of an
// empty set are errors; sum of nothing is 0, prod 1, mean NaN, logsumexp -inf.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels.h"
#include "kiln/graph/error.h"
#include "kiln/graph/meta.h"
#include "values.h"

namespace kiln::eval::detail {

namespace {

struct Split {
  std::vector<int64_t> outer_sizes, outer_strides, out_strides;
  std::vector<int64_t> inner_offsets;  // element offsets of the reduced elements, row-major
};

Split split_dims(const KernelArgs& a) {
  const TensorData& x = a.inputs[0];
  const int64_t rank = x.rank();
  const std::vector<int64_t>& dims = a.attrs.ints(attr_slot(a.op, "dims"));
  std::vector<bool> reduced(static_cast<size_t>(rank), dims.empty());
  for (int64_t d : dims) {
    KILN_CHECK(d >= 0 && d < rank, op_name(a.op), ": dim ", d, " is out of range for a tensor of rank ", rank);
    KILN_CHECK(!reduced[static_cast<size_t>(d)], op_name(a.op), ": dim ", d, " is listed twice");
    reduced[static_cast<size_t>(d)] = true;
  }
  if (a.op == OpId::argmax || a.op == OpId::argmin)
    KILN_CHECK(dims.size() <= 1, op_name(a.op), " takes at most one dim, got ", dims.size());

  Split s;
  std::vector<int64_t> inner_sizes, inner_strides;
  for (int64_t d = 0; d < rank; ++d) {
    const size_t k = static_cast<size_t>(d);
    (reduced[k] ? inner_sizes : s.outer_sizes).push_back(x.sizes[k]);
    (reduced[k] ? inner_strides : s.outer_strides).push_back(x.strides[k]);
  }
  KILN_CHECK(product(s.outer_sizes) == a.out.numel(), "reference: ", op_name(a.op), " of ", sizes_str(x.sizes),
             " over dims ", sizes_str(dims), " has ", product(s.outer_sizes), " results, but the output ",
             sizes_str(a.out.sizes), " holds ", a.out.numel());
  s.out_strides = contiguous_strides(std::span<const int64_t>(s.outer_sizes));
  s.inner_offsets.reserve(static_cast<size_t>(product(inner_sizes)));
  for_each_index<1>(inner_sizes, {inner_strides},
                    [&](const std::array<int64_t, 1>& o) { s.inner_offsets.push_back(o[0]); });
  return s;
}

// Calls fold(input elements, offset of this output's first input element, offsets, output
// element) for every output element.
template <class Fold>
void for_each_output(const KernelArgs& a, Fold&& fold) {
  const Split s = split_dims(a);
  const Elements in(a.inputs[0]), out(a.out);
  for_each_index<2>(s.outer_sizes, {s.outer_strides, s.out_strides}, [&](const std::array<int64_t, 2>& o) {
    fold(in, o[0], s.inner_offsets, out.at(o[1]));
  });
}

using Offsets = std::vector<int64_t>;

// A sum in double with Neumaier's compensation: the rounding error of every add is kept apart
// and added back at the end (where the sum overflowed to +-inf, or is NaN, the sum as it is).
struct CompensatedSum {
  double sum = 0.0, error = 0.0;
  void add(double v) {
    const double t = sum + v;
    error += std::abs(sum) >= std::abs(v) ? (sum - t) + v : (v - t) + sum;
    sum = t;
  }
  double value() const { return std::isfinite(sum) ? sum + error : sum; }
};

void require_nonempty(const KernelArgs& a, const Offsets& offsets) {
  KILN_CHECK(!offsets.empty(), op_name(a.op), ": cannot reduce over an empty set of elements (input sizes ",
             sizes_str(a.inputs[0].sizes), "); the operation has no identity");
}

void sum_or_prod(const KernelArgs& a) {
  const DType src = a.inputs[0].dtype, dst = a.out.dtype;
  const bool is_sum = a.op == OpId::sum;
  if (is_floating(dst)) {
    for_each_output(a, [&](const Elements& in, int64_t base, const Offsets& offs, std::byte* o) {
      if (is_sum) {
        CompensatedSum acc;
        for (int64_t k : offs) acc.add(load_float(in.at(base + k), src, dst));
        store_float(o, dst, acc.value());
        return;
      }
      double acc = 1.0;
      for (int64_t k : offs) acc *= load_float(in.at(base + k), src, dst);
      store_float(o, dst, acc);
    });
  } else {
    for_each_output(a, [&](const Elements& in, int64_t base, const Offsets& offs, std::byte* o) {
      int64_t acc = is_sum ? 0 : 1;
      for (int64_t k : offs) {
        const int64_t v = load_int(in.at(base + k), src, dst == DType::bool_ ? DType::i64 : dst);
        acc = is_sum ? wrap_add(acc, v) : wrap_mul(acc, v);
      }
      store_int(o, dst, acc);
    });
  }
}

void mean(const KernelArgs& a) {
  const DType src = a.inputs[0].dtype, dst = a.out.dtype;
  const DType compute = is_floating(dst) ? dst : DType::f64;
  for_each_output(a, [&](const Elements& in, int64_t base, const Offsets& offs, std::byte* o) {
    CompensatedSum acc;
    for (int64_t k : offs) acc.add(load_float(in.at(base + k), src, compute));
    store_float(o, dst, acc.value() / static_cast<double>(offs.size()));  // 0/0 = NaN when empty
  });
}

void max_or_min(const KernelArgs& a) {
  const DType src = a.inputs[0].dtype, dst = a.out.dtype;
  const bool is_max = a.op == OpId::max;
  if (is_floating(dst)) {
    for_each_output(a, [&](const Elements& in, int64_t base, const Offsets& offs, std::byte* o) {
      require_nonempty(a, offs);
      double best = load_float(in.at(base + offs[0]), src, dst);
      for (size_t k = 1; k < offs.size() && !std::isnan(best); ++k) {
        const double v = load_float(in.at(base + offs[k]), src, dst);
        if (std::isnan(v) || (is_max ? v > best : v < best)) best = v;
      }
      store_float(o, dst, best);
    });
  } else {
    for_each_output(a, [&](const Elements& in, int64_t base, const Offsets& offs, std::byte* o) {
      require_nonempty(a, offs);
      int64_t best = load_int(in.at(base + offs[0]), src, dst);
      for (size_t k = 1; k < offs.size(); ++k) {
        const int64_t v = load_int(in.at(base + offs[k]), src, dst);
        if (is_max ? v > best : v < best) best = v;
      }
      store_int(o, dst, best);
    });
  }
}

void arg_extreme(const KernelArgs& a) {
  const DType src = a.inputs[0].dtype, dst = a.out.dtype;
  const bool is_max = a.op == OpId::argmax;
  if (is_floating(src)) {
    for_each_output(a, [&](const Elements& in, int64_t base, const Offsets& offs, std::byte* o) {
      require_nonempty(a, offs);
      size_t best_at = 0;
      double best = load_float(in.at(base + offs[0]), src, DType::f64);
      for (size_t k = 1; k < offs.size() && !std::isnan(best); ++k) {
        const double v = load_float(in.at(base + offs[k]), src, DType::f64);
        if (std::isnan(v) || (is_max ? v > best : v < best)) {
          best = v;
          best_at = k;
        }
      }
      store_int(o, dst, static_cast<int64_t>(best_at));
    });
  } else {
    for_each_output(a, [&](const Elements& in, int64_t base, const Offsets& offs, std::byte* o) {
      require_nonempty(a, offs);
      size_t best_at = 0;
      int64_t best = load_int(in.at(base + offs[0]), src, DType::i64);
      for (size_t k = 1; k < offs.size(); ++k) {
        const int64_t v = load_int(in.at(base + offs[k]), src, DType::i64);
        if (is_max ? v > best : v < best) {
          best = v;
          best_at = k;
        }
      }
      store_int(o, dst, static_cast<int64_t>(best_at));
    });
  }
}

// Two passes in double; divides by max(N - correction, 0) as torch does (x/0 gives inf or NaN).
void var(const KernelArgs& a) {
  const DType src = a.inputs[0].dtype, dst = a.out.dtype;
  const DType compute = is_floating(dst) ? dst : DType::f64;
  const int64_t correction = a.attrs.i(attr_slot(a.op, "correction"));
  for_each_output(a, [&](const Elements& in, int64_t base, const Offsets& offs, std::byte* o) {
    const int64_t n = static_cast<int64_t>(offs.size());
    CompensatedSum sum;
    for (int64_t k : offs) sum.add(load_float(in.at(base + k), src, compute));
    const double mean = sum.value() / static_cast<double>(n);
    CompensatedSum squares;
    for (int64_t k : offs) {
      const double d = load_float(in.at(base + k), src, compute) - mean;
      squares.add(d * d);
    }
    store_float(o, dst, squares.value() / static_cast<double>(std::max<int64_t>(n - correction, 0)));
  });
}

// log(sum(exp(x))) = m + log(sum(exp(x - m))) with m the maximum.
void logsumexp(const KernelArgs& a) {
  const DType src = a.inputs[0].dtype, dst = a.out.dtype;
  const DType compute = is_floating(dst) ? dst : DType::f64;
  for_each_output(a, [&](const Elements& in, int64_t base, const Offsets& offs, std::byte* o) {
    double m = -std::numeric_limits<double>::infinity();
    bool nan = false;
    for (int64_t k : offs) {
      const double v = load_float(in.at(base + k), src, compute);
      nan = nan || std::isnan(v);
      m = std::max(m, v);
    }
    double result = m;  // empty: -inf; all -inf: -inf; any +inf: +inf
    if (nan) {
      result = std::numeric_limits<double>::quiet_NaN();
    } else if (std::isfinite(m)) {
      CompensatedSum sum;
      for (int64_t k : offs) sum.add(std::exp(load_float(in.at(base + k), src, compute) - m));
      result = m + std::log(sum.value());
    }
    store_float(o, dst, result);
  });
}

}  // namespace

void reduce_kernel(const KernelArgs& a) {
  KILN_CHECK(a.inputs.size() == 1, "reference: ", op_name(a.op), " takes 1 input, got ", a.inputs.size());
  switch (a.op) {
    case OpId::sum: case OpId::prod: sum_or_prod(a); return;
    case OpId::mean: mean(a); return;
    case OpId::max: case OpId::min: max_or_min(a); return;
    case OpId::argmax: case OpId::argmin: arg_extreme(a); return;
    case OpId::var: var(a); return;
    case OpId::logsumexp: logsumexp(a); return;
    default: break;
  }
  internal_fail("reference: ", op_name(a.op), " is not a reduction");
}

}  // namespace kiln::eval::detail
