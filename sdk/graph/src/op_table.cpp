// The op table: one OpDef per OpId, in enum order. Shape rules are shared by kind
// (unary, binary, reduction, ...) so the table itself reads as a list; composites carry
// decompositions that emit primitives only, so one decomposition pass leaves no composite.
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "kiln/graph/custom_ops.h"
#include "kiln/graph/error.h"
#include "kiln/graph/graph.h"
#include "kiln/graph/ops.h"
#include "builder.h"

namespace kiln {
namespace {

using graph_detail::Builder;
using graph_detail::float_of;
using graph_detail::iota;
using graph_detail::reduces_empty;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

std::string_view opn(const InferContext& c) { return op_name(c.op); }
const TensorMeta& arg(const InferContext& c, size_t i) { return *c.inputs[i]; }

std::string ints_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// As in torch, 0-d CPU tensors may join tensors on any device: decompositions make their
// scalar constants with `full`, which lives on the CPU.
Device common_device(const InferContext& c) {
  const TensorMeta* first = nullptr;
  for (const TensorMeta* m : c.inputs) {
    if (m->device == Device::cpu() && m->rank() == 0) continue;
    if (!first) {
      first = m;
    } else {
      KILN_CHECK(m->device == first->device, opn(c), ": inputs are on different devices (",
                 first->device.str(), " and ", m->device.str(), ")");
    }
  }
  return first ? first->device : Device::cpu();
}

// Every node output is contiguous, so strides stay empty.
TensorMeta result(const InferContext& c, DType t, SymShape sizes) {
  return TensorMeta{t, common_device(c), std::move(sizes), {}};
}

int64_t check_dim(const InferContext& c, int64_t d, int64_t rank, std::string_view what = "dim") {
  KILN_CHECK(d >= 0 && d < rank, opn(c), ": ", what, " ", d, " out of range for rank ", rank);
  return d;
}

void check_sizes(const InferContext& c, const SymShape& s) {
  for (const SymInt& v : s)
    KILN_CHECK(v.is_symbolic() || v.hint() >= 0, opn(c), ": negative size in shape ", shape_str(s));
}

// ---- sources -------------------------------------------------------------------------

TensorMeta infer_input(const InferContext&) {
  fail("input: input nodes are created with add_input");
}

TensorMeta infer_constant(const InferContext& c) {
  const ConstantData& v = c.attrs.tensor(0);
  int64_t n = 1;
  for (int64_t s : v.sizes) {
    KILN_CHECK(s >= 0, "constant: negative size in shape ", ints_str(v.sizes));
    n *= s;
  }
  const int64_t want = n * dtype_size(v.dtype);
  KILN_CHECK(static_cast<int64_t>(v.bytes.size()) == want, "constant: value holds ", v.bytes.size(),
             " bytes, expected ", want, " for ", dtype_name(v.dtype), ints_str(v.sizes));
  return result(c, v.dtype, static_shape(v.sizes));
}

TensorMeta infer_full(const InferContext& c) {
  check_sizes(c, c.attrs.symints(0));
  return result(c, c.attrs.dtype(2), c.attrs.symints(0));
}

TensorMeta infer_iota(const InferContext& c) {
  const SymShape& shape = c.attrs.symints(0);
  const DType t = c.attrs.dtype(2);
  check_sizes(c, shape);
  KILN_CHECK(!shape.empty(), "iota: the shape needs at least one dim");
  check_dim(c, c.attrs.i(1), static_cast<int64_t>(shape.size()));
  KILN_CHECK(t != DType::bool_, "iota: dtype bool is not supported");
  return result(c, t, shape);
}

// randn and rand: the shape and dtype of the attributes; the optional key is a 0-d integer.
TensorMeta infer_random(const InferContext& c) {
  const DType t = c.attrs.dtype(2);
  KILN_CHECK(is_floating(t), opn(c), ": dtype must be floating, got ", dtype_name(t));
  check_sizes(c, c.attrs.symints(0));
  if (!c.inputs.empty())
    KILN_CHECK(is_integral(arg(c, 0).dtype) && arg(c, 0).rank() == 0, opn(c),
               ": the key must be a 0-d integer tensor, got ", dtype_name(arg(c, 0).dtype), shape_str(arg(c, 0).sizes));
  return result(c, t, c.attrs.symints(0));
}

TensorMeta infer_arange(const InferContext& c) {
  const double start = c.attrs.f(0), end = c.attrs.f(1), step = c.attrs.f(2);
  const DType t = c.attrs.dtype(3);
  KILN_CHECK(std::isfinite(start) && std::isfinite(end) && std::isfinite(step),
             "arange: start, end and step must be finite");
  KILN_CHECK(step != 0, "arange: step must be nonzero");
  KILN_CHECK(t != DType::bool_, "arange: dtype bool is not supported");
  const double n = std::ceil((end - start) / step);
  KILN_CHECK(n >= 0, "arange: end ", end, " cannot be reached from start ", start, " with step ", step);
  KILN_CHECK(n < 9.0e18, "arange: too many elements (", n, ")");
  return result(c, t, {static_cast<int64_t>(n)});
}

// ---- pointwise -----------------------------------------------------------------------

TensorMeta infer_unary_float(const InferContext& c) {
  return result(c, float_of(arg(c, 0).dtype), arg(c, 0).sizes);
}

TensorMeta infer_unary_same(const InferContext& c) {
  const TensorMeta& x = arg(c, 0);
  KILN_CHECK(!(c.op == OpId::neg && x.dtype == DType::bool_),
             "neg: negating a bool tensor is not supported; use logical_not");
  return result(c, x.dtype, x.sizes);
}

TensorMeta infer_unary_bool(const InferContext& c) { return result(c, DType::bool_, arg(c, 0).sizes); }

TensorMeta infer_gelu(const InferContext& c) {
  const std::string& a = c.attrs.s(0);
  KILN_CHECK(a == "none" || a == "tanh", "gelu: approximate must be \"none\" or \"tanh\", got \"", a, "\"");
  return infer_unary_float(c);
}

TensorMeta infer_cast(const InferContext& c) { return result(c, c.attrs.dtype(0), arg(c, 0).sizes); }

SymShape broadcast_inputs(const InferContext& c) {
  SymShape s = arg(c, 0).sizes;
  for (size_t i = 1; i < c.inputs.size(); ++i) s = broadcast_shapes(s, arg(c, i).sizes, c.shapes, opn(c));
  return s;
}

// add, sub, mul, pow, maximum, minimum: the promoted type.
TensorMeta infer_binary(const InferContext& c) {
  const DType t = result_type(c.inputs);
  KILN_CHECK(!(c.op == OpId::sub && t == DType::bool_),
             "sub: subtracting bool tensors is not supported; use logical_xor or logical_not");
  return result(c, t, broadcast_inputs(c));
}

// True division, as in torch: integers divide to f32.
TensorMeta infer_div(const InferContext& c) {
  return result(c, float_of(result_type(c.inputs)), broadcast_inputs(c));
}

// Comparisons and logical ops.
TensorMeta infer_binary_bool(const InferContext& c) { return result(c, DType::bool_, broadcast_inputs(c)); }

TensorMeta infer_philox(const InferContext& c) {
  for (size_t k = 0; k < 2; ++k)
    KILN_CHECK(is_integral(arg(c, k).dtype), "philox: ", k == 0 ? "the key" : "the counter",
               " must be an integer tensor, got ", dtype_name(arg(c, k).dtype));
  const int64_t word = c.attrs.i(0);
  KILN_CHECK(word >= 0 && word < 4, "philox: word must be 0, 1, 2 or 3, got ", word);
  return result(c, DType::i64, broadcast_inputs(c));
}

TensorMeta infer_where(const InferContext& c) {
  KILN_CHECK(arg(c, 0).dtype == DType::bool_, "where: condition must be bool, got ",
             dtype_name(arg(c, 0).dtype));
  return result(c, result_type(c.inputs.subspan(1)), broadcast_inputs(c));
}

// ---- reductions ----------------------------------------------------------------------

// Reducing a static empty dim has no identity for max/min/argmax/argmin.
bool needs_elements(OpId op) {
  return op == OpId::max || op == OpId::min || op == OpId::argmax || op == OpId::argmin;
}


SymShape reduced_shape(const InferContext& c, const TensorMeta& x, const std::vector<int64_t>& dims,
                       bool keepdim) {
  for (size_t k = 0; k < dims.size(); ++k) {
    check_dim(c, dims[k], x.rank());
    KILN_CHECK(k == 0 || dims[k] > dims[k - 1], opn(c), ": dims must be sorted and unique, got ",
               ints_str(dims));
  }
  KILN_CHECK(!needs_elements(c.op) || !reduces_empty(x, dims), opn(c),
             ": cannot reduce over an empty dimension (", shape_str(x.sizes), " over dims ",
             ints_str(dims), ")");
  SymShape out;
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (!dims.empty() && !std::binary_search(dims.begin(), dims.end(), d)) {
      out.push_back(x.sizes[d]);
    } else if (keepdim) {
      out.push_back(1);
    }
  }
  return out;
}

DType reduction_dtype(OpId op, DType t) {
  switch (op) {
    case OpId::sum:
    case OpId::prod: return is_floating(t) ? t : DType::i64;
    case OpId::mean:
    case OpId::var:
    case OpId::logsumexp: return float_of(t);
    case OpId::argmax:
    case OpId::argmin: return DType::i64;
    default: return t;  // max, min
  }
}

TensorMeta infer_reduction(const InferContext& c) {
  const TensorMeta& x = arg(c, 0);
  const std::vector<int64_t>& dims = c.attrs.ints(0);
  KILN_CHECK(!(c.op == OpId::argmax || c.op == OpId::argmin) || dims.size() <= 1, opn(c),
             ": takes at most one dim, got ", ints_str(dims));
  KILN_CHECK(c.op != OpId::var || c.attrs.i(2) >= 0, "var: correction must be >= 0, got ", c.attrs.i(2));
  return result(c, reduction_dtype(c.op, x.dtype), reduced_shape(c, x, dims, c.attrs.b(1)));
}

// ---- layout --------------------------------------------------------------------------

TensorMeta infer_reshape(const InferContext& c) {
  const TensorMeta& x = arg(c, 0);
  const SymShape& shape = c.attrs.symints(0);
  check_sizes(c, shape);
  const SymInt n = shape_numel(shape);
  KILN_CHECK(c.shapes.decide_equal(n, x.numel(), "reshape"), "reshape: cannot reshape ", shape_str(x.sizes),
             " (", x.numel().str(), " elements) into ", shape_str(shape), " (", n.str(), " elements)");
  return result(c, x.dtype, shape);
}

TensorMeta infer_permute(const InferContext& c) {
  const TensorMeta& x = arg(c, 0);
  const std::vector<int64_t>& dims = c.attrs.ints(0);
  std::vector<bool> seen(static_cast<size_t>(x.rank()));
  bool ok = static_cast<int64_t>(dims.size()) == x.rank();
  SymShape out;
  for (size_t k = 0; ok && k < dims.size(); ++k) {
    ok = dims[k] >= 0 && dims[k] < x.rank() && !seen[dims[k]];
    if (ok) {
      seen[dims[k]] = true;
      out.push_back(x.sizes[dims[k]]);
    }
  }
  KILN_CHECK(ok, "permute: dims ", ints_str(dims), " are not a permutation of the dims of ", shape_str(x.sizes));
  return result(c, x.dtype, out);
}

TensorMeta infer_transpose(const InferContext& c) {
  const TensorMeta& x = arg(c, 0);
  SymShape out = x.sizes;
  std::swap(out[check_dim(c, c.attrs.i(0), x.rank(), "dim0")], out[check_dim(c, c.attrs.i(1), x.rank(), "dim1")]);
  return result(c, x.dtype, out);
}

TensorMeta infer_expand(const InferContext& c) {
  const TensorMeta& x = arg(c, 0);
  const SymShape& to = c.attrs.symints(0);
  check_sizes(c, to);
  KILN_CHECK(to.size() >= x.sizes.size(), "expand: cannot expand ", shape_str(x.sizes), " to fewer dims ",
             shape_str(to));
  const size_t lead = to.size() - x.sizes.size();
  for (size_t j = 0; j < x.sizes.size(); ++j) {
    const SymInt& from = x.sizes[j];
    KILN_CHECK(from == 1 || c.shapes.decide_equal(from, to[lead + j], "expand"), "expand: cannot expand ",
               shape_str(x.sizes), " to ", shape_str(to), ": dim ", j, " has size ", from.str(),
               ", expected ", to[lead + j].str(), " or 1");
  }
  return result(c, x.dtype, to);
}

TensorMeta infer_squeeze(const InferContext& c) {
  const TensorMeta& x = arg(c, 0);
  const std::vector<int64_t>& dims = c.attrs.ints(0);
  std::vector<bool> drop(static_cast<size_t>(x.rank()));
  for (int64_t d : dims) {
    check_dim(c, d, x.rank());
    KILN_CHECK(!drop[d], "squeeze: dim ", d, " listed twice in ", ints_str(dims));
    KILN_CHECK(x.sizes[d] == 1, "squeeze: dim ", d, " of ", shape_str(x.sizes), " has size ", x.sizes[d].str(),
               ", not 1");
    drop[d] = true;
  }
  SymShape out;
  for (int64_t d = 0; d < x.rank(); ++d)
    if (!drop[d]) out.push_back(x.sizes[d]);
  return result(c, x.dtype, out);
}

TensorMeta infer_unsqueeze(const InferContext& c) {
  const TensorMeta& x = arg(c, 0);
  const int64_t d = c.attrs.i(0);
  KILN_CHECK(d >= 0 && d <= x.rank(), "unsqueeze: dim ", d, " out of range for rank ", x.rank(),
             " (must be in [0, ", x.rank(), "])");
  SymShape out = x.sizes;
  out.insert(out.begin() + d, SymInt(1));
  return result(c, x.dtype, out);
}

TensorMeta infer_slice(const InferContext& c) {
  const TensorMeta& x = arg(c, 0);
  const int64_t d = check_dim(c, c.attrs.i(0), x.rank());
  const int64_t start = c.attrs.i(1), end = c.attrs.i(2), step = c.attrs.i(3);
  KILN_CHECK(step >= 1, "slice: step must be >= 1, got ", step);
  SymShape out = x.sizes;
  const SymInt& size = x.sizes[d];
  // The whole of a symbolic dim n stays symbolic. So does a slice [start, end) of it with start and
  // end >= 0 where the example says end <= n (a static part, under the fact n >= end), or, step 1,
  // start + 2 <= n <= end ([start, n), of size n - start >= 2 as every symbolic size, under the facts
  // n >= start + 2 and, for an end short of infinity, end - n >= 0). Anything else (a negative start
  // or end, a part that may be shorter) needs n.
  if (size.is_symbolic() && start >= 0 && end >= 0) {
    const bool to_end = end >= kInt64Max / 2;
    if (start == 0 && to_end && step == 1) return result(c, x.dtype, out);
    if (!to_end && size.hint() >= end && c.shapes.decide_at_least(size, end, "slice")) {
      out[d] = end > start ? (end - start - 1) / step + 1 : 0;
      return result(c, x.dtype, out);
    }
    if (step == 1 && size.hint() >= start + 2 && size.hint() <= end &&
        c.shapes.decide_at_least(size, start + 2, "slice") &&
        (to_end || c.shapes.decide_at_least(SymInt(end) - size, 0, "slice"))) {
      out[d] = size - SymInt(start);
      return result(c, x.dtype, out);
    }
  }
  const int64_t n = size.is_symbolic() ? c.shapes.specialize(size, "slice") : size.hint();
  auto clamp = [n](int64_t v) { return std::clamp(v < 0 ? v + n : v, int64_t{0}, n); };
  const int64_t s = clamp(start), e = clamp(end);
  out[d] = e > s ? (e - s - 1) / step + 1 : 0;
  return result(c, x.dtype, out);
}

TensorMeta infer_unfold(const InferContext& c) {
  const TensorMeta& x = arg(c, 0);
  const int64_t d = check_dim(c, c.attrs.i(0), x.rank());
  const int64_t size = c.attrs.i(1), step = c.attrs.i(2);
  KILN_CHECK(size >= 1 && step >= 1, "unfold: size and step must be at least 1, got size ", size, " and step ", step);
  const SymInt& s = x.sizes[static_cast<size_t>(d)];
  const int64_t n = s.is_symbolic() ? c.shapes.specialize(s, "unfold") : s.hint();
  KILN_CHECK(n >= size, "unfold: dim ", d, " has size ", n, ", smaller than the window size ", size);
  SymShape out = x.sizes;
  out[static_cast<size_t>(d)] = (n - size) / step + 1;
  out.push_back(size);
  return result(c, x.dtype, out);
}

TensorMeta infer_cat(const InferContext& c) {
  const TensorMeta& x0 = arg(c, 0);
  const int64_t d = check_dim(c, c.attrs.i(0), x0.rank());
  SymShape out = x0.sizes;
  for (size_t i = 1; i < c.inputs.size(); ++i) {
    const TensorMeta& xi = arg(c, i);
    bool ok = xi.rank() == x0.rank();
    for (int64_t j = 0; ok && j < x0.rank(); ++j)
      ok = j == d || c.shapes.decide_equal(x0.sizes[j], xi.sizes[j], "cat");
    KILN_CHECK(ok, "cat: input ", i, " has shape ", shape_str(xi.sizes), " but input 0 has shape ",
               shape_str(x0.sizes), "; shapes must match except in dim ", d);
    out[d] = out[d] + xi.sizes[d];
  }
  return result(c, result_type(c.inputs), out);
}

TensorMeta infer_pad(const InferContext& c) {
  const TensorMeta& x = arg(c, 0);
  const std::vector<int64_t>& pads = c.attrs.ints(0);
  KILN_CHECK(pads.size() % 2 == 0 && static_cast<int64_t>(pads.size()) <= 2 * x.rank(), "pad: pads ",
             ints_str(pads), " must be pairs for at most the ", x.rank(), " dims of ", shape_str(x.sizes));
  SymShape out = x.sizes;
  for (size_t k = 0; k < pads.size() / 2; ++k) {
    const size_t d = x.sizes.size() - 1 - k;  // pairs start at the last dim
    constexpr int64_t kMaxPad = int64_t{1} << 48;  // keeps the sums far from overflow
    KILN_CHECK(std::llabs(pads[2 * k]) <= kMaxPad && std::llabs(pads[2 * k + 1]) <= kMaxPad, "pad: pad amounts ",
               ints_str(pads), " are out of range (at most 2^48)");
    out[d] = out[d] + SymInt(pads[2 * k] + pads[2 * k + 1]);
    KILN_CHECK(out[d].hint() >= 0, "pad: pads ", ints_str(pads), " crop dim ", d, " of ", shape_str(x.sizes),
               " below size 0");
  }
  return result(c, x.dtype, out);
}

TensorMeta infer_index_select(const InferContext& c) {
  const TensorMeta& x = arg(c, 0);
  const TensorMeta& index = arg(c, 1);
  const int64_t d = check_dim(c, c.attrs.i(0), x.rank());
  KILN_CHECK(index.rank() == 1, "index_select: index must be 1-D, got shape ", shape_str(index.sizes));
  KILN_CHECK(index.dtype == DType::i32 || index.dtype == DType::i64, "index_select: index must be i32 or i64, got ",
             dtype_name(index.dtype));
  SymShape out = x.sizes;
  out[d] = index.sizes[0];
  return result(c, x.dtype, out);
}

// gather's and scatter_add's index: x's rank, no larger than x but along dim d.
void check_index_within(const TensorMeta& x, const TensorMeta& index, int64_t d, const char* op) {
  KILN_CHECK(index.rank() == x.rank(), op, ": index ", shape_str(index.sizes), " must have the rank of x ",
             shape_str(x.sizes));
  for (int64_t k = 0; k < x.rank(); ++k) {
    if (k == d) continue;
    const SymInt& xs = x.sizes[static_cast<size_t>(k)];
    const SymInt& is = index.sizes[static_cast<size_t>(k)];
    // A symbolic size is only known not to exceed x's when it is x's own.
    KILN_CHECK(is == xs || (is.is_static() && xs.is_static() && is.hint() <= xs.hint()), op, ": index ",
               shape_str(index.sizes), " is larger than x ", shape_str(x.sizes), " at dim ", k, " (only dim ", d,
               " may be)");
  }
}

TensorMeta infer_gather(const InferContext& c) {
  const TensorMeta& x = arg(c, 0);
  const TensorMeta& index = arg(c, 1);
  const int64_t r = x.rank();
  KILN_CHECK(r >= 1, "gather: x must have at least one dim, got a 0-d tensor");
  const int64_t d = check_dim(c, c.attrs.i(0), r);
  KILN_CHECK(index.dtype == DType::i32 || index.dtype == DType::i64, "gather: index must be i32 or i64, got ",
             dtype_name(index.dtype));
  check_index_within(x, index, d, "gather");
  return result(c, x.dtype, index.sizes);
}

TensorMeta infer_scatter(const InferContext& c) {
  const std::string op(op_name(c.op));
  const TensorMeta& x = arg(c, 0);
  const TensorMeta& index = arg(c, 1);
  const TensorMeta& src = arg(c, 2);
  const int64_t r = x.rank();
  KILN_CHECK(r >= 1, op, ": x must have at least one dim, got a 0-d tensor");
  const int64_t d = check_dim(c, c.attrs.i(0), r);
  KILN_CHECK(index.dtype == DType::i32 || index.dtype == DType::i64, op, ": index must be i32 or i64, got ",
             dtype_name(index.dtype));
  KILN_CHECK(c.op == OpId::scatter || x.dtype != DType::bool_, op, ": x must be a number tensor, got bool");
  if (c.op == OpId::scatter_reduce) {
    const std::string& reduce = c.attrs.s(1);
    KILN_CHECK(parse_scatter_reduction(reduce), op,
               ": reduce must be \"amax\", \"amin\" or \"prod\", got \"", reduce,
               "\" (\"sum\" is scatter_add; \"mean\" is a sum over a count)");
  }
  KILN_CHECK(src.dtype == x.dtype, op, ": src must have x's dtype ", dtype_name(x.dtype), ", got ",
             dtype_name(src.dtype));
  check_index_within(x, index, d, op.c_str());
  KILN_CHECK(src.sizes == index.sizes, op, ": src ", shape_str(src.sizes), " must have the index's shape ",
             shape_str(index.sizes));
  return result(c, x.dtype, x.sizes);
}

// Rank 0 flattens to [1], as in torch.
TensorMeta infer_flatten(const InferContext& c) {
  const TensorMeta& x = arg(c, 0);
  const int64_t s = c.attrs.i(0), e = c.attrs.i(1);
  if (x.rank() == 0) {
    KILN_CHECK(s == 0 && e == 0, "flatten: start_dim ", s, " and end_dim ", e, " out of range for rank 0");
    return result(c, x.dtype, {1});
  }
  check_dim(c, s, x.rank(), "start_dim");
  check_dim(c, e, x.rank(), "end_dim");
  KILN_CHECK(s <= e, "flatten: start_dim ", s, " is after end_dim ", e);
  SymShape out(x.sizes.begin(), x.sizes.begin() + s);
  SymInt n = 1;
  for (int64_t d = s; d <= e; ++d) n = n * x.sizes[d];
  out.push_back(n);
  out.insert(out.end(), x.sizes.begin() + e + 1, x.sizes.end());
  return result(c, x.dtype, out);
}

// ---- composites and matmul -----------------------------------------------------------

TensorMeta infer_softmax(const InferContext& c) {
  const TensorMeta& x = arg(c, 0);
  check_dim(c, c.attrs.i(0), x.rank());
  return result(c, float_of(x.dtype), x.sizes);
}

// The decomposition casts every input to this type, so its nodes agree with it.
DType norm_dtype(std::span<const TensorMeta* const> in) { return float_of(result_type(in)); }

// layer_norm and rms_norm: (x[, weight[, bias]]) over the last normalized_ndim dims.
TensorMeta infer_norm(const InferContext& c) {
  const TensorMeta& x = arg(c, 0);
  const int64_t n = c.attrs.i(0);
  const double eps = c.attrs.f(1);
  KILN_CHECK(n >= 1 && n <= x.rank(), opn(c), ": normalized_ndim ", n, " out of range for rank ", x.rank(),
             " (must be in [1, rank])");
  KILN_CHECK(eps > 0, opn(c), ": eps must be positive, got ", eps);
  const std::span<const SymInt> dims(x.sizes.data() + (x.sizes.size() - static_cast<size_t>(n)), static_cast<size_t>(n));
  for (size_t k = 1; k < c.inputs.size(); ++k) {
    const TensorMeta& p = arg(c, k);
    bool ok = p.rank() == n;
    for (int64_t j = 0; ok && j < n; ++j) ok = c.shapes.decide_equal(p.sizes[j], dims[j], opn(c));
    KILN_CHECK(ok, opn(c), ": ", k == 1 ? "weight" : "bias", " shape ", shape_str(p.sizes),
               " does not match the normalized dims ", shape_str(dims), " of ", shape_str(x.sizes));
  }
  return result(c, norm_dtype(c.inputs), x.sizes);
}

TensorMeta infer_linear(const InferContext& c) {
  const TensorMeta& x = arg(c, 0);
  const TensorMeta& w = arg(c, 1);
  KILN_CHECK(x.rank() >= 1 && w.rank() == 2, "linear: expected x[..., in] and weight[out, in], got ",
             shape_str(x.sizes), " and ", shape_str(w.sizes));
  KILN_CHECK(c.shapes.decide_equal(x.sizes.back(), w.sizes[1], "linear"), "linear: x ", shape_str(x.sizes),
             " has ", x.sizes.back().str(), " features but weight ", shape_str(w.sizes), " takes ", w.sizes[1].str());
  if (c.inputs.size() > 2) {
    const TensorMeta& b = arg(c, 2);
    KILN_CHECK(b.rank() == 1 && c.shapes.decide_equal(b.sizes[0], w.sizes[0], "linear"), "linear: bias ",
               shape_str(b.sizes), " does not match weight ", shape_str(w.sizes));
  }
  const DType t = result_type(c.inputs);
  KILN_CHECK(t != DType::bool_, "linear: bool operands are not supported");
  SymShape out = x.sizes;
  out.back() = w.sizes[0];
  return result(c, t, out);
}

// Attention: q[..., Lq, D], k[..., Lk, D], v[..., Lk, Dv] with the same batch dims -> [..., Lq, Dv].
TensorMeta infer_attention(const InferContext& c) {
  const TensorMeta& q = arg(c, 0);
  const TensorMeta& k = arg(c, 1);
  const TensorMeta& v = arg(c, 2);
  KILN_CHECK(q.rank() >= 2 && k.rank() == q.rank() && v.rank() == q.rank(), opn(c),
             ": q, k and v must have the same rank (at least 2), got ", shape_str(q.sizes), ", ", shape_str(k.sizes),
             " and ", shape_str(v.sizes));
  const size_t r = q.sizes.size();
  for (size_t d = 0; d + 2 < r; ++d)
    KILN_CHECK(c.shapes.decide_equal(q.sizes[d], k.sizes[d], opn(c)) && c.shapes.decide_equal(q.sizes[d], v.sizes[d], opn(c)),
               opn(c), ": batch dim ", d, " differs between q ", shape_str(q.sizes), ", k ", shape_str(k.sizes), " and v ",
               shape_str(v.sizes));
  KILN_CHECK(c.shapes.decide_equal(q.sizes[r - 1], k.sizes[r - 1], opn(c)), opn(c), ": q ", shape_str(q.sizes),
             " and k ", shape_str(k.sizes), " have different head dims");
  KILN_CHECK(c.shapes.decide_equal(k.sizes[r - 2], v.sizes[r - 2], opn(c)), opn(c), ": k ", shape_str(k.sizes),
             " and v ", shape_str(v.sizes), " have different sequence lengths");
  const DType t = float_of(result_type(c.inputs.first(3)));
  if (c.inputs.size() > 3) {
    const TensorMeta& m = arg(c, 3);
    KILN_CHECK(m.dtype == DType::bool_ || is_floating(m.dtype), opn(c), ": the mask must be bool or floating, got ",
               dtype_name(m.dtype));
    SymShape scores = q.sizes;
    scores.back() = k.sizes[r - 2];
    KILN_CHECK(m.rank() <= q.rank(), opn(c), ": the mask ", shape_str(m.sizes), " has more dims than the scores ",
               shape_str(scores));
    const SymShape b = broadcast_shapes(scores, m.sizes, c.shapes, opn(c));
    KILN_CHECK(b.size() == scores.size(), opn(c), ": the mask ", shape_str(m.sizes), " does not broadcast to the scores ",
               shape_str(scores));
    for (size_t d = 0; d < r; ++d)
      KILN_CHECK(c.shapes.decide_equal(b[d], scores[d], opn(c)), opn(c), ": the mask ", shape_str(m.sizes),
                 " does not broadcast to the scores ", shape_str(scores));
  }
  SymShape out = q.sizes;
  out.back() = v.sizes.back();
  return result(c, t, out);
}

// Convolution: x[N, C, *S] (*) w[M, C/groups, *K] (+ bias[M]) -> [N, M, *O] over static spatial
// and channel dims; the batch may be symbolic. Channels last: x[N, *S, C], w[M, *K, C/groups] ->
// [N, *O, M], checked in channels-first order.
TensorMeta infer_convolution_in(const InferContext& c, bool last) {
  KILN_CHECK(arg(c, 0).rank() >= 3 && arg(c, 1).rank() == arg(c, 0).rank(), opn(c), ": expected x", last ? "[N, *spatial, C]" : "[N, C, *spatial]",
             " and w", last ? "[M, *kernel, C/groups]" : "[M, C/groups, *kernel]", " of the same rank (at least 3), got ",
             shape_str(arg(c, 0).sizes), " and ", shape_str(arg(c, 1).sizes));
  TensorMeta x = arg(c, 0), w = arg(c, 1);
  if (last) {
    x.sizes = channels_first(x.sizes);
    w.sizes = channels_first(w.sizes);
  }
  const size_t n = static_cast<size_t>(x.rank() - 2);
  const std::vector<int64_t>& strides = c.attrs.ints(0);
  const std::vector<int64_t>& pads = c.attrs.ints(1);
  const std::vector<int64_t>& dilations = c.attrs.ints(2);
  const int64_t groups = c.attrs.i(3);
  KILN_CHECK(strides.size() == n && dilations.size() == n && pads.size() == 2 * n, opn(c), ": ", n,
             " spatial dims need ", n, " strides, ", n, " dilations and ", 2 * n, " pads, got ", strides.size(), ", ",
             dilations.size(), " and ", pads.size());
  for (size_t d = 1; d < x.sizes.size(); ++d)
    KILN_CHECK(x.sizes[d].is_static(), opn(c), ": dim ", d, " of x ", shape_str(x.sizes), " must be static (only the batch may be symbolic)");
  for (const SymInt& s : w.sizes) KILN_CHECK(s.is_static(), opn(c), ": the weight's shape ", shape_str(w.sizes), " must be static");
  const int64_t ch = x.sizes[1].hint(), m = w.sizes[0].hint();
  KILN_CHECK(groups >= 1 && ch % groups == 0 && m % groups == 0 && w.sizes[1].hint() * groups == ch, opn(c),
             ": weight ", shape_str(w.sizes), " does not match ", ch, " input channels in ", groups, " group", groups == 1 ? "" : "s");
  if (c.inputs.size() > 2) {
    const TensorMeta& b = arg(c, 2);
    KILN_CHECK(b.rank() == 1 && b.sizes[0] == m, opn(c), ": bias ", shape_str(b.sizes), " must be [", m, "]");
  }
  SymShape out{x.sizes[0], m};
  for (size_t d = 0; d < n; ++d) {
    KILN_CHECK(strides[d] >= 1 && dilations[d] >= 1 && pads[d] >= 0 && pads[d + n] >= 0, opn(c),
               ": strides and dilations must be positive and pads not negative (spatial dim ", d, ")");
    const int64_t span = (w.sizes[2 + d].hint() - 1) * dilations[d] + 1;
    const int64_t room = x.sizes[2 + d].hint() + pads[d] + pads[d + n] - span;
    KILN_CHECK(w.sizes[2 + d].hint() >= 1 && room >= 0, opn(c), ": the window (", span, ") is larger than the padded input (",
               x.sizes[2 + d].hint() + pads[d] + pads[d + n], ") along spatial dim ", d);
    out.push_back(room / strides[d] + 1);
  }
  const DType t = result_type(c.inputs);
  KILN_CHECK(is_floating(t), opn(c), ": operands must be floating point, got ", dtype_name(t));
  return result(c, t, last ? channels_last(out) : out);
}

TensorMeta infer_convolution(const InferContext& c) { return infer_convolution_in(c, false); }
TensorMeta infer_convolution_channels_last(const InferContext& c) { return infer_convolution_in(c, true); }

// The convolution a gradient op differentiates: the forward's shape rule on x and w (one of
// them rebuilt from the attributes and gy) must give gy's sizes.
void check_convolution_gradient(const InferContext& c, const TensorMeta& x, const TensorMeta& w, const TensorMeta& gy, bool last) {
  const TensorMeta* ins[2] = {&x, &w};
  const Attrs fwd{c.attrs.ints(0), c.attrs.ints(1), c.attrs.ints(2), c.attrs.i(3)};
  const InferContext f{last ? OpId::convolution_channels_last : OpId::convolution, ins, fwd, c.shapes};
  const TensorMeta y = infer_convolution_in(f, last);
  KILN_CHECK(y.sizes.size() == gy.sizes.size(), opn(c), ": the output gradient ", shape_str(gy.sizes),
             " does not match the convolution's output ", shape_str(y.sizes));
  for (size_t d = 0; d < y.sizes.size(); ++d)
    KILN_CHECK(c.shapes.decide_equal(y.sizes[d], gy.sizes[d], opn(c)), opn(c), ": the output gradient ",
               shape_str(gy.sizes), " does not match the convolution's output ", shape_str(y.sizes));
}

// A gradient op's result: `sizes` (x's or w's) once the three shapes agree, of the operands'
// floating dtype.
TensorMeta convolution_gradient_result(const InferContext& c, const TensorMeta& x, const TensorMeta& w, const TensorMeta& gy,
                                       bool last, const SymShape& sizes) {
  check_convolution_gradient(c, x, w, gy, last);
  const DType t = result_type(c.inputs);
  KILN_CHECK(is_floating(t), opn(c), ": operands must be floating point, got ", dtype_name(t));
  return result(c, t, sizes);
}

// (gy, w) -> gx: x's sizes are gy's batch, w's input channels and the attribute's spatial sizes.
TensorMeta infer_convolution_input_grad(const InferContext& c) {
  const bool last = c.attrs.b(5);
  const TensorMeta& gy = arg(c, 0);
  TensorMeta w = arg(c, 1);
  KILN_CHECK(gy.rank() >= 3 && w.rank() == gy.rank(), opn(c), ": expected gy and w of the same rank (at least 3), got ",
             shape_str(gy.sizes), " and ", shape_str(w.sizes));
  const std::vector<int64_t>& spatial = c.attrs.ints(4);
  KILN_CHECK(static_cast<int64_t>(spatial.size()) == gy.rank() - 2, opn(c), ": input_sizes needs ", gy.rank() - 2,
             " spatial sizes, got ", spatial.size());
  const SymShape wf = last ? channels_first(w.sizes) : w.sizes;
  KILN_CHECK(wf[1].is_static(), opn(c), ": the weight's shape ", shape_str(w.sizes), " must be static");
  SymShape xs{gy.sizes[0], wf[1].hint() * c.attrs.i(3)};
  for (int64_t e : spatial) {
    KILN_CHECK(e >= 0, opn(c), ": input_sizes must not be negative");
    xs.push_back(e);
  }
  TensorMeta x = gy;
  x.sizes = last ? channels_last(xs) : xs;
  return convolution_gradient_result(c, x, w, gy, last, x.sizes);
}

// (x, gy) -> gw: w's sizes are gy's channels, x's channels per group and the attribute's kernel.
TensorMeta infer_convolution_weight_grad(const InferContext& c) {
  const bool last = c.attrs.b(5);
  const TensorMeta& x = arg(c, 0);
  const TensorMeta& gy = arg(c, 1);
  KILN_CHECK(x.rank() >= 3 && gy.rank() == x.rank(), opn(c), ": expected x and gy of the same rank (at least 3), got ",
             shape_str(x.sizes), " and ", shape_str(gy.sizes));
  const std::vector<int64_t>& kernel = c.attrs.ints(4);
  KILN_CHECK(static_cast<int64_t>(kernel.size()) == x.rank() - 2, opn(c), ": kernel needs ", x.rank() - 2,
             " sizes, got ", kernel.size());
  const SymShape xf = last ? channels_first(x.sizes) : x.sizes;
  const SymShape gf = last ? channels_first(gy.sizes) : gy.sizes;
  const int64_t groups = c.attrs.i(3);
  KILN_CHECK(xf[1].is_static() && gf[1].is_static() && groups >= 1 && xf[1].hint() % groups == 0, opn(c), ": x ",
             shape_str(x.sizes), " and gy ", shape_str(gy.sizes), " need static channels that split into ", groups, " groups");
  SymShape ws{gf[1], xf[1].hint() / groups};
  for (int64_t e : kernel) {
    KILN_CHECK(e >= 1, opn(c), ": kernel sizes must be positive");
    ws.push_back(e);
  }
  TensorMeta w = x;
  w.sizes = last ? channels_last(ws) : ws;
  return convolution_gradient_result(c, x, w, gy, last, w.sizes);
}

// Pooling windows, shared by the shape rule and the decompositions of max_pool and avg_pool.
struct PoolWindows {
  std::vector<int64_t> kernel, strides, dilations, pads_begin, pads_end, out;
  std::vector<int64_t> extra_end;  // past pads_end: where ceil_mode's last windows run beyond the pads
};

// Output sizes as torch computes them: floor (or ceil with ceil_mode) of (S + pads - span) /
// stride, plus one; with ceil_mode a last window that would start in the end padding is dropped.
PoolWindows pool_windows(std::string_view op, const SymShape& x, const Attrs& a) {
  KILN_CHECK(x.size() >= 3, op, ": expected x[N, C, *spatial] with 1 to 3 spatial dims, got ", shape_str(x));
  const size_t n = x.size() - 2;
  PoolWindows w{a.ints(0), a.ints(1), a.ints(3), {}, {}, {}, {}};
  const std::vector<int64_t>& pads = a.ints(2);
  const bool ceil_mode = a.b(4);
  KILN_CHECK(n <= 3, op, ": at most 3 spatial dims, got ", n, " (x ", shape_str(x), ")");
  KILN_CHECK(w.kernel.size() == n && w.strides.size() == n && w.dilations.size() == n && pads.size() == 2 * n, op, ": ",
             n, " spatial dims need ", n, " kernel sizes, strides and dilations and ", 2 * n, " pads, got ", w.kernel.size(),
             ", ", w.strides.size(), ", ", w.dilations.size(), " and ", pads.size());
  for (size_t d = 0; d < n; ++d) {
    KILN_CHECK(x[2 + d].is_static(), op, ": spatial dim ", d, " of x ", shape_str(x), " must be static");
    KILN_CHECK(w.kernel[d] >= 1 && w.strides[d] >= 1 && w.dilations[d] >= 1 && pads[d] >= 0 && pads[d + n] >= 0, op,
               ": kernel sizes, strides and dilations must be positive and pads not negative (spatial dim ", d, ")");
    const int64_t in = x[2 + d].hint(), span = (w.kernel[d] - 1) * w.dilations[d] + 1;
    const int64_t room = in + pads[d] + pads[d + n] - span;
    KILN_CHECK(room >= 0, op, ": the window (", span, ") is larger than the padded input (", in + pads[d] + pads[d + n],
               ") along spatial dim ", d);
    int64_t o = (ceil_mode ? (room + w.strides[d] - 1) / w.strides[d] : room / w.strides[d]) + 1;
    if (ceil_mode && (o - 1) * w.strides[d] >= in + pads[d]) --o;
    const int64_t need = std::max(pads[d + n], (o - 1) * w.strides[d] + span - in - pads[d]);
    w.pads_begin.push_back(pads[d]);
    w.pads_end.push_back(pads[d + n]);
    w.extra_end.push_back(need - pads[d + n]);
    w.out.push_back(o);
  }
  return w;
}

// max_pool and avg_pool: x[N, C, *S] -> [N, C, *O]; N and C may be symbolic.
TensorMeta infer_pool(const InferContext& c) {
  const TensorMeta& x = arg(c, 0);
  const PoolWindows w = pool_windows(opn(c), x.sizes, c.attrs);
  KILN_CHECK(is_floating(x.dtype), opn(c), ": x must be floating point, got ", dtype_name(x.dtype));
  SymShape out{x.sizes[0], x.sizes[1]};
  out.insert(out.end(), w.out.begin(), w.out.end());
  return result(c, x.dtype, out);
}

// batch_norm (x[N, C, *], mean, var[, weight[, bias]]) and group_norm (x[N, C, *][, weight[,
// bias]]): per-channel parameters of [C]; the result has x's floating type.
TensorMeta infer_cumsum(const InferContext& c) {
  const TensorMeta& x = arg(c, 0);
  check_dim(c, c.attrs.i(0), std::max<int64_t>(x.rank(), 1));
  const DType t = is_floating(x.dtype) ? x.dtype : DType::i64;
  return result(c, t, x.sizes);
}

// sort and argsort: x's sizes; sort keeps the dtype, argsort gives i64.
TensorMeta infer_sort(const InferContext& c) {
  const TensorMeta& x = arg(c, 0);
  check_dim(c, c.attrs.i(0), std::max<int64_t>(x.rank(), 1));
  return result(c, c.op == OpId::argsort ? DType::i64 : x.dtype, x.sizes);
}

TensorMeta infer_triangle(const InferContext& c) {
  const TensorMeta& x = arg(c, 0);
  KILN_CHECK(x.rank() >= 2, opn(c), ": x must have at least 2 dims (rows and columns), got ", shape_str(x.sizes));
  return result(c, x.dtype, x.sizes);
}

// custom: the registered op's own shape rule, its errors named after it (custom_ops.h).
TensorMeta infer_custom(const InferContext& c) {
  const std::string& name = c.attrs.s(0);
  const std::shared_ptr<const CustomOpDef> op = find_custom_op(name, c.attrs.s(1));
  const int64_t n = static_cast<int64_t>(c.inputs.size());
  KILN_CHECK(n >= op->min_inputs && (op->max_inputs < 0 || n <= op->max_inputs), "custom op ", name, " takes ",
             op->min_inputs, op->max_inputs == op->min_inputs ? "" : op->max_inputs < 0 ? " or more" : " to " +
             std::to_string(op->max_inputs), " inputs, got ", n);
  const Device device = common_device(c);
  TensorMeta m;
  run_custom_op_function(name, "shape rule", [&] { m = op->infer(c.inputs, c.attrs.s(2), c.shapes); });
  for (const SymInt& v : m.sizes)
    KILN_CHECK(v.is_symbolic() || v.hint() >= 0, "custom op ", name, ": its shape rule gave a negative size in ",
               shape_str(m.sizes));
  return TensorMeta{m.dtype, device, std::move(m.sizes), {}};
}

TensorMeta infer_channel_norm(const InferContext& c) {
  const TensorMeta& x = arg(c, 0);
  const bool batch = c.op == OpId::batch_norm;
  KILN_CHECK(x.rank() >= (batch ? 2 : 3), opn(c), ": expected x[N, C, ", batch ? "*" : "*spatial", "], got ", shape_str(x.sizes));
  const double eps = c.attrs.f(batch ? 0 : 1);
  KILN_CHECK(eps >= 0, opn(c), ": eps must not be negative, got ", eps);
  static const char* const kBatchNames[] = {"x", "mean", "var", "weight", "bias"};
  static const char* const kGroupNames[] = {"x", "weight", "bias"};
  for (size_t k = 1; k < c.inputs.size(); ++k) {
    const TensorMeta& p = arg(c, k);
    KILN_CHECK(p.rank() == 1 && c.shapes.decide_equal(p.sizes[0], x.sizes[1], opn(c)), opn(c), ": ",
               (batch ? kBatchNames : kGroupNames)[k], " ", shape_str(p.sizes), " must be [", x.sizes[1].str(), "] (one per channel of x ",
               shape_str(x.sizes), ")");
  }
  if (!batch) {
    const int64_t groups = c.attrs.i(0);
    KILN_CHECK(x.sizes[1].is_static(), opn(c), ": the channels of x ", shape_str(x.sizes), " must be static");
    KILN_CHECK(groups >= 1 && x.sizes[1].hint() % groups == 0, opn(c), ": ", x.sizes[1].hint(),
               " channels do not split into ", groups, " groups");
  }
  return result(c, float_of(x.dtype), x.sizes);
}

// numpy matmul: a 1-D left operand is a row, a 1-D right operand a column, and the added
// dim is dropped again; leading dims broadcast.
TensorMeta infer_matmul(const InferContext& c) {
  const TensorMeta& a = arg(c, 0);
  const TensorMeta& b = arg(c, 1);
  KILN_CHECK(a.rank() >= 1 && b.rank() >= 1, "matmul: operands must have at least 1 dim, got ", shape_str(a.sizes),
             " @ ", shape_str(b.sizes));
  const DType t = result_type(c.inputs);
  KILN_CHECK(t != DType::bool_, "matmul: bool operands are not supported");
  const SymInt& ka = a.sizes.back();
  const SymInt& kb = b.rank() == 1 ? b.sizes[0] : b.sizes[b.sizes.size() - 2];
  KILN_CHECK(c.shapes.decide_equal(ka, kb, "matmul"), "matmul: inner dimensions differ: ", shape_str(a.sizes),
             " @ ", shape_str(b.sizes));
  const std::span<const SymInt> as(a.sizes), bs(b.sizes);
  SymShape out = broadcast_shapes(as.first(a.sizes.size() - std::min<size_t>(2, a.sizes.size())),
                                  bs.first(b.sizes.size() - std::min<size_t>(2, b.sizes.size())), c.shapes, "matmul");
  if (a.rank() >= 2) out.push_back(a.sizes[a.sizes.size() - 2]);
  if (b.rank() >= 2) out.push_back(b.sizes.back());
  return result(c, t, out);
}

// ---- decompositions ------------------------------------------------------------------

NodeId decompose_transpose(Graph& g, std::span<const NodeId> in, const Attrs& a) {
  Builder b{g};
  std::vector<int64_t> perm = iota(0, b.meta(in[0]).rank());
  std::swap(perm[a.i(0)], perm[a.i(1)]);
  return b.add(OpId::permute, {in[0]}, {perm});
}

NodeId decompose_flatten(Graph& g, std::span<const NodeId> in, const Attrs& a) {
  Builder b{g};
  const TensorMeta x = b.meta(in[0]);
  if (x.rank() == 0) return b.add(OpId::reshape, {in[0]}, {SymShape{1}});
  const int64_t s = a.i(0), e = a.i(1);
  SymShape out(x.sizes.begin(), x.sizes.begin() + s);
  SymInt n = 1;
  for (int64_t d = s; d <= e; ++d) n = n * x.sizes[d];
  out.push_back(n);
  out.insert(out.end(), x.sizes.begin() + e + 1, x.sizes.end());
  return b.add(OpId::reshape, {in[0]}, {out});
}

NodeId decompose_softmax(Graph& g, std::span<const NodeId> in, const Attrs& a) {
  Builder b{g};
  const std::vector<int64_t> d{a.i(0)};
  const NodeId x = b.cast(in[0], float_of(b.meta(in[0]).dtype));
  const NodeId e = b.add(OpId::exp, {b.shift_by_max(x, d)});
  return b.add(OpId::div, {e, b.reduce(OpId::sum, e, d, true)});
}

NodeId decompose_log_softmax(Graph& g, std::span<const NodeId> in, const Attrs& a) {
  Builder b{g};
  const std::vector<int64_t> d{a.i(0)};
  const NodeId x = b.cast(in[0], float_of(b.meta(in[0]).dtype));
  const NodeId z = b.shift_by_max(x, d);
  const NodeId s = b.reduce(OpId::sum, b.add(OpId::exp, {z}), d, true);
  return b.add(OpId::sub, {z, b.add(OpId::log, {s})});
}

NodeId decompose_logsumexp(Graph& g, std::span<const NodeId> in, const Attrs& a) {
  Builder b{g};
  const DType t = float_of(b.meta(in[0]).dtype);
  const NodeId x = b.cast(in[0], t);
  const std::vector<int64_t>& dims = a.ints(0);
  const int64_t rank = b.meta(x).rank();
  NodeId r;
  if (reduces_empty(b.meta(x), dims)) {
    r = b.add(OpId::log, {b.reduce(OpId::sum, b.add(OpId::exp, {x}), dims, true)});  // log(0) = -inf
  } else {
    NodeId m = b.reduce(OpId::max, x, dims, true);
    // An infinite max would make x - m nan; shifting by 0 instead gives the right +-inf.
    const NodeId inf = b.add(OpId::eq, {b.add(OpId::abs, {m}), b.scalar(std::numeric_limits<double>::infinity(), t)});
    m = b.add(OpId::where, {inf, b.scalar(0.0, t), m});
    const NodeId s = b.reduce(OpId::sum, b.add(OpId::exp, {b.add(OpId::sub, {x, m})}), dims, true);
    r = b.add(OpId::add, {b.add(OpId::log, {s}), m});
  }
  if (a.b(1)) return r;
  return b.add(OpId::squeeze, {r}, {dims.empty() ? iota(0, rank) : dims});
}

NodeId decompose_layer_norm(Graph& g, std::span<const NodeId> in, const Attrs& a) {
  Builder b{g};
  const std::vector<TensorMeta> metas = b.metas(in);
  const DType t = float_of(b.promoted(in));
  const int64_t rank = metas[0].rank();
  const std::vector<int64_t> dims = iota(rank - a.i(0), rank);
  const NodeId x = b.cast(in[0], t);
  const NodeId mean = b.reduce(OpId::mean, x, dims, true);
  const NodeId var = b.add(OpId::var, {x}, {dims, true, int64_t{0}});
  const NodeId inv = b.add(OpId::rsqrt, {b.add(OpId::add, {var, b.scalar(a.f(1), t)})});
  NodeId y = b.add(OpId::mul, {b.add(OpId::sub, {x, mean}), inv});
  if (in.size() > 1) y = b.add(OpId::mul, {y, b.cast(in[1], t)});
  if (in.size() > 2) y = b.add(OpId::add, {y, b.cast(in[2], t)});
  return y;
}

NodeId decompose_rms_norm(Graph& g, std::span<const NodeId> in, const Attrs& a) {
  Builder b{g};
  const std::vector<TensorMeta> metas = b.metas(in);
  const DType t = float_of(b.promoted(in));
  const int64_t rank = metas[0].rank();
  const NodeId x = b.cast(in[0], t);
  const NodeId ms = b.reduce(OpId::mean, b.add(OpId::mul, {x, x}), iota(rank - a.i(0), rank), true);
  NodeId y = b.add(OpId::mul, {x, b.add(OpId::rsqrt, {b.add(OpId::add, {ms, b.scalar(a.f(1), t)})})});
  if (in.size() > 1) y = b.add(OpId::mul, {y, b.cast(in[1], t)});
  return y;
}

NodeId decompose_linear(Graph& g, std::span<const NodeId> in, const Attrs&) {
  Builder b{g};
  const NodeId wt = b.add(OpId::permute, {in[1]}, {std::vector<int64_t>{1, 0}});
  const NodeId y = b.add(OpId::matmul, {in[0], wt});
  return in.size() > 2 ? b.add(OpId::add, {y, in[2]}) : y;
}

// softmax(q @ k^T * scale, -1) @ v in the result's dtype (the scale as a `full` of it, left out
// when it is 1), exactly the ops passes::recognize turns into this composite; a bool mask sets
// the scores it drops to -inf, a float one is added to them.
NodeId decompose_attention(Graph& g, std::span<const NodeId> in, const Attrs& a) {
  Builder b{g};
  const std::vector<TensorMeta> metas = b.metas(in);
  const DType t = float_of(b.promoted(in.first(3)));
  const int64_t rank = metas[0].rank();
  std::vector<int64_t> perm = iota(0, rank);
  std::swap(perm[static_cast<size_t>(rank - 1)], perm[static_cast<size_t>(rank - 2)]);
  const NodeId kt = b.add(OpId::permute, {b.cast(in[1], t)}, {perm});
  NodeId s = b.add(OpId::matmul, {b.cast(in[0], t), kt});
  if (a.f(0) != 1.0) s = b.add(OpId::mul, {s, b.scalar(a.f(0), t)});
  if (in.size() > 3 && metas[3].dtype == DType::bool_)
    s = b.add(OpId::where, {in[3], s, b.scalar(-std::numeric_limits<double>::infinity(), t)});
  else if (in.size() > 3)
    s = b.add(OpId::add, {s, b.cast(in[3], t)});
  NodeId p = b.add(OpId::softmax, {s}, {rank - 1});
  // With a mask, a row whose softmax is NaN (every key masked out, or a NaN or inf score) has
  // weights 0, as torch's scaled_dot_product_attention (its _safe_softmax) and the ONNX export
  // of a masked one (where(isnan(p), 0, p)).
  if (in.size() > 3) p = b.add(OpId::where, {b.add(OpId::isnan, {p}), b.scalar(0.0, t), p});
  return b.add(OpId::matmul, {p, b.cast(in[2], t)});
}

// x[N, C, *S] (channels last: x[N, *S, C]) padded with `fill` along its spatial dims (pad's
// pairs run from the last dim).
NodeId pad_spatial(Builder& b, NodeId x, const std::vector<int64_t>& begin, const std::vector<int64_t>& end, double fill,
                   bool last = false) {
  std::vector<int64_t> pairs;
  if (last) pairs = {0, 0};
  bool any = false;
  for (size_t d = begin.size(); d-- > 0;) {
    pairs.push_back(begin[d]);
    pairs.push_back(end[d]);
    any = any || begin[d] != 0 || end[d] != 0;
  }
  return any ? b.add(OpId::pad, {x}, {pairs, fill}) : x;
}

// The taps of w's windows over x: x padded with `fill` (the explicit pads and what ceil_mode
// needs past them), then one strided slice [N, C, *O] per kernel offset, offsets in row-major
// order (the order of a convolution weight's kernel dims).
std::vector<NodeId> window_taps(Builder& b, NodeId x, const PoolWindows& w, double fill, bool last = false) {
  const size_t n = w.kernel.size();
  const size_t first = last ? 1 : 2;  // the first spatial dim
  std::vector<int64_t> end = w.pads_end;
  for (size_t d = 0; d < n; ++d) end[d] += w.extra_end[d];
  const NodeId xp = pad_spatial(b, x, w.pads_begin, end, fill, last);
  std::vector<NodeId> taps;
  std::vector<int64_t> pos(n, 0);
  for (;;) {
    NodeId p = xp;
    for (size_t d = 0; d < n; ++d) {
      const int64_t s = pos[d] * w.dilations[d];
      const int64_t e = s + (w.out[d] - 1) * w.strides[d] + 1;
      if (s != 0 || e != b.meta(p).sizes[first + d].hint() || w.strides[d] != 1)
        p = b.add(OpId::slice, {p}, {static_cast<int64_t>(first + d), s, e, w.strides[d]});
    }
    taps.push_back(p);
    size_t d = n;
    while (d > 0 && ++pos[d - 1] == w.kernel[d - 1]) pos[--d] = 0;
    if (d == 0) return taps;
  }
}

// The windows of x as one view [N, C, *K, *O]: x padded with `fill`, each spatial dim unfolded
// into its windows (a new last dim of the window's span, every `dilation`-th element of it kept),
// then the kernel dims moved before the output dims. One strided view per dim instead of a cat
// of P strided slices: a kernel computing that cat selected among its P loads at every element
// (resnet50's 7x7 stem: 64 ms of a 303 ms call on 16 cores; vit_b_16's 16x16 patches: 32 of 422).
NodeId window_patches(Builder& b, NodeId x, const PoolWindows& w, double fill) {
  const size_t n = w.kernel.size();
  std::vector<int64_t> end = w.pads_end;
  for (size_t d = 0; d < n; ++d) end[d] += w.extra_end[d];
  NodeId p = pad_spatial(b, x, w.pads_begin, end, fill);
  for (size_t d = 0; d < n; ++d) {
    const auto dim = static_cast<int64_t>(2 + d);
    const int64_t span = (w.kernel[d] - 1) * w.dilations[d] + 1;
    // The padded size gives exactly the output's windows: out is (padded - span) / stride + 1.
    p = b.add(OpId::unfold, {p}, {dim, span, w.strides[d]});
    KILN_INTERNAL_CHECK(b.meta(p).sizes[2 + d] == SymInt(w.out[d]), "convolution windows: dim ", d, " unfolds into ",
                        b.meta(p).sizes[2 + d].str(), " windows, not ", w.out[d]);
    if (w.dilations[d] != 1)
      p = b.add(OpId::slice, {p}, {b.meta(p).rank() - 1, int64_t{0}, span, w.dilations[d]});
  }
  std::vector<int64_t> perm{0, 1};  // [N, C, *O, *K] -> [N, C, *K, *O]
  for (size_t d = 0; d < n; ++d) perm.push_back(static_cast<int64_t>(2 + n + d));
  for (size_t d = 0; d < n; ++d) perm.push_back(static_cast<int64_t>(2 + d));
  return b.add(OpId::permute, {p}, {perm});
}

// Most taps a depthwise convolution folds (7x7 windows): two ops a tap, well inside a kernel's
// inline depth (schedule::Options::max_inline_depth); larger windows go through im2col.
constexpr int64_t kMaxFoldedTaps = 49;

}  // namespace

