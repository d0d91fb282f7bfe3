// The ONNX op converters: each maps one ONNX op (default domain, opsets 7..17) onto op-table
// primitives and composites through the Importer, which folds whatever is known at import.
// Attribute and input conventions that changed between opsets are handled per op.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "importer.h"
#include "kiln/eval/interpreter.h"
#include "kiln/graph/memory_budget.h"

namespace kiln::onnx::detail {

namespace {

using O = OpId;
constexpr double kInf = std::numeric_limits<double>::infinity();

int64_t norm_axis(int64_t a, int64_t rank, const char* what = "axis") {
  KILN_CHECK(a >= -rank && a < rank, what, " ", a, " is out of range for rank ", rank);
  return a < 0 ? a + rank : a;
}

std::vector<int64_t> norm_axes(std::vector<int64_t> axes, int64_t rank) {
  for (int64_t& a : axes) a = norm_axis(a, rank);
  std::sort(axes.begin(), axes.end());
  KILN_CHECK(std::adjacent_find(axes.begin(), axes.end()) == axes.end(), "axes are repeated");
  return axes;
}

int64_t rank_of(const V& v) { return static_cast<int64_t>(v->sizes.size()); }

int64_t static_dim(Importer& im, const V& v, int64_t d, const char* op) {
  const SymInt& s = v->sizes[static_cast<size_t>(d)];
  return s.is_static() ? s.hint() : im.graph().shapes().specialize(s, op);
}

// The sizes of v from dim `from` on (those before it left out), specialising symbolic ones.
std::vector<int64_t> static_sizes(Importer& im, const V& v, const char* op, int64_t from = 0) {
  std::vector<int64_t> out;
  for (int64_t d = from; d < rank_of(v); ++d) out.push_back(static_dim(im, v, d, op));
  return out;
}

// A constant of x's dtype (0-d, so it never changes the promoted type).
V sc(NodeCtx& c, double v, const V& like) { return c.im.scalar(v, like->dtype); }

std::vector<V> one(V v) { return {std::move(v)}; }

V where(Importer& im, const V& cond, const V& a, const V& b) { return im.op(O::where, {cond, a, b}); }

// ---- pointwise ---------------------------------------------------------------------------

Converter unary(O op) {
  return [op](NodeCtx& c) { return one(c.im.op(op, {c.input(0)})); };
}

// Binary ops keep the first operand's type (ONNX operands agree; Pow's exponent may not).
Converter binary(O op, bool keep_type = true) {
  return [op, keep_type](NodeCtx& c) {
    V r = c.im.op(op, {c.input(0), c.input(1)});
    return one(keep_type ? c.im.cast(r, c.input(0)->dtype) : r);
  };
}

// Integer Div truncates toward zero; kiln's div of integers is true division.
std::vector<V> div_op(NodeCtx& c) {
  const V& a = c.input(0);
  const V& b = c.input(1);
  // Sizes divided by a constant that divides them exactly (hidden / heads) stay known sizes.
  if (!is_floating(a->dtype) && a->ints && !a->data && a->sizes.size() <= 1 && b->data && b->ints &&
      b->ints->size() == 1 && (a->ints->size() == 1 || b->sizes.size() <= 1)) {
    const int64_t d = (*b->ints)[0].hint();
    SymShape q;
    for (const SymInt& x : *a->ints) {
      std::optional<SymInt> r = d > 0 ? x.exact_div(d) : std::nullopt;
      if (!r) break;
      q.push_back(*r);
    }
    if (q.size() == a->ints->size()) return one(c.im.known_ints(std::move(q), a->sizes.empty() && b->sizes.empty()));
  }
  if (!is_floating(a->dtype)) {
    V q = c.im.op(O::div, {c.im.cast(a, DType::f64), c.im.cast(b, DType::f64)});
    return one(c.im.cast(q, a->dtype));
  }
  return one(c.im.op(O::div, {a, b}));
}

V trunc(Importer& im, const V& x) {
  const V negative = im.op(O::lt, {x, im.scalar(0, x->dtype)});
  const V up = im.op(O::ceil, {x});
  return where(im, negative, up, im.op(O::floor, {x}));
}

std::vector<V> mod_op(NodeCtx& c) {
  const V& a = c.input(0);
  const V& b = c.input(1);
  const bool fmod = c.i("fmod", 0) != 0;
  const DType t = a->dtype;
  KILN_CHECK(fmod || !is_floating(t), "fmod=0 is defined for integer inputs only");
  const V x = c.im.cast(a, DType::f64), y = c.im.cast(b, DType::f64);
  const V q = c.im.div(x, y);
  const V r = c.im.sub(x, c.im.mul(fmod ? trunc(c.im, q) : c.im.op(O::floor, {q}), y));
  return one(c.im.cast(r, t));
}

std::vector<V> variadic(NodeCtx& c, O op) {
  KILN_CHECK(!c.in.empty(), "needs at least one input");
  V acc = c.input(0);
  for (size_t k = 1; k < c.in.size(); ++k) acc = c.im.cast(c.im.op(op, {acc, c.input(k)}), c.input(0)->dtype);
  return one(acc);
}

std::vector<V> mean_op(NodeCtx& c) {
  V s = variadic(c, O::add)[0];
  return one(c.im.div(s, sc(c, static_cast<double>(c.in.size()), s)));
}

std::vector<V> clip_op(NodeCtx& c) {
  V x = c.input(0);
  V lo, hi;
  if (c.opset < 11) {
    if (c.has("min")) lo = c.im.scalar(c.f("min", 0), x->dtype);
    if (c.has("max")) hi = c.im.scalar(c.f("max", 0), x->dtype);
  } else {
    if (c.present(1)) lo = c.im.cast(c.input(1), x->dtype);
    if (c.present(2)) hi = c.im.cast(c.input(2), x->dtype);
  }
  if (lo) x = c.im.op(O::maximum, {x, lo});
  if (hi) x = c.im.op(O::minimum, {x, hi});
  return one(x);
}

std::vector<V> cast_op(NodeCtx& c) {
  const DType to = dtype_of(static_cast<int32_t>(c.i("to", 0)), "the target type of Cast");
  const V& x = c.input(0);
  if (x->ints && !x->data && is_integral(to)) return one(x);  // known sizes stay known
  return one(c.im.cast(x, to));
}

std::vector<V> elu(NodeCtx& c) {
  const V& x = c.input(0);
  const V a = sc(c, c.f("alpha", 1.0), x);
  const V neg = c.im.mul(a, c.im.sub(c.im.op(O::exp, {x}), sc(c, 1, x)));
  return one(where(c.im, c.im.op(O::lt, {x, sc(c, 0, x)}), neg, x));
}

std::vector<V> selu(NodeCtx& c) {
  const V& x = c.input(0);
  const V a = sc(c, c.f("alpha", 1.67326319217681884765625), x);
  const V gm = sc(c, c.f("gamma", 1.05070102214813232421875), x);
  const V neg = c.im.mul(a, c.im.sub(c.im.op(O::exp, {x}), sc(c, 1, x)));
  return one(c.im.mul(gm, where(c.im, c.im.op(O::le, {x, sc(c, 0, x)}), neg, x)));
}

std::vector<V> leaky_relu(NodeCtx& c) {
  const V& x = c.input(0);
  const V negative = c.im.op(O::lt, {x, sc(c, 0, x)});
  return one(where(c.im, negative, c.im.mul(x, sc(c, c.f("alpha", 0.01), x)), x));
}

std::vector<V> prelu(NodeCtx& c) {
  const V& x = c.input(0);
  const V negative = c.im.op(O::lt, {x, sc(c, 0, x)});
  return one(c.im.cast(where(c.im, negative, c.im.mul(x, c.input(1)), x), x->dtype));
}

std::vector<V> thresholded_relu(NodeCtx& c) {
  const V& x = c.input(0);
  return one(where(c.im, c.im.op(O::gt, {x, sc(c, c.f("alpha", 1.0), x)}), x, sc(c, 0, x)));
}

V clamp01(Importer& im, const V& v) {
  return im.op(O::minimum, {im.op(O::maximum, {v, im.scalar(0, v->dtype)}), im.scalar(1, v->dtype)});
}

std::vector<V> hard_sigmoid(NodeCtx& c) {
  const V& x = c.input(0);
  return one(clamp01(c.im, c.im.add(c.im.mul(x, sc(c, c.f("alpha", 0.2), x)), sc(c, c.f("beta", 0.5), x))));
}

std::vector<V> hard_swish(NodeCtx& c) {
  const V& x = c.input(0);
  return one(c.im.mul(x, clamp01(c.im, c.im.add(c.im.mul(x, sc(c, 1.0 / 6, x)), sc(c, 0.5, x)))));
}

V softplus(Importer& im, const V& x) {
  return im.op(O::log, {im.add(im.op(O::exp, {x}), im.scalar(1, x->dtype))});
}

std::vector<V> celu(NodeCtx& c) {
  const V& x = c.input(0);
  const double alpha = c.f("alpha", 1.0);
  const V e = c.im.mul(sc(c, alpha, x), c.im.sub(c.im.op(O::exp, {c.im.div(x, sc(c, alpha, x))}), sc(c, 1, x)));
  const V positive = c.im.op(O::maximum, {x, sc(c, 0, x)});
  return one(c.im.add(positive, c.im.op(O::minimum, {e, sc(c, 0, x)})));
}

std::vector<V> shrink(NodeCtx& c) {
  const V& x = c.input(0);
  const double bias = c.f("bias", 0), lambd = c.f("lambd", 0.5);
  const V lo = c.im.op(O::lt, {x, sc(c, -lambd, x)});
  const V hi = c.im.op(O::gt, {x, sc(c, lambd, x)});
  const V below = c.im.add(x, sc(c, bias, x));
  const V r = where(c.im, lo, below, where(c.im, hi, c.im.sub(x, sc(c, bias, x)), sc(c, 0, x)));
  return one(c.im.cast(r, x->dtype));
}

std::vector<V> is_inf(NodeCtx& c) {
  const V& x = c.input(0);
  const bool pos = c.i("detect_positive", 1) != 0, neg = c.i("detect_negative", 1) != 0;
  V p = c.im.op(O::eq, {x, sc(c, kInf, x)});
  V n = c.im.op(O::eq, {x, sc(c, -kInf, x)});
  if (pos && neg) return one(c.im.op(O::logical_or, {p, n}));
  if (pos) return one(p);
  if (neg) return one(n);
  return one(c.im.op(O::logical_and, {p, n}));  // all false
}

// Hyperbolic functions and their inverses through exp, log and sqrt.
std::vector<V> hyperbolic(NodeCtx& c, const std::string& which) {
  Importer& im = c.im;
  const V& x = c.input(0);
  auto half = [&](const V& v) { return im.mul(v, sc(c, 0.5, x)); };
  if (which == "Sinh" || which == "Cosh") {
    const V ex = im.op(O::exp, {x});
    const V e_x = im.op(O::exp, {im.op(O::neg, {x})});
    return one(half(which == "Sinh" ? im.sub(ex, e_x) : im.add(ex, e_x)));
  }
  if (which == "Asinh")
    return one(im.op(O::log, {im.add(x, im.op(O::sqrt, {im.add(im.mul(x, x), sc(c, 1, x))}))}));
  if (which == "Acosh")
    return one(im.op(O::log, {im.add(x, im.op(O::sqrt, {im.sub(im.mul(x, x), sc(c, 1, x))}))}));
  if (which == "Atanh") {
    const V num = im.add(sc(c, 1, x), x);
    return one(half(im.op(O::log, {im.div(num, im.sub(sc(c, 1, x), x))})));
  }
  // Tan
  const V sin = im.op(O::sin, {x});
  return one(im.div(sin, im.op(O::cos, {x})));
}

// ---- reductions --------------------------------------------------------------------------

// Axes of a reduction: the attribute (before opset 13, or 18 for all but ReduceSum) or input 1.
std::vector<V> reduce_op(NodeCtx& c, const std::string& kind) {
  Importer& im = c.im;
  V x = c.input(0);
  const int64_t rank = rank_of(x);
  std::vector<int64_t> axes;
  bool from_input = (kind == "ReduceSum" && c.opset >= 13) || c.opset >= 18;
  if (from_input) {
    if (c.present(1)) axes = im.static_ints(c.input(1), "the axes input");
  } else {
    axes = c.ints("axes");
  }
  const bool keep = c.i("keepdims", 1) != 0;
  if (axes.empty() && c.i("noop_with_empty_axes", 0) != 0) return one(x);
  axes = norm_axes(axes, rank);
  if (axes.empty())
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  const DType t = x->dtype;
  auto fix = [&](const V& r) { return im.cast(r, t); };
  if (kind == "ReduceSum") return one(fix(im.reduce(O::sum, x, axes, keep)));
  if (kind == "ReduceMean") return one(fix(im.reduce(O::mean, x, axes, keep)));
  if (kind == "ReduceMax") return one(im.reduce(O::max, x, axes, keep));
  if (kind == "ReduceMin") return one(im.reduce(O::min, x, axes, keep));
  if (kind == "ReduceProd") return one(fix(im.reduce(O::prod, x, axes, keep)));
  if (kind == "ReduceSumSquare") return one(fix(im.reduce(O::sum, im.mul(x, x), axes, keep)));
  if (kind == "ReduceL1") return one(fix(im.reduce(O::sum, im.op(O::abs, {x}), axes, keep)));
  if (kind == "ReduceL2") {
    const V s = im.reduce(O::sum, im.mul(x, x), axes, keep);
    return one(fix(im.op(O::sqrt, {s})));
  }
  if (kind == "ReduceLogSum") return one(fix(im.op(O::log, {im.reduce(O::sum, x, axes, keep)})));
  if (kind == "ReduceLogSumExp") return one(fix(im.reduce(O::logsumexp, x, axes, keep)));
  internal_fail("onnx: unknown reduction ", kind);
}

std::vector<V> arg_op(NodeCtx& c, O op) {
  Importer& im = c.im;
  V x = c.input(0);
  const int64_t axis = norm_axis(c.i("axis", 0), rank_of(x));
  const bool keep = c.i("keepdims", 1) != 0;
  if (c.i("select_last_index", 0) == 0) return one(im.op(op, {x}, {std::vector<int64_t>{axis}, keep}));
  // The last extreme: the first of the reversed axis, mapped back.
  const int64_t n = static_dim(im, x, axis, "ArgMax");
  std::vector<double> rev;
  for (int64_t k = n - 1; k >= 0; --k) rev.push_back(static_cast<double>(k));
  const V flipped = im.op(O::index_select, {x, im.constant(make_tensor(DType::i64, {n}, rev))}, {axis});
  const V i = im.op(op, {flipped}, {std::vector<int64_t>{axis}, keep});
  return one(im.sub(im.scalar(static_cast<double>(n - 1), DType::i64), i));
}

// ---- layout ------------------------------------------------------------------------------

// Reshape's target: 0 copies the input's dim (unless allowzero), -1 takes what is left.
SymShape reshape_target(Importer& im, const V& x, SymShape want, bool allowzero) {
  int64_t infer = -1;
  for (size_t k = 0; k < want.size(); ++k) {
    const SymInt& s = want[k];
    if (s == 0 && !allowzero) {
      KILN_CHECK(k < x->sizes.size(), "shape ", shape_str(want), ": 0 at dim ", k, " has no input dim to copy");
      want[k] = x->sizes[k];
    } else if (s == -1) {
      KILN_CHECK(infer < 0, "shape ", shape_str(want), " has more than one -1");
      infer = static_cast<int64_t>(k);
    } else {
      KILN_CHECK(s.is_symbolic() || s.hint() >= 0, "shape ", shape_str(want), " has a negative size");
    }
  }
  if (infer < 0) return want;
  // What is left: cancel equal factors of the input and the other target dims, then divide.
  std::vector<SymInt> num(x->sizes.begin(), x->sizes.end()), den;
  for (size_t k = 0; k < want.size(); ++k)
    if (static_cast<int64_t>(k) != infer) den.push_back(want[k]);
  for (auto it = den.begin(); it != den.end();) {
    auto m = std::find(num.begin(), num.end(), *it);
    if (it->is_symbolic() && m != num.end()) {
      num.erase(m);
      it = den.erase(it);
    } else {
      ++it;
    }
  }
  const SymInt n = shape_numel(num), d = shape_numel(den);
  std::optional<SymInt> q;
  if (d.is_static() && d.hint() != 0) q = n.exact_div(d.hint());
  if (!q && n.is_static() && d.is_symbolic()) {
    const int64_t dv = im.graph().shapes().specialize(d, "Reshape");
    if (dv != 0 && n.hint() % dv == 0) q = SymInt(n.hint() / dv);
  }
  KILN_CHECK(q.has_value(), "cannot infer the -1 of shape ", shape_str(want), " for input shape ", shape_str(x->sizes));
  want[static_cast<size_t>(infer)] = *q;
  return want;
}

std::vector<V> reshape_op(NodeCtx& c) {
  const V& x = c.input(0);
  SymShape want = c.opset < 5 ? static_shape(c.ints("shape")) : c.im.sym_ints(c.input(1), "the shape input");
  want = reshape_target(c.im, x, std::move(want), c.i("allowzero", 0) != 0);
  if (x->ints && !x->data && shape_numel(want) == static_cast<int64_t>(x->ints->size()) && want.size() <= 1)
    return one(c.im.known_ints(*x->ints, want.empty()));
  return one(c.im.reshape(x, want));
}

std::vector<V> flatten_op(NodeCtx& c) {
  const V& x = c.input(0);
  const int64_t r = rank_of(x);
  int64_t axis = c.i("axis", 1);
  KILN_CHECK(axis >= -r && axis <= r, "axis ", axis, " is out of range for rank ", r);
  if (axis < 0) axis += r;
  SymInt a = 1, b = 1;
  for (int64_t d = 0; d < r; ++d) (d < axis ? a : b) = (d < axis ? a : b) * x->sizes[static_cast<size_t>(d)];
  return one(c.im.reshape(x, {a, b}));
}

std::vector<V> transpose_op(NodeCtx& c) {
  const V& x = c.input(0);
  std::vector<int64_t> perm = c.ints("perm");
  if (perm.empty())
    for (int64_t d = rank_of(x) - 1; d >= 0; --d) perm.push_back(d);
  for (int64_t& p : perm) p = norm_axis(p, rank_of(x), "perm entry");
  return one(c.im.permute(x, perm));
}

std::vector<int64_t> axes_arg(NodeCtx& c, int64_t since_input) {
  if (c.opset >= since_input) return c.present(1) ? c.im.static_ints(c.input(1), "the axes input") : std::vector<int64_t>{};
  return c.ints("axes");
}

std::vector<V> squeeze_op(NodeCtx& c) {
  const V& x = c.input(0);
  std::vector<int64_t> axes = norm_axes(axes_arg(c, 13), rank_of(x));
  if (axes.empty())
    for (int64_t d = 0; d < rank_of(x); ++d)
      if (x->sizes[static_cast<size_t>(d)] == 1) axes.push_back(d);
  if (x->ints && !x->data && x->sizes.size() == 1 && axes == std::vector<int64_t>{0})
    return one(c.im.known_ints(*x->ints, true));
  return one(axes.empty() ? x : c.im.op(O::squeeze, {x}, {axes}));
}

std::vector<V> unsqueeze_op(NodeCtx& c) {
  V x = c.input(0);
  const std::vector<int64_t> given = axes_arg(c, 13);
  const std::vector<int64_t> axes = norm_axes(given, rank_of(x) + static_cast<int64_t>(given.size()));
  if (x->ints && !x->data && x->sizes.empty() && axes.size() == 1) return one(c.im.known_ints(*x->ints, false));
  for (int64_t a : axes) x = c.im.unsqueeze(x, a);
  return one(x);
}

std::vector<V> expand_op(NodeCtx& c) {
  const V& x = c.input(0);
  const SymShape shape = c.im.sym_ints(c.input(1), "the shape input");
  const SymShape out = broadcast_shapes(x->sizes, shape, c.im.graph().shapes(), "Expand");
  return one(out == x->sizes ? x : c.im.op(O::expand, {x}, {out}));
}

std::vector<V> concat_op(NodeCtx& c) {
  std::vector<V> in;
  for (size_t k = 0; k < c.in.size(); ++k) in.push_back(c.input(k));
  KILN_CHECK(!in.empty(), "needs at least one input");
  const int64_t axis = norm_axis(c.i("axis", 0), rank_of(in[0]));
  bool sym = true, any_sym = false;
  for (const V& v : in) {
    sym = sym && v->ints && v->sizes.size() == 1;
    any_sym = any_sym || (v->ints && !v->data);
  }
  if (sym && any_sym) {  // shape arithmetic over dynamic dims
    SymShape all;
    for (const V& v : in) all.insert(all.end(), v->ints->begin(), v->ints->end());
    return one(c.im.known_ints(all, false));
  }
  return one(c.im.cast(c.im.op(O::cat, in, {axis}), in[0]->dtype));
}

// The k largest (smallest) along axis, in order (sorted = 0 allows any order; sorted is one),
// ties in index order: the first k positions of argsort (a sorting network on the device; along
// a symbolic axis, a counting sort, the axis kept symbolic under the fact that it holds k), and
// the values gathered at them.
std::vector<V> top_k(NodeCtx& c) {
  const V& x = c.input(0);
  const int64_t axis = norm_axis(c.i("axis", -1), rank_of(x));
  const SymInt& n = x->sizes[static_cast<size_t>(axis)];
  const int64_t k = c.opset >= 10 ? c.im.static_ints(c.input(1), "k").at(0) : c.i("k", 0);
  KILN_CHECK(k >= 0 && c.im.graph().shapes().decide_at_least(n, k, "TopK"), "k = ", k, " is out of range for axis ",
             axis, " of size ", n.str(), n.is_symbolic() ? " = " + std::to_string(n.hint()) : "");
  const bool largest = c.i("largest", 1) != 0;
  const V indices = c.im.slice(c.im.op(O::argsort, {x}, {axis, largest}), axis, 0, k);
  return {c.im.op(O::gather, {x, indices}, {axis}), indices};
}

std::vector<V> split_op(NodeCtx& c) {
  const V& x = c.input(0);
  const int64_t axis = norm_axis(c.i("axis", 0), rank_of(x));
  const int64_t n = static_dim(c.im, x, axis, "Split");
  std::vector<int64_t> parts = c.opset >= 13 ? (c.present(1) ? c.im.static_ints(c.input(1), "the split input")
                                                             : std::vector<int64_t>{})
                                             : c.ints("split");
  const int64_t outs = static_cast<int64_t>(c.node.output.size());
  if (parts.empty() && c.opset >= 18 && c.has("num_outputs")) {
    // Opset 18: num_outputs parts of ceil(n / num_outputs), the last one smaller.
    const int64_t k = c.i("num_outputs", 0);
    KILN_CHECK(k == outs && k > 0, "num_outputs is ", k, " but the node has ", outs, " outputs");
    const int64_t chunk = (n + k - 1) / k;
    for (int64_t at = 0; at < n; at += chunk) parts.push_back(std::min(chunk, n - at));
    KILN_CHECK(static_cast<int64_t>(parts.size()) == k, "dim ", axis, " of size ", n, " does not split into ", k,
               " parts of ", chunk);
  }
  if (parts.empty()) {
    KILN_CHECK(outs > 0 && n % outs == 0, "dim ", axis, " of size ", n, " does not split into ", outs, " equal parts");
    parts.assign(static_cast<size_t>(outs), n / outs);
  }
  KILN_CHECK(static_cast<int64_t>(parts.size()) == outs, "split has ", parts.size(), " sizes for ", outs, " outputs");
  KILN_CHECK(std::accumulate(parts.begin(), parts.end(), int64_t{0}) == n, "split sizes do not add up to ", n);
  std::vector<V> out;
  int64_t at = 0;
  for (int64_t p : parts) {
    KILN_CHECK(p >= 0, "split size ", p, " is negative");
    out.push_back(c.im.slice(x, axis, at, at + p));
    at += p;
  }
  return out;
}

// Elements [start, end) by step of a dim of size n, ONNX Slice clamping.
std::vector<int64_t> slice_indices(int64_t n, int64_t start, int64_t end, int64_t step) {
  KILN_CHECK(step != 0, "slice step must not be 0");
  if (start < 0) start += n;
  if (end < 0) end += n;
  std::vector<int64_t> idx;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, n);
    end = std::clamp<int64_t>(end, 0, n);
    for (int64_t i = start; i < end; i += step) idx.push_back(i);
  } else {
    start = std::clamp<int64_t>(start, 0, n - 1);
    end = std::clamp<int64_t>(end, -1, n - 1);
    for (int64_t i = start; i > end; i += step) idx.push_back(i);
  }
  return idx;
}

