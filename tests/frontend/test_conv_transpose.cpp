// conv_transpose1d/2d/3d against the definition computed directly (every input element
// scatters weight * x to out[i * stride - padding + k * dilation]), with strides, padding,
// output_padding, dilation and groups, compiled against eager, and the errors.
#include <numeric>

#include "helpers.h"

using namespace kiln;
using namespace frontend_test;

namespace {


// Direct 2-D transposed convolution (1-D as height 1): out[n, g*Cog + co, oh, ow] +=
// x[n, g*Cig + ci, ih, iw] * w[g*Cig + ci, co, kh, kw] at oh = ih*s - p + kh*d (same for w).
std::vector<double> direct(const Tensor& x, const Tensor& w, const std::vector<double>& bias, Dims s, Dims p, Dims op,
                           int64_t g, Dims d, Sizes& out_sizes) {
  const Sizes xs = sizes_of(x), ws = sizes_of(w);
  const bool one = xs.size() == 3;
  const int64_t N = xs[0], Ci = xs[1], H = one ? 1 : xs[2], W = xs.back();
  const int64_t Cog = ws[1], KH = one ? 1 : ws[2], KW = ws.back(), Cig = Ci / g;
  auto two = [one](Dims v, int64_t unit) {  // one value per dim of the 2-D form
    if (one) return Dims{unit, v[0]};
    return v.size() == 1 ? Dims{v[0], v[0]} : v;
  };
  s = two(s, 1), p = two(p, 0), op = two(op, 0), d = two(d, 1);
  const int64_t OH = (H - 1) * s[0] - 2 * p[0] + d[0] * (KH - 1) + op[0] + 1;
  const int64_t OW = (W - 1) * s[1] - 2 * p[1] + d[1] * (KW - 1) + op[1] + 1;
  const int64_t Co = Cog * g;
  out_sizes = one ? Sizes{N, Co, OW} : Sizes{N, Co, OH, OW};
  const std::vector<double> xv = x.to_vector<double>(), wv = w.to_vector<double>();
  std::vector<double> out(static_cast<size_t>(N * Co * OH * OW), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < Co; ++c)
      for (int64_t i = 0; i < OH * OW; ++i) out[((n * Co + c) * OH * OW) + i] = bias.empty() ? 0 : bias[c];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ci = 0; ci < Ci; ++ci)
      for (int64_t ih = 0; ih < H; ++ih)
        for (int64_t iw = 0; iw < W; ++iw)
          for (int64_t co = 0; co < Cog; ++co)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t oh = ih * s[0] - p[0] + kh * d[0], ow = iw * s[1] - p[1] + kw * d[1];
                if (oh < 0 || oh >= OH || ow < 0 || ow >= OW) continue;
                const int64_t oc = (ci / Cig) * Cog + co;
                out[((n * Co + oc) * OH + oh) * OW + ow] +=
                    xv[((n * Ci + ci) * H + ih) * W + iw] * wv[((ci * Cog + co) * KH + kh) * KW + kw];
              }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(conv_transpose_op)

BOOST_AUTO_TEST_CASE(against_the_definition) {
  struct Case {
    Sizes x, w;
    Dims s, p, op;
    int64_t g;
    Dims d;
    bool bias;
  };
  const Case cases[] = {
      {{1, 2, 3, 3}, {2, 3, 3, 3}, {1}, {0}, {0}, 1, {1}, true},
      {{2, 2, 3, 4}, {2, 3, 3, 3}, {2}, {1}, {1}, 1, {1}, true},           // stride, padding, output_padding
      {{1, 4, 3, 3}, {4, 1, 2, 3}, {2, 1}, {0, 1}, {1, 0}, 2, {1}, false},  // groups, per-dim values
      {{1, 2, 4, 3}, {2, 2, 3, 2}, {1}, {1}, {0}, 1, {2}, true},           // dilation
      {{2, 3, 5}, {3, 2, 3}, {3}, {1}, {2}, 1, {1}, true},                 // 1-D
      {{1, 2, 4}, {2, 2, 2}, {2}, {0}, {1}, 1, {2}, false},                // 1-D, dilation and output_padding
  };
  for (const Case& c : cases) {
    const Tensor x = pattern_tensor(c.x, 1), w = pattern_tensor(c.w, 2);
    const int64_t co = c.w[1] * c.g;
    std::vector<double> bias_values;
    Tensor bias;
    if (c.bias) {
      std::vector<float> b;
      for (int64_t i = 0; i < co; ++i) b.push_back(0.25f * static_cast<float>(i) - 0.5f);
      bias = from_vector(b);
      bias_values.assign(b.begin(), b.end());
    }
    Sizes want;
    const std::vector<double> expected = direct(x, w, bias_values, c.s, c.p, c.op, c.g, c.d, want);
    const Tensor y = c.x.size() == 3 ? conv_transpose1d(x, w, bias, c.s, c.p, c.op, c.g, c.d)
                                     : conv_transpose2d(x, w, bias, c.s, c.p, c.op, c.g, c.d);
    BOOST_TEST_CONTEXT("x " << c.x.size() << "-d, stride " << c.s[0] << ", groups " << c.g << ", dilation " << c.d[0]) {
      BOOST_TEST(sizes_of(y) == want);
      check_values(y, expected, 1e-5);
    }
  }
  // 3-D: one spatial dim of size 1 makes it the 2-D case.
  const Tensor x3 = pattern_tensor({1, 2, 1, 3, 3}, 3), w3 = pattern_tensor({2, 2, 1, 2, 2}, 4);
  Sizes want;
  const std::vector<double> expected =
      direct(reshape(x3, {1, 2, 3, 3}), reshape(w3, {2, 2, 2, 2}), {}, {2}, {0}, {0}, 1, {1}, want);
  check_values(conv_transpose3d(x3, w3, {}, {1, 2, 2}), expected, 1e-5);
}

BOOST_AUTO_TEST_CASE(compiled_like_eager) {
  auto f = kiln::compile([](const Tensor& x, const Tensor& w) { return relu(conv_transpose2d(x, w, {}, {2}, {1}, {1})); });
  const Tensor x = pattern_tensor({2, 3, 4, 4}, 5), w = pattern_tensor({3, 2, 3, 3}, 6);
  const Tensor eager = relu(conv_transpose2d(x, w, {}, {2}, {1}, {1}));
  BOOST_TEST(sizes_of(eager) == (Sizes{2, 2, 8, 8}));
  check_values(f(x, w), eager.to_vector<double>(), 1e-5);
}

BOOST_AUTO_TEST_CASE(errors_say_what) {
  const Tensor x = pattern_tensor({1, 2, 3, 3}, 1), w = pattern_tensor({2, 2, 3, 3}, 2);
  BOOST_TEST(contains(error_of([&] { conv_transpose2d(x, w, {}, {2}, {0}, {2}); }),
                      "output_padding 2 must be smaller than the stride or the dilation (2)"));
  BOOST_TEST(contains(error_of([&] { conv_transpose2d(x, pattern_tensor({3, 2, 3, 3}, 2)); }), "x has 2 channels, the weight 3"));
  BOOST_TEST(contains(error_of([&] { conv_transpose2d(x, w, {}, {1}, {0}, {0}, 4); }), "not a multiple of groups 4"));
  BOOST_TEST(contains(error_of([&] { conv_transpose1d(x, w); }), "expected x[N, C, 1 spatial dim]"));
}

BOOST_AUTO_TEST_SUITE_END()