bool convolution_tiles_input(const Attrs& a, std::span<const SymInt> x_spatial, std::span<const SymInt> w_sizes) {
  const std::vector<int64_t>& strides = a.ints(0);
  const std::vector<int64_t>& pads = a.ints(1);
  const std::vector<int64_t>& dil = a.ints(2);
  const size_t n = x_spatial.size();
  if (a.i(3) != 1 || w_sizes.size() != n + 2 || strides.size() != n || dil.size() != n || pads.size() != 2 * n) return false;
  bool wider = false;
  for (size_t d = 0; d < n; ++d) {
    const SymInt& k = w_sizes[2 + d];
    if (!k.is_static() || !x_spatial[d].is_static() || k.hint() != strides[d] || dil[d] != 1 || k.hint() > x_spatial[d].hint())
      return false;
    wider = wider || k.hint() > 1;
  }
  for (int64_t p : pads)
    if (p != 0) return false;
  return wider;
}

bool convolution_folds_taps(std::span<const SymInt> w_sizes) {
  int64_t taps = 1;
  for (size_t d = 2; d < w_sizes.size(); ++d) taps *= w_sizes[d].hint();
  return w_sizes.size() >= 3 && w_sizes[1].hint() == 1 && taps <= kMaxFoldedTaps;
}