std::vector<V> slice_op(NodeCtx& c) {
  Importer& im = c.im;
  V x = c.input(0);
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.opset < 10) {
    starts = c.ints("starts");
    ends = c.ints("ends");
    axes = c.ints("axes");
  } else {
    starts = im.static_ints(c.input(1), "the starts input");
    ends = im.static_ints(c.input(2), "the ends input");
    if (c.present(3)) axes = im.static_ints(c.input(3), "the axes input");
    if (c.present(4)) steps = im.static_ints(c.input(4), "the steps input");
  }
  KILN_CHECK(starts.size() == ends.size(), "starts and ends differ in length");
  if (axes.empty())
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  if (steps.empty()) steps.assign(starts.size(), 1);
  KILN_CHECK(axes.size() == starts.size() && steps.size() == starts.size(), "starts, ends, axes and steps differ in length");
  if (x->ints && !x->data && x->sizes.size() == 1) {  // a slice of known sizes
    const std::vector<int64_t> idx =
        slice_indices(static_cast<int64_t>(x->ints->size()), starts[0], ends[0], steps[0]);
    SymShape out;
    for (int64_t i : idx) out.push_back((*x->ints)[static_cast<size_t>(i)]);
    return one(im.known_ints(out, false));
  }
  for (size_t k = 0; k < axes.size(); ++k) {
    const int64_t a = norm_axis(axes[k], rank_of(x));
    constexpr int64_t kBig = std::numeric_limits<int64_t>::max() / 2;
    if (steps[k] > 0) {
      const int64_t e = std::min(ends[k], kBig + 1);
      const int64_t s = std::max(starts[k], -kBig);
      x = im.slice(x, a, s, std::max(e, -kBig), steps[k]);
    } else {
      const int64_t n = static_dim(im, x, a, "Slice");
      const std::vector<int64_t> idx = slice_indices(n, starts[k], ends[k], steps[k]);
      std::vector<double> d(idx.begin(), idx.end());
      x = im.op(O::index_select, {x, im.constant(make_tensor(DType::i64, {static_cast<int64_t>(idx.size())}, d))}, {a});
    }
  }
  return one(x);
}

