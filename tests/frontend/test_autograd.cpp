// Autograd (kiln/autograd.h): every differentiable op of the op table checked against central
// finite differences in f64 (as torch's gradcheck), through the C++ API, eagerly; the engine's
// contract (accumulation, create_graph, NoGrad, detach, errors that name what is wrong); and
// gradients computed inside compiled functions against the same eager ones, across dynamic
// sizes and graph breaks.
#include "helpers.h"

#include "device_frontend_checks.h"

#include <functional>
#include <set>

using namespace kiln;
using namespace frontend_test;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

struct GradCase {
  std::string name;
  std::vector<OpId> ops;  // the op table entries this case differentiates
  std::vector<Tensor> inputs;
  Fn f;
};

Tensor f64(const Sizes& sizes, uint64_t seed, double scale = 1.0, double shift = 0.0) {
  Shape shape;
  for (int64_t s : sizes) shape.push_back(s);
  return randn(shape, DType::f64, Device::cpu(), seed) * scale + shift;
}
// Away from 0, for log, sqrt, pow's base, ...
Tensor positive(const Sizes& sizes, uint64_t seed) { return abs(f64(sizes, seed)) + 0.5; }

Tensor with_element(const Tensor& x, size_t i, double delta) {
  std::vector<double> v = x.to_vector<double>();
  v[i] += delta;
  return from_vector(v, x.shape()).to(x.dtype());
}

// loss = sum(f(inputs) * weights): gradients against central differences of the loss.
void gradcheck(const GradCase& c) {
  BOOST_TEST_CONTEXT("case " << c.name) {
    std::vector<Tensor> leaves;
    std::vector<size_t> floating;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      Tensor x = c.inputs[i].detach();
      if (is_floating(x.dtype())) {
        x.requires_grad_();
        floating.push_back(i);
      }
      leaves.push_back(x);
    }
    const Tensor y = c.f(leaves);
    BOOST_REQUIRE(y.requires_grad());
    const Tensor weights = f64(sizes_of(y), 99);
    const Tensor loss = sum(y * weights);
    std::vector<Tensor> wrt;
    for (size_t i : floating) wrt.push_back(leaves[i]);
    const std::vector<Tensor> analytic = grad({loss}, wrt, {.allow_unused = true});
    auto loss_at = [&](size_t input, size_t element, double delta) {
      NoGrad off;
      std::vector<Tensor> in = c.inputs;
      in[input] = with_element(in[input], element, delta);
      return sum(c.f(in) * weights).item<double>();
    };
    const double eps = 1e-6;
    for (size_t k = 0; k < floating.size(); ++k) {
      const size_t i = floating[k];
      const size_t n = static_cast<size_t>(c.inputs[i].numel().hint());
      const std::vector<double> a =
          analytic[k].defined() ? analytic[k].to_vector<double>() : std::vector<double>(n, 0.0);
      BOOST_REQUIRE_EQUAL(a.size(), n);
      if (analytic[k].defined()) BOOST_TEST((analytic[k].shape() == c.inputs[i].shape()));
      for (size_t e = 0; e < n; ++e) {
        const double numeric = (loss_at(i, e, eps) - loss_at(i, e, -eps)) / (2 * eps);
        BOOST_TEST(std::abs(a[e] - numeric) <= 1e-5 + 1e-4 * std::abs(numeric),
                   "input " << i << " element " << e << ": autograd " << a[e] << ", finite differences " << numeric);
      }
    }
  }
}