std::optional<ScatterReduction> parse_scatter_reduction(std::string_view reduce) {
  if (reduce == "amax") return ScatterReduction::amax;
  if (reduce == "amin") return ScatterReduction::amin;
  if (reduce == "prod") return ScatterReduction::prod;
  return std::nullopt;
}

std::string_view convolution_computes_name(ConvolutionComputes c) {
  switch (c) {
    case ConvolutionComputes::y: return "y";
    case ConvolutionComputes::x: return "x";
    case ConvolutionComputes::w: return "w";
  }
  return "?";
}

SymShape channels_first(const SymShape& s) {
  if (s.size() < 3) return s;
  SymShape r{s.front(), s.back()};
  r.insert(r.end(), s.begin() + 1, s.end() - 1);
  return r;
}

SymShape channels_last(const SymShape& s) {
  if (s.size() < 3) return s;
  SymShape r{s.front()};
  r.insert(r.end(), s.begin() + 2, s.end());
  r.push_back(s[1]);
  return r;
}

namespace {

// A convolution whose groups read one input channel each (depthwise, any channel multiplier)
// as a sum over its taps of tap * weight: one fused kernel reading x in place. im2col would
// materialise P copies of x for a matmul whose inner dim is only P.
// Each tap and weight is cast to `acc` where it is read (x and w stay views of what they are).
NodeId depthwise_fold(Builder& b, NodeId x, NodeId w, const PoolWindows& win, int64_t groups, int64_t mult, const SymShape& ys,
                      DType acc) {
  const size_t n = win.kernel.size();
  int64_t p = 1;
  for (int64_t k : win.kernel) p *= k;
  const NodeId wk = b.add(OpId::reshape, {w}, {SymShape{groups, mult, p}});  // [M, 1, *K] -> [g, M/g, P]
  SymShape w_tap{1, groups, mult};
  w_tap.insert(w_tap.end(), n, SymInt(1));
  NodeId sum = -1;
  int64_t k = 0;
  for (NodeId tap : window_taps(b, x, win, 0.0)) {
    const NodeId wt = b.add(OpId::reshape, {b.add(OpId::slice, {wk}, {int64_t{2}, k, k + 1, int64_t{1}})}, {w_tap});
    const NodeId term = b.add(OpId::mul, {b.cast(b.add(OpId::unsqueeze, {tap}, {int64_t{2}}), acc), b.cast(wt, acc)});  // [N, g, M/g, *O]
    sum = sum < 0 ? term : b.add(OpId::add, {sum, term});
    ++k;
  }
  return b.add(OpId::reshape, {sum}, {ys});
}

// The windows of x as columns and one matmul per group (im2col): x padded and unfolded into its
// P = prod(K) taps per output position [N, C, *K, *O] (window_patches), read as
// [N, g, C/g * P, L] (L = prod(O)), multiplied by w as [g, M/g, C/g * P]: y comes out channels
// first, as its readers take it (a ConvNeXt's depthwise convolution after the stem read a
// channels-last product 4x slower). Windows that tile x (a patch embedding) unfold as views, so
// their columns are one copy of x. Depthwise ones are a sum over their taps (depthwise_fold).
// Targets with a convolution kernel of their own keep the others (schedule::Target::convolution).
// A convolution's windows over x[N, C, *S] for w[M, C/groups, *K] (channels-first sizes).
PoolWindows convolution_windows(const SymShape& x, const SymShape& w, const Attrs& a) {
  const size_t n = x.size() - 2;
  const std::vector<int64_t>& strides = a.ints(0);
  const std::vector<int64_t>& pads = a.ints(1);
  const std::vector<int64_t>& dil = a.ints(2);
  std::vector<int64_t> kernel, osz;
  for (size_t d = 0; d < n; ++d) {
    kernel.push_back(w[2 + d].hint());
    const int64_t span = (kernel[d] - 1) * dil[d] + 1;
    osz.push_back((x[2 + d].hint() + pads[d] + pads[d + n] - span) / strides[d] + 1);
  }
  return PoolWindows{kernel, strides, dil, {pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(n)},
                     {pads.begin() + static_cast<std::ptrdiff_t>(n), pads.end()}, osz, std::vector<int64_t>(n, 0)};
}

// A channels-last convolution whose windows tile x (convolution_tiles_input) as one linear
// layer over its windows as rows: x [N, *S, C] cropped to whole windows, viewed as
// [N, O1, K1, .., On, Kn, C], permuted to [N, *O, *K, C] and read as [N, *O, P * C] (each row
// one window, in the order of the weight's [M, *K, C] flattened); the product [N, *O, M] is y as
// it lies.
NodeId tiled_convolution_channels_last(Builder& b, std::span<const NodeId> in, const PoolWindows& win, DType t, int64_t m) {
  NodeId x = b.cast(in[0], t);
  const SymShape xs = b.meta(x).sizes;
  const size_t n = win.kernel.size();
  for (size_t d = 0; d < n; ++d) {
    const int64_t whole = win.out[d] * win.kernel[d];
    if (xs[1 + d].hint() != whole) x = b.add(OpId::slice, {x}, {static_cast<int64_t>(1 + d), int64_t{0}, whole, int64_t{1}});
  }
  SymShape split{xs[0]}, rows{xs[0]};
  std::vector<int64_t> perm{0};
  int64_t p = 1;
  for (size_t d = 0; d < n; ++d) {
    split.push_back(SymInt(win.out[d]));
    split.push_back(SymInt(win.kernel[d]));
    rows.push_back(SymInt(win.out[d]));
    perm.push_back(static_cast<int64_t>(1 + 2 * d));  // O_d
    p *= win.kernel[d];
  }
  for (size_t d = 0; d < n; ++d) perm.push_back(static_cast<int64_t>(2 + 2 * d));  // K_d
  split.push_back(xs.back());
  perm.push_back(static_cast<int64_t>(1 + 2 * n));  // C
  rows.push_back(xs.back() * SymInt(p));
  const NodeId windows = b.add(OpId::permute, {b.add(OpId::reshape, {x}, {split})}, {perm});
  std::vector<NodeId> lin{b.add(OpId::reshape, {windows}, {rows}),
                          b.add(OpId::reshape, {b.cast(in[1], t)}, {SymShape{SymInt(m), rows.back()}})};
  if (in.size() > 2) lin.push_back(b.cast(in[2], t));
  return b.add(OpId::linear, lin);
}

NodeId decompose_convolution(Graph& g, std::span<const NodeId> in, const Attrs& a) {
  Builder b{g};
  const std::vector<TensorMeta> metas = b.metas(in);
  const DType t = b.promoted(in);
  const TensorMeta& x = metas[0];
  const TensorMeta& w = metas[1];
  const size_t n = static_cast<size_t>(x.rank() - 2);
  const int64_t groups = a.i(3);
  const int64_t ch = x.sizes[1].hint(), m = w.sizes[0].hint();
  const PoolWindows win = convolution_windows(x.sizes, w.sizes, a);
  const std::vector<int64_t>& kernel = win.kernel;
  const std::vector<int64_t>& osz = win.out;
  int64_t p = 1, l = 1;
  for (int64_t k : kernel) p *= k;
  for (int64_t o : osz) l *= o;
  const SymInt nb = x.sizes[0];
  SymShape ys{nb, m};
  for (int64_t o : osz) ys.push_back(o);
  NodeId y;
  const bool folds = convolution_folds_taps(w.sizes);
  // Folded taps of f16/bf16 add up in f32 (as a gemm's or cuDNN's accumulator), with the bias,
  // and are rounded once: a sum of 49 taps in bf16 kept 8 bits through 48 roundings.
  const DType acc = folds && (t == DType::f16 || t == DType::bf16) ? DType::f32 : t;
  if (folds) {
    y = depthwise_fold(b, b.cast(in[0], t), b.cast(in[1], t), win, groups, m / groups, ys, acc);
  } else {
    // [N, C, P, *O]: one tap (a 1x1 kernel) is x itself, or a strided slice of it
    const NodeId patches = p == 1 ? b.add(OpId::unsqueeze, {window_taps(b, b.cast(in[0], t), win, 0.0)[0]}, {int64_t{2}})
                                  : window_patches(b, b.cast(in[0], t), win, 0.0);
    const NodeId lhs = b.add(OpId::reshape, {b.cast(in[1], t)}, {SymShape{groups, m / groups, ch / groups * p}});
    const NodeId rhs = b.add(OpId::reshape, {patches}, {SymShape{nb, groups, ch / groups * p, l}});
    y = b.add(OpId::reshape, {b.add(OpId::matmul, {lhs, rhs})}, {ys});  // [N, g, M/g, L] -> [N, M, *O]
  }
  if (in.size() > 2) {
    SymShape bs{m};
    bs.insert(bs.end(), n, SymInt(1));
    y = b.add(OpId::add, {y, b.add(OpId::reshape, {b.cast(in[2], acc)}, {bs})});
  }
  return b.cast(y, t);
}

// The permutations between channels-first [N, C, *S] and channels-last [N, *S, C] of rank r.
std::vector<int64_t> to_first_perm(int64_t r) {
  std::vector<int64_t> p{0, r - 1};
  for (int64_t d = 1; d < r - 1; ++d) p.push_back(d);
  return p;
}
std::vector<int64_t> to_last_perm(int64_t r) {
  std::vector<int64_t> p{0};
  for (int64_t d = 2; d < r; ++d) p.push_back(d);
  p.push_back(1);
  return p;
}

// Channels last: a 1x1 convolution of unit stride, no pads and one group is a linear layer over
// x's channels as they lie (one gemm over every position); a depthwise one folds its taps along
// the channel dim, each output position's channels side by side (coalesced where the
// channels-first fold reads the spatial dims); one whose windows tile x a linear layer over its
// windows as rows (tiled_convolution_channels_last); any other is the channels-first convolution
// between permutes (targets that run convolutions themselves keep the op:
// schedule::Target::runs_convolution).
NodeId decompose_convolution_channels_last(Graph& g, std::span<const NodeId> in, const Attrs& a) {
  Builder b{g};
  const std::vector<TensorMeta> metas = b.metas(in);
  const DType t = b.promoted(in);
  const SymShape xs = channels_first(metas[0].sizes);
  const SymShape ws = channels_first(metas[1].sizes);
  const auto r = static_cast<int64_t>(xs.size());
  const size_t n = xs.size() - 2;
  const int64_t groups = a.i(3), m = ws[0].hint();
  const PoolWindows win = convolution_windows(xs, ws, a);
  bool unit = groups == 1;
  for (size_t d = 0; d < n; ++d)
    unit = unit && win.kernel[d] == 1 && win.strides[d] == 1 && win.pads_begin[d] == 0 && win.pads_end[d] == 0;
  if (unit) {
    std::vector<NodeId> lin{b.cast(in[0], t), b.add(OpId::reshape, {b.cast(in[1], t)}, {SymShape{m, ws[1]}})};
    if (in.size() > 2) lin.push_back(b.cast(in[2], t));
    return b.add(OpId::linear, lin);
  }
  if (convolution_folds_taps(ws)) {
    // As depthwise_fold, channels last: tap [N, *O, g] as [N, *O, g, 1] times w[g, M/g] per tap.
    const DType acc = t == DType::f16 || t == DType::bf16 ? DType::f32 : t;
    const int64_t mult = m / groups;
    int64_t p = 1;
    for (int64_t k : win.kernel) p *= k;
    // [M, *K, 1] -> [g, M/g, P] -> [P, g, M/g]: each tap's weights side by side along the
    // channels, as the taps lie, so a kernel reads them as it reads x (the scheduler stores a
    // small weight so permuted: Fuser's permuted_small_source).
    const NodeId wk = b.add(OpId::permute, {b.add(OpId::reshape, {b.cast(in[1], t)}, {SymShape{groups, mult, p}})},
                            {std::vector<int64_t>{2, 0, 1}});
    NodeId sum = -1;
    int64_t k = 0;
    for (NodeId tap : window_taps(b, b.cast(in[0], t), win, 0.0, true)) {
      const NodeId wt = b.add(OpId::reshape, {b.add(OpId::slice, {wk}, {int64_t{0}, k, k + 1, int64_t{1}})}, {SymShape{groups, mult}});
      const NodeId term = b.add(OpId::mul, {b.cast(b.add(OpId::unsqueeze, {tap}, {r}), acc), b.cast(wt, acc)});
      sum = sum < 0 ? term : b.add(OpId::add, {sum, term});
      ++k;
    }
    SymShape ys{xs[0]};
    for (int64_t o : win.out) ys.push_back(o);
    ys.push_back(m);
    NodeId y = b.add(OpId::reshape, {sum}, {ys});
    if (in.size() > 2) y = b.add(OpId::add, {y, b.cast(in[2], acc)});
    return b.cast(y, t);
  }
  if (convolution_tiles_input(a, std::span(xs).subspan(2), ws)) return tiled_convolution_channels_last(b, in, win, t, m);
  std::vector<NodeId> args{b.add(OpId::permute, {in[0]}, {to_first_perm(r)}), b.add(OpId::permute, {in[1]}, {to_first_perm(r)})};
  if (in.size() > 2) args.push_back(in[2]);
  return b.add(OpId::permute, {b.add(OpId::convolution, args, a)}, {to_last_perm(r)});
}

// Pads one dim of x by begin and end (negative: crops), torch's pairs from the last dim down.
NodeId pad_dim(Builder& b, NodeId x, int64_t dim, int64_t begin, int64_t end) {
  if (begin == 0 && end == 0) return x;
  std::vector<int64_t> pairs;
  for (int64_t d = b.meta(x).rank(); d-- > dim;) {
    pairs.push_back(d == dim ? begin : 0);
    pairs.push_back(d == dim ? end : 0);
  }
  return b.add(OpId::pad, {x}, {pairs, 0.0});
}

// A gradient op's attributes with channels_last set to `last`.
Attrs with_layout(const Attrs& a, bool last) { return Attrs{a.ints(0), a.ints(1), a.ints(2), a.i(3), a.ints(4), last}; }

// Whether a convolution is a product over channels alone: 1x1, unit stride, no pads, one group.
bool pointwise_convolution(const Attrs& a, std::span<const int64_t> kernel) {
  bool unit = a.i(3) == 1;
  for (int64_t k : kernel) unit = unit && k == 1;
  for (int64_t st : a.ints(0)) unit = unit && st == 1;
  for (int64_t p : a.ints(1)) unit = unit && p == 0;
  return unit;
}

// gx = the transposed convolution of gy: gy spaced out by the strides (stride - 1 zeros between
// neighbours), padded so that every tap that read x[i] in the forward lines up with i, then
// convolved at unit stride with w's taps flipped and its input and output channels swapped
// within each group (as XLA's convolution with lhs dilation). Channels last: a 1x1 unit-stride
// one is gy @ w over the channels; any other the channels-first op between permutes.
NodeId decompose_convolution_input_grad(Graph& g, std::span<const NodeId> in, const Attrs& a) {
  Builder b{g};
  const DType t = b.promoted(in);
  const NodeId gy = b.cast(in[0], t), w = b.cast(in[1], t);
  const auto r = b.meta(gy).rank();
  if (a.b(5)) {
    const SymShape ws = b.meta(w).sizes;
    std::vector<int64_t> kernel;
    for (size_t d = 1; d + 1 < ws.size(); ++d) kernel.push_back(ws[d].hint());
    if (pointwise_convolution(a, kernel))
      return b.add(OpId::matmul, {gy, b.add(OpId::reshape, {w}, {SymShape{ws.front(), ws.back()}})});
    const NodeId gx = b.add(OpId::convolution_input_grad,
                            {b.add(OpId::permute, {gy}, {to_first_perm(r)}), b.add(OpId::permute, {w}, {to_first_perm(r)})},
                            with_layout(a, false));
    return b.add(OpId::permute, {gx}, {to_last_perm(r)});
  }
  const size_t n = static_cast<size_t>(r - 2);
  const std::vector<int64_t>& strides = a.ints(0);
  const std::vector<int64_t>& pads = a.ints(1);
  const std::vector<int64_t>& dil = a.ints(2);
  const int64_t groups = a.i(3);
  const std::vector<int64_t>& spatial = a.ints(4);
  const SymShape ws = b.meta(w).sizes;
  const int64_t m = ws[0].hint(), cg = ws[1].hint();
  NodeId z = gy;
  for (size_t d = 0; d < n; ++d) {
    const auto dim = static_cast<int64_t>(2 + d);
    const int64_t o = b.meta(z).sizes[2 + d].hint(), k = ws[2 + d].hint();
    int64_t len = o;
    if (strides[d] > 1) {  // [.., O, ..] -> [.., O, 1, ..] -> [.., O, s, ..] -> [.., O * s, ..]
      SymShape spaced = b.meta(z).sizes;
      spaced[2 + d] = o * strides[d];
      z = pad_dim(b, b.add(OpId::unsqueeze, {z}, {dim + 1}), dim + 1, 0, strides[d] - 1);
      z = b.add(OpId::reshape, {z}, {spaced});
      len = o * strides[d];
    }
    const int64_t left = (k - 1) * dil[d] - pads[d];
    z = pad_dim(b, z, dim, left, spatial[d] + (k - 1) * dil[d] - left - len);
  }
  // w[M, C/g, *K] -> [g, M/g, C/g, *K] -> [g, C/g, M/g, *K] -> [C, M/g, *K], each kernel dim reversed
  SymShape split{groups, m / groups, cg};
  split.insert(split.end(), ws.begin() + 2, ws.end());
  std::vector<int64_t> swap{0, 2, 1};
  for (size_t d = 0; d < n; ++d) swap.push_back(static_cast<int64_t>(3 + d));
  SymShape merged{cg * groups, m / groups};
  merged.insert(merged.end(), ws.begin() + 2, ws.end());
  NodeId wt = b.add(OpId::reshape, {b.add(OpId::permute, {b.add(OpId::reshape, {w}, {split})}, {swap})}, {merged});
  for (size_t d = 0; d < n; ++d) {
    const int64_t k = ws[2 + d].hint();
    if (k == 1) continue;
    const NodeId reversed = b.add(OpId::arange, {}, {static_cast<double>(k - 1), -1.0, -1.0, DType::i64});
    wt = b.add(OpId::index_select, {wt, reversed}, {static_cast<int64_t>(2 + d)});
  }
  return b.add(OpId::convolution, {z, wt},
               {std::vector<int64_t>(n, 1), std::vector<int64_t>(2 * n, 0), dil, groups});
}

// gw = x's windows times gy, summed over the batch and the output positions: per group one
// product [M/g, N * L] @ [N * L, C/g * P] with the batch folded into the inner dim. A
// depthwise weight (Target-independent convolution_folds_taps) sums tap * gy per tap instead.
// Channels last: a 1x1 unit-stride one is gy^T @ x over every position; any other the
// channels-first op between permutes.
NodeId decompose_convolution_weight_grad(Graph& g, std::span<const NodeId> in, const Attrs& a) {
  Builder b{g};
  const DType t = b.promoted(in);
  const NodeId x = b.cast(in[0], t), gy = b.cast(in[1], t);
  const auto r = b.meta(x).rank();
  const std::vector<int64_t>& kernel = a.ints(4);
  if (a.b(5)) {
    const SymShape xs = b.meta(x).sizes, gs = b.meta(gy).sizes;
    if (pointwise_convolution(a, kernel)) {
      SymInt rows = 1;
      for (size_t d = 0; d + 1 < xs.size(); ++d) rows = rows * xs[d];
      const NodeId g2 = b.add(OpId::reshape, {gy}, {SymShape{rows, gs.back()}});
      const NodeId x2 = b.add(OpId::reshape, {x}, {SymShape{rows, xs.back()}});
      const NodeId gw = b.add(OpId::matmul, {b.add(OpId::permute, {g2}, {std::vector<int64_t>{1, 0}}), x2});
      SymShape wl{gs.back()};
      wl.insert(wl.end(), kernel.size(), SymInt(1));
      wl.push_back(xs.back());
      return b.add(OpId::reshape, {gw}, {wl});
    }
    const NodeId gw = b.add(OpId::convolution_weight_grad,
                            {b.add(OpId::permute, {x}, {to_first_perm(r)}), b.add(OpId::permute, {gy}, {to_first_perm(r)})},
                            with_layout(a, false));
    return b.add(OpId::permute, {gw}, {to_last_perm(r)});
  }
  const SymShape xs = b.meta(x).sizes, gs = b.meta(gy).sizes;
  const size_t n = static_cast<size_t>(r - 2);
  const int64_t groups = a.i(3), ch = xs[1].hint(), m = gs[1].hint();
  SymShape wsz{m, ch / groups};
  for (int64_t k : kernel) wsz.push_back(k);
  const PoolWindows win = convolution_windows(xs, wsz, a);
  int64_t p = 1, l = 1;
  for (int64_t k : kernel) p *= k;
  for (int64_t o : win.out) l *= o;
  const SymInt nb = xs[0];
  if (convolution_folds_taps(wsz)) {
    // One reduction per tap: sum over the batch and positions of tap[N, g, 1, *O] * gy[N, g, M/g, *O].
    const DType acc = t == DType::f16 || t == DType::bf16 ? DType::f32 : t;
    SymShape gsplit{nb, groups, m / groups};
    gsplit.insert(gsplit.end(), gs.begin() + 2, gs.end());
    const NodeId gy_split = b.cast(b.add(OpId::reshape, {gy}, {gsplit}), acc);
    std::vector<int64_t> summed{0};
    for (size_t d = 0; d < n; ++d) summed.push_back(static_cast<int64_t>(3 + d));
    std::vector<NodeId> per_tap;
    for (NodeId tap : window_taps(b, x, win, 0.0)) {
      const NodeId prod = b.add(OpId::mul, {b.cast(b.add(OpId::unsqueeze, {tap}, {int64_t{2}}), acc), gy_split});
      per_tap.push_back(b.add(OpId::unsqueeze, {b.reduce(OpId::sum, prod, summed, false)}, {int64_t{2}}));  // [g, M/g, 1]
    }
    const NodeId taps = per_tap.size() == 1 ? per_tap[0] : b.add(OpId::cat, per_tap, {int64_t{2}});
    return b.cast(b.add(OpId::reshape, {taps}, {wsz}), t);
  }
  // [N, C, P, *O] -> [N, g, C/g * P, L] -> [g, N, L, C/g * P] -> [g, N * L, C/g * P]
  const NodeId patches = p == 1 ? b.add(OpId::unsqueeze, {window_taps(b, x, win, 0.0)[0]}, {int64_t{2}})
                                : window_patches(b, x, win, 0.0);
  const NodeId cols = b.add(OpId::reshape, {b.add(OpId::permute, {b.add(OpId::reshape, {patches}, {SymShape{nb, groups, ch / groups * p, l}})},
                                                  {std::vector<int64_t>{1, 0, 3, 2}})},
                            {SymShape{groups, nb * l, ch / groups * p}});
  // gy [N, M, *O] -> [N, g, M/g, L] -> [g, M/g, N, L] -> [g, M/g, N * L]
  const NodeId rows = b.add(OpId::reshape, {b.add(OpId::permute, {b.add(OpId::reshape, {gy}, {SymShape{nb, groups, m / groups, l}})},
                                                  {std::vector<int64_t>{1, 2, 0, 3}})},
                            {SymShape{groups, m / groups, nb * l}});
  return b.add(OpId::reshape, {b.add(OpId::matmul, {rows, cols})}, {wsz});
}

// The windows folded tap by tap (maximum or add): a chain of pointwise ops over views of x
// fuses into one kernel that reads x at each tap; a stack of the windows reduced over its tap
// dim would materialise P copies.
NodeId pool_fold(Builder& b, NodeId x, const PoolWindows& w, double fill, OpId op) {
  NodeId acc = -1;
  for (NodeId tap : window_taps(b, x, w, fill)) acc = acc < 0 ? tap : b.add(op, {acc, tap});
  return acc;
}

NodeId decompose_max_pool(Graph& g, std::span<const NodeId> in, const Attrs& a) {
  Builder b{g};
  const PoolWindows w = pool_windows("max_pool", b.meta(in[0]).sizes, a);
  return pool_fold(b, in[0], w, -std::numeric_limits<double>::infinity(), OpId::maximum);
}

}  // namespace