std::vector<V> gather_op(NodeCtx& c) {
  Importer& im = c.im;
  const V& x = c.input(0);
  const V& idx = c.input(1);
  const int64_t axis = norm_axis(c.i("axis", 0), rank_of(x));
  if (x->ints && !x->data && x->sizes.size() == 1) {  // Gather on a shape
    const std::vector<int64_t> at = im.static_ints(idx, "the indices");
    SymShape out;
    for (int64_t i : at) {
      const int64_t n = static_cast<int64_t>(x->ints->size());
      KILN_CHECK(i >= -n && i < n, "index ", i, " out of range for size ", n);
      out.push_back((*x->ints)[static_cast<size_t>(i < 0 ? i + n : i)]);
    }
    return one(im.known_ints(out, idx->sizes.empty()));
  }
  KILN_CHECK(idx->dtype == DType::i32 || idx->dtype == DType::i64, "indices must be int32 or int64");
  V flat, r;  // the flat indices, or the rows picked (a slice)
  if (idx->data) {
    const int64_t n = static_dim(im, x, axis, "Gather");
    std::vector<double> v;
    for (int64_t i : ints_of(im.read(idx))) {
      KILN_CHECK(i >= -n && i < n, "index ", i, " out of range for dim ", axis, " of size ", n);
      v.push_back(static_cast<double>(i < 0 ? i + n : i));
    }
    // Indices known at import that step evenly upwards (one index: ViT's q, k and v of a packed
    // projection, its class token) are a strided slice: a view, no gather (off the CPU a
    // gather's constant indices would be a parameter read at run time, with a range check).
    const double step = v.size() > 1 ? v[1] - v[0] : 1;
    bool even = step >= 1;
    for (size_t k = 1; k < v.size() && even; ++k) even = v[k] - v[k - 1] == step;
    if (even && !v.empty()) {
      r = im.slice(x, axis, static_cast<int64_t>(v.front()), static_cast<int64_t>(v.back()) + 1, static_cast<int64_t>(step));
    } else {
      flat = im.constant(make_tensor(DType::i64, {static_cast<int64_t>(v.size())}, v));
    }
  } else {
    // Negative indices count from the end.
    V i = im.cast(idx, DType::i64);
    const V nv = im.scalar(static_cast<double>(static_dim(im, x, axis, "Gather")), DType::i64);
    const V negative = im.op(O::lt, {i, im.scalar(0, DType::i64)});
    i = where(im, negative, im.add(i, nv), i);
    flat = im.reshape(i, {shape_numel(idx->sizes)});
  }
  if (!r) r = im.op(O::index_select, {x, flat}, {axis});
  SymShape out(x->sizes.begin(), x->sizes.begin() + axis);
  out.insert(out.end(), idx->sizes.begin(), idx->sizes.end());
  out.insert(out.end(), x->sizes.begin() + axis + 1, x->sizes.end());
  return one(im.reshape(r, out));
}

