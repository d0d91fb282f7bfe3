// The op API: argument normalisation (negative dims, -1 sizes, scalars) and one dispatch
// per op. Shape and dtype rules live in the op table, not here.
#include "kiln/ops.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "kiln/graph/error.h"
#include "trace.h"

namespace kiln {

using detail::dispatch;

namespace {

Tensor scalar_like(Scalar s, const Tensor& other) {
  KILN_CHECK(other.defined(), "an op got a scalar next to an undefined tensor");
  const DType dtype = weak_scalar_dtype(s.kind(), other.dtype());
  return dispatch(OpId::full, {}, Attrs{std::vector<SymInt>{}, s.value(), dtype});
}

Dims normalize_dims(const Tensor& x, const Dims& dims, std::string_view op) {
  Dims out;
  for (int64_t d : dims) out.push_back(normalize_dim(d, x.rank(), op));
  std::sort(out.begin(), out.end());
  KILN_CHECK(std::adjacent_find(out.begin(), out.end()) == out.end(), op, ": a dim is listed twice");
  return out;
}

Tensor reduce(OpId op, const Tensor& x, const Dims& dims, bool keepdim) {
  return dispatch(op, {&x}, Attrs{normalize_dims(x, dims, op_name(op)), keepdim});
}

// a / b where b is a single term (c * symbols): exact polynomial division, or nullopt.
std::optional<SymInt> divide_size(const SymInt& a, const SymInt& b) {
  if (b.is_static()) return b.hint() == 0 ? std::nullopt : a.exact_div(b.hint());
  const SymExpr be = b.expr();
  if (be.terms().size() != 1) return std::nullopt;
  const SymTerm& div = be.terms()[0];
  SymExpr q = SymExpr::constant(0);
  const SymExpr ae = a.expr();  // expr() returns by value: keep it alive for the loop
  for (const SymTerm& t : ae.terms()) {
    if (t.coeff % div.coeff != 0) return std::nullopt;
    std::vector<SymbolId> rest = t.symbols;
    for (SymbolId s : div.symbols) {
      auto it = std::find(rest.begin(), rest.end(), s);
      if (it == rest.end()) return std::nullopt;
      rest.erase(it);
    }
    SymExpr term = SymExpr::constant(t.coeff / div.coeff);
    for (SymbolId s : rest) term = term * SymExpr::symbol(s);
    q = q + term;
  }
  return SymInt(std::move(q), b.hint() == 0 ? 0 : a.hint() / b.hint());
}

}  // namespace

#define KILN_UNARY(name) \
  Tensor name(const Tensor& x) { return dispatch(OpId::name, {&x}); }
KILN_UNARY(neg)
KILN_UNARY(abs)
KILN_UNARY(exp)
KILN_UNARY(log)
KILN_UNARY(sqrt)
KILN_UNARY(rsqrt)
KILN_UNARY(reciprocal)
KILN_UNARY(sin)
KILN_UNARY(cos)
KILN_UNARY(tanh)
KILN_UNARY(sigmoid)
KILN_UNARY(relu)
KILN_UNARY(silu)
KILN_UNARY(erf)
KILN_UNARY(floor)
KILN_UNARY(ceil)
KILN_UNARY(round)
KILN_UNARY(sign)
KILN_UNARY(logical_not)
KILN_UNARY(isnan)
#undef KILN_UNARY

Tensor gelu(const Tensor& x, const std::string& approximate) {
  return dispatch(OpId::gelu, {&x}, Attrs{approximate});
}
Tensor cast(const Tensor& x, DType dtype) { return dispatch(OpId::cast, {&x}, Attrs{dtype}); }

#define KILN_BINARY(name)                                                   \
  Tensor name(const Tensor& a, const Tensor& b) { return dispatch(OpId::name, {&a, &b}); } \
  Tensor name(const Tensor& a, Scalar b) {                                  \
    const Tensor s = scalar_like(b, a);                                     \
    return dispatch(OpId::name, {&a, &s});                                  \
  }                                                                         \
  Tensor name(Scalar a, const Tensor& b) {                                  \
    const Tensor s = scalar_like(a, b);                                     \
    return dispatch(OpId::name, {&s, &b});                                  \
  }
KILN_BINARY(add)
KILN_BINARY(sub)
KILN_BINARY(mul)
KILN_BINARY(div)
KILN_BINARY(pow)
KILN_BINARY(maximum)
KILN_BINARY(minimum)
KILN_BINARY(eq)
KILN_BINARY(ne)
KILN_BINARY(lt)
KILN_BINARY(le)
KILN_BINARY(gt)
KILN_BINARY(ge)
KILN_BINARY(logical_and)
KILN_BINARY(logical_or)
#undef KILN_BINARY

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) { return dispatch(OpId::where, {&cond, &a, &b}); }
Tensor where(const Tensor& cond, const Tensor& a, Scalar b) {
  const Tensor s = scalar_like(b, a);
  return dispatch(OpId::where, {&cond, &a, &s});
}
Tensor where(const Tensor& cond, Scalar a, const Tensor& b) {
  const Tensor s = scalar_like(a, b);
  return dispatch(OpId::where, {&cond, &s, &b});
}

Tensor where(const Tensor& cond, Scalar a, Scalar b) {
  const auto category = [](ScalarKind k) { return k == ScalarKind::floating ? 2 : k == ScalarKind::integer ? 1 : 0; };
  const int c = std::max(category(a.kind()), category(b.kind()));
  const DType t = c == 2 ? DType::f32 : c == 1 ? DType::i64 : DType::bool_;
  const Tensor sa = dispatch(OpId::full, {}, Attrs{std::vector<SymInt>{}, a.value(), t});
  const Tensor sb = dispatch(OpId::full, {}, Attrs{std::vector<SymInt>{}, b.value(), t});
  return dispatch(OpId::where, {&cond, &sa, &sb});
}