namespace graph_detail {

// max_pool's gradient, gathered: each window's gradient goes to the first tap that holds its
// maximum (a NaN where the window has one; a pad never), as torch's; each element of x collects
// it from the few windows that can have picked it (ceil(span / stride) per spatial dim: 2 x 2
// for 3x3 windows at stride 2), read at positions computed from iotas (index_select over the
// flattened windows). Differentiating the decomposition instead (each tap's maximum, then each
// strided slice's gradient interleaved with zeros and padded back) stored a full-size gradient
// per tap and split ties evenly.
std::vector<NodeId> grad_max_pool(Graph& g, const GradContext& c) {
  Builder b{g};
  const NodeId x = c.inputs[0], y = c.output, gy = c.grad;
  const TensorMeta xm = b.meta(x);
  const PoolWindows w = pool_windows("max_pool", xm.sizes, c.attrs);
  const size_t n = w.kernel.size();
  int64_t elements = 1;
  for (size_t d = 0; d < n; ++d) elements *= std::max(xm.sizes[2 + d].hint(), w.out[d] * w.kernel[d]);
  // Positions and tap numbers: integers, exact in f32 below 2^24.
  const DType f = elements < (int64_t{1} << 24) ? DType::f32 : DType::f64;
  const DType t = b.meta(gy).dtype;
  // The tap each window took its maximum from: the first that matches, looked at last to first.
  const std::vector<NodeId> taps = window_taps(b, x, w, -std::numeric_limits<double>::infinity());
  // Whether tap t_d of window o lies inside x along spatial dim d, as [1, 1, .., O_d, .., 1]
  // (from an iota: a graph off the CPU holds no constants of rank > 0).
  auto inside = [&](size_t d, int64_t tap) {
    const int64_t size = xm.sizes[2 + d].hint();
    const NodeId o = b.add(OpId::iota, {}, {SymShape{w.out[d]}, int64_t{0}, f});
    const NodeId at = b.add(OpId::add, {b.add(OpId::mul, {o, b.scalar(static_cast<double>(w.strides[d]), f)}),
                                        b.scalar(static_cast<double>(tap * w.dilations[d] - w.pads_begin[d]), f)});
    const NodeId in = b.add(OpId::logical_and, {b.add(OpId::ge, {at, b.scalar(0.0, f)}),
                                                b.add(OpId::lt, {at, b.scalar(static_cast<double>(size), f)})});
    SymShape s(n + 2, SymInt(1));
    s[2 + d] = SymInt(w.out[d]);
    return b.add(OpId::reshape, {in}, {s});
  };
  // (Tap numbers are stored, so in f16 while it holds them exactly: half of f32's bytes.)
  const DType tap_type = taps.size() <= 2048 ? DType::f16 : f;
  NodeId first = b.scalar(0.0, tap_type);
  std::vector<int64_t> pos(n, 0);  // tap k's offset per dim (row-major, as window_taps)
  for (size_t k = taps.size(); k-- > 0;) {
    int64_t rest = static_cast<int64_t>(k);
    for (size_t d = n; d-- > 0;) {
      pos[d] = rest % w.kernel[d];
      rest /= w.kernel[d];
    }
    NodeId match = b.add(OpId::logical_or, {b.add(OpId::eq, {taps[k], y}), b.add(OpId::isnan, {taps[k]})});
    for (size_t d = 0; d < n; ++d) {
      const int64_t at_first = pos[d] * w.dilations[d] - w.pads_begin[d];
      const int64_t at_last = at_first + (w.out[d] - 1) * w.strides[d];
      if (at_first < 0 || at_last >= xm.sizes[2 + d].hint()) match = b.add(OpId::logical_and, {match, inside(d, pos[d])});
    }
    first = b.add(OpId::where, {match, b.scalar(static_cast<double>(k), tap_type), first});
  }
  // Per spatial dim and candidate j: position p's window q = floor((p + pad) / stride) - j, its
  // offset r = p + pad - q * stride in the padded window, the tap r / dilation.
  struct Candidate {
    NodeId window, tap, valid;  // [S_d]: the window (clamped into range), its tap, whether it counts
  };
  std::vector<std::vector<Candidate>> per_dim(n);
  int64_t windows = 1, positions = 1;
  for (size_t d = 0; d < n; ++d) {
    const int64_t size = xm.sizes[2 + d].hint(), s = w.strides[d], dil = w.dilations[d], out = w.out[d];
    const int64_t span = (w.kernel[d] - 1) * dil + 1;
    windows *= out;
    positions *= size;
    const NodeId p = b.add(OpId::iota, {}, {SymShape{size}, int64_t{0}, f});
    const NodeId shifted = b.add(OpId::add, {p, b.scalar(static_cast<double>(w.pads_begin[d]), f)});
    const NodeId base = b.add(OpId::floor, {b.add(OpId::div, {shifted, b.scalar(static_cast<double>(s), f)})});
    for (int64_t j = 0; j * s < span; ++j) {
      const NodeId q = b.add(OpId::sub, {base, b.scalar(static_cast<double>(j), f)});
      const NodeId r = b.add(OpId::sub, {shifted, b.add(OpId::mul, {q, b.scalar(static_cast<double>(s), f)})});
      const NodeId tap = dil == 1 ? r : b.add(OpId::floor, {b.add(OpId::div, {r, b.scalar(static_cast<double>(dil), f)})});
      NodeId valid = b.add(OpId::logical_and, {b.add(OpId::lt, {r, b.scalar(static_cast<double>(span), f)}),
                                               b.add(OpId::ge, {q, b.scalar(0.0, f)})});
      valid = b.add(OpId::logical_and, {valid, b.add(OpId::le, {q, b.scalar(static_cast<double>(out - 1), f)})});
      if (dil != 1)
        valid = b.add(OpId::logical_and, {valid, b.add(OpId::eq, {b.add(OpId::mul, {tap, b.scalar(static_cast<double>(dil), f)}), r})});
      const NodeId clamped = b.add(OpId::minimum, {b.add(OpId::maximum, {q, b.scalar(0.0, f)}), b.scalar(static_cast<double>(out - 1), f)});
      per_dim[d].push_back({clamped, tap, valid});
    }
  }
  // Each combination of candidates over the dims, flattened: [prod S] windows, taps, validity.
  const SymInt nb = xm.sizes[0], ch = xm.sizes[1];
  const NodeId gy_flat = b.add(OpId::reshape, {gy}, {SymShape{nb, ch, windows}});
  const NodeId first_flat = b.add(OpId::reshape, {first}, {SymShape{nb, ch, windows}});
  auto along = [&](NodeId v, size_t d) {  // [S_d] -> [1.., S_d, ..1] over the spatial dims
    SymShape s(n, SymInt(1));
    s[d] = xm.sizes[2 + d];
    return b.add(OpId::reshape, {v}, {s});
  };
  NodeId gx = -1;
  std::vector<size_t> pick(n, 0);
  for (;;) {
    NodeId window = -1, tap = -1, valid = -1;
    int64_t window_stride = 1, tap_stride = 1;
    for (size_t d = n; d-- > 0;) {
      const Candidate& cd = per_dim[d][pick[d]];
      const NodeId wd = along(b.add(OpId::mul, {cd.window, b.scalar(static_cast<double>(window_stride), f)}), d);
      const NodeId td = along(b.add(OpId::mul, {cd.tap, b.scalar(static_cast<double>(tap_stride), f)}), d);
      const NodeId vd = along(cd.valid, d);
      window = window < 0 ? wd : b.add(OpId::add, {window, wd});
      tap = tap < 0 ? td : b.add(OpId::add, {tap, td});
      valid = valid < 0 ? vd : b.add(OpId::logical_and, {valid, vd});
      window_stride *= w.out[d];
      tap_stride *= w.kernel[d];
    }
    const SymShape flat{positions};
    const NodeId index = b.cast(b.add(OpId::reshape, {window}, {flat}), DType::i64);
    const NodeId took = b.add(OpId::eq, {b.add(OpId::index_select, {first_flat, index}, {int64_t{2}}), b.add(OpId::reshape, {tap}, {flat})});
    const NodeId counts = b.add(OpId::logical_and, {took, b.add(OpId::reshape, {valid}, {flat})});
    const NodeId part = b.add(OpId::where, {counts, b.add(OpId::index_select, {gy_flat, index}, {int64_t{2}}), b.scalar(0.0, t)});
    gx = gx < 0 ? part : b.add(OpId::add, {gx, part});
    size_t d = n;
    while (d > 0 && ++pick[d - 1] == per_dim[d - 1].size()) pick[--d] = 0;
    if (d == 0) break;
  }
  return {b.add(OpId::reshape, {gx}, {xm.sizes})};
}

}  // namespace graph_detail