std::vector<V> shape_op(NodeCtx& c) {
  const V& x = c.input(0);
  const int64_t r = rank_of(x);
  int64_t start = c.i("start", 0), end = c.i("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  SymShape s;
  for (int64_t d = start; d < end; ++d) s.push_back(x->sizes[static_cast<size_t>(d)]);
  return one(c.im.known_ints(s, false));
}

std::vector<V> size_op(NodeCtx& c) { return one(c.im.known_ints({shape_numel(c.input(0)->sizes)}, true)); }

std::vector<V> tile_op(NodeCtx& c) {
  Importer& im = c.im;
  const V& x = c.input(0);
  const std::vector<int64_t> reps = im.static_ints(c.input(1), "the repeats input");
  KILN_CHECK(static_cast<int64_t>(reps.size()) == rank_of(x), "repeats has ", reps.size(), " entries for rank ",
             rank_of(x));
  SymShape inter, big, out;
  for (size_t d = 0; d < reps.size(); ++d) {
    KILN_CHECK(reps[d] >= 0, "repeat ", reps[d], " is negative");
    inter.push_back(1);
    inter.push_back(x->sizes[d]);
    big.push_back(reps[d]);
    big.push_back(x->sizes[d]);
    out.push_back(x->sizes[d] * SymInt(reps[d]));
  }
  const V e = im.op(O::expand, {im.reshape(x, inter)}, {big});
  return one(im.reshape(e, out));
}

// A table the importer builds on the host (indices, a constant's values) of `a` * `b` doubles:
// checked against the memory budget before it is built (a 100-byte model asking for a Pad of
// 2^40 or an EyeLike of 2^31 x 2^31, issue 31).
int64_t checked_table(int64_t a, int64_t b, const std::string& what) {
  int64_t entries = 0;
  const bool wraps = a < 0 || b < 0 || __builtin_mul_overflow(a, b, &entries);
  KILN_CHECK(!wraps && entries <= memory_budget_bytes() / 8, what, " would build a table of ", a, " x ", b,
             " entries on the host, more than ", memory_budget_str());
  return entries;
}

// Indices of a padded dim of size n: reflect or edge.
std::vector<double> pad_indices(int64_t n, int64_t before, int64_t after, bool reflect) {
  int64_t total = 0;
  KILN_CHECK(!__builtin_add_overflow(n, before, &total) && !__builtin_add_overflow(total, after, &total),
             "pads ", before, " and ", after, " of a dim of size ", n, " overflow");
  checked_table(total, 1, "Pad (" + std::to_string(total) + " indices)");
  std::vector<double> idx;
  for (int64_t i = -before; i < n + after; ++i) {
    int64_t j = i;
    if (reflect) {
      KILN_CHECK(n >= 2 || (before == 0 && after == 0), "reflect padding needs a dim of size >= 2");
      const int64_t period = 2 * (n - 1);
      j = ((j % period) + period) % period;
      if (j >= n) j = period - j;
    } else {
      j = std::clamp<int64_t>(j, 0, n - 1);
    }
    idx.push_back(static_cast<double>(j));
  }
  return idx;
}

std::vector<V> pad_op(NodeCtx& c) {
  Importer& im = c.im;
  V x = c.input(0);
  const int64_t r = rank_of(x);
  const std::string mode = c.s("mode", "constant");
  std::vector<int64_t> pads = c.opset < 11 ? c.ints("pads") : im.static_ints(c.input(1), "the pads input");
  double value = c.opset < 11 ? c.f("value", 0) : 0;
  if (c.opset >= 11 && c.present(2)) {
    const std::vector<double> v = im.static_doubles(c.input(2), "the constant_value input");
    KILN_CHECK(v.size() == 1, "constant_value must hold one element");
    value = v[0];
  }
  std::vector<int64_t> axes;
  if (c.present(3)) axes = norm_axes(im.static_ints(c.input(3), "the axes input"), r);
  else
    for (int64_t d = 0; d < r; ++d) axes.push_back(d);
  KILN_CHECK(pads.size() == 2 * axes.size(), "pads has ", pads.size(), " entries, expected ", 2 * axes.size());
  const size_t na = axes.size();
  if (mode == "constant") {
    std::vector<int64_t> kp(static_cast<size_t>(2 * r), 0);  // last dim first
    for (size_t k = 0; k < na; ++k) {
      const size_t slot = static_cast<size_t>(r - 1 - axes[k]);
      kp[2 * slot] = pads[k];
      kp[2 * slot + 1] = pads[k + na];
    }
    return one(im.op(O::pad, {x}, {kp, value}));
  }
  KILN_CHECK(mode == "reflect" || mode == "edge", "pad mode '", mode, "' is not supported");
  for (size_t k = 0; k < na; ++k) {
    if (pads[k] == 0 && pads[k + na] == 0) continue;
    KILN_CHECK(pads[k] >= 0 && pads[k + na] >= 0, "negative pads are supported in constant mode only");
    const int64_t n = static_dim(im, x, axes[k], "Pad");
    const std::vector<double> idx = pad_indices(n, pads[k], pads[k + na], mode == "reflect");
    x = im.op(O::index_select, {x, im.constant(make_tensor(DType::i64, {static_cast<int64_t>(idx.size())}, idx))},
              {axes[k]});
  }
  return one(x);
}

std::vector<V> constant_op(NodeCtx& c) {
  const auto* a = c.node.attribute.size() == 1 ? &c.node.attribute[0] : nullptr;
  KILN_CHECK(a, "a Constant node has exactly one attribute");
  const std::string& n = a->name;
  if (n == "value") return one(c.im.tensor(tensor_attr(*a)));
  if (n == "value_float") return one(c.im.scalar(a->f, DType::f32));
  if (n == "value_int") return one(c.im.scalar(static_cast<double>(a->i), DType::i64));
  if (n == "value_floats") {
    std::vector<double> v(a->floats.begin(), a->floats.end());
    return one(c.im.constant(make_tensor(DType::f32, {static_cast<int64_t>(v.size())}, v)));
  }
  if (n == "value_ints") {
    std::vector<double> v(a->ints.begin(), a->ints.end());
    return one(c.im.constant(make_tensor(DType::i64, {static_cast<int64_t>(v.size())}, v)));
  }
  fail("Constant with attribute '", n, "' is not supported (strings and sparse tensors are not)");
}

std::vector<V> constant_of_shape(NodeCtx& c) {
  Importer& im = c.im;
  const SymShape shape = im.sym_ints(c.input(0), "the shape input");
  DType t = DType::f32;
  double value = 0;
  if (const auto* a = c.attr("value")) {
    const TensorData v = tensor_from_proto(tensor_attr(*a), "");
    KILN_CHECK(v.numel() == 1, "value must hold one element");
    t = v.dtype;
    value = doubles_of(v)[0];
  }
  if (shape_is_static(shape) && shape_numel(shape).hint() <= (int64_t{1} << 16))
    return one(im.constant(make_tensor(t, shape_hints(shape), {value})));
  return one(im.op(O::full, {}, {shape, value, t}));
}

std::vector<V> range_op(NodeCtx& c) {
  const V& s = c.input(0);
  const double start = c.im.static_doubles(s, "start").at(0), limit = c.im.static_doubles(c.input(1), "limit").at(0),
               delta = c.im.static_doubles(c.input(2), "delta").at(0);
  KILN_CHECK(delta != 0, "delta must not be 0");
  const double n = std::max(std::ceil((limit - start) / delta), 0.0);
  KILN_CHECK(n < (1 << 28), "the range has too many elements (", n, ")");
  checked_table(static_cast<int64_t>(n), 1, "Range");
  std::vector<double> v;
  for (int64_t k = 0; k < static_cast<int64_t>(n); ++k) v.push_back(start + static_cast<double>(k) * delta);
  return one(c.im.constant(make_tensor(s->dtype, {static_cast<int64_t>(n)}, v)));
}

std::vector<V> identity(NodeCtx& c) { return one(c.input(0)); }

std::vector<V> dropout(NodeCtx& c) {
  if (c.present(2)) {
    KILN_CHECK(c.im.static_doubles(c.input(2), "training_mode").at(0) == 0,
               "training_mode true (random dropout) is not supported");
  }
  std::vector<V> out{c.input(0)};
  if (c.node.output.size() > 1) {
    std::vector<int64_t> s = static_sizes(c.im, c.input(0), "Dropout");
    out.push_back(c.im.constant(make_tensor(DType::bool_, s, {1})));
  }
  return out;
}

std::vector<V> where_op(NodeCtx& c) {
  return one(c.im.cast(where(c.im, c.input(0), c.input(1), c.input(2)), c.input(1)->dtype));
}

std::vector<V> eye_like(NodeCtx& c) {
  const V& x = c.input(0);
  const std::vector<int64_t> s = static_sizes(c.im, x, "EyeLike");
  KILN_CHECK(s.size() == 2, "input must be 2-D");
  const DType t = c.has("dtype") ? dtype_of(static_cast<int32_t>(c.i("dtype", 1)), "dtype") : x->dtype;
  const int64_t k = c.i("k", 0);
  std::vector<double> v(static_cast<size_t>(checked_table(s[0], s[1], "EyeLike")), 0);
  for (int64_t i = 0; i < s[0]; ++i)
    if (i + k >= 0 && i + k < s[1]) v[static_cast<size_t>(i * s[1] + i + k)] = 1;
  return one(c.im.constant(make_tensor(t, s, v)));
}

std::vector<V> trilu(NodeCtx& c) {
  Importer& im = c.im;
  const V& x = c.input(0);
  KILN_CHECK(rank_of(x) >= 2, "input must have rank >= 2");
  const int64_t k = c.present(1) ? im.static_ints(c.input(1), "k").at(0) : 0;
  const bool upper = c.i("upper", 1) != 0;
  return one(im.op(upper ? O::triu : O::tril, {x}, {k}));
}

std::vector<V> one_hot(NodeCtx& c) {
  Importer& im = c.im;
  const V& idx = c.input(0);
  const V& values = c.input(2);
  const int64_t depth = static_cast<int64_t>(im.static_doubles(c.input(1), "depth").at(0));
  KILN_CHECK(depth > 0, "depth must be positive");
  const int64_t r = rank_of(idx) + 1;
  const int64_t axis = norm_axis(c.i("axis", -1), r);
  V i = im.cast(idx, DType::i64);
  const V negative = im.op(O::lt, {i, im.scalar(0, DType::i64)});
  i = where(im, negative, im.add(i, im.scalar(static_cast<double>(depth), DType::i64)), i);
  i = im.unsqueeze(i, axis);
  std::vector<double> ar(static_cast<size_t>(depth));
  std::iota(ar.begin(), ar.end(), 0.0);
  std::vector<int64_t> shape(static_cast<size_t>(r), 1);
  shape[static_cast<size_t>(axis)] = depth;
  const V range = im.constant(make_tensor(DType::i64, shape, ar));
  const V off = im.slice(values, 0, 0, 1), on = im.slice(values, 0, 1, 2);
  const V offs = im.reshape(off, {}), ons = im.reshape(on, {});
  return one(im.cast(where(im, im.op(O::eq, {i, range}), ons, offs), values->dtype));
}

std::vector<V> cumsum(NodeCtx& c) {
  Importer& im = c.im;
  const V& x = c.input(0);
  const int64_t axis = norm_axis(im.static_ints(c.input(1), "the axis input").at(0), rank_of(x));
  const bool exclusive = c.i("exclusive", 0) != 0, reverse = c.i("reverse", 0) != 0;
  return one(im.cast(im.op(O::cumsum, {x}, {axis, exclusive, reverse}), x->dtype));
}

std::vector<V> depth_to_space(NodeCtx& c, bool to_space) {
  Importer& im = c.im;
  const V& x = c.input(0);
  const std::vector<int64_t> s = static_sizes(im, x, "DepthToSpace");
  KILN_CHECK(s.size() == 4, "input must be 4-D");
  const int64_t b = c.i("blocksize", 0);
  KILN_CHECK(b > 0, "blocksize must be positive");
  const int64_t n = s[0], ch = s[1], h = s[2], w = s[3];
  if (to_space) {
    KILN_CHECK(ch % (b * b) == 0, "channels ", ch, " not divisible by blocksize^2");
    const bool crd = c.s("mode", "DCR") == "CRD";
    V t = crd ? im.reshape(x, {n, ch / (b * b), b, b, h, w}) : im.reshape(x, {n, b, b, ch / (b * b), h, w});
    t = crd ? im.permute(t, {0, 1, 4, 2, 5, 3}) : im.permute(t, {0, 3, 4, 1, 5, 2});
    return one(im.reshape(t, {n, ch / (b * b), h * b, w * b}));
  }
  KILN_CHECK(h % b == 0 && w % b == 0, "spatial dims not divisible by blocksize");
  V t = im.reshape(x, {n, ch, h / b, b, w / b, b});
  t = im.permute(t, {0, 3, 5, 1, 2, 4});
  return one(im.reshape(t, {n, ch * b * b, h / b, w / b}));
}

// ---- matmul, conv, pooling ---------------------------------------------------------------

std::vector<V> gemm(NodeCtx& c) {
  Importer& im = c.im;
  V a = c.input(0), b = c.input(1);
  KILN_CHECK(rank_of(a) == 2 && rank_of(b) == 2, "A and B must be 2-D");
  if (c.i("transA", 0)) a = im.permute(a, {1, 0});
  if (c.i("transB", 0)) b = im.permute(b, {1, 0});
  V y = im.op(O::matmul, {a, b});
  const double alpha = c.f("alpha", 1.0), beta = c.f("beta", 1.0);
  if (alpha != 1.0) y = im.mul(y, sc(c, alpha, y));
  if (c.present(2)) {
    V cc = c.input(2);
    if (beta != 1.0) cc = im.mul(cc, sc(c, beta, cc));
    y = im.add(y, cc);
  }
  return one(im.cast(y, c.input(0)->dtype));
}

struct Window {
  std::vector<int64_t> kernel, strides, dilations, pads_begin, pads_end, out;
};

// Output sizes and explicit padding (auto_pad resolved) of a convolution or pooling window over
// spatial sizes `in`.
Window window(NodeCtx& c, const std::vector<int64_t>& in, std::vector<int64_t> kernel) {
  const size_t n = in.size();
  Window w;
  w.kernel = std::move(kernel);
  KILN_CHECK(w.kernel.size() == n, "kernel has ", w.kernel.size(), " dims for ", n, " spatial dims");
  w.strides = c.ints("strides");
  if (w.strides.empty()) w.strides.assign(n, 1);
  w.dilations = c.ints("dilations");
  if (w.dilations.empty()) w.dilations.assign(n, 1);
  KILN_CHECK(w.strides.size() == n && w.dilations.size() == n, "strides and dilations need ", n, " entries");
  std::vector<int64_t> pads = c.ints("pads");
  const std::string auto_pad = c.s("auto_pad", "NOTSET");
  if (pads.empty()) pads.assign(2 * n, 0);
  KILN_CHECK(pads.size() == 2 * n, "pads needs ", 2 * n, " entries");
  for (size_t k = 0; k < n; ++k) {
    KILN_CHECK(w.kernel[k] >= 1 && w.strides[k] >= 1 && w.dilations[k] >= 1,
               "kernel sizes, strides and dilations must be positive");
    const int64_t span = (w.kernel[k] - 1) * w.dilations[k] + 1;
    int64_t pb = pads[k], pe = pads[k + n];
    KILN_CHECK(pb >= 0 && pe >= 0, "pads must not be negative");
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t o = (in[k] + w.strides[k] - 1) / w.strides[k];
      const int64_t total = std::max<int64_t>((o - 1) * w.strides[k] + span - in[k], 0);
      pb = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pe = total - pb;
    } else if (auto_pad == "VALID") {
      pb = pe = 0;
    } else {
      KILN_CHECK(auto_pad == "NOTSET", "auto_pad '", auto_pad, "' is not supported");
    }
    const int64_t room = in[k] + pb + pe - span;
    KILN_CHECK(room >= 0, "the window (", span, ") is larger than the padded input (", in[k] + pb + pe, ")");
    const int64_t o = room / w.strides[k] + 1;
    w.pads_begin.push_back(pb);
    w.pads_end.push_back(pe);
    w.out.push_back(o);
  }
  return w;
}

// y = conv(x, w) + bias (input 2 when present): one convolution op, which targets run with their
// own convolution kernels or as the windows of x times the weights (its decomposition).
// ONNX gives X, W and B one type, the output's. Where a file's weights or bias are of another
// floating type than a floating X (torch's exporter folds a bf16 model's batch norms into its
// convolutions in f32), the convolution is computed in X's type, the declared output's: they are
// cast to it (folded at import when they are initializers), rather than X promoted to theirs.
V conv_apply(NodeCtx& c, const V& x, const V& wt, int64_t group, const Window& w) {
  std::vector<int64_t> pads = w.pads_begin;
  pads.insert(pads.end(), w.pads_end.begin(), w.pads_end.end());
  auto as_x = [&](const V& v) { return is_floating(x->dtype) && is_floating(v->dtype) ? c.im.cast(v, x->dtype) : v; };
  std::vector<V> ins{x, as_x(wt)};
  if (c.present(2)) ins.push_back(as_x(c.input(2)));
  return c.im.op(O::convolution, ins, {w.strides, pads, w.dilations, group});
}