Tensor sum(const Tensor& x, const Dims& dims, bool keepdim) { return reduce(OpId::sum, x, dims, keepdim); }
Tensor mean(const Tensor& x, const Dims& dims, bool keepdim) { return reduce(OpId::mean, x, dims, keepdim); }
Tensor max(const Tensor& x, const Dims& dims, bool keepdim) { return reduce(OpId::max, x, dims, keepdim); }
Tensor min(const Tensor& x, const Dims& dims, bool keepdim) { return reduce(OpId::min, x, dims, keepdim); }
Tensor prod(const Tensor& x, const Dims& dims, bool keepdim) { return reduce(OpId::prod, x, dims, keepdim); }
Tensor logsumexp(const Tensor& x, const Dims& dims, bool keepdim) {
  return reduce(OpId::logsumexp, x, dims, keepdim);
}
Tensor var(const Tensor& x, const Dims& dims, int64_t correction, bool keepdim) {
  return dispatch(OpId::var, {&x}, Attrs{normalize_dims(x, dims, "var"), keepdim, correction});
}
Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return reduce(OpId::argmax, x, dim ? Dims{*dim} : Dims{}, keepdim);
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return reduce(OpId::argmin, x, dim ? Dims{*dim} : Dims{}, keepdim);
}

Tensor reshape(const Tensor& x, const Shape& shape) {
  Shape resolved = shape;
  int64_t infer_at = -1;
  SymInt known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      KILN_CHECK(infer_at < 0, "reshape: only one size may be -1, got ", shape_str(shape));
      infer_at = static_cast<int64_t>(i);
    } else {
      KILN_CHECK(shape[i].is_symbolic() || shape[i].hint() >= 0, "reshape: negative size in ", shape_str(shape));
      known = known * shape[i];
    }
  }
  if (infer_at >= 0) {
    auto q = divide_size(x.numel(), known);
    detail::Trace* t = detail::current_trace();
    if (!q && t && known.hint() != 0 && x.numel().hint() % known.hint() == 0) {
      // The quotient is no polynomial (s0 / 2): specialise the sizes instead, as for any
      // size the graph needs static (an error naming reshape when a dim was marked dynamic).
      const int64_t n = t->graph.shapes().specialize(x.numel(), "reshape");
      q = SymInt(n / t->graph.shapes().specialize(known, "reshape"));
    }
    KILN_CHECK(q.has_value(), "reshape: cannot infer the -1 in ", shape_str(shape), " for a tensor of shape ",
               shape_str(x.shape()));
    resolved[static_cast<size_t>(infer_at)] = *q;
  }
  return dispatch(OpId::reshape, {&x}, Attrs{resolved});
}

Tensor permute(const Tensor& x, const Dims& dims) {
  Dims d;
  for (int64_t i : dims) d.push_back(normalize_dim(i, x.rank(), "permute"));
  return dispatch(OpId::permute, {&x}, Attrs{d});
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  return dispatch(OpId::transpose, {&x},
                  Attrs{normalize_dim(dim0, x.rank(), "transpose"), normalize_dim(dim1, x.rank(), "transpose")});
}

Tensor expand(const Tensor& x, const Shape& shape) {
  Shape resolved = shape;
  const int64_t lead = static_cast<int64_t>(shape.size()) - x.rank();
  KILN_CHECK(lead >= 0, "expand: target ", shape_str(shape), " has fewer dims than the input ", shape_str(x.shape()));
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == -1) {
      KILN_CHECK(static_cast<int64_t>(i) >= lead, "expand: -1 is not allowed for a new leading dim");
      resolved[i] = x.shape()[i - static_cast<size_t>(lead)];
    }
  return dispatch(OpId::expand, {&x}, Attrs{resolved});
}

Tensor squeeze(const Tensor& x) {
  Dims dims;
  for (int64_t i = 0; i < x.rank(); ++i)
    if (x.shape()[static_cast<size_t>(i)] == 1) dims.push_back(i);
  return dispatch(OpId::squeeze, {&x}, Attrs{dims});
}
Tensor squeeze(const Tensor& x, int64_t dim) {
  return dispatch(OpId::squeeze, {&x}, Attrs{Dims{normalize_dim(dim, x.rank(), "squeeze")}});
}
Tensor unsqueeze(const Tensor& x, int64_t dim) {
  return dispatch(OpId::unsqueeze, {&x}, Attrs{normalize_dim(dim, x.rank() + 1, "unsqueeze")});
}
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  return dispatch(OpId::slice, {&x}, Attrs{normalize_dim(dim, x.rank(), "slice"), start, end, step});
}

Tensor unfold(const Tensor& x, int64_t dim, int64_t size, int64_t step) {
  return dispatch(OpId::unfold, {&x}, Attrs{normalize_dim(dim, x.rank(), "unfold"), size, step});
}

Tensor cat(const std::vector<Tensor>& xs, int64_t dim) {
  KILN_CHECK(!xs.empty(), "cat: needs at least one tensor");
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : xs) ptrs.push_back(&t);
  return dispatch(OpId::cat, ptrs, Attrs{normalize_dim(dim, xs[0].rank(), "cat")});
}

Tensor pad(const Tensor& x, const Dims& pads, double value) { return dispatch(OpId::pad, {&x}, Attrs{pads, value}); }

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  return dispatch(OpId::index_select, {&x, &index}, Attrs{normalize_dim(dim, x.rank(), "index_select")});
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  KILN_CHECK(x.rank() >= 1, "gather: x must have at least one dim, got a 0-d tensor");
  return dispatch(OpId::gather, {&x, &index}, Attrs{normalize_dim(dim, x.rank(), "gather")});
}

namespace {

// scatter, scatter_add and scatter_reduce: src cut to the index's sizes (torch reads it only
// there) and cast to x's dtype.
Tensor scatter_op(OpId op, const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                  const std::string& reduce = "") {
  const std::string name(op_name(op));
  KILN_CHECK(x.rank() >= 1 && index.rank() == x.rank() && src.rank() == x.rank(), name, ": x ",
             shape_str(x.shape()), ", index ", shape_str(index.shape()), " and src ", shape_str(src.shape()),
             " must have the same rank, at least 1");
  const int64_t d = normalize_dim(dim, x.rank(), name.c_str());
  // torch reads src only where index has elements: the leading part of each larger dim.
  Tensor part = src.dtype() == x.dtype() ? src : src.to(x.dtype());
  for (size_t k = 0; k < index.shape().size(); ++k) {
    const SymInt& is = index.shape()[k];
    const SymInt& ss = src.shape()[k];
    if (is == ss) continue;
    KILN_CHECK(is.is_static() && ss.is_static() && is.hint() <= ss.hint(), name, ": index ",
               shape_str(index.shape()), " is larger than src ", shape_str(src.shape()), " at dim ", k);
    part = slice(part, static_cast<int64_t>(k), 0, is.hint());
  }
  if (op == OpId::scatter_reduce) return dispatch(op, {&x, &index, &part}, Attrs{d, reduce});
  return dispatch(op, {&x, &index, &part}, Attrs{d});
}

}  // namespace

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_op(OpId::scatter_add, x, dim, index, src);
}

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_op(OpId::scatter, x, dim, index, src);
}