namespace {

// The window sums divided by each window's count: the taps inside x (or inside x and its
// explicit pads with count_include_pad), a scalar where every window counts alike. Otherwise
// the counts are the same windows summed over ones padded with 1 where pads count and 0
// elsewhere. The ones are made from x (cast(isnan(x)) * 0 + 1): a graph off the CPU holds no
// constants of rank > 0, and slicing a plane out of x would pin a symbolic batch; fused, they
// cost arithmetic on taps the kernel reads anyway.
NodeId decompose_avg_pool(Graph& g, std::span<const NodeId> in, const Attrs& a) {
  Builder b{g};
  const TensorMeta x = b.meta(in[0]);
  const PoolWindows w = pool_windows("avg_pool", x.sizes, a);
  const bool include_pad = a.b(5);
  const size_t n = w.kernel.size();
  bool uniform = true;
  int64_t count = 1;
  for (size_t d = 0; d < n; ++d) {
    const int64_t size = x.sizes[2 + d].hint();
    const int64_t lo = include_pad ? -w.pads_begin[d] : 0, hi = include_pad ? size + w.pads_end[d] : size;
    int64_t first = -1;
    for (int64_t o = 0; o < w.out[d]; ++o) {
      int64_t taps = 0;
      for (int64_t t = 0; t < w.kernel[d]; ++t) {
        const int64_t p = o * w.strides[d] - w.pads_begin[d] + t * w.dilations[d];
        taps += p >= lo && p < hi;
      }
      if (first < 0) first = taps;
      uniform = uniform && taps == first;
    }
    count *= first;
  }
  const NodeId sum = pool_fold(b, in[0], w, 0.0, OpId::add);
  if (uniform) return b.add(OpId::div, {sum, b.scalar(static_cast<double>(count), x.dtype)});
  const NodeId zero = b.add(OpId::mul, {b.cast(b.add(OpId::isnan, {in[0]}), x.dtype), b.scalar(0.0, x.dtype)});
  NodeId ones = b.add(OpId::add, {zero, b.scalar(1.0, x.dtype)});
  PoolWindows counted = w;
  if (include_pad) {  // the explicit pads count: pad them with 1 first, then pool without them
    ones = pad_spatial(b, ones, w.pads_begin, w.pads_end, 1.0);
    for (size_t d = 0; d < n; ++d) counted.pads_begin[d] = counted.pads_end[d] = 0;
  }
  const NodeId counts = pool_fold(b, ones, counted, 0.0, OpId::add);
  return b.add(OpId::div, {sum, counts});
}

// The [rows, cols] bool mask cmp(col - row, offset) from two iotas: symbolic rows and columns
// stay symbolic and nothing is stored. tril, triu and cumsum's triangle of ones.
NodeId diagonal_mask(Builder& b, const SymInt& rows, const SymInt& cols, OpId cmp, int64_t offset) {
  const SymShape rc{rows, cols};
  const NodeId r = b.add(OpId::iota, {}, {rc, int64_t{0}, DType::i64});
  const NodeId c = b.add(OpId::iota, {}, {rc, int64_t{1}, DType::i64});
  return b.add(cmp, {b.add(OpId::sub, {c, r}), b.scalar(static_cast<double>(offset), DType::i64)});
}
// x where (col - row) compared with the diagonal holds, else 0, over x's last two dims.
NodeId triangle(Graph& g, NodeId x, int64_t diagonal, OpId keep) {
  Builder b{g};
  const TensorMeta m = b.meta(x);
  const NodeId mask = diagonal_mask(b, m.sizes[m.sizes.size() - 2], m.sizes.back(), keep, diagonal);
  return b.add(OpId::where, {mask, x, b.scalar(0.0, m.dtype)});
}
// The permutation moving dim d of a rank-r tensor last, and its inverse (the running sums and
// products work along the last dim).
std::pair<std::vector<int64_t>, std::vector<int64_t>> dim_last(int64_t r, int64_t d) {
  std::vector<int64_t> perm;
  for (int64_t k = 0; k < r; ++k)
    if (k != d) perm.push_back(k);
  perm.push_back(d);
  std::vector<int64_t> inv(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) inv[static_cast<size_t>(perm[k])] = static_cast<int64_t>(k);
  return {perm, inv};
}
// Running sums and products along dim (moved last), in blocks. Within a block of L values, y[i] is
// the reduction (sum or prod) of where(T[i, j], x[j], identity) over j, T[i, j] = (j <= i) (j < i
// exclusive; j >= i, j > i reversed) from two iotas: L terms per element, which fusion computes
// from x without storing the [L, L] operand. A dim longer than two blocks is padded with the
// identity to B blocks of kScanBlock; each block's total is reduced, the running totals of the
// blocks before it (exclusive; reversed: after it) are the same op over [.., B], and combine adds
// or multiplies them in: O(n L) work and log_L(n) levels instead of O(n^2). A symbolic dim is one
// block. Sums skip the masked terms rather than multiply them by 0, so inf and NaN carry on as in
// a sequential scan. Integers and bool sum and multiply in i64 (wrapping, as torch's).
constexpr int64_t kScanBlock = 64;

NodeId running_in_one_block(Builder& b, NodeId xs, bool exclusive, bool reverse, OpId reduce, double identity) {
  const TensorMeta m = b.meta(xs);  // [..., n]
  const SymInt n = m.sizes.back();
  // x[..., j] as [..., 1, n], expanded to [..., n (i), n (j)].
  SymShape one_row = m.sizes, square = m.sizes;
  one_row.insert(one_row.end() - 1, SymInt(1));
  square.insert(square.end() - 1, n);
  const NodeId xe = b.add(OpId::expand, {b.add(OpId::reshape, {xs}, {one_row})}, {square});
  // j <= i is col - row <= 0; exclusive j < i is < 0; reversed j >= i is >= 0, exclusive > 0.
  const OpId keep = reverse ? (exclusive ? OpId::gt : OpId::ge) : (exclusive ? OpId::lt : OpId::le);
  const NodeId kept = b.add(OpId::where, {diagonal_mask(b, n, n, keep, 0), xe, b.scalar(identity, m.dtype)});
  return b.add(reduce, {kept}, {std::vector<int64_t>{m.rank()}, false});
}

NodeId decompose_running(Graph& g, std::span<const NodeId> in, const Attrs& a, OpId scan, OpId reduce,
                         OpId combine, double identity) {
  Builder b{g};
  const TensorMeta x = b.meta(in[0]);
  const DType t = is_floating(x.dtype) ? x.dtype : DType::i64;
  NodeId xs = b.cast(in[0], t);
  if (x.rank() == 0) return xs;
  const int64_t r = x.rank(), d = a.i(0);
  const bool exclusive = a.b(1), reverse = a.b(2);
  const auto [perm, inv] = dim_last(r, d);
  if (d != r - 1) xs = b.add(OpId::permute, {xs}, {perm});
  const SymShape rows = b.meta(xs).sizes;  // [..., n]
  const std::optional<int64_t> n = rows.back().static_value();
  NodeId y;
  if (!n || *n <= 2 * kScanBlock) {
    y = running_in_one_block(b, xs, exclusive, reverse, reduce, identity);
  } else {
    const int64_t blocks = (*n + kScanBlock - 1) / kScanBlock, padded = blocks * kScanBlock;
    if (padded > *n) {  // the identity after the last value changes no running value
      std::vector<int64_t> pads(static_cast<size_t>(2 * r), 0);
      pads[1] = padded - *n;
      xs = b.add(OpId::pad, {xs}, {pads, identity});
    }
    SymShape split = rows;  // [..., B, L]
    split.back() = SymInt(blocks);
    split.push_back(SymInt(kScanBlock));
    const NodeId xb = b.add(OpId::reshape, {xs}, {split});
    const NodeId within = running_in_one_block(b, xb, exclusive, reverse, reduce, identity);
    const NodeId totals = b.add(reduce, {xb}, {std::vector<int64_t>{r}, false});  // [..., B]
    const NodeId before = b.add(scan, {totals}, {r - 1, true, reverse});
    SymShape column = split;
    column.back() = SymInt(1);
    y = b.add(combine, {within, b.add(OpId::reshape, {before}, {column})});
    SymShape flat = rows;
    flat.back() = SymInt(padded);
    y = b.add(OpId::reshape, {y}, {flat});
    if (padded > *n) y = b.add(OpId::slice, {y}, {r - 1, int64_t{0}, *n, int64_t{1}});
  }
  if (d != r - 1) y = b.add(OpId::permute, {y}, {inv});
  return y;
}
NodeId decompose_cumsum(Graph& g, std::span<const NodeId> in, const Attrs& a) {
  return decompose_running(g, in, a, OpId::cumsum, OpId::sum, OpId::add, 0.0);
}
NodeId decompose_cumprod(Graph& g, std::span<const NodeId> in, const Attrs& a) {
  return decompose_running(g, in, a, OpId::cumprod, OpId::prod, OpId::mul, 1.0);
}

// sort and argsort: a bitonic sorting network over (value, position) pairs along dim, moved last
// and padded to a power of two P (the padding's positions put it after every real value). Stage
// (s, j), for s = 2, 4, ..., P and j = s/2, ..., 1, compares each position i with bit j clear
// against i + j, in ascending order where bit s of i is clear (all of them when s = P), else
// descending, and swaps the pair where it is out of order. A stage is views and pointwise ops
// over [.., P/2s, 2 (bit s), s/2j, 2 (bit j), j]: one kernel of P/2 pairs per row, log2(P)
// (log2(P) + 1) / 2 stages, all on the device. Ties keep their positions' order (a stable sort);
// NaN sorts above every number, as torch's. The values move through `where`s, so a gradient goes
// back through the same permutation.
// Whether key ka at position ia belongs after key kb at position ib: ka above kb (below,
// descending), or equal and later (a stable order); NaN (where `nan`) above every number and
// equal to NaN.
NodeId sorts_after(Builder& b, NodeId ka, NodeId ia, NodeId kb, NodeId ib, bool descending, bool nan) {
  NodeId gt = b.add(descending ? OpId::lt : OpId::gt, {ka, kb});
  NodeId eq = b.add(OpId::eq, {ka, kb});
  if (nan) {
    const NodeId na = b.add(OpId::isnan, {ka}), nb = b.add(OpId::isnan, {kb});
    // NaN above every number: after b ascending when a is NaN and b is not; descending, the reverse.
    const NodeId nan_gt = descending ? b.add(OpId::logical_and, {nb, b.add(OpId::logical_not, {na})})
                                     : b.add(OpId::logical_and, {na, b.add(OpId::logical_not, {nb})});
    gt = b.add(OpId::logical_or, {gt, nan_gt});
    eq = b.add(OpId::logical_or, {eq, b.add(OpId::logical_and, {na, nb})});
  }
  return b.add(OpId::logical_or, {gt, b.add(OpId::logical_and, {eq, b.add(OpId::gt, {ia, ib})})});
}

// sort and argsort along a dim of symbolic size, where no network can be built: each element's
// rank is counted, rank[i] = #{j : element i sorts after element j}, a sum over [.., n(i), n(j)];
// then position p takes the element whose rank is p, a max over [.., n(p), n(i)] of that element
// (the lowest value of the key's type elsewhere) and a sum of its position. Two reductions of
// n^2 compares, fused, on the device; stable, NaN above every number, as the network.
std::pair<NodeId, NodeId> counting_sort(Builder& b, NodeId x0, int64_t d, bool descending) {
  const TensorMeta x = b.meta(x0);
  const int64_t r = x.rank();
  const auto [perm, inv] = dim_last(r, d);
  NodeId v = d != r - 1 ? b.add(OpId::permute, {x0}, {perm}) : x0;
  const SymShape rows = b.meta(v).sizes;
  const DType t = x.dtype;
  const DType kt = t == DType::bool_ ? DType::i64 : t;
  const NodeId key = b.cast(v, kt);
  SymShape square = rows;  // [.., n, n]
  square.push_back(rows.back());
  const NodeId first = b.add(OpId::iota, {}, {square, r - 1, DType::i64});  // the position along dim r - 1
  const NodeId second = b.add(OpId::iota, {}, {square, r, DType::i64});     // along dim r
  const NodeId along_first = b.add(OpId::unsqueeze, {key}, {r});            // key[i] at [.., i, 1]
  const NodeId along_second = b.add(OpId::unsqueeze, {key}, {r - 1});       // key[j] at [.., 1, j]
  const NodeId after = sorts_after(b, along_first, first, along_second, second, descending, is_floating(t));
  const NodeId rank = b.add(OpId::sum, {after}, {std::vector<int64_t>{r}, false});  // i64 [.., n]
  // [.., p, i]: element i goes to position p.
  const NodeId lands = b.add(OpId::eq, {b.add(OpId::unsqueeze, {rank}, {r - 1}), first});
  const NodeId idx = b.add(OpId::sum, {b.add(OpId::where, {lands, second, b.scalar(0.0, DType::i64)})},
                           {std::vector<int64_t>{r}, false});
  const double lowest = is_floating(kt) ? -std::numeric_limits<double>::infinity()
                        : kt == DType::i32 ? static_cast<double>(std::numeric_limits<int32_t>::min())
                                           : static_cast<double>(std::numeric_limits<int64_t>::min());
  NodeId values = b.add(OpId::max, {b.add(OpId::where, {lands, along_second, b.scalar(lowest, kt)})},
                        {std::vector<int64_t>{r}, false});
  values = b.cast(values, t);
  if (d != r - 1) return {b.add(OpId::permute, {values}, {inv}), b.add(OpId::permute, {idx}, {inv})};
  return {values, idx};
}

std::pair<NodeId, NodeId> sorting_network(Builder& b, NodeId x0, int64_t d, bool descending) {
  const TensorMeta x = b.meta(x0);
  const int64_t r = x.rank();
  NodeId v = x0;
  if (r == 0) return {v, b.add(OpId::full, {}, {SymShape{}, 0.0, DType::i64})};
  const auto [perm, inv] = dim_last(r, d);
  if (d != r - 1) v = b.add(OpId::permute, {v}, {perm});
  const SymShape rows = b.meta(v).sizes;
  const int64_t n = rows.back().hint();
  int64_t p = 1;
  while (p < n) p *= 2;
  // The key compared: bool as i64 (its order), anything else itself.
  const DType t = x.dtype;
  const DType kt = t == DType::bool_ ? DType::i64 : t;
  const bool nan = is_floating(t);
  SymShape padded = rows;
  padded.back() = SymInt(p);
  NodeId idx = b.add(OpId::iota, {}, {padded, r - 1, DType::i64});
  if (p > n) {  // padding at positions n.. (its value never compared: see after)
    std::vector<int64_t> pads(static_cast<size_t>(2 * r), 0);
    pads[1] = p - n;
    v = b.add(OpId::pad, {v}, {pads, 0.0});
  }
  NodeId key = b.cast(v, kt);
  // after(a, b): a belongs after b (with positions ia, ib as the tie-break).
  auto after = [&](NodeId ka, NodeId ia, NodeId kb, NodeId ib) {
    const NodeId by_value = sorts_after(b, ka, ia, kb, ib, descending, nan);
    if (p == n) return by_value;
    const NodeId later = b.add(OpId::gt, {ia, ib});
    // Padding (positions n and above) goes after every real value, in position order.
    const NodeId pad = b.add(OpId::ge, {b.add(OpId::maximum, {ia, ib}), b.scalar(static_cast<double>(n), DType::i64)});
    return b.add(OpId::where, {pad, later, by_value});
  };
  SymShape lead(rows.begin(), rows.end() - 1);
  for (int64_t s = 2; s <= p; s *= 2) {
    for (int64_t j = s / 2; j >= 1; j /= 2) {
      // [.., P/2s, 2, s/2j, 2, j], or [.., P/2j, 2, j] in the last merge (all ascending).
      SymShape view = lead;
      const bool merge_all = s == p;
      if (!merge_all) view.insert(view.end(), {SymInt(p / (2 * s)), SymInt(2)});
      view.insert(view.end(), {SymInt(s / (2 * j)), SymInt(2), SymInt(j)});
      const int64_t jd = static_cast<int64_t>(view.size()) - 2;  // the bit-j dim
      auto half = [&](NodeId a, int64_t k) {
        return b.add(OpId::slice, {b.add(OpId::reshape, {a}, {view})}, {jd, k, k + 1, int64_t{1}});
      };
      const NodeId klo = half(key, 0), khi = half(key, 1), ilo = half(idx, 0), ihi = half(idx, 1);
      NodeId swap = after(klo, ilo, khi, ihi);
      if (!merge_all) {  // where bit s is set, the pair is in the other order
        SymShape hs = b.meta(klo).sizes;
        const NodeId up = b.add(OpId::eq, {b.add(OpId::iota, {}, {hs, jd - 2, DType::i64}), b.scalar(0.0, DType::i64)});
        swap = b.add(OpId::where, {up, swap, after(khi, ihi, klo, ilo)});
      }
      auto exchange = [&](NodeId lo, NodeId hi) {
        const NodeId y = b.add(OpId::cat, {b.add(OpId::where, {swap, hi, lo}), b.add(OpId::where, {swap, lo, hi})}, {jd});
        return b.add(OpId::reshape, {y}, {padded});
      };
      key = exchange(klo, khi);
      idx = exchange(ilo, ihi);
    }
  }
  if (p > n) {
    key = b.add(OpId::slice, {key}, {r - 1, int64_t{0}, n, int64_t{1}});
    idx = b.add(OpId::slice, {idx}, {r - 1, int64_t{0}, n, int64_t{1}});
  }
  NodeId values = b.cast(key, t);
  if (d != r - 1) {
    values = b.add(OpId::permute, {values}, {inv});
    idx = b.add(OpId::permute, {idx}, {inv});
  }
  return {values, idx};
}
// The network along a static dim, counting along a symbolic one.
std::pair<NodeId, NodeId> sorted(Graph& g, NodeId x, const Attrs& a) {
  Builder b{g};
  const TensorMeta& m = g.node(x).meta;
  if (m.rank() > 0 && !m.sizes[static_cast<size_t>(a.i(0))].is_static()) return counting_sort(b, x, a.i(0), a.b(1));
  return sorting_network(b, x, a.i(0), a.b(1));
}
NodeId decompose_sort(Graph& g, std::span<const NodeId> in, const Attrs& a) { return sorted(g, in[0], a).first; }
NodeId decompose_argsort(Graph& g, std::span<const NodeId> in, const Attrs& a) { return sorted(g, in[0], a).second; }

NodeId decompose_tril(Graph& g, std::span<const NodeId> in, const Attrs& a) { return triangle(g, in[0], a.i(0), OpId::le); }
NodeId decompose_triu(Graph& g, std::span<const NodeId> in, const Attrs& a) { return triangle(g, in[0], a.i(0), OpId::ge); }

// [C] -> [C, 1, ..., 1] against x of rank r, cast to t.
NodeId per_channel(Builder& b, NodeId p, int64_t r, DType t) {
  SymShape s{b.meta(p).sizes[0]};
  s.insert(s.end(), static_cast<size_t>(r - 2), SymInt(1));
  return b.add(OpId::reshape, {b.cast(p, t)}, {s});
}

// (x - mean) * (rsqrt(var + eps) * weight) + bias, the per-channel factor computed on [C]
// (folded when the statistics are constants).
NodeId decompose_batch_norm(Graph& g, std::span<const NodeId> in, const Attrs& a) {
  Builder b{g};
  const std::vector<TensorMeta> metas = b.metas(in);
  const DType t = float_of(b.promoted(in));
  const int64_t r = metas[0].rank();
  NodeId factor = b.add(OpId::rsqrt, {b.add(OpId::add, {b.cast(in[2], t), b.scalar(a.f(0), t)})});
  if (in.size() > 3) factor = b.add(OpId::mul, {factor, b.cast(in[3], t)});
  NodeId y = b.add(OpId::mul, {b.add(OpId::sub, {b.cast(in[0], t), per_channel(b, in[1], r, t)}), per_channel(b, factor, r, t)});
  if (in.size() > 4) y = b.add(OpId::add, {y, per_channel(b, in[4], r, t)});
  return b.cast(y, float_of(metas[0].dtype));
}

// x as [N, groups, rest], normalised over rest (population variance), then back to x's shape
// and scaled per channel.
NodeId decompose_group_norm(Graph& g, std::span<const NodeId> in, const Attrs& a) {
  Builder b{g};
  const std::vector<TensorMeta> metas = b.metas(in);
  const DType t = float_of(b.promoted(in));
  const SymShape& xs = metas[0].sizes;
  const int64_t groups = a.i(0);
  SymInt rest = SymInt(xs[1].hint() / groups);
  for (size_t d = 2; d < xs.size(); ++d) rest = rest * xs[d];
  const NodeId x = b.add(OpId::reshape, {b.cast(in[0], t)}, {SymShape{xs[0], groups, rest}});
  const NodeId mean = b.reduce(OpId::mean, x, {2}, true);
  const NodeId var = b.add(OpId::var, {x}, {std::vector<int64_t>{2}, true, int64_t{0}});
  const NodeId inv = b.add(OpId::rsqrt, {b.add(OpId::add, {var, b.scalar(a.f(1), t)})});
  NodeId y = b.add(OpId::reshape, {b.add(OpId::mul, {b.add(OpId::sub, {x, mean}), inv})}, {xs});
  const int64_t r = metas[0].rank();
  if (in.size() > 1) y = b.add(OpId::mul, {y, per_channel(b, in[1], r, t)});
  if (in.size() > 2) y = b.add(OpId::add, {y, per_channel(b, in[2], r, t)});
  return b.cast(y, float_of(metas[0].dtype));
}

// ---- random numbers ------------------------------------------------------------------

// rand and randn (random.h): each element's flat row-major position (an iota over all elements,
// reshaped) is philox's counter, the key input (else 0) its key and the seed its attribute; then
// rand's or randn's formula in f32, cast to the dtype. Every op is pointwise, so the numbers are
// made inside whichever kernel reads them.
NodeId decompose_random(Graph& g, std::span<const NodeId> in, const Attrs& a, bool normal) {
  Builder b{g};
  const SymShape& shape = a.symints(0);
  const SymInt n = shape_numel(shape);
  const NodeId counter =
      b.add(OpId::reshape, {b.add(OpId::iota, {}, {SymShape{n}, int64_t{0}, DType::i64})}, {shape});
  const NodeId key = in.empty() ? b.scalar(0.0, DType::i64) : in[0];
  auto bits = [&](int64_t word) { return b.add(OpId::philox, {key, counter}, {word, a.i(1)}); };
  auto unit = [&](NodeId v) { return b.add(OpId::mul, {b.cast(v, DType::f32), b.scalar(0x1p-24, DType::f32)}); };
  NodeId y;
  if (normal) {
    const NodeId u1 = unit(b.add(OpId::add, {bits(0), b.scalar(1.0, DType::i64)}));
    const NodeId u2 = unit(bits(1));
    const NodeId radius = b.add(OpId::sqrt, {b.add(OpId::mul, {b.scalar(-2.0, DType::f32), b.add(OpId::log, {u1})})});
    const NodeId theta = b.add(OpId::mul, {b.scalar(6.2831855, DType::f32), u2});
    y = b.add(OpId::mul, {radius, b.add(OpId::cos, {theta})});
  } else {
    y = unit(bits(0));
  }
  return b.cast(y, a.dtype(2));
}
NodeId decompose_randn(Graph& g, std::span<const NodeId> in, const Attrs& a) { return decompose_random(g, in, a, true); }
NodeId decompose_rand(Graph& g, std::span<const NodeId> in, const Attrs& a) { return decompose_random(g, in, a, false); }

// ---- the table -----------------------------------------------------------------------

std::vector<OpDef> build_table() {
  using O = OpId;
  using C = OpCategory;
  using K = AttrKind;
  const std::vector<AttrSpec> reduce = {{"dims", K::ints}, {"keepdim", K::bool_}};
  const std::vector<AttrSpec> norm = {{"normalized_ndim", K::int_}, {"eps", K::float_}};
  const std::vector<AttrSpec> dim = {{"dim", K::int_}};
  auto unary = [](O id, std::string_view name, InferFn f, std::vector<AttrSpec> attrs = {}) {
    return OpDef{id, name, C::unary, 1, 1, std::move(attrs), f};
  };
  auto binary = [](O id, std::string_view name, InferFn f) { return OpDef{id, name, C::binary, 2, 2, {}, f}; };
  auto reduction = [](O id, std::string_view name, std::vector<AttrSpec> attrs, DecomposeFn d = nullptr) {
    return OpDef{id, name, C::reduction, 1, 1, std::move(attrs), infer_reduction, d};
  };
  auto layout = [](O id, std::string_view name, std::vector<AttrSpec> attrs, InferFn f, DecomposeFn d = nullptr) {
    return OpDef{id, name, C::layout, 1, 1, std::move(attrs), f, d};
  };

  std::vector<OpDef> t = {
      {O::input, "input", C::source, 0, 0, {{"index", K::int_}}, infer_input},
      {O::constant, "constant", C::source, 0, 0, {{"value", K::tensor}}, infer_constant},
      {O::full, "full", C::source, 0, 0, {{"shape", K::symints}, {"value", K::float_}, {"dtype", K::dtype}}, infer_full},
      {O::arange, "arange", C::source, 0, 0,
       {{"start", K::float_}, {"end", K::float_}, {"step", K::float_}, {"dtype", K::dtype}}, infer_arange},
      {O::iota, "iota", C::source, 0, 0, {{"shape", K::symints}, {"dim", K::int_}, {"dtype", K::dtype}}, infer_iota},
      {O::randn, "randn", C::source, 0, 1, {{"shape", K::symints}, {"seed", K::int_}, {"dtype", K::dtype}}, infer_random,
       decompose_randn},
      {O::rand, "rand", C::source, 0, 1, {{"shape", K::symints}, {"seed", K::int_}, {"dtype", K::dtype}}, infer_random,
       decompose_rand},

      unary(O::neg, "neg", infer_unary_same),
      unary(O::abs, "abs", infer_unary_same),
      unary(O::exp, "exp", infer_unary_float),
      unary(O::log, "log", infer_unary_float),
      unary(O::sqrt, "sqrt", infer_unary_float),
      unary(O::rsqrt, "rsqrt", infer_unary_float),
      unary(O::reciprocal, "reciprocal", infer_unary_float),
      unary(O::sin, "sin", infer_unary_float),
      unary(O::cos, "cos", infer_unary_float),
      unary(O::tanh, "tanh", infer_unary_float),
      unary(O::sigmoid, "sigmoid", infer_unary_float),
      unary(O::relu, "relu", infer_unary_same),
      unary(O::gelu, "gelu", infer_gelu, {{"approximate", K::string}}),
      unary(O::silu, "silu", infer_unary_float),
      unary(O::erf, "erf", infer_unary_float),
      unary(O::floor, "floor", infer_unary_same),
      unary(O::ceil, "ceil", infer_unary_same),
      unary(O::round, "round", infer_unary_same),
      unary(O::sign, "sign", infer_unary_same),
      unary(O::logical_not, "logical_not", infer_unary_bool),
      unary(O::isnan, "isnan", infer_unary_bool),
      unary(O::cast, "cast", infer_cast, {{"dtype", K::dtype}}),

      binary(O::add, "add", infer_binary),
      binary(O::sub, "sub", infer_binary),
      binary(O::mul, "mul", infer_binary),
      binary(O::div, "div", infer_div),
      binary(O::pow, "pow", infer_binary),
      binary(O::maximum, "maximum", infer_binary),
      binary(O::minimum, "minimum", infer_binary),
      binary(O::eq, "eq", infer_binary_bool),
      binary(O::ne, "ne", infer_binary_bool),
      binary(O::lt, "lt", infer_binary_bool),
      binary(O::le, "le", infer_binary_bool),
      binary(O::gt, "gt", infer_binary_bool),
      binary(O::ge, "ge", infer_binary_bool),
      binary(O::logical_and, "logical_and", infer_binary_bool),
      binary(O::logical_or, "logical_or", infer_binary_bool),
      {O::philox, "philox", C::binary, 2, 2, {{"word", K::int_}, {"seed", K::int_}}, infer_philox},

      {O::where, "where", C::ternary, 3, 3, {}, infer_where},

      reduction(O::sum, "sum", reduce),
      reduction(O::mean, "mean", reduce),
      reduction(O::max, "max", reduce),
      reduction(O::min, "min", reduce),
      reduction(O::prod, "prod", reduce),
      reduction(O::argmax, "argmax", reduce),
      reduction(O::argmin, "argmin", reduce),
      reduction(O::var, "var", {{"dims", K::ints}, {"keepdim", K::bool_}, {"correction", K::int_}}),
      reduction(O::logsumexp, "logsumexp", reduce, decompose_logsumexp),

      layout(O::reshape, "reshape", {{"shape", K::symints}}, infer_reshape),
      layout(O::permute, "permute", {{"dims", K::ints}}, infer_permute),
      layout(O::transpose, "transpose", {{"dim0", K::int_}, {"dim1", K::int_}}, infer_transpose, decompose_transpose),
      layout(O::expand, "expand", {{"shape", K::symints}}, infer_expand),
      layout(O::squeeze, "squeeze", {{"dims", K::ints}}, infer_squeeze),
      layout(O::unsqueeze, "unsqueeze", dim, infer_unsqueeze),
      layout(O::slice, "slice", {{"dim", K::int_}, {"start", K::int_}, {"end", K::int_}, {"step", K::int_}},
             infer_slice),
      layout(O::unfold, "unfold", {{"dim", K::int_}, {"size", K::int_}, {"step", K::int_}}, infer_unfold),
      {O::cat, "cat", C::layout, 1, -1, dim, infer_cat},
      layout(O::pad, "pad", {{"pads", K::ints}, {"value", K::float_}}, infer_pad),
      {O::index_select, "index_select", C::layout, 2, 2, dim, infer_index_select},
      {O::gather, "gather", C::layout, 2, 2, dim, infer_gather},
      {O::scatter_add, "scatter_add", C::scatter, 3, 3, dim, infer_scatter},
      {O::scatter, "scatter", C::scatter, 3, 3, dim, infer_scatter},
      {O::scatter_reduce, "scatter_reduce", C::scatter, 3, 3, {{"dim", K::int_}, {"reduce", K::string}}, infer_scatter},
      layout(O::flatten, "flatten", {{"start_dim", K::int_}, {"end_dim", K::int_}}, infer_flatten, decompose_flatten),

      {O::softmax, "softmax", C::composite, 1, 1, dim, infer_softmax, decompose_softmax},
      {O::log_softmax, "log_softmax", C::composite, 1, 1, dim, infer_softmax, decompose_log_softmax},
      {O::layer_norm, "layer_norm", C::composite, 1, 3, norm, infer_norm, decompose_layer_norm},
      {O::rms_norm, "rms_norm", C::composite, 1, 2, norm, infer_norm, decompose_rms_norm},
      {O::linear, "linear", C::composite, 2, 3, {}, infer_linear, decompose_linear},
      {O::scaled_dot_product_attention, "scaled_dot_product_attention", C::composite, 3, 4, {{"scale", K::float_}},
       infer_attention, decompose_attention},
      {O::convolution, "convolution", C::composite, 2, 3,
       {{"strides", K::ints}, {"pads", K::ints}, {"dilations", K::ints}, {"groups", K::int_}}, infer_convolution,
       decompose_convolution},
      {O::convolution_channels_last, "convolution_channels_last", C::composite, 2, 3,
       {{"strides", K::ints}, {"pads", K::ints}, {"dilations", K::ints}, {"groups", K::int_}},
       infer_convolution_channels_last, decompose_convolution_channels_last},
      {O::convolution_input_grad, "convolution_input_grad", C::composite, 2, 2,
       {{"strides", K::ints}, {"pads", K::ints}, {"dilations", K::ints}, {"groups", K::int_}, {"input_sizes", K::ints},
        {"channels_last", K::bool_}},
       infer_convolution_input_grad, decompose_convolution_input_grad},
      {O::convolution_weight_grad, "convolution_weight_grad", C::composite, 2, 2,
       {{"strides", K::ints}, {"pads", K::ints}, {"dilations", K::ints}, {"groups", K::int_}, {"kernel", K::ints},
        {"channels_last", K::bool_}},
       infer_convolution_weight_grad, decompose_convolution_weight_grad},
      {O::max_pool, "max_pool", C::composite, 1, 1,
       {{"kernel", K::ints}, {"strides", K::ints}, {"pads", K::ints}, {"dilations", K::ints}, {"ceil_mode", K::bool_}},
       infer_pool, decompose_max_pool},
      {O::avg_pool, "avg_pool", C::composite, 1, 1,
       {{"kernel", K::ints}, {"strides", K::ints}, {"pads", K::ints}, {"dilations", K::ints}, {"ceil_mode", K::bool_},
        {"count_include_pad", K::bool_}},
       infer_pool, decompose_avg_pool},
      {O::batch_norm, "batch_norm", C::composite, 3, 5, {{"eps", K::float_}}, infer_channel_norm, decompose_batch_norm},
      {O::cumsum, "cumsum", C::composite, 1, 1, {{"dim", K::int_}, {"exclusive", K::bool_}, {"reverse", K::bool_}},
       infer_cumsum, decompose_cumsum},
      {O::cumprod, "cumprod", C::composite, 1, 1, {{"dim", K::int_}, {"exclusive", K::bool_}, {"reverse", K::bool_}},
       infer_cumsum, decompose_cumprod},
      {O::sort, "sort", C::composite, 1, 1, {{"dim", K::int_}, {"descending", K::bool_}}, infer_sort, decompose_sort},
      {O::argsort, "argsort", C::composite, 1, 1, {{"dim", K::int_}, {"descending", K::bool_}}, infer_sort,
       decompose_argsort},
      {O::tril, "tril", C::composite, 1, 1, {{"diagonal", K::int_}}, infer_triangle, decompose_tril},
      {O::triu, "triu", C::composite, 1, 1, {{"diagonal", K::int_}}, infer_triangle, decompose_triu},
      {O::group_norm, "group_norm", C::composite, 1, 3, {{"groups", K::int_}, {"eps", K::float_}}, infer_channel_norm,
       decompose_group_norm},

      {O::matmul, "matmul", C::matmul, 2, 2, {}, infer_matmul},
      {O::custom, "custom", C::custom, 0, -1, {{"name", K::string}, {"version", K::string}, {"config", K::string}},
       infer_custom},
  };
  KILN_INTERNAL_CHECK(t.size() == static_cast<size_t>(kNumOps), "kiln op table: wrong number of entries");
  for (OpDef& d : t) d.grad = graph_detail::derivative_rule(d);
  for (size_t i = 0; i < t.size(); ++i)
    KILN_INTERNAL_CHECK(static_cast<size_t>(t[i].id) == i, "kiln op table: entry ", t[i].name, " is out of enum order");
  return t;
}

const std::vector<OpDef>& table() {
  static const std::vector<OpDef> t = build_table();
  return t;
}

}  // namespace