std::vector<V> conv(NodeCtx& c) {
  Importer& im = c.im;
  const V& x = c.input(0);
  const V& wt = c.input(1);
  KILN_CHECK(rank_of(x) >= 3 && rank_of(wt) == rank_of(x), "X and W must have the same rank >= 3");
  // The batch stays symbolic; channels and spatial sizes (cs) must be static.
  const std::vector<int64_t> cs = static_sizes(im, x, "Conv", 1), ws = static_sizes(im, wt, "Conv");
  const int64_t group = c.i("group", 1);
  const int64_t ch = cs[0], m = ws[0];
  KILN_CHECK(group >= 1 && ch % group == 0 && m % group == 0 && ws[1] * group == ch, "W shape [", m, ", ", ws[1],
             ", ...] does not match ", ch, " input channels in ", group, " groups");
  std::vector<int64_t> kernel(ws.begin() + 2, ws.end());
  if (c.has("kernel_shape")) KILN_CHECK(c.ints("kernel_shape") == kernel, "kernel_shape does not match W");
  const Window w = window(c, std::vector<int64_t>(cs.begin() + 1, cs.end()), kernel);
  return one(im.cast(conv_apply(c, x, wt, group, w), x->dtype));
}

// ConvTranspose as a convolution: the input dilated by the strides (zeros between elements),
// padded by (K-1)*d minus the pads (negative crops), convolved with stride 1 and dilation d by
// the kernel flipped in space, with its channel axes swapped within each group.
std::vector<V> conv_transpose(NodeCtx& c) {
  Importer& im = c.im;
  V x = c.input(0);
  const V& wt = c.input(1);
  const int64_t r = rank_of(x);
  KILN_CHECK(r >= 3 && rank_of(wt) == r, "X and W must have the same rank >= 3");
  const std::vector<int64_t> cs = static_sizes(im, x, "ConvTranspose", 1), ws = static_sizes(im, wt, "ConvTranspose");
  const size_t n = static_cast<size_t>(r - 2);
  const int64_t group = c.i("group", 1);
  const int64_t ch = cs[0];
  KILN_CHECK(group >= 1 && ws[0] == ch && ch % group == 0, "W shape does not match ", ch, " input channels in ",
             group, " groups");
  const int64_t m = ws[1] * group;
  std::vector<int64_t> kernel(ws.begin() + 2, ws.end());
  auto list = [&](const char* name, int64_t def) {
    std::vector<int64_t> v = c.ints(name);
    if (v.empty()) v.assign(n, def);
    KILN_CHECK(v.size() == n, name, " needs ", n, " entries");
    return v;
  };
  const std::vector<int64_t> strides = list("strides", 1), dil = list("dilations", 1), outpad = list("output_padding", 0);
  std::vector<int64_t> pads = c.ints("pads");
  if (pads.empty()) pads.assign(2 * n, 0);
  KILN_CHECK(pads.size() == 2 * n, "pads needs ", 2 * n, " entries");
  const std::string auto_pad = c.s("auto_pad", "NOTSET");
  std::vector<int64_t> out_shape = c.ints("output_shape");
  if (out_shape.size() == n + 2) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
  if (out_shape.empty() && (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER"))
    for (size_t k = 0; k < n; ++k) out_shape.push_back(cs[1 + k] * strides[k]);
  if (!out_shape.empty()) {
    KILN_CHECK(out_shape.size() == n, "output_shape needs ", n, " entries");
    for (size_t k = 0; k < n; ++k) {
      const int64_t total = strides[k] * (cs[1 + k] - 1) + outpad[k] + (kernel[k] - 1) * dil[k] + 1 - out_shape[k];
      const bool lower = auto_pad == "SAME_LOWER";
      pads[k] = lower ? total - total / 2 : total / 2;
      pads[k + n] = total - pads[k];
    }
  }
  // Dilate by the strides: [.., S, ..] -> [.., S, s, ..] padded with zeros -> [.., S*s] -> first (S-1)*s+1.
  for (size_t k = 0; k < n; ++k) {
    if (strides[k] == 1) continue;
    const int64_t d = static_cast<int64_t>(2 + k);
    SymShape merged = x->sizes;
    V u = im.unsqueeze(x, d + 1);
    std::vector<int64_t> kp(static_cast<size_t>(2 * (r - d)), 0);  // pairs from the last dim (rank r+1) to d+1
    kp[kp.size() - 1] = strides[k] - 1;
    u = im.op(O::pad, {u}, {kp, 0.0});
    merged[static_cast<size_t>(d)] = cs[1 + k] * strides[k];
    x = im.slice(im.reshape(u, merged), d, 0, (cs[1 + k] - 1) * strides[k] + 1);
  }
  std::vector<int64_t> kp;
  for (size_t k = n; k-- > 0;) {
    const int64_t span = (kernel[k] - 1) * dil[k];
    kp.push_back(span - pads[k]);
    kp.push_back(span - pads[k + n] + outpad[k]);
  }
  x = im.op(O::pad, {x}, {kp, 0.0});
  // W [C, M/g, *K] -> [M, C/g, *K], flipped in space.
  std::vector<int64_t> gshape{group, ch / group, m / group};
  gshape.insert(gshape.end(), kernel.begin(), kernel.end());
  std::vector<int64_t> perm{0, 2, 1};
  for (size_t k = 0; k < n; ++k) perm.push_back(static_cast<int64_t>(3 + k));
  SymShape wshape{m, ch / group};
  wshape.insert(wshape.end(), kernel.begin(), kernel.end());
  V w2 = im.reshape(im.permute(im.reshape(wt, static_shape(gshape)), perm), wshape);
  for (size_t k = 0; k < n; ++k) {
    std::vector<double> rev;
    for (int64_t i = kernel[k] - 1; i >= 0; --i) rev.push_back(static_cast<double>(i));
    w2 = im.op(O::index_select, {w2, im.constant(make_tensor(DType::i64, {kernel[k]}, rev))},
               {static_cast<int64_t>(2 + k)});
  }
  Window w;
  w.kernel = kernel;
  w.strides.assign(n, 1);
  w.dilations = dil;
  w.pads_begin.assign(n, 0);
  w.pads_end.assign(n, 0);
  for (size_t k = 0; k < n; ++k) {
    const int64_t size = static_dim(im, x, static_cast<int64_t>(2 + k), "ConvTranspose");
    w.out.push_back(size - (kernel[k] - 1) * dil[k]);
    KILN_CHECK(w.out.back() >= 1, "the output would be empty");
  }
  return one(im.cast(conv_apply(c, x, w2, group, w), c.input(0)->dtype));
}

// MaxPool and AveragePool: the pooling ops, with auto_pad resolved to explicit pads; only the
// spatial dims need static sizes.
std::vector<V> pool(NodeCtx& c, bool is_max) {
  Importer& im = c.im;
  const V& x = c.input(0);
  KILN_CHECK(rank_of(x) >= 3, "X must have rank >= 3");
  KILN_CHECK(c.outputs() == 1, "the Indices output is not supported");
  KILN_CHECK(c.i("storage_order", 0) == 0, "storage_order 1 is not supported");
  std::vector<int64_t> spatial;
  for (int64_t d = 2; d < rank_of(x); ++d) spatial.push_back(static_dim(im, x, d, is_max ? "MaxPool" : "AveragePool"));
  const Window w = window(c, spatial, c.ints("kernel_shape"));
  std::vector<int64_t> pads = w.pads_begin;
  pads.insert(pads.end(), w.pads_end.begin(), w.pads_end.end());
  const bool ceil_mode = c.i("ceil_mode", 0) != 0;
  if (is_max) return one(im.op(O::max_pool, {x}, {w.kernel, w.strides, pads, w.dilations, ceil_mode}));
  return one(im.op(O::avg_pool, {x}, {w.kernel, w.strides, pads, w.dilations, ceil_mode, c.i("count_include_pad", 0) != 0}));
}

std::vector<V> global_pool(NodeCtx& c, bool is_max) {
  const V& x = c.input(0);
  std::vector<int64_t> dims;
  for (int64_t d = 2; d < rank_of(x); ++d) dims.push_back(d);
  return one(c.im.reduce(is_max ? O::max : O::mean, x, dims, true));
}

// ---- normalisation -----------------------------------------------------------------------

// Softmax-like ops: opset < 13 coerces the input to 2-D at `axis` (default 1).
std::vector<V> softmax_like(NodeCtx& c, const std::string& kind) {
  Importer& im = c.im;
  const V& x = c.input(0);
  const int64_t r = rank_of(x);
  auto apply = [&](const V& v, int64_t axis) -> V {
    if (kind == "Softmax") return im.op(O::softmax, {v}, {axis});
    if (kind == "LogSoftmax") return im.op(O::log_softmax, {v}, {axis});
    // Hardmax: one at the first maximum.
    const V i = im.op(O::argmax, {v}, {std::vector<int64_t>{axis}, true});
    const int64_t n = static_dim(im, v, axis, "Hardmax");
    std::vector<int64_t> shape(static_cast<size_t>(rank_of(v)), 1);
    shape[static_cast<size_t>(axis)] = n;
    std::vector<double> ar(static_cast<size_t>(n));
    std::iota(ar.begin(), ar.end(), 0.0);
    return im.cast(im.op(O::eq, {i, im.constant(make_tensor(DType::i64, shape, ar))}), v->dtype);
  };
  if (r == 0) return one(apply(im.reshape(x, {1}), 0));
  if (c.opset >= 13) return one(im.cast(apply(x, norm_axis(c.i("axis", -1), r)), x->dtype));
  int64_t axis = c.i("axis", 1);
  KILN_CHECK(axis >= -r && axis <= r, "axis ", axis, " out of range for rank ", r);
  if (axis < 0) axis += r;
  SymInt a = 1, b = 1;
  for (int64_t d = 0; d < r; ++d) (d < axis ? a : b) = (d < axis ? a : b) * x->sizes[static_cast<size_t>(d)];
  const V y = apply(im.reshape(x, {a, b}), 1);
  return one(im.cast(im.reshape(y, x->sizes), x->dtype));
}

std::vector<V> layer_norm(NodeCtx& c) {
  Importer& im = c.im;
  const V& x = c.input(0);
  const int64_t r = rank_of(x);
  const int64_t axis = norm_axis(c.i("axis", -1), r);
  const double eps = c.f("epsilon", 1e-5);
  KILN_CHECK(c.i("stash_type", 1) == 1, "stash_type other than 1 (float) is not supported");
  std::vector<int64_t> dims;
  for (int64_t d = axis; d < r; ++d) dims.push_back(d);
  const V xf = im.cast(x, is_floating(x->dtype) && x->dtype != DType::f16 && x->dtype != DType::bf16 ? x->dtype
                                                                                                      : DType::f32);
  const V mean = im.reduce(O::mean, xf, dims, true);
  const V d = im.sub(xf, mean);
  const V var = im.reduce(O::mean, im.mul(d, d), dims, true);
  const V inv = im.op(O::rsqrt, {im.add(var, im.scalar(eps, xf->dtype))});
  V y = im.mul(d, inv);
  y = im.mul(y, c.input(1));
  if (c.present(2)) y = im.add(y, c.input(2));
  return {im.cast(y, x->dtype), mean, inv};
}

std::vector<V> batch_norm(NodeCtx& c) {
  Importer& im = c.im;
  const V& x = c.input(0);
  KILN_CHECK(c.i("training_mode", 0) == 0 && c.outputs() == 1, "training mode is not supported");
  KILN_CHECK(rank_of(x) >= 2, "X must have rank >= 2");
  // ONNX orders (X, scale, B, mean, var); the op takes (x, mean, var, weight, bias).
  const V y = im.op(O::batch_norm, {x, c.input(3), c.input(4), c.input(1), c.input(2)}, {c.f("epsilon", 1e-5)});
  return one(im.cast(y, x->dtype));
}

// A group norm of one channel per group.
std::vector<V> instance_norm(NodeCtx& c) {
  Importer& im = c.im;
  const V& x = c.input(0);
  KILN_CHECK(rank_of(x) >= 3, "input must have rank >= 3");
  const int64_t ch = static_dim(im, x, 1, "InstanceNormalization");
  const V y = im.op(O::group_norm, {x, c.input(1), c.input(2)}, {ch, c.f("epsilon", 1e-5)});
  return one(im.cast(y, x->dtype));
}

std::vector<V> lp_norm(NodeCtx& c) {
  Importer& im = c.im;
  const V& x = c.input(0);
  const int64_t axis = norm_axis(c.i("axis", -1), rank_of(x));
  const int64_t p = c.i("p", 2);
  KILN_CHECK(p == 1 || p == 2, "p must be 1 or 2");
  const V n = p == 1 ? im.reduce(O::sum, im.op(O::abs, {x}), {axis}, true)
                     : im.op(O::sqrt, {im.reduce(O::sum, im.mul(x, x), {axis}, true)});
  return one(im.cast(im.div(x, n), x->dtype));
}

std::vector<V> mvn(NodeCtx& c) {
  Importer& im = c.im;
  const V& x = c.input(0);
  std::vector<int64_t> axes = c.ints("axes");
  if (axes.empty()) axes = {0, 2, 3};
  axes = norm_axes(axes, rank_of(x));
  const V mean = im.reduce(O::mean, x, axes, true);
  const V d = im.sub(x, mean);
  const V var = im.reduce(O::mean, im.mul(d, d), axes, true);
  return one(im.cast(im.div(d, im.add(im.op(O::sqrt, {var}), sc(c, 1e-9, x))), x->dtype));
}


// A [1, .., n (at dim), .., 1] i64 tensor 0..n-1 of rank `rank`.
V iota_along(Importer& im, int64_t n, int64_t dim, int64_t rank) {
  std::vector<int64_t> shape(static_cast<size_t>(rank), 1);
  shape[static_cast<size_t>(dim)] = n;
  std::vector<double> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0.0);
  return im.constant(make_tensor(DType::i64, shape, v));
}

// Negative indices count from the end of a dim of size n.
V wrap_index(Importer& im, const V& idx, int64_t n) {
  const V i = im.cast(idx, DType::i64);
  const V negative = im.op(O::lt, {i, im.scalar(0, DType::i64)});
  return where(im, negative, im.add(i, im.scalar(static_cast<double>(n), DType::i64)), i);
}

// GatherElements is gather, negative indices counting from the end of the axis.
std::vector<V> gather_elements(NodeCtx& c) {
  Importer& im = c.im;
  const V& x = c.input(0);
  const V& idx = c.input(1);
  const int64_t r = rank_of(x);
  KILN_CHECK(rank_of(idx) == r, "indices must have the rank of data (", r, ")");
  const int64_t axis = norm_axis(c.i("axis", 0), r);
  const int64_t n = static_dim(im, x, axis, "GatherElements");
  return one(im.op(O::gather, {x, wrap_index(im, idx, n)}, {axis}));
}

// NegativeLogLikelihoodLoss over log-probabilities [N, C, d..] and targets [N, d..].
V nll(NodeCtx& c, const V& input, const V& target, const V& weight, const std::string& reduction) {
  Importer& im = c.im;
  const int64_t r = rank_of(input);
  KILN_CHECK(r >= 2 && rank_of(target) == r - 1, "input must be [N, C, ...] and target [N, ...]");
  const int64_t classes = static_dim(im, input, 1, "NegativeLogLikelihoodLoss");
  const V t = im.cast(target, DType::i64);
  const V mask = im.op(O::eq, {im.unsqueeze(t, 1), iota_along(im, classes, 1, r)});  // [N, C, d..]
  const V zero = sc(c, 0, input);
  const V picked = im.reduce(O::sum, where(im, mask, input, zero), {1}, false);
  V w;
  if (weight) {
    SymShape ws{classes};
    for (int64_t d = 2; d < r; ++d) ws.push_back(1);
    w = im.reduce(O::sum, where(im, mask, im.reshape(weight, ws), zero), {1}, false);
  } else {
    w = im.op(O::expand, {sc(c, 1, input)}, {t->sizes});  // every target counts once
  }
  if (c.has("ignore_index")) {
    const V valid = im.op(O::ne, {t, im.scalar(static_cast<double>(c.i("ignore_index", 0)), DType::i64)});
    w = where(im, valid, w, zero);
  }
  const V loss = im.mul(im.op(O::neg, {picked}), w);
  if (reduction == "none") return im.cast(loss, input->dtype);
  std::vector<int64_t> all;
  for (int64_t d = 0; d < r - 1; ++d) all.push_back(d);
  const V total = im.reduce(O::sum, loss, all, false);
  if (reduction == "sum") return im.cast(total, input->dtype);
  KILN_CHECK(reduction == "mean", "reduction '", reduction, "' is not supported (none, sum, mean)");
  return im.cast(im.div(total, im.reduce(O::sum, w, all, false)), input->dtype);
}

std::vector<V> nll_loss(NodeCtx& c) {
  return one(nll(c, c.input(0), c.input(1), c.present(2) ? c.input(2) : nullptr, c.s("reduction", "mean")));
}

std::vector<V> softmax_cross_entropy(NodeCtx& c) {
  const V& scores = c.input(0);
  KILN_CHECK(rank_of(scores) >= 2, "scores must be [N, C, ...]");
  const V logp = c.im.op(O::log_softmax, {scores}, {int64_t{1}});
  const V loss = nll(c, logp, c.input(1), c.present(2) ? c.input(2) : nullptr, c.s("reduction", "mean"));
  return {loss, c.im.cast(logp, scores->dtype)};
}

// atan by Cephes' range reduction (|x| > tan(3pi/8): pi/2 + atan(-1/x); > tan(pi/8):
// pi/4 + atan((x-1)/(x+1))) and its degree-9 odd polynomial, ~1e-7 relative in f32.
V atan_of(Importer& im, const V& x0) {
  const V x = im.cast(x0, is_floating(x0->dtype) ? x0->dtype : DType::f32);
  auto k = [&](double v) { return im.scalar(v, x->dtype); };
  const V a = im.op(O::abs, {x});
  const V big = im.op(O::gt, {a, k(2.414213562373095)});
  const V mid = im.op(O::gt, {a, k(0.4142135623730950)});
  const V t_big = im.div(k(-1), a);
  const V a_less = im.sub(a, k(1));
  const V t_mid = im.div(a_less, im.add(a, k(1)));
  const V t = where(im, big, t_big, where(im, mid, t_mid, a));
  const V y0 = where(im, big, k(M_PI / 2), where(im, mid, k(M_PI / 4), k(0)));
  const V z = im.mul(t, t);
  V p = k(8.05374449538e-2);
  for (double c : {-1.38776856032e-1, 1.99777106478e-1, -3.33329491539e-1}) p = im.add(im.mul(p, z), k(c));
  const V r = im.add(y0, im.add(im.mul(im.mul(p, z), t), t));
  return im.mul(im.op(O::sign, {x}), r);
}

std::vector<V> inverse_trig(NodeCtx& c, const std::string& which) {
  Importer& im = c.im;
  const V& x = c.input(0);
  if (which == "Atan") return one(atan_of(im, x));
  // asin(x) = atan(x / sqrt(1 - x^2)); acos(x) = pi/2 - asin(x).
  const V as = atan_of(im, im.div(x, im.op(O::sqrt, {im.sub(sc(c, 1, x), im.mul(x, x))})));
  return one(which == "Asin" ? as : im.sub(sc(c, M_PI / 2, x), as));
}

// Hann, Hamming and Blackman windows of a size known at import.
std::vector<V> window_fn(NodeCtx& c, const std::string& which) {
  const int64_t size = static_cast<int64_t>(c.im.static_doubles(c.input(0), "size").at(0));
  KILN_CHECK(size >= 0 && size <= (int64_t{1} << 20), "size ", size, " is out of range");
  const DType t = dtype_of(static_cast<int32_t>(c.i("output_datatype", 1)), "output_datatype");
  const double n_den = static_cast<double>(c.i("periodic", 1) ? size : size - 1);
  std::vector<double> v;
  for (int64_t n = 0; n < size; ++n) {
    const double w = 2 * M_PI * static_cast<double>(n) / n_den;
    if (which == "HannWindow") v.push_back(0.5 - 0.5 * std::cos(w));
    else if (which == "HammingWindow") v.push_back(25.0 / 46 - 21.0 / 46 * std::cos(w));
    else v.push_back(0.42 - 0.5 * std::cos(w) + 0.08 * std::cos(2 * w));
  }
  return one(c.im.constant(make_tensor(t, {size}, v)));
}

// Resize (opset 11+), one axis at a time from the last, each output element a weighted sum of
// up to four input elements along the axis: the taps and weights of ONNX's reference
// implementation (neighbours by distance over the edge-padded axis), computed at import.
struct Taps {
  std::vector<std::vector<int64_t>> index;  // [tap][output position], clamped into the input
  std::vector<std::vector<double>> weight;  // [tap][output position]
  std::vector<double> outside;              // 1 where the position extrapolates
};

Taps resize_taps(NodeCtx& c, int64_t in, int64_t out, double scale, double roi_start, double roi_end) {
  const std::string mode = c.s("mode", "nearest");
  const std::string ctm = c.s("coordinate_transformation_mode", "half_pixel");
  const std::string nearest_mode = c.s("nearest_mode", "round_prefer_floor");
  const double a = c.f("cubic_coeff_a", -0.75);
  const bool exclude = c.i("exclude_outside", 0) != 0;
  const size_t n = mode == "cubic" ? 4 : 2;
  KILN_CHECK(mode == "nearest" || mode == "linear" || mode == "cubic", "mode '", mode, "' is not supported");
  // index, weight and their copies into constants: 4n + 1 values per output position.
  checked_table(out, static_cast<int64_t>(4 * n + 1), "Resize (" + mode + ", " + std::to_string(out) + " outputs along a dim)");
  Taps t;
  t.index.assign(n, {});
  t.weight.assign(n, {});
  const double out_w = scale * static_cast<double>(in);
  for (int64_t o = 0; o < out; ++o) {
    const double x = static_cast<double>(o), w = static_cast<double>(in);
    double xo = 0;
    bool outside = false;
    if (ctm == "align_corners") xo = out_w == 1 ? 0 : x * (w - 1) / (out_w - 1);
    else if (ctm == "asymmetric") xo = x / scale;
    else if (ctm == "tf_crop_and_resize") {
      xo = out_w == 1 ? (roi_end - roi_start) * (w - 1) / 2 : x * (roi_end - roi_start) * (w - 1) / (out_w - 1);
      xo += roi_start * (w - 1);
      outside = xo < 0 || xo > w - 1;
    } else if (ctm == "pytorch_half_pixel") xo = out_w == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
    else if (ctm == "half_pixel") xo = (x + 0.5) / scale - 0.5;
    else if (ctm == "tf_half_pixel_for_nearest" || ctm == "tf_half_pixel_for_nn") xo = (x + 0.5) / scale;
    else fail("coordinate_transformation_mode '", ctm, "' is not supported");
    const double fl = std::floor(xo);
    const double ratio = xo == fl ? 1.0 : xo - fl;
    std::vector<double> k;
    if (mode == "nearest") {
      if (xo == fl) k = {0, 1};
      else if (nearest_mode == "round_prefer_floor") k = {double(ratio <= 0.5), double(ratio > 0.5)};
      else if (nearest_mode == "round_prefer_ceil") k = {double(ratio < 0.5), double(ratio >= 0.5)};
      else if (nearest_mode == "floor") k = {1, 0};
      else if (nearest_mode == "ceil") k = {0, 1};
      else fail("nearest_mode '", nearest_mode, "' is not supported");
    } else if (mode == "linear") {
      k = {1 - ratio, ratio};
    } else {
      const double r = ratio, q = 1 - ratio;
      k = {((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a, ((a + 2) * r - (a + 3)) * r * r + 1,
           ((a + 2) * q - (a + 3)) * q * q + 1, ((a * (q + 1) - 5 * a) * (q + 1) + 8 * a) * (q + 1) - 4 * a};
    }
    // The n positions of the edge-padded axis nearest to xo (ties to the lower), in order: they
    // lie within n of floor(xp), so only that window is ranked (ranking the whole axis for every
    // output position made a wide Resize quadratic).
    const int64_t pad = static_cast<int64_t>((n + 1) / 2);
    const double xp = xo + static_cast<double>(pad);
    const int64_t padded = in + 2 * pad, span = static_cast<int64_t>(n);
    const double centre = std::clamp(std::floor(xp), -1.0, static_cast<double>(padded));
    const int64_t lo = std::max<int64_t>(0, static_cast<int64_t>(centre) - span);
    const int64_t hi = std::min<int64_t>(padded, static_cast<int64_t>(centre) + span + 2);
    std::vector<int64_t> idx;
    for (int64_t i = lo; i < hi; ++i) idx.push_back(i);
    std::stable_sort(idx.begin(), idx.end(), [&](int64_t p, int64_t q2) {
      return std::abs(xp - static_cast<double>(p)) < std::abs(xp - static_cast<double>(q2));
    });
    idx.resize(n);
    std::sort(idx.begin(), idx.end());
    if (exclude) {
      double sum = 0;
      for (size_t j = 0; j < n; ++j) {
        const int64_t src = idx[j] - pad;
        if (src < 0 || src >= in) k[j] = 0;
        sum += k[j];
      }
      for (double& v : k) v /= sum;
    }
    for (size_t j = 0; j < n; ++j) {
      t.index[j].push_back(std::clamp<int64_t>(idx[j] - pad, 0, in - 1));
      t.weight[j].push_back(outside ? 0 : k[j]);
    }
    t.outside.push_back(outside);
  }
  return t;
}

std::vector<V> resize(NodeCtx& c) {
  Importer& im = c.im;
  V x = c.input(0);
  KILN_CHECK(c.opset >= 11, "Resize before opset 11 is not supported");
  // Opset 18's additions, where they change the result.
  KILN_CHECK(c.i("antialias", 0) == 0, "Resize with antialias is not supported");
  KILN_CHECK(c.s("keep_aspect_ratio_policy", "stretch") == "stretch", "Resize keep_aspect_ratio_policy '",
             c.s("keep_aspect_ratio_policy", "stretch"), "' is not supported");
  KILN_CHECK(c.ints("axes").empty(), "Resize with axes is not supported");
  const int64_t r = rank_of(x);
  const std::vector<int64_t> xs = static_sizes(im, x, "Resize");
  std::vector<double> roi, scales;
  std::vector<int64_t> sizes;
  if (c.present(1)) roi = im.static_doubles(c.input(1), "the roi input");
  if (c.present(2)) scales = im.static_doubles(c.input(2), "the scales input");
  if (c.present(3)) sizes = im.static_ints(c.input(3), "the sizes input");
  KILN_CHECK(sizes.empty() || scales.empty(), "only one of scales and sizes may be given");
  KILN_CHECK(!sizes.empty() || static_cast<int64_t>(scales.size()) == r, "scales needs ", r, " entries");
  KILN_CHECK(sizes.empty() || static_cast<int64_t>(sizes.size()) == r, "sizes needs ", r, " entries");
  const DType t = x->dtype;
  const V xf = im.cast(x, is_floating(t) ? t : DType::f32);
  x = xf;
  const double extrapolation = c.f("extrapolation_value", 0);
  for (int64_t d = r - 1; d >= 0; --d) {
    const int64_t in = xs[static_cast<size_t>(d)];
    const double scale = sizes.empty() ? scales[static_cast<size_t>(d)]
                                       : static_cast<double>(sizes[static_cast<size_t>(d)]) / static_cast<double>(in);
    KILN_CHECK(scale > 0 && std::isfinite(scale), "scale ", scale, " must be positive and finite");
    // The import builds tap tables as long as the output dim: past 2^24 (16M) per dim it is a
    // hostile or broken scale, not an image (a 1e9 scale grew without bound).
    constexpr double kMaxOut = double(int64_t{1} << 24);
    const double want = sizes.empty() ? std::floor(static_cast<double>(in) * scale) : static_cast<double>(sizes[static_cast<size_t>(d)]);
    KILN_CHECK(want >= 0 && want <= kMaxOut, "the output's dim ", d, " would have ", want, " elements (input ", in,
               ", scale ", scale, "): more than 2^24 per dim is not supported");
    const int64_t out = static_cast<int64_t>(want);
    const double rs = roi.size() == static_cast<size_t>(2 * r) ? roi[static_cast<size_t>(d)] : 0;
    const double re = roi.size() == static_cast<size_t>(2 * r) ? roi[static_cast<size_t>(d + r)] : 1;
    if (out == in && scale == 1.0 && c.s("coordinate_transformation_mode", "half_pixel") != "tf_crop_and_resize") continue;
    const Taps taps = resize_taps(c, in, out, scale, rs, re);
    std::vector<int64_t> wshape(static_cast<size_t>(r), 1);
    wshape[static_cast<size_t>(d)] = out;
    V acc;
    for (size_t j = 0; j < taps.index.size(); ++j) {
      std::vector<double> iv(taps.index[j].begin(), taps.index[j].end());
      const V g = im.op(O::index_select, {x, im.constant(make_tensor(DType::i64, {out}, iv))}, {d});
      const V term = im.mul(g, im.constant(make_tensor(x->dtype, wshape, taps.weight[j])));
      acc = acc ? im.add(acc, term) : term;
    }
    if (std::any_of(taps.outside.begin(), taps.outside.end(), [](double v) { return v != 0; })) {
      std::vector<double> fill;
      for (double o : taps.outside) fill.push_back(o * extrapolation);
      acc = im.add(acc, im.constant(make_tensor(x->dtype, wshape, fill)));
    }
    x = acc;
  }
  if (!is_floating(t)) x = im.cast(im.op(O::round, {x}), t);
  return one(im.cast(x, t));
}

// LRN across channels: x / (bias + alpha/size * sum of squares over the channel window)^beta.
std::vector<V> lrn(NodeCtx& c) {
  Importer& im = c.im;
  const V& x = c.input(0);
  const int64_t r = rank_of(x);
  KILN_CHECK(r >= 3, "input must be [N, C, ...]");
  const int64_t size = c.i("size", 0);
  KILN_CHECK(size >= 1, "size must be positive");
  const int64_t ch = static_dim(im, x, 1, "LRN");
  // Channel c sums the squares over [c - before, c + after] within [0, ch): reaches past ch - 1 on
  // either side add only padding, so they are cut (a size of 1e9 would make 1e9 slices).
  const int64_t before = std::min((size - 1) / 2, ch - 1), after = std::min(size - 1 - (size - 1) / 2, ch - 1);
  std::vector<int64_t> kp(static_cast<size_t>(2 * (r - 1)), 0);  // pairs from the last dim to dim 1
  kp[kp.size() - 2] = before;
  kp[kp.size() - 1] = after;
  const V sq = im.op(O::pad, {im.mul(x, x)}, {kp, 0.0});
  V sum;
  for (int64_t k = 0; k <= before + after; ++k) {
    const V part = im.slice(sq, 1, k, k + ch);
    sum = sum ? im.add(sum, part) : part;
  }
  const V base = im.add(sc(c, c.f("bias", 1.0), x), im.mul(sum, sc(c, c.f("alpha", 1e-4) / static_cast<double>(size), x)));
  return one(im.div(x, im.op(O::pow, {base, sc(c, c.f("beta", 0.75), x)})));
}

// Einsum without ellipses or repeated letters within an operand: letters used once are summed
// out, then operands are contracted pairwise as batched matmuls, and the result permuted.
std::vector<V> einsum(NodeCtx& c) {
  Importer& im = c.im;
  std::string eq;
  for (char ch : c.s("equation", "")) if (ch != ' ') eq += ch;
  KILN_CHECK(eq.find("...") == std::string::npos, "equations with an ellipsis are not supported");
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::pair<V, std::string>> ops;
  size_t start = 0;
  for (size_t k = 0; k <= lhs.size(); ++k) {
    if (k == lhs.size() || lhs[k] == ',') {
      const std::string letters = lhs.substr(start, k - start);
      KILN_CHECK(ops.size() < c.in.size(), "the equation names more operands than the node has");
      const V& v = c.input(ops.size());
      KILN_CHECK(static_cast<int64_t>(letters.size()) == rank_of(v), "operand ", ops.size(), " has rank ", rank_of(v),
                 " but the equation gives it ", letters.size(), " letters");
      for (char ch : letters) {
        KILN_CHECK(std::isalpha(static_cast<unsigned char>(ch)), "bad letter '", ch, "' in the equation");
        KILN_CHECK(std::count(letters.begin(), letters.end(), ch) == 1, "repeated letter '", ch,
                   "' within an operand (a diagonal) is not supported");
      }
      ops.push_back({v, letters});
      start = k + 1;
    }
  }
  KILN_CHECK(ops.size() == c.in.size(), "the equation names ", ops.size(), " operands, the node has ", c.in.size());
  std::string out;
  if (arrow != std::string::npos) {
    out = eq.substr(arrow + 2);
  } else {
    for (char ch = 'A'; ch <= 'z'; ++ch)
      if (std::count(lhs.begin(), lhs.end(), ch) == 1) out += ch;
  }
  const DType t = ops[0].first->dtype;
  // Sums out the letters of op k that no other operand and not the output use.
  auto reduce_unused = [&](size_t k) {
    std::vector<int64_t> dims;
    std::string keep;
    for (size_t j = 0; j < ops[k].second.size(); ++j) {
      const char ch = ops[k].second[j];
      bool used = out.find(ch) != std::string::npos;
      for (size_t o = 0; o < ops.size(); ++o) used = used || (o != k && ops[o].second.find(ch) != std::string::npos);
      if (used) keep += ch;
      else dims.push_back(static_cast<int64_t>(j));
    }
    if (!dims.empty()) ops[k] = {im.cast(im.reduce(O::sum, ops[k].first, dims, false), t), keep};
  };
  for (size_t k = 0; k < ops.size(); ++k) reduce_unused(k);
  while (ops.size() > 1) {
    auto [a, la] = ops[0];
    auto [b, lb] = ops[1];
    ops.erase(ops.begin(), ops.begin() + 2);
    auto kept = [&](char ch) {
      bool k = out.find(ch) != std::string::npos;
      for (const auto& o : ops) k = k || o.second.find(ch) != std::string::npos;
      return k;
    };
    std::string batch, contract, aonly, bonly;
    for (char ch : la) {
      if (lb.find(ch) == std::string::npos) aonly += ch;
      else (kept(ch) ? batch : contract) += ch;
    }
    for (char ch : lb)
      if (la.find(ch) == std::string::npos) bonly += ch;
    auto perm_of = [](const std::string& from, const std::string& to) {
      std::vector<int64_t> p;
      for (char ch : to) p.push_back(static_cast<int64_t>(from.find(ch)));
      return p;
    };
    auto size_of = [](const V& v, const std::string& letters, char ch) { return v->sizes[letters.find(ch)]; };
    auto prod = [&](const V& v, const std::string& letters, const std::string& which) {
      SymInt n = 1;
      for (char ch : which) n = n * size_of(v, letters, ch);
      return n;
    };
    const V ap = im.permute(a, perm_of(la, batch + aonly + contract));
    const V bp = im.permute(b, perm_of(lb, batch + contract + bonly));
    const SymInt nb = prod(a, la, batch);
    const V am = im.reshape(ap, {nb, prod(a, la, aonly), prod(a, la, contract)});
    const V bm = im.reshape(bp, {nb, prod(b, lb, contract), prod(b, lb, bonly)});
    SymShape rs;
    for (char ch : batch) rs.push_back(size_of(a, la, ch));
    for (char ch : aonly) rs.push_back(size_of(a, la, ch));
    for (char ch : bonly) rs.push_back(size_of(b, lb, ch));
    ops.insert(ops.begin(), {im.reshape(im.cast(im.op(O::matmul, {am, bm}), t), rs), batch + aonly + bonly});
  }
  const auto& [v, letters] = ops[0];
  KILN_CHECK(letters.size() == out.size(), "the output letters '", out, "' do not match the operands");
  std::vector<int64_t> p;
  for (char ch : out) {
    KILN_CHECK(letters.find(ch) != std::string::npos, "output letter '", ch, "' is not in any operand");
    p.push_back(static_cast<int64_t>(letters.find(ch)));
  }
  return one(im.permute(v, p));
}

// A scatter's reduction attribute as the op that does it: 'none' writes each update (ONNX
// requires the indices to be distinct), 'add' adds, 'mul', 'max' and 'min' combine.
// Shared by ScatterElements and ScatterND.
V scatter_by_reduction(NodeCtx& c, const V& data, const V& index, const V& updates, int64_t axis) {
  Importer& im = c.im;
  const std::string red = c.s("reduction", "none");
  const V u = im.cast(updates, data->dtype);
  if (red == "none") return im.op(O::scatter, {data, index, u}, Attrs{axis});
  if (red == "add") return im.op(O::scatter_add, {data, index, u}, Attrs{axis});
  static const std::map<std::string, std::string> reduce{{"mul", "prod"}, {"max", "amax"}, {"min", "amin"}};
  const auto it = reduce.find(red);
  KILN_CHECK(it != reduce.end(), "reduction '", red, "' is not supported (it has none, add, mul, max and min)");
  return im.op(O::scatter_reduce, {data, index, u}, Attrs{axis, it->second});
}

// ScatterElements (and Scatter, its older name): one scatter op along the axis.
std::vector<V> scatter_elements(NodeCtx& c) {
  Importer& im = c.im;
  const V& x = c.input(0);
  const V& idx = c.input(1);
  const V& upd = c.input(2);
  const int64_t r = rank_of(x);
  KILN_CHECK(rank_of(idx) == r && rank_of(upd) == r, "data, indices and updates must have one rank");
  const int64_t axis = norm_axis(c.i("axis", 0), r);
  for (int64_t d = 0; d < r; ++d)
    KILN_CHECK(d == axis || x->sizes[static_cast<size_t>(d)] == idx->sizes[static_cast<size_t>(d)],
               "indices smaller than data outside the axis are not supported");
  const int64_t n = static_dim(im, x, axis, "ScatterElements");
  return one(scatter_by_reduction(c, x, wrap_index(im, idx, n), upd, axis));
}

// ScatterND: data [r dims], indices [.., k] (k <= r), updates [indices' leading dims.., data's
// dims from k]. Data's first k dims flatten into one dim of n positions and each index tuple
// into its position there (negative indices counting from the end of their dim); then one
// scatter along that dim of the m update rows.
std::vector<V> scatter_nd(NodeCtx& c) {
  Importer& im = c.im;
  const V& x = c.input(0);
  const V& idx = c.input(1);
  const V& upd = c.input(2);
  const int64_t r = rank_of(x), q = rank_of(idx);
  KILN_CHECK(q >= 1, "indices must have at least one dim");
  const int64_t k = static_dim(im, idx, q - 1, "ScatterND");
  KILN_CHECK(k >= 1 && k <= r, "the indices' last dim (", k, ") must be between 1 and data's rank (", r, ")");
  KILN_CHECK(rank_of(upd) == q - 1 + r - k, "updates must have rank ", q - 1 + r - k, " (indices' leading dims and data's last ",
             r - k, "), got ", rank_of(upd));
  std::vector<double> dims, strides(static_cast<size_t>(k));
  int64_t n = 1, m = 1;
  for (int64_t d = 0; d < k; ++d) dims.push_back(static_cast<double>(static_dim(im, x, d, "ScatterND")));
  for (int64_t d = k; d-- > 0;) {
    strides[static_cast<size_t>(d)] = static_cast<double>(n);
    n *= static_cast<int64_t>(dims[static_cast<size_t>(d)]);
  }
  for (int64_t d = 0; d + 1 < q; ++d) m *= static_dim(im, idx, d, "ScatterND");
  const V i = im.reshape(im.cast(idx, DType::i64), SymShape{m, k});
  const V size = im.constant(make_tensor(DType::i64, {k}, dims));
  const V negative = im.op(O::lt, {i, im.scalar(0, DType::i64)});
  const V wrapped = where(im, negative, im.add(i, size), i);
  const V pos = im.reduce(O::sum, im.mul(wrapped, im.constant(make_tensor(DType::i64, {k}, strides))), {1}, false);
  SymShape rest(x->sizes.begin() + k, x->sizes.end()), flat{n}, lined{m}, rows{m};
  flat.insert(flat.end(), rest.begin(), rest.end());
  lined.resize(static_cast<size_t>(1 + r - k), SymInt(1));
  rows.insert(rows.end(), rest.begin(), rest.end());
  const V index = im.op(O::expand, {im.reshape(pos, lined)}, Attrs{rows});
  const V y = scatter_by_reduction(c, im.reshape(x, flat), index, im.reshape(upd, rows), 0);
  return one(im.reshape(y, x->sizes));
}

std::vector<V> matmul_op(NodeCtx& c) { return one(c.im.op(O::matmul, {c.input(0), c.input(1)})); }

std::map<std::string, Converter> build() {
  std::map<std::string, Converter> m;
  const std::pair<const char*, O> unaries[] = {
      {"Abs", O::abs},       {"Neg", O::neg},         {"Exp", O::exp},   {"Log", O::log},
      {"Sqrt", O::sqrt},     {"Reciprocal", O::reciprocal}, {"Sin", O::sin}, {"Cos", O::cos},
      {"Tanh", O::tanh},     {"Sigmoid", O::sigmoid}, {"Relu", O::relu}, {"Erf", O::erf},
      {"Floor", O::floor},   {"Ceil", O::ceil},       {"Round", O::round}, {"Sign", O::sign},
      {"Not", O::logical_not}, {"IsNaN", O::isnan},
  };
  for (const auto& [name, op] : unaries) m[name] = unary(op);
  const std::pair<const char*, O> binaries[] = {
      {"Add", O::add}, {"Sub", O::sub}, {"Mul", O::mul}, {"Pow", O::pow},
  };
  for (const auto& [name, op] : binaries) m[name] = binary(op);
  const std::pair<const char*, O> compares[] = {
      {"Equal", O::eq}, {"Less", O::lt}, {"LessOrEqual", O::le}, {"Greater", O::gt}, {"GreaterOrEqual", O::ge},
      {"And", O::logical_and}, {"Or", O::logical_or}, {"Xor", O::ne},
  };
  for (const auto& [name, op] : compares) m[name] = binary(op, false);
  m["Div"] = div_op;
  m["Mod"] = mod_op;
  m["Max"] = [](NodeCtx& c) { return variadic(c, O::maximum); };
  m["Min"] = [](NodeCtx& c) { return variadic(c, O::minimum); };
  m["Sum"] = [](NodeCtx& c) { return variadic(c, O::add); };
  m["Mean"] = mean_op;
  m["Clip"] = clip_op;
  m["Cast"] = cast_op;
  m["CastLike"] = [](NodeCtx& c) { return one(c.im.cast(c.input(0), c.input(1)->dtype)); };
  m["Where"] = where_op;
  m["Elu"] = elu;
  m["Selu"] = selu;
  m["LeakyRelu"] = leaky_relu;
  m["PRelu"] = prelu;
  m["ThresholdedRelu"] = thresholded_relu;
  m["HardSigmoid"] = hard_sigmoid;
  m["HardSwish"] = hard_swish;
  m["Softplus"] = [](NodeCtx& c) { return one(softplus(c.im, c.input(0))); };
  m["Softsign"] = [](NodeCtx& c) {
    const V& x = c.input(0);
    return one(c.im.div(x, c.im.add(c.im.op(O::abs, {x}), sc(c, 1, x))));
  };
  m["Mish"] = [](NodeCtx& c) {
    const V& x = c.input(0);
    return one(c.im.mul(x, c.im.op(O::tanh, {softplus(c.im, x)})));
  };
  m["Celu"] = celu;
  for (const char* t : {"Atan", "Asin", "Acos"})
    m[t] = [name = std::string(t)](NodeCtx& c) { return inverse_trig(c, name); };
  for (const char* w : {"HannWindow", "HammingWindow", "BlackmanWindow"})
    m[w] = [name = std::string(w)](NodeCtx& c) { return window_fn(c, name); };
  m["Shrink"] = shrink;
  m["IsInf"] = is_inf;
  for (const char* h : {"Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Tan"})
    m[h] = [name = std::string(h)](NodeCtx& c) { return hyperbolic(c, name); };
  for (const char* r : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare",
                        "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp"})
    m[r] = [name = std::string(r)](NodeCtx& c) { return reduce_op(c, name); };
  m["ArgMax"] = [](NodeCtx& c) { return arg_op(c, O::argmax); };
  m["ArgMin"] = [](NodeCtx& c) { return arg_op(c, O::argmin); };
  m["Reshape"] = reshape_op;
  m["Flatten"] = flatten_op;
  m["Transpose"] = transpose_op;
  m["Squeeze"] = squeeze_op;
  m["Unsqueeze"] = unsqueeze_op;
  m["Expand"] = expand_op;
  m["Concat"] = concat_op;
  m["Split"] = split_op;
  m["TopK"] = top_k;
  m["Slice"] = slice_op;
  m["Gather"] = gather_op;
  m["Shape"] = shape_op;
  m["Size"] = size_op;
  m["Tile"] = tile_op;
  m["Pad"] = pad_op;
  m["Constant"] = constant_op;
  m["ConstantOfShape"] = constant_of_shape;
  m["Range"] = range_op;
  m["Identity"] = identity;
  m["Dropout"] = dropout;
  m["EyeLike"] = eye_like;
  m["Trilu"] = trilu;
  m["OneHot"] = one_hot;
  m["CumSum"] = cumsum;
  m["DepthToSpace"] = [](NodeCtx& c) { return depth_to_space(c, true); };
  m["SpaceToDepth"] = [](NodeCtx& c) { return depth_to_space(c, false); };
  m["MatMul"] = matmul_op;
  m["GatherElements"] = gather_elements;
  m["NegativeLogLikelihoodLoss"] = nll_loss;
  m["SoftmaxCrossEntropyLoss"] = softmax_cross_entropy;
  m["Gemm"] = gemm;
  m["Conv"] = conv;
  m["ConvTranspose"] = conv_transpose;
  m["Resize"] = resize;
  m["LRN"] = lrn;
  m["Einsum"] = einsum;
  m["ScatterElements"] = scatter_elements;
  m["ScatterND"] = scatter_nd;
  m["Scatter"] = scatter_elements;
  m["MaxPool"] = [](NodeCtx& c) { return pool(c, true); };
  m["AveragePool"] = [](NodeCtx& c) { return pool(c, false); };
  m["GlobalMaxPool"] = [](NodeCtx& c) { return global_pool(c, true); };
  m["GlobalAveragePool"] = [](NodeCtx& c) { return global_pool(c, false); };
  for (const char* s : {"Softmax", "LogSoftmax", "Hardmax"})
    m[s] = [name = std::string(s)](NodeCtx& c) { return softmax_like(c, name); };
  m["LayerNormalization"] = layer_norm;
  m["BatchNormalization"] = batch_norm;
  m["InstanceNormalization"] = instance_norm;
  m["LpNormalization"] = lp_norm;
  m["MeanVarianceNormalization"] = mvn;
  return m;
}

const std::map<std::string, Converter>& table() {
  static const std::map<std::string, Converter> t = build();
  return t;
}

}  // namespace

const Converter* find_converter(const std::string& op_type) {
  const auto it = table().find(op_type);
  return it == table().end() ? nullptr : &it->second;
}

std::vector<std::string> supported_ops() {
  std::vector<std::string> out;
  for (const auto& [k, v] : table()) out.push_back(k);
  return out;
}

}  // namespace kiln::onnx::detail