namespace {

// index_add's and index_reduce's dim and 1-D index as a scatter's: the index spread over
// source's other dims.
std::pair<int64_t, Tensor> index_spread(const char* op, const Tensor& x, int64_t dim, const Tensor& index,
                                        const Tensor& source) {
  KILN_CHECK(index.rank() == 1, op, ": index must be 1-D, got shape ", shape_str(index.shape()));
  KILN_CHECK(x.rank() >= 1 && source.rank() == x.rank(), op, ": source ", shape_str(source.shape()),
             " must have the rank of x ", shape_str(x.shape()));
  const int64_t d = normalize_dim(dim, x.rank(), op);
  Shape lined(static_cast<size_t>(x.rank()), SymInt(1));
  lined[static_cast<size_t>(d)] = index.shape()[0];
  return {d, expand(reshape(index, lined), source.shape())};
}

}  // namespace

Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce,
                      bool include_self) {
  KILN_CHECK(reduce == "sum" || reduce == "prod" || reduce == "mean" || reduce == "amax" || reduce == "amin",
             "scatter_reduce: reduce must be \"sum\", \"prod\", \"mean\", \"amax\" or \"amin\", got \"", reduce, "\"");
  KILN_CHECK(x.dtype() != DType::bool_, "scatter_reduce: x must be a number tensor, got bool");
  auto filled = [&](double v) { return full(index.shape(), v, x.dtype(), x.device()); };
  if (reduce == "sum") return scatter_add(include_self ? x : scatter(x, dim, index, filled(0)), dim, index, src);
  if (reduce == "mean") {
    // The sum over the count of terms (x's own included); where nothing reached an element
    // that leaves out x's, x. Integers divide rounding down, as torch's do (in f64).
    const Tensor sum = scatter_add(include_self ? x : scatter(x, dim, index, filled(0)), dim, index, src);
    Tensor count = scatter_add(include_self ? ones_like(x) : zeros_like(x), dim, index, filled(1));
    if (!include_self) count = where(eq(count, 0), 1.0, count);
    if (is_floating(x.dtype())) return div(sum, count);
    return floor(div(sum.to(DType::f64), count.to(DType::f64))).to(x.dtype());
  }
  // Leaving x out: the elements src reaches start from the reduction's identity; integers'
  // maximum and minimum from one of their own src values instead (taken twice at no cost; i64's
  // extremes are not all doubles). Floats keep the identity: the gradient of a scatter of src
  // would reach every src value aimed at the element, not only the one that landed.
  Tensor base = x;
  if (!include_self) {
    if (reduce == "prod")
      base = scatter(x, dim, index, filled(1));
    else if (is_floating(x.dtype()))
      base = scatter(x, dim, index, filled(reduce == "amax" ? -INFINITY : INFINITY));
    else
      base = scatter(x, dim, index, src);
  }
  return scatter_op(OpId::scatter_reduce, base, dim, index, src, reduce);
}

Tensor index_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, const std::string& reduce,
                    bool include_self) {
  KILN_CHECK(reduce == "prod" || reduce == "mean" || reduce == "amax" || reduce == "amin",
             "index_reduce: reduce must be \"prod\", \"mean\", \"amax\" or \"amin\", got \"", reduce, "\"");
  const auto [d, spread] = index_spread("index_reduce", x, dim, index, source);
  return scatter_reduce(x, d, spread, source, reduce, include_self);
}

Tensor index_put(const Tensor& x, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate) {
  const size_t k = indices.size();
  KILN_CHECK(k >= 1 && k <= static_cast<size_t>(x.rank()), "index_put: takes 1 to ", x.rank(),
             " index tensors for x ", shape_str(x.shape()), ", got ", k);
  // Each index tuple's position in x's first k dims flattened; a tuple with an index outside its
  // dim gets position -1, which the scatter's index check reports.
  Tensor position, outside;
  SymInt positions = 1;
  for (size_t j = k; j-- > 0;) {
    const Tensor& i = indices[j];
    KILN_CHECK(i.dtype() == DType::i32 || i.dtype() == DType::i64, "index_put: index ", j, " must be i32 or i64, got ",
               dtype_name(i.dtype()));
    const SymInt& size = x.shape()[j];
    KILN_CHECK(size.is_static(), "index_put: dim ", j, " of x ", shape_str(x.shape()), " must have a static size");
    const Tensor i64 = i.to(DType::i64);
    const Tensor bad = logical_or(lt(i64, -size.hint()), ge(i64, size.hint()));
    const Tensor wrapped = where(lt(i64, 0), add(i64, size.hint()), i64);
    const Tensor term = positions.hint() == 1 ? wrapped : mul(wrapped, positions.hint());
    position = position.defined() ? add(position, term) : term;
    outside = outside.defined() ? logical_or(outside, bad) : bad;
    positions = positions * size;
  }
  position = where(outside, -1, position);
  const Shape batch = position.shape();
  Shape rest(x.shape().begin() + static_cast<std::ptrdiff_t>(k), x.shape().end());
  SymInt m = 1;
  for (const SymInt& s : batch) m = m * s;
  Shape flat{positions}, rows{m}, lined{m};
  flat.insert(flat.end(), rest.begin(), rest.end());
  rows.insert(rows.end(), rest.begin(), rest.end());
  lined.resize(rows.size(), SymInt(1));
  Shape spread = batch;
  spread.insert(spread.end(), rest.begin(), rest.end());
  const Tensor v = reshape(expand(values.dtype() == x.dtype() ? values : values.to(x.dtype()), spread), rows);
  const Tensor index = expand(reshape(position, lined), rows);
  const Tensor y = (accumulate ? scatter_add : scatter)(reshape(x, flat), 0, index, v);
  return reshape(y, x.shape());
}

Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, double alpha) {
  const auto [d, spread] = index_spread("index_add", x, dim, index, source);
  return scatter_add(x, d, spread, alpha == 1.0 ? source : mul(source, alpha));
}