const OpDef& op_def(OpId op) {
  const auto i = static_cast<size_t>(op);
  KILN_CHECK(i < table().size(), "unknown op id ", i);
  return table()[i];
}

std::string_view op_name(OpId op) { return op_def(op).name; }

std::optional<OpId> find_op(std::string_view name) {
  static const std::unordered_map<std::string_view, OpId> by_name = [] {
    std::unordered_map<std::string_view, OpId> m;
    for (const OpDef& d : table()) m.emplace(d.name, d.id);
    return m;
  }();
  const auto it = by_name.find(name);
  if (it == by_name.end()) return std::nullopt;
  return it->second;
}

std::span<const OpDef> all_ops() { return table(); }

// torch: operands with dims decide the type, unless the 0-d ones are of a higher category
// (i32[3] + f64 0-d -> f64; f32[3] + f64 0-d -> f32).
DType result_type(std::span<const TensorMeta* const> operands) {
  KILN_CHECK(!operands.empty(), "result_type: no operands");
  std::optional<DType> dim, zero;
  for (const TensorMeta* m : operands) {
    std::optional<DType>& slot = m->rank() > 0 ? dim : zero;
    slot = slot ? promote_types(*slot, m->dtype) : m->dtype;
  }
  if (!dim) return *zero;
  if (zero && dtype_category(*zero) > dtype_category(*dim)) return *zero;
  return *dim;
}