std::vector<GradCase> cases() {
  using O = OpId;
  std::vector<GradCase> c;
  auto unary = [&](std::string name, O op, std::function<Tensor(const Tensor&)> f, Tensor x) {
    c.push_back({std::move(name), {op}, {std::move(x)}, [f](const std::vector<Tensor>& v) { return f(v[0]); }});
  };
  const Sizes s{3, 4};
  unary("neg", O::neg, [](const Tensor& x) { return neg(x); }, f64(s, 1));
  unary("abs", O::abs, [](const Tensor& x) { return abs(x); }, f64(s, 2));
  unary("exp", O::exp, [](const Tensor& x) { return exp(x); }, f64(s, 3));
  unary("log", O::log, [](const Tensor& x) { return log(x); }, positive(s, 4));
  unary("sqrt", O::sqrt, [](const Tensor& x) { return sqrt(x); }, positive(s, 5));
  unary("rsqrt", O::rsqrt, [](const Tensor& x) { return rsqrt(x); }, positive(s, 6));
  unary("reciprocal", O::reciprocal, [](const Tensor& x) { return reciprocal(x); }, positive(s, 7));
  unary("sin", O::sin, [](const Tensor& x) { return sin(x); }, f64(s, 8));
  unary("cos", O::cos, [](const Tensor& x) { return cos(x); }, f64(s, 9));
  unary("tanh", O::tanh, [](const Tensor& x) { return tanh(x); }, f64(s, 10));
  unary("sigmoid", O::sigmoid, [](const Tensor& x) { return sigmoid(x); }, f64(s, 11));
  unary("relu", O::relu, [](const Tensor& x) { return relu(x); }, f64(s, 12));
  unary("gelu", O::gelu, [](const Tensor& x) { return gelu(x); }, f64(s, 13));
  unary("gelu tanh", O::gelu, [](const Tensor& x) { return gelu(x, "tanh"); }, f64(s, 14));
  unary("silu", O::silu, [](const Tensor& x) { return silu(x); }, f64(s, 15));
  unary("erf", O::erf, [](const Tensor& x) { return erf(x); }, f64(s, 16));
  // Piecewise constant: zero gradients (the inputs stay away from the jumps).
  unary("floor ceil round sign", O::floor,
        [](const Tensor& x) { return floor(x) + ceil(x) + round(x) + sign(x) + x; }, f64(s, 17, 1.0, 0.25));
  c.back().ops = {O::floor, O::ceil, O::round, O::sign};
  unary("cast", O::cast, [](const Tensor& x) { return cast(cast(x, DType::f32), DType::f64) * 0.0 + x * 2.0; },
        f64(s, 18));

  auto binary = [&](std::string name, O op, std::function<Tensor(const Tensor&, const Tensor&)> f, Tensor a, Tensor b) {
    c.push_back({std::move(name), {op}, {std::move(a), std::move(b)},
                 [f](const std::vector<Tensor>& v) { return f(v[0], v[1]); }});
  };
  // Broadcasting both ways: [3, 4] with [4] and with [3, 1].
  binary("add", O::add, [](const Tensor& a, const Tensor& b) { return a + b; }, f64({3, 4}, 20), f64({4}, 21));
  binary("sub", O::sub, [](const Tensor& a, const Tensor& b) { return a - b; }, f64({3, 1}, 22), f64({3, 4}, 23));
  binary("mul", O::mul, [](const Tensor& a, const Tensor& b) { return a * b; }, f64({2, 3, 4}, 24), f64({3, 1}, 25));
  binary("div", O::div, [](const Tensor& a, const Tensor& b) { return a / b; }, f64({3, 4}, 26), positive({4}, 27));
  binary("pow", O::pow, [](const Tensor& a, const Tensor& b) { return pow(a, b); }, positive({3, 4}, 28),
         f64({3, 4}, 29));
  binary("maximum", O::maximum, [](const Tensor& a, const Tensor& b) { return maximum(a, b); }, f64({3, 4}, 30),
         f64({4}, 31));
  binary("minimum", O::minimum, [](const Tensor& a, const Tensor& b) { return minimum(a, b); }, f64({3, 4}, 32),
         f64({3, 4}, 33));
  binary("scalar operands", O::mul, [](const Tensor& a, const Tensor&) { return (2.0 - a) * 3.0 / (a * a + 1.0); },
         f64({5}, 34), f64({1}, 35));
  c.push_back({"where", {O::where}, {f64({3, 4}, 36), f64({4}, 37), f64({3, 4}, 38)}, [](const std::vector<Tensor>& v) {
                 return where(v[0] > 0.0, v[1], v[2]);
               }});

  auto reduce = [&](std::string name, O op, std::function<Tensor(const Tensor&)> f, Tensor x) {
    unary(std::move(name), op, std::move(f), std::move(x));
  };
  reduce("sum", O::sum, [](const Tensor& x) { return sum(x, {0, 2}); }, f64({2, 3, 4}, 40));
  reduce("sum all, keepdim", O::sum, [](const Tensor& x) { return sum(x, {}, true); }, f64({2, 3}, 41));
  reduce("mean", O::mean, [](const Tensor& x) { return mean(x, {1}, true); }, f64({2, 3, 4}, 42));
  reduce("max", O::max, [](const Tensor& x) { return max(x, {1}); }, f64({3, 5}, 43));
  reduce("min", O::min, [](const Tensor& x) { return min(x); }, f64({3, 5}, 44));
  reduce("prod", O::prod, [](const Tensor& x) { return prod(x, {1}); }, f64({3, 4}, 45));
  reduce("prod with zeros", O::prod, [](const Tensor& x) { return prod(x, {0, 1}); },
         from_vector(std::vector<double>{1.5, 0.0, -2.0, 0.5, 0.0, 3.0}, {2, 3}));
  reduce("var", O::var, [](const Tensor& x) { return var(x, {1}); }, f64({3, 5}, 46));
  reduce("var, correction 0", O::var, [](const Tensor& x) { return var(x, {0, 1}, 0, true); }, f64({3, 5}, 47));
  reduce("logsumexp", O::logsumexp, [](const Tensor& x) { return logsumexp(x, {1}); }, f64({3, 5}, 48));

  auto layout = [&](std::string name, O op, std::function<Tensor(const Tensor&)> f, Tensor x) {
    unary(std::move(name), op, std::move(f), std::move(x));
  };
  layout("reshape", O::reshape, [](const Tensor& x) { return reshape(x, {4, -1}) * 1.0; }, f64({2, 3, 2}, 50));
  layout("permute", O::permute, [](const Tensor& x) { return permute(x, {2, 0, 1}) * 1.0; }, f64({2, 3, 4}, 51));
  layout("transpose", O::transpose, [](const Tensor& x) { return transpose(x, 0, 2) * 1.0; }, f64({2, 3, 4}, 52));
  layout("expand", O::expand, [](const Tensor& x) { return expand(x, {2, 3, 4}) * 1.0; }, f64({3, 1}, 53));
  layout("squeeze unsqueeze", O::squeeze, [](const Tensor& x) { return unsqueeze(squeeze(x, 1), 0) * 1.0; },
         f64({3, 1, 4}, 54));
  c.back().ops = {O::squeeze, O::unsqueeze};
  layout("slice", O::slice, [](const Tensor& x) { return slice(x, 1, 1, 6, 2) * 1.0; }, f64({2, 7}, 55));
  layout("slice from the end", O::slice, [](const Tensor& x) { return slice(x, 0, -3) * 1.0; }, f64({5, 2}, 56));
  layout("unfold, overlapping", O::unfold, [](const Tensor& x) { return unfold(x, 1, 3, 2) * 1.0; },
         f64({2, 8}, 57));
  layout("pad and crop", O::pad, [](const Tensor& x) { return pad(x, {1, -1, 2, 0}, 0.5) * 1.0; }, f64({3, 4}, 58));
  layout("flatten", O::flatten, [](const Tensor& x) { return flatten(x, 1) * 1.0; }, f64({2, 3, 2}, 59));
  c.push_back({"cat", {O::cat}, {f64({2, 3}, 60), f64({2, 1}, 61), f64({2, 2}, 62)},
               [](const std::vector<Tensor>& v) { return cat({v[0], v[1], v[2]}, 1) * 1.0; }});
  c.push_back({"index_select, repeated rows",
               {O::index_select},
               {f64({4, 3}, 63), from_vector(std::vector<int64_t>{2, 0, 2, 3, 2})},
               [](const std::vector<Tensor>& v) { return index_select(v[0], 0, v[1]) * 1.0; }});
  c.push_back({"gather, smaller index",
               {O::gather},
               {f64({3, 5}, 64), from_vector(std::vector<int64_t>{4, 0, 4, 1, 1, 2}, {2, 3})},
               [](const std::vector<Tensor>& v) { return gather(v[0], 1, v[1]) * 1.0; }});
  c.push_back({"scatter_add, repeated and smaller index",
               {O::scatter_add},
               {f64({3, 4}, 65), from_vector(std::vector<int64_t>{2, 0, 2, 1, 2, 2}, {2, 3}), f64({2, 5}, 66)},
               [](const std::vector<Tensor>& v) { return scatter_add(v[0], 0, v[1], v[2]) * 1.0; }});
  c.push_back({"scatter, distinct indices",
               {O::scatter},
               {f64({3, 4}, 77), from_vector(std::vector<int64_t>{2, 0, 1, 1, 2, 0}, {2, 3}), f64({2, 3}, 78)},
               [](const std::vector<Tensor>& v) { return scatter(v[0], 0, v[1], v[2]) * 1.0; }});
  c.push_back({"index_put, accumulating repeated rows",
               {O::scatter_add},
               {f64({4, 3}, 75), from_vector(std::vector<int64_t>{1, -1, 1}), f64({3, 3}, 76)},
               [](const std::vector<Tensor>& v) { return index_put(v[0], {v[1]}, v[2], true); }});
  // scatter_reduce: random values (no ties: amax's gradient shares g among ties, which finite
  // differences do not see); prod with x's zero, a src zero alone in its element and two zeros
  // in one element.
  const Tensor rows = from_vector(std::vector<int64_t>{2, 0, 2, 1, 2, 2}, {2, 3});
  for (const char* reduce : {"amax", "amin", "prod", "mean"})
    for (bool include_self : {true, false})
      c.push_back({std::string("scatter_reduce ") + reduce + (include_self ? "" : ", without x"),
                   {std::string(reduce) == "mean" ? O::scatter_add : O::scatter_reduce},
                   {f64({3, 4}, 90), rows, f64({2, 5}, 91)},
                   [reduce, include_self](const std::vector<Tensor>& v) {
                     return scatter_reduce(v[0], 0, v[1], v[2], reduce, include_self) * 1.0;
                   }});
  c.push_back({"scatter_reduce prod through zeros",
               {O::scatter_reduce},
               {from_vector(std::vector<double>{0, 2, 3, 4, 5, 6}, {3, 2}),
                from_vector(std::vector<int64_t>{2, 0, 2, 0, 0, 0}, {3, 2}),
                from_vector(std::vector<double>{0, 1.5, 0.5, 0, -1.2, 0}, {3, 2})},
               [](const std::vector<Tensor>& v) { return scatter_reduce(v[0], 0, v[1], v[2], "prod") * 1.0; }});
  c.push_back({"index_add",
               {O::scatter_add},
               {f64({4, 3}, 67), from_vector(std::vector<int64_t>{2, 0, 2}), f64({4, 3}, 68)},
               [](const std::vector<Tensor>& v) { return index_add(v[0], 1, v[1], v[2], 0.5); }});

  unary("softmax", O::softmax, [](const Tensor& x) { return softmax(x, 1); }, f64({3, 5}, 70));
  unary("log_softmax", O::log_softmax, [](const Tensor& x) { return log_softmax(x, 0); }, f64({3, 5}, 71));
  c.push_back({"layer_norm", {O::layer_norm}, {f64({3, 6}, 72), f64({6}, 73), f64({6}, 74)},
               [](const std::vector<Tensor>& v) { return layer_norm(v[0], {6}, v[1], v[2]); }});
  c.push_back({"rms_norm", {O::rms_norm}, {f64({3, 6}, 75), f64({6}, 76)},
               [](const std::vector<Tensor>& v) { return rms_norm(v[0], {6}, v[1]); }});
  c.push_back({"linear", {O::linear}, {f64({2, 3, 4}, 77), f64({5, 4}, 78), f64({5}, 79)},
               [](const std::vector<Tensor>& v) { return linear(v[0], v[1], v[2]); }});
  c.push_back({"attention", {O::scaled_dot_product_attention}, {f64({2, 3, 4}, 80), f64({2, 5, 4}, 81), f64({2, 5, 3}, 82)},
               [](const std::vector<Tensor>& v) { return scaled_dot_product_attention(v[0], v[1], v[2]); }});
  c.push_back({"attention, causal, grouped heads",
               {O::scaled_dot_product_attention},
               {f64({1, 4, 3, 4}, 83), f64({1, 2, 3, 4}, 84), f64({1, 2, 3, 4}, 85)},
               [](const std::vector<Tensor>& v) {
                 return scaled_dot_product_attention(v[0], v[1], v[2], AttentionOptions{.is_causal = true, .enable_gqa = true});
               }});
  c.push_back({"attention, float mask", {O::scaled_dot_product_attention},
               {f64({2, 3, 4}, 86), f64({2, 3, 4}, 87), f64({2, 3, 4}, 88), f64({3, 3}, 89)},
               [](const std::vector<Tensor>& v) {
                 return scaled_dot_product_attention(v[0], v[1], v[2], AttentionOptions{.mask = v[3]});
               }});
  c.push_back({"conv2d, stride, padding, dilation, groups",
               {O::convolution},
               {f64({1, 4, 6, 5}, 90), f64({6, 2, 3, 2}, 91), f64({6}, 92)},
               [](const std::vector<Tensor>& v) { return conv2d(v[0], v[1], v[2], {2, 1}, {1, 1}, {1, 2}, 2); }});
  c.push_back({"conv2d 1x1, stride 2", {O::convolution}, {f64({2, 3, 5, 4}, 102), f64({4, 3, 1, 1}, 103), f64({4}, 104)},
               [](const std::vector<Tensor>& v) { return conv2d(v[0], v[1], v[2], {2}, {0}); }});
  c.push_back({"conv2d depthwise, 2 per channel, stride 2", {O::convolution}, {f64({1, 2, 6, 5}, 105), f64({4, 1, 3, 3}, 106)},
               [](const std::vector<Tensor>& v) { return conv2d(v[0], v[1], {}, {2}, {1}, {1}, 2); }});
  c.push_back({"conv3d, stride and padding", {O::convolution}, {f64({1, 2, 4, 3, 4}, 107), f64({2, 2, 2, 2, 3}, 108)},
               [](const std::vector<Tensor>& v) { return conv3d(v[0], v[1], {}, {2, 1, 1}, {1, 0, 1}); }});
  c.push_back({"conv1d depthwise", {O::convolution}, {f64({2, 3, 7}, 93), f64({3, 1, 3}, 94)},
               [](const std::vector<Tensor>& v) { return conv1d(v[0], v[1], {}, {1}, {1}, {1}, 3); }});
  c.push_back({"conv_transpose2d", {O::convolution_input_grad}, {f64({1, 2, 3, 3}, 95), f64({2, 3, 2, 2}, 96)},
               [](const std::vector<Tensor>& v) { return conv_transpose2d(v[0], v[1], {}, {2}, {0}, {1}); }});
  c.push_back({"conv_transpose2d, padding, output padding, groups, dilation", {O::convolution_input_grad},
               {f64({2, 4, 3, 4}, 97), f64({4, 3, 3, 2}, 98), f64({6}, 99)},
               [](const std::vector<Tensor>& v) { return conv_transpose2d(v[0], v[1], v[2], {2, 3}, {1, 0}, {1, 2}, 2, {1, 2}); }});
  c.push_back({"conv_transpose1d, output padding past the stride", {O::convolution_input_grad},
               {f64({1, 2, 4}, 100), f64({2, 2, 3}, 101)},
               [](const std::vector<Tensor>& v) { return conv_transpose1d(v[0], v[1], {}, {1}, {0}, {2}, 1, {3}); }});
  unary("max_pool2d", O::max_pool, [](const Tensor& x) { return max_pool2d(x, {2, 2}, {1, 2}, {1, 0}); },
        f64({1, 2, 4, 5}, 97));
  // ResNet's stem pooling (windows overlap: an element collects from up to four), ceil_mode with
  // a dilation, 1-D and 3-D.
  unary("max_pool2d 3x3 stride 2 pad 1", O::max_pool, [](const Tensor& x) { return max_pool2d(x, {3, 3}, {2, 2}, {1, 1}); },
        f64({2, 2, 7, 6}, 105));
  unary("max_pool2d ceil_mode, dilation", O::max_pool,
        [](const Tensor& x) { return max_pool2d(x, {2, 3}, {2, 2}, {0, 1}, {2, 1}, true); }, f64({1, 2, 6, 7}, 106));
  unary("max_pool1d", O::max_pool, [](const Tensor& x) { return max_pool1d(x, {3}, {2}, {1}); }, f64({2, 3, 9}, 107));
  unary("max_pool3d", O::max_pool, [](const Tensor& x) { return max_pool3d(x, {2, 2, 2}, {1, 2, 2}, {0, 1, 0}); },
        f64({1, 2, 3, 4, 5}, 108));
  unary("avg_pool2d", O::avg_pool,
        [](const Tensor& x) { return avg_pool2d(x, {3, 2}, {2, 1}, {1, 0}, true, false); }, f64({1, 2, 5, 4}, 98));
  c.push_back({"batch_norm", {O::batch_norm},
               {f64({2, 3, 4}, 100), f64({3}, 101), positive({3}, 102), f64({3}, 103), f64({3}, 104)},
               [](const std::vector<Tensor>& v) { return batch_norm(v[0], v[1], v[2], v[3], v[4]); }});
  c.push_back({"batch_norm_training", {O::batch_norm, O::var, O::mean},
               {f64({3, 2, 2, 2}, 130), f64({2}, 131), f64({2}, 132)},
               [](const std::vector<Tensor>& v) { return batch_norm_training(v[0], v[1], v[2]).y; }});
  c.push_back({"group_norm", {O::group_norm}, {f64({2, 4, 3}, 105), f64({4}, 106), f64({4}, 107)},
               [](const std::vector<Tensor>& v) { return group_norm(v[0], 2, v[1], v[2]); }});
  unary("cumsum", O::cumsum, [](const Tensor& x) { return cumsum(x, 1); }, f64({3, 5}, 108));
  unary("cumprod", O::cumprod, [](const Tensor& x) { return cumprod(x, 0); }, f64({4, 3}, 109));
  unary("sort", O::sort, [](const Tensor& x) { return sort(x, 1, true).first; }, f64({3, 5}, 110));
  unary("tril triu", O::tril, [](const Tensor& x) { return tril(x, 1) + triu(x, -1) * 2.0; }, f64({4, 5}, 110));
  c.back().ops = {O::tril, O::triu};
  binary("matmul", O::matmul, [](const Tensor& a, const Tensor& b) { return matmul(a, b); }, f64({3, 4}, 111),
         f64({4, 2}, 112));
  binary("matmul, shared left operand", O::matmul, [](const Tensor& a, const Tensor& b) { return matmul(a, b); },
         f64({1, 3, 4}, 117), f64({2, 3, 4, 2}, 118));
  binary("matmul, 2-D left operand", O::matmul, [](const Tensor& a, const Tensor& b) { return matmul(a, b); },
         f64({3, 4}, 119), f64({5, 4, 2}, 120));
  binary("matmul, broadcast batch", O::matmul, [](const Tensor& a, const Tensor& b) { return matmul(a, b); },
         f64({2, 3, 4}, 113), f64({4, 5}, 114));
  binary("matmul, vector @ batch", O::matmul, [](const Tensor& a, const Tensor& b) { return matmul(a, b); },
         f64({4}, 115), f64({2, 4, 3}, 116));
  binary("matmul, batch @ vector", O::matmul, [](const Tensor& a, const Tensor& b) { return matmul(a, b); },
         f64({2, 3, 4}, 117), f64({4}, 118));
  binary("matmul, vector @ vector", O::matmul, [](const Tensor& a, const Tensor& b) { return matmul(a, b); },
         f64({4}, 119), f64({4}, 120));
  return c;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(autograd)

BOOST_AUTO_TEST_CASE(every_op_against_finite_differences) {
  for (const GradCase& c : cases()) gradcheck(c);
}

// Every op that can pass a gradient has a case above (integer- and bool-valued ops pass none,
// philox included, and channels-last convolution is not in the C++ API: passes::to_channels_last makes it;
// convolution_weight_grad neither: its values are checked as every convolution case's weight
// gradient, its rule as conv_transpose's weight gradient).
BOOST_AUTO_TEST_CASE(every_differentiable_op_has_a_case) {
  std::set<OpId> covered;
  for (const GradCase& c : cases()) covered.insert(c.ops.begin(), c.ops.end());
  const std::set<OpId> no_gradient = {OpId::eq,          OpId::ne,          OpId::lt,     OpId::le,
                                      OpId::gt,          OpId::ge,          OpId::logical_and,
                                      OpId::logical_or,  OpId::logical_not, OpId::isnan,  OpId::argmax,
                                      OpId::argmin,      OpId::convolution_channels_last, OpId::convolution_weight_grad,
                                      OpId::philox,      OpId::argsort,
                                      OpId::custom};  // a user's op: gradients flow through its decomposition
  for (const OpDef& d : all_ops()) {
    if (d.category == OpCategory::source || no_gradient.count(d.id)) continue;
    BOOST_TEST(covered.count(d.id) == 1u, "op " << d.name << " has no gradient case");
    BOOST_TEST((d.grad != nullptr || d.decompose != nullptr), "op " << d.name << " has neither a rule nor a decomposition");
  }
}

BOOST_AUTO_TEST_CASE(backward_accumulates_into_leaves) {
  const Tensor w = f32({1, 2, 3}).requires_grad_();
  const Tensor x = f32({0.5f, -1, 2});
  BOOST_TEST(w.is_leaf());
  const Tensor loss = sum(w * x + w * w);
  BOOST_TEST(!loss.is_leaf());
  BOOST_TEST(loss.requires_grad());
  BOOST_TEST(!x.requires_grad());
  loss.backward();
  check_tensor(w.grad(), {3}, DType::f32, {2.5, 3, 8});
  BOOST_TEST(!x.grad().defined());
  sum(w * 3.0).backward();  // accumulates
  check_values(w.grad(), {5.5, 6, 11});
  w.set_grad({});
  BOOST_TEST(!w.grad().defined());
  // A non-scalar output with its gradient.
  (w * w).backward(f32({1, 0, -1}));
  check_values(w.grad(), {2, 0, -6});
}

// cross_entropy: the mean of -log_softmax at each target, and its gradient softmax - one_hot
// over the number of rows.
BOOST_AUTO_TEST_CASE(cross_entropy_and_its_gradient) {
  const Tensor logits = from_vector(std::vector<double>{1, 2, 3, 0, 0, 0}, {2, 3}).requires_grad_();
  const Tensor targets = from_vector(std::vector<int64_t>{2, 0});
  const Tensor loss = cross_entropy(logits, targets);
  const double z = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  check_values(loss, {((z - 3) + std::log(3.0)) / 2}, 1e-12);
  loss.backward();
  const double e1 = std::exp(1 - z), e2 = std::exp(2 - z), e3 = std::exp(3 - z);
  check_values(logits.grad(), {e1 / 2, e2 / 2, (e3 - 1) / 2, (1.0 / 3 - 1) / 2, 1.0 / 6, 1.0 / 6}, 1e-12);
  BOOST_TEST(contains(error_of([&] { cross_entropy(logits, from_vector(std::vector<int64_t>{1, 2}, {2, 1})); }), "without its last dim"));
  // A target outside the classes gives NaN, not the loss of some other class.
  const Tensor bad = cross_entropy(logits.detach(), from_vector(std::vector<int64_t>{3, 0}));
  BOOST_TEST(std::isnan(bad.to(DType::f64).item<double>()));
}

// BatchNorm2d in training mode: normalised by the batch's mean and biased variance, the running
// statistics moved towards the batch's (unbiased variance) by the momentum, as torch's.
BOOST_AUTO_TEST_CASE(batch_norm_in_training_mode) {
  nn::Init init(0);
  const nn::BatchNorm2d bn = nn::BatchNorm2d::make(1, init);
  const Tensor x = f32({1, 3, 5, 7}, {2, 1, 1, 2});  // one channel: mean 4, biased var 5, unbiased 20/3
  const auto [y, next] = bn.train(x, 0.5);
  const double s = std::sqrt(5 + 1e-5);
  check_values(y, {-3 / s, -1 / s, 1 / s, 3 / s}, 1e-5);
  check_values(next.running_mean, {2});             // 0.5 * 0 + 0.5 * 4
  check_values(next.running_var, {0.5 + 10.0 / 3});  // 0.5 * 1 + 0.5 * 20/3
  check_values(bn.running_mean, {0});               // the module itself is unchanged
}

// A window's gradient goes to its first maximum, as torch's (not split among ties), and to a NaN
// where the window holds one; windows that overlap add up.
BOOST_AUTO_TEST_CASE(max_pooling_gives_a_windows_gradient_to_its_first_maximum) {
  const Tensor x = f32({1, 3, 3, 2, 3}, {1, 1, 1, 5}).requires_grad_();
  max_pool2d(x, {1, 3}, {1, 1}, {0, 0}).sum().backward();  // windows [1 3 3] [3 3 2] [3 2 3]: 1, 1, 2
  check_values(x.grad(), {0, 2, 1, 0, 0});
  const double nan = std::nan("");
  const Tensor z = f32({1, static_cast<float>(nan), 5, static_cast<float>(nan)}, {1, 1, 1, 4}).requires_grad_();
  max_pool2d(z, {1, 2}, {1, 2}, {0, 0}).sum().backward();
  check_values(z.grad(), {0, 1, 0, 1});
  // Padding never takes the gradient, even where every element of a window is -inf.
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor m = f32({-static_cast<float>(inf), -static_cast<float>(inf), 2}, {1, 1, 1, 3}).requires_grad_();
  max_pool2d(m, {1, 2}, {1, 2}, {0, 1}).sum().backward();  // windows [pad, -inf] [-inf, 2]
  check_values(m.grad(), {1, 0, 1});
}

BOOST_AUTO_TEST_CASE(gradients_of_gradients) {
  // d/dx x^3 = 3x^2, d2/dx2 = 6x.
  const Tensor x = from_vector(std::vector<double>{0.5, -2}).requires_grad_();
  const Tensor y = sum(x * x * x);
  const std::vector<Tensor> g = grad({y}, {x}, {.create_graph = true});
  check_values(g[0], {0.75, 12});
  BOOST_TEST(g[0].requires_grad());
  const std::vector<Tensor> h = grad({sum(g[0])}, {x});
  check_values(h[0], {3, -12});
}

BOOST_AUTO_TEST_CASE(no_grad_and_detach_record_nothing) {
  const Tensor w = f32({1, 2}).requires_grad_();
  {
    NoGrad off;
    BOOST_TEST(!grad_enabled());
    BOOST_TEST(!(w * 2.0).requires_grad());
    {
      NoGrad on(true);
      BOOST_TEST((w * 2.0).requires_grad());
    }
  }
  BOOST_TEST(grad_enabled());
  const Tensor d = w.detach();
  BOOST_TEST(!d.requires_grad());
  BOOST_TEST(storage_of(d) == storage_of(w));  // same values, no copy
  BOOST_TEST(!(d * 2.0).requires_grad());
  // Integer results carry no gradient.
  BOOST_TEST(!argmax(w).requires_grad());
  BOOST_TEST(!(w > 1.0).requires_grad());
}

BOOST_AUTO_TEST_CASE(gradient_flows_into_the_input_dtype) {
  const Tensor x = f32({1, 2, 3}).requires_grad_();
  const Tensor y = sum(cast(x, DType::f64) * 2.0);
  y.backward();
  check_tensor(x.grad(), {3}, DType::f32, {2, 2, 2});
  // Strided views and copies of them.
  const Tensor m = f32({1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_();
  sum(transpose(m, 0, 1).contiguous() * f32({1, 2, 3, 4, 5, 6}, {3, 2})).backward();
  check_values(m.grad(), {1, 3, 5, 2, 4, 6});
}

BOOST_AUTO_TEST_CASE(a_long_chain_needs_no_deep_stack) {
  Tensor x = from_vector(std::vector<double>{1.0}).requires_grad_();
  const Tensor leaf = x;
  for (int i = 0; i < 3000; ++i) x = x * 1.0001;
  sum(x).backward();
  check_values(leaf.grad(), {std::pow(1.0001, 3000)}, 1e-9);
}

BOOST_AUTO_TEST_CASE(bad_calls_say_what_is_wrong) {
  const Tensor w = f32({1, 2}).requires_grad_();
  BOOST_TEST(contains(error_of([&] { (w * 2.0).backward(); }), "not a single element"));
  BOOST_TEST(contains(error_of([&] { sum(f32({1, 2})).backward(); }), "does not require gradients"));
  BOOST_TEST(contains(error_of([&] { arange(3).requires_grad_(); }), "only floating tensors"));
  BOOST_TEST(contains(error_of([&] { (w * 2.0).requires_grad_(); }), "only leaves"));
  const Tensor other = f32({3}).requires_grad_();
  BOOST_TEST(contains(error_of([&] { grad({sum(w)}, {other}); }), "is not used to compute the outputs"));
  BOOST_TEST(!grad({sum(w)}, {other}, {.allow_unused = true})[0].defined());
  BOOST_TEST(contains(error_of([&] { (w * 2.0).backward(f32({1, 2, 3})); }), "must have the same shape"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(autograd_compiled)

namespace {

Tensor mlp_loss(const std::vector<Tensor>& p, const Tensor& x, const Tensor& target) {
  const Tensor d = linear(gelu(linear(x, p[0], p[1])), p[2], p[3]) - target;
  return mean(d * d);
}

std::vector<Tensor> mlp_params() {
  return {randn({16, 8}, DType::f32, Device::cpu(), 1) * 0.3, randn({16}, DType::f32, Device::cpu(), 2) * 0.1,
          randn({4, 16}, DType::f32, Device::cpu(), 3) * 0.3, randn({4}, DType::f32, Device::cpu(), 4) * 0.1};
}

double max_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  BOOST_REQUIRE_EQUAL(x.size(), y.size());
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

void check_same(const std::pair<Tensor, std::vector<Tensor>>& got, const std::pair<Tensor, std::vector<Tensor>>& want) {
  BOOST_TEST(max_diff(got.first, want.first) < 1e-5);
  BOOST_REQUIRE_EQUAL(got.second.size(), want.second.size());
  for (size_t k = 0; k < got.second.size(); ++k) {
    BOOST_TEST((got.second[k].shape() == want.second[k].shape()));
    BOOST_TEST(max_diff(got.second[k], want.second[k]) < 1e-5, "gradient " << k);
  }
}

}  // namespace

// The forward and backward trace into one graph; across batch sizes (the second size makes
// the batch dynamic) the compiled gradients are the eager ones.
BOOST_AUTO_TEST_CASE(a_compiled_step_gives_the_eager_gradients) {
  auto step = kiln::compile([](const std::vector<Tensor>& p, const Tensor& x, const Tensor& t) {
    return value_and_grad([&](const std::vector<Tensor>& q) { return mlp_loss(q, x, t); }, p);
  });
  const std::vector<Tensor> params = mlp_params();
  for (int64_t batch : {6, 6, 10, 14}) {
    const Tensor x = randn({batch, 8}, DType::f32, Device::cpu(), 10 + static_cast<uint64_t>(batch));
    const Tensor t = randn({batch, 4}, DType::f32, Device::cpu(), 20 + static_cast<uint64_t>(batch));
    const auto want = value_and_grad([&](const std::vector<Tensor>& q) { return mlp_loss(q, x, t); }, params);
    check_same(step(params, x, t), want);
  }
  BOOST_TEST(step.stats().compiles == 2);  // static 6, then a dynamic batch
}

// backward() on the compiled function's own arguments: their grad() inside is this call's.
BOOST_AUTO_TEST_CASE(backward_inside_a_compiled_function) {
  auto f = kiln::compile([](const Tensor& w, const Tensor& x) {
    w.requires_grad_();
    sum(exp(w * x)).backward();
    return w.grad();
  });
  const Tensor w = f32({0.5f, -1, 2}), x = f32({1, 2, -0.5f});
  const Tensor got = f(w, x);
  const Tensor leaf = w.detach().requires_grad_();
  sum(exp(leaf * x)).backward();
  BOOST_TEST(max_diff(got, leaf.grad()) < 1e-5);
}

// A graph break between the forward and the backward keeps the gradients right: the recorded
// values of the first segment enter the second as its inputs.
BOOST_AUTO_TEST_CASE(gradients_across_a_graph_break) {
  auto step = kiln::compile([](const std::vector<Tensor>& p, const Tensor& x, const Tensor& t) {
    return value_and_grad(
        [&](const std::vector<Tensor>& q) {
          const Tensor loss = mlp_loss(q, x, t);
          // A data-dependent branch: a graph break.
          return loss.item<double>() > 1e9 ? loss * 0.0 : loss * 2.0;
        },
        p);
  });
  const std::vector<Tensor> params = mlp_params();
  const Tensor x = randn({5, 8}, DType::f32, Device::cpu(), 30), t = randn({5, 4}, DType::f32, Device::cpu(), 31);
  const auto want = value_and_grad([&](const std::vector<Tensor>& q) { return mlp_loss(q, x, t) * 2.0; }, params);
  check_same(step(params, x, t), want);
  BOOST_TEST(step.stats().graph_breaks >= 1);
}

// The check the GPU targets run on their devices (tests/common/device_frontend_checks.h): an
// embedding, layer norm, causal attention, a convolution, pooling and a gathered log-softmax.
BOOST_AUTO_TEST_CASE(a_compiled_language_model_step_on_the_cpu) {
  device_frontend_checks::compiled_gradients_on(Device::cpu());
}

// torch's usual training loop over a compiled model: the compiled call's outputs record the call,
// and backward() runs its compiled backward. Eager ops before and after it, a second compiled call
// on its output, a dynamic batch and outputs no gradient reaches give the eager gradients.
BOOST_AUTO_TEST_CASE(a_compiled_call_differentiated_from_outside) {
  auto model = kiln::compile([](const std::vector<Tensor>& p, const Tensor& x) {
    const Tensor h = gelu(linear(x, p[0], p[1]));
    return std::tuple{linear(h, p[2], p[3]), sum(h, {1}), argmax(h, 1)};  // logits, a side output, an integer one
  });
  auto head = kiln::compile([](const Tensor& y, const Tensor& t) {
    const Tensor d = y - t;
    return mean(d * d);
  });
  const std::vector<Tensor> init = mlp_params();
  for (int64_t batch : {6, 6, 9}) {
    const Tensor x = randn({batch, 8}, DType::f32, Device::cpu(), 40 + static_cast<uint64_t>(batch));
    const Tensor t = randn({batch, 4}, DType::f32, Device::cpu(), 50 + static_cast<uint64_t>(batch));
    auto leaves = [&] {
      std::vector<Tensor> p;
      for (const Tensor& q : init) p.push_back(q.detach().requires_grad_());
      return p;
    };
    // Compiled: an eager scale of the first weight before the call, an eager term after it.
    const std::vector<Tensor> p = leaves();
    const std::vector<Tensor> scaled = {p[0] * 1.5, p[1], p[2], p[3]};
    const auto [y, side, index] = model(scaled, x);
    BOOST_TEST(y.requires_grad());
    BOOST_TEST(!index.requires_grad());
    const Tensor loss = head(y, t) + mean(side) * 0.1 + mean(side * side) * 0.01;  // side read twice
    loss.backward();
    // Eager, the same.
    const std::vector<Tensor> q = leaves();
    const Tensor hq = gelu(linear(x, q[0] * 1.5, q[1]));
    const Tensor dq = linear(hq, q[2], q[3]) - t;
    const Tensor sq = sum(hq, {1});
    (mean(dq * dq) + mean(sq) * 0.1 + mean(sq * sq) * 0.01).backward();
    for (size_t k = 0; k < p.size(); ++k) {
      BOOST_REQUIRE(p[k].grad().defined());
      BOOST_TEST(max_diff(p[k].grad(), q[k].grad()) < 1e-5, "parameter " << k << ", batch " << batch);
    }
    // kiln::grad with respect to the call's own output (twice), and to a tensor computed eagerly
    // from it that is also differentiated.
    const auto [y2, side2, index2] = model(scaled, x);
    const Tensor z = y2 * 2.0;
    const std::vector<Tensor> g = kiln::grad({head(y2, t), z}, {y2, p[2], y2, z}, {.grad_outputs = {Tensor(), ones_like(z)}});
    const Tensor y_eager = y2.detach().requires_grad_();
    const Tensor d = y_eager - t;
    (mean(d * d) + sum(y_eager * 2.0)).backward();
    BOOST_TEST(max_diff(g[0], y_eager.grad()) < 1e-6);
    BOOST_TEST(max_diff(g[2], y_eager.grad()) < 1e-6);
    BOOST_TEST(max_diff(g[3], ones_like(z)) == 0.0);
  }
  BOOST_TEST(model.stats().compiles == 2);  // static 6, then a dynamic batch
  // The cache entry a first call for gradients added runs (compiled now) for a call without.
  const Tensor x = randn({9, 8}, DType::f32, Device::cpu(), 59);
  const Tensor y = std::get<0>(model(init, x));
  BOOST_TEST(!y.requires_grad());
  BOOST_TEST(max_diff(y, linear(gelu(linear(x, init[0], init[1])), init[2], init[3])) < 1e-5);
  BOOST_TEST(model.stats().compiles == 2);
}

// A large activation of a call differentiated from outside: the split stores nothing of it (the
// backward computes relu(x * w) again from the input and the weight it is given anyway).
BOOST_AUTO_TEST_CASE(a_large_activation_is_computed_again_in_the_backward) {
  auto f = kiln::compile([](const Tensor& x, const Tensor& w) {
    const Tensor a = relu(x * w);
    return sum(a * a + a);
  });
  const Tensor x = randn({256, 512}, DType::f32, Device::cpu(), 60);
  const Tensor w = randn({512}, DType::f32, Device::cpu(), 61).requires_grad_();
  f(x, w).backward();
  const Tensor v = w.detach().requires_grad_();
  const Tensor a = relu(x * v);
  sum(a * a + a).backward();
  const double scale = max_diff(v.grad(), zeros_like(v.grad()));
  BOOST_TEST(max_diff(w.grad(), v.grad()) <= 1e-5 * scale, "largest gradient " << scale);
}

BOOST_AUTO_TEST_CASE(what_compiled_functions_refuse) {
  const Tensor w = f32({1, 2}).requires_grad_();
  auto f = kiln::compile([](const Tensor& a) { return a * 2.0; });
  BOOST_TEST(f(w).requires_grad());
  BOOST_TEST(contains(error_of([&] { kiln::grad({sum(f(w))}, {w}, {.create_graph = true}); }), "create_graph through the output of a compiled call"));
  const Tensor out = [&] {
    NoGrad off;
    return f(w);
  }();
  BOOST_TEST(!out.requires_grad());
  auto broken = kiln::compile([](const Tensor& a) {
    graph_break();
    return a * 2.0;
  });
  BOOST_TEST(contains(error_of([&] { broken(w); }), "breaks its graph"));
  // A leaf captured by the function is a constant of its graph.
  auto g = kiln::compile([w](const Tensor& x) {
    sum(w * x).backward();
    return x * 1.0;
  });
  BOOST_TEST(contains(error_of([&] { g(f32({3, 4})); }), "captured from outside"));
}

BOOST_AUTO_TEST_SUITE_END()