Tensor take_along_dim(const Tensor& x, const Tensor& index, int64_t dim) {
  KILN_CHECK(x.rank() >= 1 && index.rank() == x.rank(), "take_along_dim: x ", shape_str(x.shape()), " and index ",
             shape_str(index.shape()), " must have the same rank, at least 1");
  const int64_t d = normalize_dim(dim, x.rank(), "take_along_dim");
  Shape xs = x.shape(), is = index.shape();
  for (size_t k = 0; k < xs.size(); ++k) {
    if (static_cast<int64_t>(k) == d || xs[k] == is[k]) continue;
    KILN_CHECK(xs[k] == 1 || is[k] == 1, "take_along_dim: x ", shape_str(x.shape()), " and index ",
               shape_str(index.shape()), " do not broadcast at dim ", k);
    if (xs[k] == 1) xs[k] = is[k]; else is[k] = xs[k];
  }
  return gather(expand(x, xs), d, expand(index, is));
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  if (x.rank() == 0) return reshape(x, {1});
  return dispatch(OpId::flatten, {&x},
                  Attrs{normalize_dim(start_dim, x.rank(), "flatten"), normalize_dim(end_dim, x.rank(), "flatten")});
}

Tensor softmax(const Tensor& x, int64_t dim) {
  return dispatch(OpId::softmax, {&x}, Attrs{normalize_dim(dim, x.rank(), "softmax")});
}
Tensor log_softmax(const Tensor& x, int64_t dim) {
  return dispatch(OpId::log_softmax, {&x}, Attrs{normalize_dim(dim, x.rank(), "log_softmax")});
}

namespace {
int64_t check_normalized_shape(const Tensor& x, const Shape& normalized_shape, std::string_view op) {
  const auto n = static_cast<int64_t>(normalized_shape.size());
  KILN_CHECK(n >= 1 && n <= x.rank(), op, ": normalized_shape ", shape_str(normalized_shape),
             " must name 1 to ", x.rank(), " trailing dims of the input ", shape_str(x.shape()));
  for (int64_t i = 0; i < n; ++i) {
    const SymInt& have = x.shape()[static_cast<size_t>(x.rank() - n + i)];
    const SymInt& want = normalized_shape[static_cast<size_t>(i)];
    KILN_CHECK(have == want || have.hint() == want.hint(), op, ": normalized_shape ", shape_str(normalized_shape),
               " does not match the trailing dims of the input ", shape_str(x.shape()));
  }
  return n;
}
}  // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias, double eps) {
  const int64_t n = check_normalized_shape(x, normalized_shape, "layer_norm");
  const Attrs attrs{n, eps};
  if (bias.defined()) {
    const Tensor w = weight.defined() ? weight : ones(normalized_shape, bias.dtype());
    return dispatch(OpId::layer_norm, {&x, &w, &bias}, attrs);
  }
  if (weight.defined()) return dispatch(OpId::layer_norm, {&x, &weight}, attrs);
  return dispatch(OpId::layer_norm, {&x}, attrs);
}

Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, double eps) {
  const Attrs attrs{check_normalized_shape(x, normalized_shape, "rms_norm"), eps};
  if (weight.defined()) return dispatch(OpId::rms_norm, {&x, &weight}, attrs);
  return dispatch(OpId::rms_norm, {&x}, attrs);
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (bias.defined()) return dispatch(OpId::linear, {&x, &weight, &bias});
  return dispatch(OpId::linear, {&x, &weight});
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, std::optional<double> scale) {
  KILN_CHECK(q.defined() && k.defined() && v.defined(), "scaled_dot_product_attention: q, k and v must be defined");
  KILN_CHECK(q.rank() >= 1, "scaled_dot_product_attention: q must have a head dim, got a 0-d tensor");
  const double s = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(1, q.size(-1))));
  return dispatch(OpId::scaled_dot_product_attention, {&q, &k, &v}, Attrs{s});
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
  const char* op = "scaled_dot_product_attention";
  KILN_CHECK(q.defined() && k.defined() && v.defined(), op, ": q, k and v must be defined");
  KILN_CHECK(!(o.is_causal && o.mask.defined()), op, ": give a mask or is_causal, not both (as torch)");
  Tensor kk = k, vv = v;
  // The op's rule checks the ranks; here only so far as the head dims below are read.
  const bool heads = q.rank() >= 3 && k.rank() == q.rank() && v.rank() == q.rank();
  if (o.enable_gqa && heads && !(q.shape()[q.rank() - 3] == k.shape()[k.rank() - 3])) {
    // k and v [..., Hkv, L, D] -> [..., Hkv, G, L, D] (a broadcast view) -> [..., Hq, L, D].
    const SymInt& hq = q.shape()[q.rank() - 3];
    const SymInt& hkv = k.shape()[k.rank() - 3];
    KILN_CHECK(hq.is_static() && hkv.is_static() && hkv.hint() > 0 && hq.hint() % hkv.hint() == 0 &&
                   v.shape()[v.rank() - 3] == hkv,
               op, ": with enable_gqa, q's heads (", hq.str(), ") must be a multiple of k's and v's (", hkv.str(), ", ",
               v.shape()[v.rank() - 3].str(), ")");
    const int64_t groups = hq.hint() / hkv.hint();
    auto repeat = [&](const Tensor& t) {
      const int64_t r = t.rank();
      Shape e = unsqueeze(t, r - 2).shape();
      e[static_cast<size_t>(r - 2)] = groups;
      Shape s = t.shape();
      s[static_cast<size_t>(r - 3)] = hq;
      return reshape(expand(unsqueeze(t, r - 2), e), s);
    };
    kk = repeat(k);
    vv = repeat(v);
  }
  const double s = o.scale ? *o.scale : 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(1, q.size(-1))));
  if (!o.mask.defined() && !o.is_causal)
    return dispatch(OpId::scaled_dot_product_attention, {&q, &kk, &vv}, Attrs{s});
  Tensor mask = o.mask;
  if (o.is_causal && q.rank() >= 2 && kk.rank() >= 2) {  // (other ranks: the op's rule says why)
    const Shape scores{q.shape()[q.rank() - 2], kk.shape()[kk.rank() - 2]};
    mask = le(iota(scores, 1, DType::i64, q.device()), iota(scores, 0, DType::i64, q.device()));
  }
  return dispatch(OpId::scaled_dot_product_attention, {&q, &kk, &vv, &mask}, Attrs{s});
}