SymShape broadcast_shapes(std::span<const SymInt> a, std::span<const SymInt> b, ShapeEnv& shapes,
                          std::string_view op) {
  const size_t n = std::max(a.size(), b.size());
  SymShape out(n);
  for (size_t k = 0; k < n; ++k) {  // k counts from the right
    const SymInt x = k < a.size() ? a[a.size() - 1 - k] : SymInt(1);
    const SymInt y = k < b.size() ? b[b.size() - 1 - k] : SymInt(1);
    SymInt& r = out[n - 1 - k];
    // A static 1 broadcasts against anything without asking about symbols.
    if (x == 1) {
      r = y;
    } else if (y == 1 || (x.is_static() && y.is_static() && x == y)) {
      r = x;
    } else if (!(x.is_static() && y.is_static()) && shapes.decide_equal(x, y, op)) {
      r = x.is_symbolic() ? x : y;
    } else if (x.is_symbolic() && x.hint() == 1 && shapes.decide_equal(x, 1, op)) {
      r = y;  // a symbolic size that is 1 while tracing broadcasts like 1, pinned there
    } else if (y.is_symbolic() && y.hint() == 1 && shapes.decide_equal(y, 1, op)) {
      r = x;
    } else {
      fail(op, ": shapes ", shape_str(a), " and ", shape_str(b), " do not broadcast at dim ", n - 1 - k,
           " (sizes ", x.str(), " and ", y.str(), ")");
    }
  }
  return out;
}

}  // namespace kiln
