// Derivative rules of the op table: for each differentiable primitive, the nodes that compute
// its inputs' gradients from its output's (a vector-Jacobian product). Each rule is written
// once over graph nodes, so eager autograd, traced backward passes and whole-graph
// differentiation (sdk/autodiff) all use it, and the gradients fuse like any other nodes.
// Composites without a rule here are differentiated through their decompositions.
#include <cmath>
#include <numbers>

#include "builder.h"
#include "kiln/graph/error.h"

namespace kiln {
// The browser's build differentiates nothing (sdk/autodiff is not in it): it has no rules, and
// its module is 32 KB smaller for it (issue 29's size limit).
#ifndef __EMSCRIPTEN__
namespace {

using graph_detail::Builder;
using graph_detail::iota;

constexpr NodeId kNone = -1;

// Builder with what the rules share: the context's values and scalars of the gradient's dtype.
struct Rule : Builder {
  const GradContext& c;
  Rule(Graph& g, const GradContext& ctx) : Builder{g}, c(ctx) {}

  NodeId x(size_t i = 0) const { return c.inputs[i]; }
  NodeId y() const { return c.output; }
  NodeId gy() const { return c.grad; }
  DType t() const { return meta(c.grad).dtype; }
  NodeId k(double v) { return scalar(v, t()); }
  NodeId mul(NodeId a, NodeId b) { return add(OpId::mul, {a, b}); }
  NodeId div(NodeId a, NodeId b) { return add(OpId::div, {a, b}); }
  NodeId sub(NodeId a, NodeId b) { return add(OpId::sub, {a, b}); }
  NodeId plus(NodeId a, NodeId b) { return add(OpId::add, {a, b}); }
  NodeId neg(NodeId a) { return add(OpId::neg, {a}); }
  NodeId where(NodeId cond, NodeId a, NodeId b) { return add(OpId::where, {cond, a, b}); }
  NodeId zeros(const SymShape& shape) { return add(OpId::full, {}, {shape, 0.0, t()}); }
  // The gradient where `cond` holds, else 0.
  NodeId keep_where(NodeId cond, NodeId v) { return where(cond, v, k(0.0)); }
  NodeId reshape(NodeId v, const SymShape& shape) { return add(OpId::reshape, {v}, {shape}); }
  NodeId cast_to_grad(NodeId v) { return cast(v, t()); }
};

// ---- pointwise -----------------------------------------------------------------------

std::vector<NodeId> grad_unary(Graph& g, const GradContext& c) {
  Rule r(g, c);
  const NodeId x = r.cast_to_grad(r.x()), y = r.y(), gy = r.gy();
  switch (c.op) {
    case OpId::neg: return {r.neg(gy)};
    case OpId::abs: return {r.mul(gy, r.add(OpId::sign, {x}))};
    case OpId::exp: return {r.mul(gy, y)};
    case OpId::log: return {r.div(gy, x)};
    case OpId::sqrt: return {r.div(gy, r.mul(y, r.k(2.0)))};
    case OpId::rsqrt: return {r.mul(gy, r.mul(r.mul(r.mul(y, y), y), r.k(-0.5)))};
    case OpId::reciprocal: return {r.neg(r.mul(gy, r.mul(y, y)))};
    case OpId::sin: return {r.mul(gy, r.add(OpId::cos, {x}))};
    case OpId::cos: return {r.neg(r.mul(gy, r.add(OpId::sin, {x})))};
    case OpId::tanh: return {r.mul(gy, r.sub(r.k(1.0), r.mul(y, y)))};
    case OpId::sigmoid: return {r.mul(gy, r.mul(y, r.sub(r.k(1.0), y)))};
    case OpId::relu: return {r.keep_where(r.add(OpId::gt, {r.x(), r.scalar(0.0, r.meta(r.x()).dtype)}), gy)};
    case OpId::silu: {
      const NodeId s = r.add(OpId::sigmoid, {x});
      return {r.mul(gy, r.mul(s, r.plus(r.k(1.0), r.mul(x, r.sub(r.k(1.0), s)))))};
    }
    case OpId::erf:
      return {r.mul(gy, r.mul(r.k(2.0 / std::sqrt(std::numbers::pi)), r.add(OpId::exp, {r.neg(r.mul(x, x))})))};
    case OpId::gelu: {
      if (c.attrs.s(0) == "tanh") {
        // y = x/2 (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3)
        const double a = std::sqrt(2.0 / std::numbers::pi), b = 0.044715;
        const NodeId x2 = r.mul(x, x);
        const NodeId u = r.mul(r.k(a), r.plus(x, r.mul(r.k(b), r.mul(x2, x))));
        const NodeId th = r.add(OpId::tanh, {u});
        const NodeId du = r.mul(r.k(a), r.plus(r.k(1.0), r.mul(r.k(3.0 * b), x2)));
        const NodeId left = r.mul(r.k(0.5), r.plus(r.k(1.0), th));
        const NodeId right = r.mul(r.mul(r.k(0.5), x), r.mul(r.sub(r.k(1.0), r.mul(th, th)), du));
        return {r.mul(gy, r.plus(left, right))};
      }
      // y = x Phi(x): Phi(x) + x phi(x)
      const NodeId cdf = r.mul(r.k(0.5), r.plus(r.k(1.0), r.add(OpId::erf, {r.mul(x, r.k(std::numbers::sqrt2 / 2))})));
      const NodeId pdf = r.mul(r.k(1.0 / std::sqrt(2.0 * std::numbers::pi)),
                               r.add(OpId::exp, {r.mul(r.k(-0.5), r.mul(x, x))}));
      return {r.mul(gy, r.plus(cdf, r.mul(x, pdf)))};
    }
    case OpId::cast: return {gy};
    default: return {kNone};  // floor, ceil, round, sign: zero almost everywhere
  }
}

std::vector<NodeId> grad_binary(Graph& g, const GradContext& c) {
  Rule r(g, c);
  const NodeId gy = r.gy();
  const NodeId a = r.cast_to_grad(r.x(0)), b = r.cast_to_grad(r.x(1));
  switch (c.op) {
    case OpId::add: return {gy, gy};
    case OpId::sub: return {gy, r.neg(gy)};
    case OpId::mul: return {r.mul(gy, b), r.mul(gy, a)};
    case OpId::div: {
      const NodeId q = r.div(gy, b);
      return {q, r.neg(r.mul(q, r.y()))};
    }
    case OpId::pow: {
      // As torch: no gradient through an exponent of 0, nor to the exponent where the base is 0.
      const NodeId zero = r.k(0.0);
      const NodeId ga = r.mul(gy, r.mul(b, r.add(OpId::pow, {a, r.sub(b, r.k(1.0))})));
      const NodeId gb = r.mul(gy, r.mul(r.y(), r.add(OpId::log, {a})));
      return {r.where(r.add(OpId::eq, {b, zero}), zero, ga),
              r.where(r.add(OpId::logical_and, {r.add(OpId::eq, {a, zero}), r.add(OpId::ge, {b, zero})}), zero, gb)};
    }
    case OpId::maximum:
    case OpId::minimum: {
      // The larger (smaller) operand takes the gradient; a tie splits it, as torch does.
      const OpId wins = c.op == OpId::maximum ? OpId::gt : OpId::lt;
      const NodeId half = r.mul(gy, r.k(0.5));
      const NodeId tie = r.add(OpId::eq, {a, b});
      return {r.where(r.add(wins, {a, b}), gy, r.keep_where(tie, half)),
              r.where(r.add(wins, {b, a}), gy, r.keep_where(tie, half))};
    }
    default: return {kNone, kNone};  // comparisons and logical ops
  }
}

std::vector<NodeId> grad_where(Graph& g, const GradContext& c) {
  Rule r(g, c);
  return {kNone, r.keep_where(r.x(0), r.gy()), r.where(r.x(0), r.k(0.0), r.gy())};
}

// ---- reductions ----------------------------------------------------------------------

// The reduced dims of x (all when `dims` is empty).
std::vector<int64_t> reduced_dims(const TensorMeta& x, const std::vector<int64_t>& dims) {
  return dims.empty() ? iota(0, x.rank()) : dims;
}

// A reduction's output (or its gradient) brought back to x's shape: the reduced dims put
// back as 1s when they were dropped, then expanded.
NodeId expand_back(Rule& r, NodeId v, const TensorMeta& x, const std::vector<int64_t>& dims, bool keepdim,
                   bool expand = true) {
  const std::vector<int64_t> red = reduced_dims(x, dims);
  SymShape kept = x.sizes;
  for (int64_t d : red) kept[static_cast<size_t>(d)] = 1;
  if (!keepdim) v = r.reshape(v, kept);
  return expand ? r.add(OpId::expand, {v}, {x.sizes}) : v;
}

// The number of elements reduced, as a 0-d tensor of the gradient's dtype (a count over a
// symbolic size is a sum of ones, so the gradient stays shape-generic).
NodeId reduced_count(Rule& r, const TensorMeta& x, const std::vector<int64_t>& dims) {
  SymInt n = 1;
  SymShape shape;
  for (int64_t d : reduced_dims(x, dims)) {
    n = n * x.sizes[static_cast<size_t>(d)];
    shape.push_back(x.sizes[static_cast<size_t>(d)]);
  }
  if (n.is_static()) return r.k(static_cast<double>(n.hint()));
  return r.reduce(OpId::sum, r.add(OpId::full, {}, {shape, 1.0, r.t()}), {}, false);
}

std::vector<NodeId> grad_reduction(Graph& g, const GradContext& c) {
  Rule r(g, c);
  const TensorMeta xm = r.meta(r.x());
  const std::vector<int64_t>& dims = c.attrs.ints(0);
  const bool keepdim = c.attrs.b(1);
  const NodeId x = r.cast_to_grad(r.x());
  const NodeId gx = expand_back(r, r.gy(), xm, dims, keepdim);
  switch (c.op) {
    case OpId::sum: return {gx};
    case OpId::mean: return {r.div(gx, reduced_count(r, xm, dims))};
    case OpId::var: {
      const std::vector<int64_t> red = reduced_dims(xm, dims);
      const NodeId centred = r.sub(x, r.reduce(OpId::mean, x, red, true));
      const NodeId n = r.sub(reduced_count(r, xm, dims), r.k(static_cast<double>(c.attrs.i(2))));
      return {r.mul(gx, r.div(r.mul(centred, r.k(2.0)), n))};
    }
    case OpId::max:
    case OpId::min: {
      // Spread evenly over the elements that attain the extreme, as torch's amax/amin.
      const NodeId hit = r.add(OpId::eq, {x, expand_back(r, r.cast_to_grad(r.y()), xm, dims, keepdim)});
      const NodeId count = r.reduce(OpId::sum, r.cast_to_grad(hit), reduced_dims(xm, dims), true);
      return {r.keep_where(hit, r.div(gx, count))};
    }
    case OpId::prod: {
      // The product of the other elements: exclusive running products from both ends (exact
      // where elements are 0, unlike y / x).
      const std::vector<int64_t> red = reduced_dims(xm, dims);
      std::vector<int64_t> perm, inverse(static_cast<size_t>(xm.rank()));
      SymShape flat;
      for (int64_t d = 0; d < xm.rank(); ++d)
        if (!std::binary_search(red.begin(), red.end(), d)) {
          perm.push_back(d);
          flat.push_back(xm.sizes[static_cast<size_t>(d)]);
        }
      SymInt n = 1;
      SymShape permuted;
      for (int64_t d : perm) permuted.push_back(xm.sizes[static_cast<size_t>(d)]);
      for (int64_t d : red) {
        perm.push_back(d);
        n = n * xm.sizes[static_cast<size_t>(d)];
        permuted.push_back(xm.sizes[static_cast<size_t>(d)]);
      }
      flat.push_back(n);
      for (size_t i = 0; i < perm.size(); ++i) inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
      const NodeId z = r.reshape(r.add(OpId::permute, {x}, {perm}), flat);
      const int64_t last = static_cast<int64_t>(flat.size()) - 1;
      const NodeId before = r.add(OpId::cumprod, {z}, {last, true, false});
      const NodeId after = r.add(OpId::cumprod, {z}, {last, true, true});
      const NodeId others = r.add(OpId::permute, {r.reshape(r.mul(before, after), permuted)}, {inverse});
      return {r.mul(gx, others)};
    }
    case OpId::logsumexp:
      return {r.mul(gx, r.add(OpId::exp, {r.sub(x, expand_back(r, r.cast_to_grad(r.y()), xm, dims, keepdim))}))};
    default: return {kNone};  // argmax, argmin
  }
}

// ---- layout --------------------------------------------------------------------------

// The gradient of a strided slice of dim d (`count` elements from `start`, `step` apart, of a
// dim of size n): g's elements at their places, zeros between and around them.
NodeId place_strided(Rule& r, NodeId v, int64_t d, int64_t start, int64_t step, int64_t n) {
  const TensorMeta vm = r.meta(v);
  const int64_t count = vm.sizes[static_cast<size_t>(d)].hint();
  SymShape full = vm.sizes;
  full[static_cast<size_t>(d)] = n;
  if (count == 0) return r.zeros(full);
  auto zeros_along = [&](int64_t size) {
    SymShape s = vm.sizes;
    s[static_cast<size_t>(d)] = size;
    return r.zeros(s);
  };
  NodeId body = v;
  int64_t span = count;
  if (step > 1) {
    // [.., count, ..] -> [.., count, step, ..] (zeros after each) -> [.., count * step, ..], cut after the last.
    const NodeId col = r.add(OpId::unsqueeze, {v}, {d + 1});
    SymShape gap = r.meta(col).sizes;
    gap[static_cast<size_t>(d + 1)] = step - 1;
    const NodeId spread = r.add(OpId::cat, {col, r.zeros(gap)}, {d + 1});
    SymShape joined = vm.sizes;
    joined[static_cast<size_t>(d)] = count * step;
    span = (count - 1) * step + 1;
    body = r.add(OpId::slice, {r.reshape(spread, joined)}, {d, int64_t{0}, span, int64_t{1}});
  }
  std::vector<NodeId> parts;
  if (start > 0) parts.push_back(zeros_along(start));
  parts.push_back(body);
  if (n - start - span > 0) parts.push_back(zeros_along(n - start - span));
  return parts.size() == 1 ? body : r.add(OpId::cat, std::move(parts), {d});
}

int64_t static_size(Rule& r, const SymInt& s, std::string_view why) {
  return s.is_static() ? s.hint() : r.g.shapes().specialize(s, why);
}

// zeros of `sizes` (g's dtype) with g added at the positions index gives along dim.
NodeId scatter_into_zeros(Rule& r, const SymShape& sizes, int64_t dim, NodeId index, NodeId g) {
  const NodeId zeros = r.add(OpId::full, {}, {sizes, 0.0, r.meta(g).dtype});
  return r.add(OpId::scatter_add, {zeros, index, g}, {dim});
}

std::vector<NodeId> grad_layout(Graph& g, const GradContext& c) {
  Rule r(g, c);
  const TensorMeta xm = r.meta(r.x());
  const NodeId gy = r.gy();
  switch (c.op) {
    case OpId::reshape:
    case OpId::squeeze:
    case OpId::unsqueeze:
    case OpId::flatten: return {r.reshape(gy, xm.sizes)};
    case OpId::expand: return {gy};  // summed back to x's shape by the caller
    case OpId::permute: {
      const std::vector<int64_t>& p = c.attrs.ints(0);
      std::vector<int64_t> inverse(p.size());
      for (size_t i = 0; i < p.size(); ++i) inverse[static_cast<size_t>(p[i])] = static_cast<int64_t>(i);
      return {r.add(OpId::permute, {gy}, {inverse})};
    }
    case OpId::transpose: return {r.add(OpId::transpose, {gy}, {c.attrs.i(0), c.attrs.i(1)})};
    case OpId::slice: {
      const int64_t d = c.attrs.i(0);
      const SymInt& size = xm.sizes[static_cast<size_t>(d)];
      if (r.meta(r.y()).sizes[static_cast<size_t>(d)] == size) return {gy};  // the whole dim
      const int64_t n = static_size(r, size, "slice (gradient)");
      const int64_t start = std::clamp(c.attrs.i(1) < 0 ? c.attrs.i(1) + n : c.attrs.i(1), int64_t{0}, n);
      return {place_strided(r, gy, d, start, c.attrs.i(3), n)};
    }
    case OpId::unfold: {
      // Each window position k adds its column back at k, k + step, ...: the windows overlap
      // where step < size.
      const int64_t d = c.attrs.i(0), size = c.attrs.i(1), step = c.attrs.i(2);
      const int64_t n = static_size(r, xm.sizes[static_cast<size_t>(d)], "unfold (gradient)");
      const int64_t last = r.meta(gy).rank() - 1;
      NodeId sum = kNone;
      for (int64_t k = 0; k < size; ++k) {
        const NodeId col = r.add(OpId::squeeze, {r.add(OpId::slice, {gy}, {last, k, k + 1, int64_t{1}})},
                                 {std::vector<int64_t>{last}});
        const NodeId placed = place_strided(r, col, d, k, step, n);
        sum = sum == kNone ? placed : r.plus(sum, placed);
      }
      return {sum};
    }
    case OpId::cat: {
      const int64_t d = c.attrs.i(0);
      std::vector<NodeId> out;
      int64_t offset = 0;
      for (NodeId in : c.inputs) {
        const int64_t n = static_size(r, r.meta(in).sizes[static_cast<size_t>(d)], "cat (gradient)");
        out.push_back(r.add(OpId::slice, {gy}, {d, offset, offset + n, int64_t{1}}));
        offset += n;
      }
      return out;
    }
    case OpId::pad: {
      // Padding's gradient crops what it added and pads back what it cropped.
      std::vector<int64_t> undo = c.attrs.ints(0);
      for (int64_t& p : undo) p = -p;
      return {r.add(OpId::pad, {gy}, {undo, 0.0})};
    }
    case OpId::index_select: {
      // Each row of g added into the row it came from: a scatter_add along dim of g over zeros,
      // with the 1-D index spread over g's other dims.
      const int64_t d = c.attrs.i(0);
      const TensorMeta gm = r.meta(gy);
      std::vector<SymInt> lined(static_cast<size_t>(gm.rank()), SymInt(1));
      lined[static_cast<size_t>(d)] = gm.sizes[static_cast<size_t>(d)];
      const NodeId index = r.add(OpId::expand, {r.reshape(r.x(1), lined)}, {gm.sizes});
      return {scatter_into_zeros(r, xm.sizes, d, index, gy), kNone};
    }
    case OpId::gather:
      // x[.., s, ..] gets the sum of g where index is s.
      return {scatter_into_zeros(r, xm.sizes, c.attrs.i(0), r.x(1), gy), kNone};
    default: return {kNone};
  }
}

// scatter_reduce, as torch's scatter_reduce_backward. amax/amin: g goes to x and to the src
// values equal to the result, shared among the ties. prod: g times the product of the other
// terms: the result over the term, or where the term is 0 (x's zeros, a src zero alone in its
// element) the product taken again with it as 1; an element with two zeros passes 0 to all.
std::vector<NodeId> grad_scatter_reduce(Rule& r, int64_t d) {
  const NodeId x = r.x(), index = r.x(1), src = r.x(2), y = r.y(), gy = r.gy();
  const SymShape& sizes = r.meta(x).sizes;
  auto gather = [&](NodeId v) { return r.add(OpId::gather, {v, index}, {d}); };
  auto as_t = [&](NodeId b) { return r.cast_to_grad(b); };
  if (r.c.attrs.s(1) != "prod") {
    const NodeId x_hit = r.add(OpId::eq, {x, y}), src_hit = r.add(OpId::eq, {src, gather(y)});
    const NodeId count = r.plus(as_t(x_hit), scatter_into_zeros(r, sizes, d, index, as_t(src_hit)));
    const NodeId share = r.div(gy, count);
    return {r.keep_where(x_hit, share), kNone, r.keep_where(src_hit, gather(share))};
  }
  const NodeId one = r.scalar(1.0, r.meta(x).dtype);
  const NodeId x_ones = r.where(r.add(OpId::eq, {x, r.scalar(0.0, r.meta(x).dtype)}), one, x);
  const NodeId others_of_x = r.add(OpId::scatter_reduce, {x_ones, index, src}, r.c.attrs);
  const NodeId gx = r.div(r.mul(gy, others_of_x), x_ones);
  const NodeId src_zero = r.add(OpId::eq, {src, r.scalar(0.0, r.meta(src).dtype)});
  const NodeId zeros_there = gather(scatter_into_zeros(r, sizes, d, index, as_t(src_zero)));
  const NodeId single_zero = r.add(OpId::logical_and, {src_zero, r.add(OpId::eq, {zeros_there, r.k(1.0)})});
  const NodeId others_of_zero =
      r.add(OpId::scatter_reduce, {x, index, r.where(single_zero, one, src)}, r.c.attrs);
  const NodeId gsrc = r.where(single_zero, gather(r.mul(gy, others_of_zero)),
                              r.div(gather(r.mul(gy, y)), r.where(src_zero, one, src)));
  return {gx, kNone, gsrc};
}

// scatter_add: x's gradient passes through; scatter: it does where nothing overwrote x (g with
// zeros scattered over it). src's is g read where src went (a gather).
std::vector<NodeId> grad_scatter(Graph& g, const GradContext& c) {
  Rule r(g, c);
  const int64_t d = c.attrs.i(0);
  if (c.op == OpId::scatter_reduce) return grad_scatter_reduce(r, d);
  NodeId gx = r.gy();
  if (c.op == OpId::scatter) {
    const NodeId zeros = r.add(OpId::full, {}, {r.meta(r.x(1)).sizes, 0.0, r.t()});
    gx = r.add(OpId::scatter, {gx, r.x(1), zeros}, {d});
  }
  return {gx, kNone, r.add(OpId::gather, {r.gy(), r.x(1)}, {d})};
}

// ---- composites with their own rules -------------------------------------------------

// A convolution's gradients are convolutions too: x's the transposed convolution of gy by w
// (convolution_input_grad), w's the correlation of x with gy (convolution_weight_grad), each one
// op that a target with a convolution library runs there and the others decompose; the bias's
// is gy summed over all but the channels. Its decomposition's gradient would be im2col's:
// copies of x's windows and their sum back (col2im), 26 of ResNet-50's 44 ms training step.
std::vector<NodeId> grad_convolution(Graph& g, const GradContext& c) {
  Rule r(g, c);
  const Attrs& a = c.attrs;
  // The gradient ops are linear in each operand, their gradients the other two products of the
  // same convolution: gx = input_grad(gy, w) gives gy's gradient conv(G, w) and w's
  // weight_grad(G, gy); gw = weight_grad(x, gy) gives x's input_grad(gy, G) and gy's conv(x, G).
  if (c.op == OpId::convolution_input_grad || c.op == OpId::convolution_weight_grad) {
    const bool last = a.b(5);
    const OpId forward = last ? OpId::convolution_channels_last : OpId::convolution;
    const Attrs fwd{a.ints(0), a.ints(1), a.ints(2), a.i(3)};
    auto sizes_of = [&](NodeId v) {  // x's spatial or w's kernel sizes (dims 2.., channels last 1..)
      const SymShape s = r.meta(v).sizes;
      std::vector<int64_t> out;
      for (size_t d = 0; d + 2 < s.size(); ++d) out.push_back(s[(last ? 1 : 2) + d].hint());
      return out;
    };
    const NodeId G = r.gy();
    if (c.op == OpId::convolution_input_grad) {
      const NodeId gy = r.x(0), w = r.x(1);
      return {r.add(forward, {G, w}, fwd),
              r.add(OpId::convolution_weight_grad, {G, gy}, {a.ints(0), a.ints(1), a.ints(2), a.i(3), sizes_of(w), last})};
    }
    const NodeId x = r.x(0), gy = r.x(1);
    return {r.add(OpId::convolution_input_grad, {gy, G}, {a.ints(0), a.ints(1), a.ints(2), a.i(3), sizes_of(x), last}),
            r.add(forward, {x, G}, fwd)};
  }
  const bool last = c.op == OpId::convolution_channels_last;
  const TensorMeta xm = r.meta(r.x(0)), wm = r.meta(r.x(1));
  const auto rank = xm.rank();
  const SymShape xf = last ? channels_first(xm.sizes) : xm.sizes;
  const SymShape wf = last ? channels_first(wm.sizes) : wm.sizes;
  std::vector<int64_t> spatial, kernel;
  for (int64_t d = 2; d < rank; ++d) {
    spatial.push_back(xf[static_cast<size_t>(d)].hint());
    kernel.push_back(wf[static_cast<size_t>(d)].hint());
  }
  const NodeId gx = r.add(OpId::convolution_input_grad, {r.gy(), r.x(1)}, {a.ints(0), a.ints(1), a.ints(2), a.i(3), spatial, last});
  const NodeId gw = r.add(OpId::convolution_weight_grad, {r.x(0), r.gy()}, {a.ints(0), a.ints(1), a.ints(2), a.i(3), kernel, last});
  if (c.inputs.size() < 3) return {gx, gw};
  std::vector<int64_t> dims{0};
  for (int64_t d = 1; d < rank; ++d)
    if (d != (last ? rank - 1 : 1)) dims.push_back(d);
  return {gx, gw, r.reduce(OpId::sum, r.gy(), dims, false)};
}

std::vector<NodeId> grad_softmax(Graph& g, const GradContext& c) {
  Rule r(g, c);
  const std::vector<int64_t> d{c.attrs.i(0)};
  const NodeId y = r.cast_to_grad(r.y()), gy = r.gy();
  if (c.op == OpId::softmax) {
    // y (g - sum(g y))
    return {r.mul(y, r.sub(gy, r.reduce(OpId::sum, r.mul(gy, y), d, true)))};
  }
  // log_softmax: g - exp(y) sum(g)
  return {r.sub(gy, r.mul(r.add(OpId::exp, {y}), r.reduce(OpId::sum, gy, d, true)))};
}

// ---- matmul --------------------------------------------------------------------------

std::vector<NodeId> grad_matmul(Graph& g, const GradContext& c) {
  Rule r(g, c);
  // Promote 1-D operands as numpy does (a row on the left, a column on the right), so both
  // gradients are batched 2-D products; reshape back at the end.
  const TensorMeta am = r.meta(r.x(0)), bm = r.meta(r.x(1));
  NodeId a = r.cast_to_grad(r.x(0)), b = r.cast_to_grad(r.x(1)), gy = r.gy();
  if (am.rank() == 1) {
    a = r.add(OpId::unsqueeze, {a}, {int64_t{0}});
    gy = r.add(OpId::unsqueeze, {gy}, {r.meta(gy).rank() - (bm.rank() == 1 ? 0 : 1)});
  }
  if (bm.rank() == 1) {
    b = r.add(OpId::unsqueeze, {b}, {int64_t{1}});
    gy = r.add(OpId::unsqueeze, {gy}, {r.meta(gy).rank()});
  }
  auto swap_last = [&](NodeId v) {
    const int64_t rk = r.meta(v).rank();
    return r.add(OpId::transpose, {v}, {rk - 2, rk - 1});
  };
  NodeId ga = -1, gb = -1;
  const TensorMeta a2 = r.meta(a), g2 = r.meta(gy);
  // An operand shared by every batch element: 2-D, or batch dims all of size 1 (a convolution's
  // weight as its decomposition multiplies the windows by it).
  auto shared = [](const TensorMeta& m) {
    bool s = m.rank() >= 2;
    for (int64_t d = 0; d + 2 < m.rank(); ++d) s = s && m.sizes[static_cast<size_t>(d)] == 1;
    return s;
  };
  const bool shared_b = shared(bm);
  const int64_t rg = g2.rank();
  // a shared and b batched alike with the result (w @ windows[n]): both gradients are products
  // with the batch folded in, not a product per batch element: a's over K (gy's rows laid side by
  // side against b's columns), b's as (gy[n]^T @ a)^T with the batch folded into gy^T's rows.
  bool batched_b = shared(am) && bm.rank() == rg && rg > 2 && !shared_b;
  for (int64_t d = 0; batched_b && d + 2 < rg; ++d) batched_b = bm.sizes[static_cast<size_t>(d)] == g2.sizes[static_cast<size_t>(d)];
  if (batched_b) {
    SymInt batch = 1;
    for (int64_t d = 0; d + 2 < rg; ++d) batch = batch * g2.sizes[static_cast<size_t>(d)];
    const SymInt& m = g2.sizes[static_cast<size_t>(rg - 2)];
    const SymInt& n = g2.sizes[static_cast<size_t>(rg - 1)];
    const SymInt& k = bm.sizes[static_cast<size_t>(rg - 2)];
    std::vector<int64_t> rows_first = iota(0, rg - 2);  // [m, batch..., n]
    rows_first.insert(rows_first.begin(), rg - 2);
    rows_first.push_back(rg - 1);
    std::vector<int64_t> columns_first = iota(0, rg - 2);  // [batch..., n, k]
    columns_first.push_back(rg - 1);
    columns_first.push_back(rg - 2);
    const NodeId g_wide = r.reshape(r.add(OpId::permute, {gy}, {rows_first}), {m, batch * n});
    const NodeId b_tall = r.reshape(r.add(OpId::permute, {b}, {columns_first}), {batch * n, k});
    ga = r.reshape(r.add(OpId::matmul, {g_wide, b_tall}), am.sizes);
    const NodeId g_tall = r.reshape(r.add(OpId::permute, {gy}, {columns_first}), {batch * n, m});
    const NodeId gbt = r.add(OpId::matmul, {g_tall, r.reshape(a, {m, k})});  // [batch * n, k]
    SymShape nk(g2.sizes.begin(), g2.sizes.end() - 2);
    nk.push_back(n);
    nk.push_back(k);
    gb = swap_last(r.reshape(gbt, nk));
  } else {
    ga = r.add(OpId::matmul, {gy, swap_last(b)});
  }
  if (gb < 0 && shared_b && a2.rank() > 2) {
    // A weight's gradient over batched rows (a linear layer's): the batch dims fold into K,
    // one [K, M*batch] @ [M*batch, N] product, instead of a product per batch element summed
    // afterwards (a [batch, K, N] intermediate: 617 MB for GPT-2's LM head at batch 8).
    SymInt rows = 1;
    for (int64_t d = 0; d + 1 < a2.rank(); ++d) rows = rows * a2.sizes[static_cast<size_t>(d)];
    const NodeId flat_a = r.reshape(a, {rows, a2.sizes.back()});
    const NodeId flat_g = r.reshape(gy, {rows, g2.sizes.back()});
    gb = r.add(OpId::matmul, {swap_last(flat_a), flat_g});
    if (bm.rank() > 2) gb = r.reshape(gb, bm.sizes);
  } else if (gb < 0) {
    gb = r.add(OpId::matmul, {swap_last(a), gy});
  }
  // A 1-D operand's gradient: its batch dims summed away (sum_to cannot tell them from
  // the promoted dim), then the promoted dim dropped.
  auto to_vector = [&](NodeId v, const TensorMeta& m, int64_t kept) {
    const int64_t rk = r.meta(v).rank();
    if (rk > 2) v = r.reduce(OpId::sum, v, iota(0, rk - 2), false);
    return r.reshape(r.add(OpId::slice, {v}, {kept, int64_t{0}, int64_t{1}, int64_t{1}}), m.sizes);
  };
  if (am.rank() == 1) ga = to_vector(ga, am, 0);
  if (bm.rank() == 1) gb = to_vector(gb, bm, 1);
  return {ga, gb};
}

}  // namespace
#endif

namespace graph_detail {
GradFn derivative_rule(const OpDef& d) {
#ifdef __EMSCRIPTEN__
  (void)d;
  return nullptr;
#else
  const OpId op = d.id;
  switch (d.category) {
    case OpCategory::unary: return grad_unary;
    case OpCategory::binary: return grad_binary;
    case OpCategory::ternary: return grad_where;
    case OpCategory::reduction: return grad_reduction;
    case OpCategory::matmul: return grad_matmul;
    case OpCategory::layout: return grad_layout;
    case OpCategory::scatter: return grad_scatter;
    case OpCategory::composite:
      if (op == OpId::convolution || op == OpId::convolution_channels_last || op == OpId::convolution_input_grad ||
          op == OpId::convolution_weight_grad)
        return grad_convolution;
      if (op == OpId::max_pool) return graph_detail::grad_max_pool;
      return op == OpId::softmax || op == OpId::log_softmax ? grad_softmax : nullptr;
    case OpCategory::source:
    case OpCategory::custom: return nullptr;
  }
  return nullptr;
#endif
}
}  // namespace graph_detail

}  // namespace kiln