Tensor cumsum(const Tensor& x, int64_t dim) {
  const int64_t d = normalize_dim(dim, std::max<int64_t>(x.rank(), 1), "cumsum");
  return dispatch(OpId::cumsum, {&x}, Attrs{d, false, false});
}

Tensor cumprod(const Tensor& x, int64_t dim) {
  const int64_t d = normalize_dim(dim, std::max<int64_t>(x.rank(), 1), "cumprod");
  return dispatch(OpId::cumprod, {&x}, Attrs{d, false, false});
}
std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending) {
  const int64_t d = normalize_dim(dim, std::max<int64_t>(x.rank(), 1), "sort");
  // The values gathered at the positions: one sorting network, not one for each. Along a
  // symbolic dim (a counting sort, whose values need no gather: a gather there runs on the host)
  // the two ops share their ranks once the graph's equal nodes merge.
  const Tensor positions = dispatch(OpId::argsort, {&x}, Attrs{d, descending});
  if (x.rank() == 0) return {x, positions};
  if (!x.shape()[static_cast<size_t>(d)].is_static()) return {dispatch(OpId::sort, {&x}, Attrs{d, descending}), positions};
  return {gather(x, d, positions), positions};
}
Tensor argsort(const Tensor& x, int64_t dim, bool descending) {
  const int64_t d = normalize_dim(dim, std::max<int64_t>(x.rank(), 1), "argsort");
  return dispatch(OpId::argsort, {&x}, Attrs{d, descending});
}
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest) {
  const int64_t d = normalize_dim(dim, std::max<int64_t>(x.rank(), 1), "topk");
  const int64_t n = x.rank() == 0 ? 1 : x.size(d);
  KILN_CHECK(k >= 0 && k <= n, "topk: k = ", k, " is out of range for dim ", d, " of size ", n);
  if (x.rank() == 0) return sort(x, d, largest);
  const Tensor positions = slice(argsort(x, d, largest), d, 0, k);  // the values gathered at k positions only
  return {gather(x, d, positions), positions};
}
Tensor tril(const Tensor& x, int64_t diagonal) { return dispatch(OpId::tril, {&x}, Attrs{diagonal}); }
Tensor triu(const Tensor& x, int64_t diagonal) { return dispatch(OpId::triu, {&x}, Attrs{diagonal}); }

Tensor one_hot(const Tensor& x, int64_t num_classes) {
  KILN_CHECK(x.defined() && (x.dtype() == DType::i32 || x.dtype() == DType::i64), "one_hot: x must be an i32 or i64 ",
             "tensor of class indices", x.defined() ? std::string(", got ") + std::string(dtype_name(x.dtype())) : "");
  KILN_CHECK(num_classes > 0, "one_hot: num_classes must be positive, got ", num_classes);
  if (!x.is_traced())
    for (int64_t v : cast(x, DType::i64).to_vector<int64_t>())
      KILN_CHECK(v >= 0 && v < num_classes, "one_hot: class ", v, " is outside [0, ", num_classes, ")");
  Shape s = x.shape();
  s.push_back(num_classes);
  return cast(eq(unsqueeze(x, -1), iota(s, -1, x.dtype(), x.device())), DType::i64);
}

namespace {

// One value per spatial dim: `v` gives one for all or one each.
Dims per_spatial(const Dims& v, size_t n, std::string_view op, std::string_view what) {
  if (v.size() == 1) return Dims(n, v[0]);
  KILN_CHECK(v.size() == n, op, ": ", what, " takes 1 or ", n, " values, got ", v.size());
  return v;
}

void check_spatial(const Tensor& x, size_t n, std::string_view op) {
  KILN_CHECK(x.defined(), op, ": the input is undefined");
  KILN_CHECK(x.rank() == static_cast<int64_t>(n) + 2, op, ": expected x[N, C, ", n, " spatial dim", n == 1 ? "" : "s",
             "], got ", shape_str(x.shape()));
}

Dims both_sides(const Dims& pads) {
  Dims out = pads;
  out.insert(out.end(), pads.begin(), pads.end());
  return out;
}

Tensor conv_nd(size_t n, std::string_view op, const Tensor& x, const Tensor& w, const Tensor& bias, const Dims& stride,
               const Dims& padding, const Dims& dilation, int64_t groups) {
  check_spatial(x, n, op);
  const Attrs attrs{per_spatial(stride, n, op, "stride"), both_sides(per_spatial(padding, n, op, "padding")),
                    per_spatial(dilation, n, op, "dilation"), groups};
  if (bias.defined()) return dispatch(OpId::convolution, {&x, &w, &bias}, attrs);
  return dispatch(OpId::convolution, {&x, &w}, attrs);
}

// A transposed convolution is the gradient of a convolution with respect to its input
// (convolution_input_grad: a library's backward-data kernel where the target has one): x plays
// the output's gradient, the weight the convolution's. Output padding up to stride - 1 is part of
// that convolution's input; beyond it (allowed where the dilation exceeds the stride) no tap
// reaches, so those positions are zeros padded after.
Tensor conv_transpose_nd(size_t n, std::string_view op, const Tensor& x, const Tensor& w, const Tensor& bias,
                         const Dims& stride_, const Dims& padding_, const Dims& output_padding_, int64_t groups,
                         const Dims& dilation_) {
  check_spatial(x, n, op);
  const Dims stride = per_spatial(stride_, n, op, "stride"), padding = per_spatial(padding_, n, op, "padding");
  const Dims output_padding = per_spatial(output_padding_, n, op, "output_padding");
  const Dims dilation = per_spatial(dilation_, n, op, "dilation");
  KILN_CHECK(w.defined() && w.rank() == static_cast<int64_t>(n) + 2, op, ": expected weight[C_in, C_out / groups, ", n,
             " kernel dim", n == 1 ? "" : "s", "], got ", w.defined() ? shape_str(w.shape()) : std::string("none"));
  KILN_CHECK(groups >= 1, op, ": groups ", groups, " must be positive");
  const int64_t cin = w.size(0);
  KILN_CHECK(cin % groups == 0, op, ": the weight's ", cin, " input channels are not a multiple of groups ", groups);
  const SymInt xc = x.shape()[1];
  KILN_CHECK(!xc.is_static() || xc.hint() == cin, op, ": x has ", xc.hint(), " channels, the weight ", cin);
  for (size_t i = 0; i < n; ++i) {
    KILN_CHECK(stride[i] >= 1 && dilation[i] >= 1 && padding[i] >= 0, op, ": stride, dilation must be positive and ",
               "padding non-negative");
    KILN_CHECK(output_padding[i] >= 0 && output_padding[i] < std::max(stride[i], dilation[i]), op, ": output_padding ",
               output_padding[i], " must be smaller than the stride or the dilation (", std::max(stride[i], dilation[i]), ")");
  }
  std::vector<int64_t> sizes;
  Dims beyond(2 * static_cast<size_t>(x.rank()), 0);  // pad pairs, last dim first
  bool any_beyond = false;
  for (size_t i = 0; i < n; ++i) {
    const SymInt len = x.shape()[2 + i];
    KILN_CHECK(len.is_static(), op, ": spatial dim ", 2 + i, " is dynamic (", len.str(), "); its size must be static");
    const int64_t k = w.size(static_cast<int64_t>(2 + i));
    const int64_t reached = std::min(output_padding[i], stride[i] - 1);
    const int64_t size = (len.hint() - 1) * stride[i] - 2 * padding[i] + dilation[i] * (k - 1) + reached + 1;
    KILN_CHECK(size + output_padding[i] - reached >= 1, op, ": the output's spatial dim ", 2 + i, " would be empty (",
               size + output_padding[i] - reached, ")");
    KILN_CHECK(size >= 1, op, ": padding ", padding[i], " crops every position the kernel reaches in spatial dim ", 2 + i);
    sizes.push_back(size);
    beyond[2 * (n - 1 - i) + 1] = output_padding[i] - reached;
    any_beyond = any_beyond || output_padding[i] > reached;
  }
  Tensor y = dispatch(OpId::convolution_input_grad, {&x, &w}, Attrs{stride, both_sides(padding), dilation, groups, sizes, false});
  if (any_beyond) y = pad(y, beyond);
  if (!bias.defined()) return y;
  KILN_CHECK(bias.rank() == 1 && bias.shape()[0] == y.shape()[1], op, ": bias ", shape_str(bias.shape()), " must be [",
             y.shape()[1].str(), "]");
  Shape bs{bias.shape()[0]};
  bs.insert(bs.end(), n, SymInt(1));
  return y + reshape(bias, bs);
}

Tensor max_pool_nd(size_t n, std::string_view op, const Tensor& x, const Dims& kernel, const Dims& stride,
                   const Dims& padding, const Dims& dilation, bool ceil_mode) {
  check_spatial(x, n, op);
  const Dims k = per_spatial(kernel, n, op, "kernel_size");
  return dispatch(OpId::max_pool, {&x},
                  Attrs{k, stride.empty() ? k : per_spatial(stride, n, op, "stride"),
                        both_sides(per_spatial(padding, n, op, "padding")), per_spatial(dilation, n, op, "dilation"),
                        ceil_mode});
}

Tensor avg_pool_nd(size_t n, std::string_view op, const Tensor& x, const Dims& kernel, const Dims& stride,
                   const Dims& padding, bool ceil_mode, bool count_include_pad) {
  check_spatial(x, n, op);
  const Dims k = per_spatial(kernel, n, op, "kernel_size");
  return dispatch(OpId::avg_pool, {&x},
                  Attrs{k, stride.empty() ? k : per_spatial(stride, n, op, "stride"),
                        both_sides(per_spatial(padding, n, op, "padding")), Dims(n, 1), ceil_mode, count_include_pad});
}

// Adaptive windows are separable (each is a product of one interval per dim), so each dim is
// pooled on its own: an output size dividing the input size is a reshape and one reduction;
// otherwise each interval is a slice and a reduction, and the results a cat.
Tensor adaptive_pool_nd(size_t n, std::string_view op, const Tensor& x, const Dims& output_size, OpId reduce_op) {
  check_spatial(x, n, op);
  const Dims out = per_spatial(output_size, n, op, "output_size");
  Tensor y = x;
  for (size_t d = 0; d < n; ++d) {
    const auto dim = static_cast<int64_t>(2 + d);
    const int64_t size = x.size(dim), o = out[d];
    KILN_CHECK(o >= 1, op, ": output size ", o, " must be positive");
    if (o == size) continue;
    if (size % o == 0) {
      Shape s = y.shape();
      s[d + 2] = o;
      s.insert(s.begin() + dim + 1, size / o);
      y = reduce(reduce_op, reshape(y, s), {dim + 1}, false);
      continue;
    }
    std::vector<Tensor> parts;
    for (int64_t i = 0; i < o; ++i)
      parts.push_back(reduce(reduce_op, slice(y, dim, i * size / o, ((i + 1) * size + o - 1) / o), {dim}, true));
    y = cat(parts, dim);
  }
  return y;
}

}  // namespace

Tensor conv1d(const Tensor& x, const Tensor& w, const Tensor& b, const Dims& s, const Dims& p, const Dims& d, int64_t g) {
  return conv_nd(1, "conv1d", x, w, b, s, p, d, g);
}
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const Dims& s, const Dims& p, const Dims& d, int64_t g) {
  return conv_nd(2, "conv2d", x, w, b, s, p, d, g);
}
Tensor conv3d(const Tensor& x, const Tensor& w, const Tensor& b, const Dims& s, const Dims& p, const Dims& d, int64_t g) {
  return conv_nd(3, "conv3d", x, w, b, s, p, d, g);
}
Tensor conv_transpose1d(const Tensor& x, const Tensor& w, const Tensor& b, const Dims& s, const Dims& p, const Dims& op,
                        int64_t g, const Dims& d) {
  return conv_transpose_nd(1, "conv_transpose1d", x, w, b, s, p, op, g, d);
}
Tensor conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor& b, const Dims& s, const Dims& p, const Dims& op,
                        int64_t g, const Dims& d) {
  return conv_transpose_nd(2, "conv_transpose2d", x, w, b, s, p, op, g, d);
}
Tensor conv_transpose3d(const Tensor& x, const Tensor& w, const Tensor& b, const Dims& s, const Dims& p, const Dims& op,
                        int64_t g, const Dims& d) {
  return conv_transpose_nd(3, "conv_transpose3d", x, w, b, s, p, op, g, d);
}
Tensor max_pool1d(const Tensor& x, const Dims& k, const Dims& s, const Dims& p, const Dims& d, bool ceil_mode) {
  return max_pool_nd(1, "max_pool1d", x, k, s, p, d, ceil_mode);
}
Tensor max_pool2d(const Tensor& x, const Dims& k, const Dims& s, const Dims& p, const Dims& d, bool ceil_mode) {
  return max_pool_nd(2, "max_pool2d", x, k, s, p, d, ceil_mode);
}
Tensor max_pool3d(const Tensor& x, const Dims& k, const Dims& s, const Dims& p, const Dims& d, bool ceil_mode) {
  return max_pool_nd(3, "max_pool3d", x, k, s, p, d, ceil_mode);
}
Tensor avg_pool1d(const Tensor& x, const Dims& k, const Dims& s, const Dims& p, bool ceil_mode, bool include_pad) {
  return avg_pool_nd(1, "avg_pool1d", x, k, s, p, ceil_mode, include_pad);
}
Tensor avg_pool2d(const Tensor& x, const Dims& k, const Dims& s, const Dims& p, bool ceil_mode, bool include_pad) {
  return avg_pool_nd(2, "avg_pool2d", x, k, s, p, ceil_mode, include_pad);
}
Tensor avg_pool3d(const Tensor& x, const Dims& k, const Dims& s, const Dims& p, bool ceil_mode, bool include_pad) {
  return avg_pool_nd(3, "avg_pool3d", x, k, s, p, ceil_mode, include_pad);
}
Tensor adaptive_avg_pool1d(const Tensor& x, const Dims& o) { return adaptive_pool_nd(1, "adaptive_avg_pool1d", x, o, OpId::mean); }
Tensor adaptive_avg_pool2d(const Tensor& x, const Dims& o) { return adaptive_pool_nd(2, "adaptive_avg_pool2d", x, o, OpId::mean); }
Tensor adaptive_avg_pool3d(const Tensor& x, const Dims& o) { return adaptive_pool_nd(3, "adaptive_avg_pool3d", x, o, OpId::mean); }
Tensor adaptive_max_pool1d(const Tensor& x, const Dims& o) { return adaptive_pool_nd(1, "adaptive_max_pool1d", x, o, OpId::max); }
Tensor adaptive_max_pool2d(const Tensor& x, const Dims& o) { return adaptive_pool_nd(2, "adaptive_max_pool2d", x, o, OpId::max); }
Tensor adaptive_max_pool3d(const Tensor& x, const Dims& o) { return adaptive_pool_nd(3, "adaptive_max_pool3d", x, o, OpId::max); }

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, double eps) {
  const Attrs attrs{eps};
  if (bias.defined()) {
    const Tensor w = weight.defined() ? weight : ones(bias.shape(), bias.dtype(), bias.device());
    return dispatch(OpId::batch_norm, {&x, &running_mean, &running_var, &w, &bias}, attrs);
  }
  if (weight.defined()) return dispatch(OpId::batch_norm, {&x, &running_mean, &running_var, &weight}, attrs);
  return dispatch(OpId::batch_norm, {&x, &running_mean, &running_var}, attrs);
}

BatchNormTraining batch_norm_training(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  KILN_CHECK(x.rank() >= 2, "batch_norm_training: expects x[N, C, *], got shape ", shape_str(x.shape()));
  Dims dims{0};
  for (int64_t d = 2; d < x.rank(); ++d) dims.push_back(d);
  const Tensor mean = kiln::mean(x, dims);
  const Tensor biased = var(x, dims, 0);
  return {batch_norm(x, mean, biased, weight, bias, eps), mean, var(x, dims, 1)};
}

Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias, double eps) {
  const Attrs attrs{num_groups, eps};
  if (bias.defined()) {
    const Tensor w = weight.defined() ? weight : ones(bias.shape(), bias.dtype(), bias.device());
    return dispatch(OpId::group_norm, {&x, &w, &bias}, attrs);
  }
  if (weight.defined()) return dispatch(OpId::group_norm, {&x, &weight}, attrs);
  return dispatch(OpId::group_norm, {&x}, attrs);
}

Tensor instance_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  KILN_CHECK(x.defined() && x.rank() >= 3, "instance_norm: expected x[N, C, *spatial]");
  return group_norm(x, x.size(1), weight, bias, eps);
}

Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  KILN_CHECK(min || max, "clamp: give a min, a max or both");
  Tensor y = x;
  if (min) y = maximum(y, *min);
  if (max) y = minimum(y, *max);
  return y;
}
Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max) {
  KILN_CHECK(min.defined() || max.defined(), "clamp: give a min, a max or both");
  Tensor y = x;
  if (min.defined()) y = maximum(y, min);
  if (max.defined()) y = minimum(y, max);
  return y;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value) { return where(mask, value, x); }

Tensor dropout(const Tensor& x, double p, const Tensor& key, uint64_t seed) {
  KILN_CHECK(p >= 0 && p <= 1, "dropout: p must be in [0, 1], got ", p);
  KILN_CHECK(is_floating(x.dtype()), "dropout: x must be floating, got ", dtype_name(x.dtype()));
  if (p == 0) return x;
  if (p == 1) return where(full(x.shape(), 1.0, DType::bool_, x.device()), 0.0, x);  // zeros, x's gradient 0
  const Tensor dropped = rand(x.shape(), key, DType::f32, seed) < p;
  return where(dropped, 0.0, x * (1.0 / (1.0 - p)));
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets) {
  KILN_CHECK(logits.rank() >= 1 && targets.rank() == logits.rank() - 1, "cross_entropy: targets ",
             shape_str(targets.shape()), " must have the shape of logits ", shape_str(logits.shape()),
             " without its last dim (the classes)");
  // logsumexp(row) - row[target], the target's logit picked by a mask against the class positions
  // rather than gathered from stored log-probabilities: the row's logsumexp and the picked logit
  // are one reduction over the logits, the gradient (softmax minus the mask) one pointwise kernel,
  // and no [rows, classes] log-probabilities or scattered one-hots are stored (GPT-2's [4096, 50257]).
  const int64_t c = logits.rank() - 1;
  const Tensor hit = eq(iota(logits.shape(), c, targets.dtype(), logits.device()), unsqueeze(targets, -1));
  const Tensor picked = sum(where(hit, logits, 0.0), {c});
  // A target outside [0, C) hits no class: its loss is NaN, not a number that looks right.
  const Tensor valid = eq(sum(hit, {c}), 1);
  return mean(where(valid, sub(logsumexp(logits, {c}), picked), std::numeric_limits<double>::quiet_NaN()));
}

Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
  KILN_CHECK(!xs.empty(), "stack: needs at least one tensor");
  const int64_t d = normalize_dim(dim, xs[0].rank() + 1, "stack");
  std::vector<Tensor> parts;
  for (const Tensor& t : xs) parts.push_back(unsqueeze(t, d));
  return cat(parts, d);
}

std::vector<Tensor> split(const Tensor& x, const Dims& sizes, int64_t dim) {
  const int64_t d = normalize_dim(dim, x.rank(), "split");
  const int64_t n = x.size(d);
  int64_t total = 0;
  for (int64_t s : sizes) {
    KILN_CHECK(s >= 0, "split: negative size ", s);
    total += s;
  }
  KILN_CHECK(total == n, "split: sizes add up to ", total, ", but dim ", d, " of ", shape_str(x.shape()), " has ", n);
  std::vector<Tensor> out;
  int64_t at = 0;
  for (int64_t s : sizes) {
    out.push_back(slice(x, d, at, at + s));
    at += s;
  }
  return out;
}
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  KILN_CHECK(split_size >= 1, "split: split_size must be positive, got ", split_size);
  const int64_t n = x.size(normalize_dim(dim, x.rank(), "split"));
  Dims sizes;
  for (int64_t at = 0; at < n || (n == 0 && sizes.empty()); at += split_size) sizes.push_back(std::min(split_size, n - at));
  return split(x, sizes, dim);
}
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  KILN_CHECK(chunks >= 1, "chunk: chunks must be positive, got ", chunks);
  const int64_t n = x.size(normalize_dim(dim, x.rank(), "chunk"));
  return split(x, std::max<int64_t>(1, (n + chunks - 1) / chunks), dim);
}
std::vector<Tensor> unbind(const Tensor& x, int64_t dim) {
  const int64_t d = normalize_dim(dim, x.rank(), "unbind");
  std::vector<Tensor> out;
  for (int64_t i = 0; i < x.size(d); ++i) out.push_back(squeeze(slice(x, d, i, i + 1), d));
  return out;
}

Tensor matmul(const Tensor& a, const Tensor& b) { return dispatch(OpId::matmul, {&a, &b}); }

// Member forms.
Tensor Tensor::sum(const Dims& dims, bool keepdim) const { return kiln::sum(*this, dims, keepdim); }
Tensor Tensor::mean(const Dims& dims, bool keepdim) const { return kiln::mean(*this, dims, keepdim); }
Tensor Tensor::max(const Dims& dims, bool keepdim) const { return kiln::max(*this, dims, keepdim); }
Tensor Tensor::min(const Dims& dims, bool keepdim) const { return kiln::min(*this, dims, keepdim); }
Tensor Tensor::prod(const Dims& dims, bool keepdim) const { return kiln::prod(*this, dims, keepdim); }
Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdim) const { return kiln::argmax(*this, dim, keepdim); }
Tensor Tensor::argmin(std::optional<int64_t> dim, bool keepdim) const { return kiln::argmin(*this, dim, keepdim); }
Tensor Tensor::reshape(const Shape& shape) const { return kiln::reshape(*this, shape); }
Tensor Tensor::view(const Shape& shape) const { return kiln::reshape(*this, shape); }
Tensor Tensor::permute(const Dims& dims) const { return kiln::permute(*this, dims); }
Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const { return kiln::transpose(*this, dim0, dim1); }
Tensor Tensor::expand(const Shape& shape) const { return kiln::expand(*this, shape); }
Tensor Tensor::squeeze(int64_t dim) const { return kiln::squeeze(*this, dim); }
Tensor Tensor::unsqueeze(int64_t dim) const { return kiln::unsqueeze(*this, dim); }
Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const { return kiln::flatten(*this, start_dim, end_dim); }
Tensor Tensor::matmul(const Tensor& other) const { return kiln::matmul(*this, other); }
Tensor Tensor::gather(int64_t dim, const Tensor& index) const { return kiln::gather(*this, dim, index); }
Tensor Tensor::scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const {
  return kiln::scatter_add(*this, dim, index, src);
}
Tensor Tensor::scatter(int64_t dim, const Tensor& index, const Tensor& src) const {
  return kiln::scatter(*this, dim, index, src);
}
Tensor Tensor::scatter_reduce(int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce,
                              bool include_self) const {
  return kiln::scatter_reduce(*this, dim, index, src, reduce, include_self);
}
Tensor Tensor::index_reduce(int64_t dim, const Tensor& index, const Tensor& source, const std::string& reduce,
                            bool include_self) const {
  return kiln::index_reduce(*this, dim, index, source, reduce, include_self);
}
Tensor Tensor::index_put(const std::vector<Tensor>& indices, const Tensor& values, bool accumulate) const {
  return kiln::index_put(*this, indices, values, accumulate);
}
Tensor Tensor::index_add(int64_t dim, const Tensor& index, const Tensor& source, double alpha) const {
  return kiln::index_add(*this, dim, index, source, alpha);
}
Tensor Tensor::softmax(int64_t dim) const { return kiln::softmax(*this, dim); }
Tensor Tensor::exp() const { return kiln::exp(*this); }
Tensor Tensor::log() const { return kiln::log(*this); }
Tensor Tensor::sqrt() const { return kiln::sqrt(*this); }
Tensor Tensor::abs() const { return kiln::abs(*this); }
Tensor Tensor::relu() const { return kiln::relu(*this); }
Tensor Tensor::sigmoid() const { return kiln::sigmoid(*this); }
Tensor Tensor::tanh() const { return kiln::tanh(*this); }

Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator!(const Tensor& x) { return logical_not(x); }

}  // namespace kiln
