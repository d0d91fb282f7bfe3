// Composite ops (run through their decompositions) and matmul against hand-computed values.
#include <random>

#include "helpers.h"

using namespace ref_test;

namespace {
Attrs dim(int64_t d) { return {d}; }
Attrs norm(int64_t ndim, double eps) { return {ndim, eps}; }
}  // namespace

BOOST_AUTO_TEST_SUITE(composites)

BOOST_AUTO_TEST_CASE(softmax_and_log_softmax) {
  check(eval(OpId::softmax, {f32({3}, {1, 2, 3})}, dim(0)), DType::f32, {3}, {0.0900306, 0.2447285, 0.6652410});
  // Shift invariant: large inputs do not overflow.
  check(eval(OpId::softmax, {f32({2}, {1000, 1001})}, dim(0)), DType::f32, {2}, {0.2689414, 0.7310586});
  // [[1, 1], [2, 1]] over dim 0: column 0 is softmax(1, 2), column 1 is uniform.
  check(eval(OpId::softmax, {f32({2, 2}, {1, 1, 2, 1})}, dim(0)), DType::f32, {2, 2},
        {0.2689414, 0.5, 0.7310586, 0.5});
  check(eval(OpId::softmax, {i32({2}, {0, 0})}, dim(0)), DType::f32, {2}, {0.5, 0.5});
  check(eval(OpId::log_softmax, {f32({3}, {1, 2, 3})}, dim(0)), DType::f32, {3},
        {-2.4076059644, -1.4076059644, -0.4076059644});
  check(eval(OpId::log_softmax, {f64({2, 2}, {0, 0, 5, 5})}, dim(1)), DType::f64, {2, 2},
        {-0.6931471806, -0.6931471806, -0.6931471806, -0.6931471806}, 1e-9);
}

BOOST_AUTO_TEST_CASE(logsumexp_composite) {
  check(eval(OpId::logsumexp, {f32({2, 3}, {1, 2, 3, 1, 2, 3})}, {std::vector<int64_t>{1}, true}), DType::f32, {2, 1},
        {3.4076059644, 3.4076059644});
  check(eval(OpId::logsumexp, {i32({2}, {0, 0})}, {std::vector<int64_t>{}, false}), DType::f32, {}, {0.6931471806});
}

BOOST_AUTO_TEST_CASE(layer_norm_values) {
  // [1, 2, 3, 4]: mean 2.5, population variance 1.25, sqrt 1.1180340 (eps must be positive: 1e-12).
  const TensorData x = f32({4}, {1, 2, 3, 4});
  check(eval(OpId::layer_norm, {x}, norm(1, 1e-12)), DType::f32, {4}, {-1.3416408, -0.4472136, 0.4472136, 1.3416408});
  check(eval(OpId::layer_norm, {x}, norm(1, 1e-5)), DType::f32, {4}, {-1.3416408, -0.4472136, 0.4472136, 1.3416408},
        1e-4);
  check(eval(OpId::layer_norm, {x, f32({4}, {1, 2, 1, 2})}, norm(1, 1e-12)), DType::f32, {4},
        {-1.3416408, -0.8944272, 0.4472136, 2.6832816});
  check(eval(OpId::layer_norm, {x, f32({4}, {1, 2, 1, 2}), f32({4}, {0, 0, 1, 1})}, norm(1, 1e-12)), DType::f32, {4},
        {-1.3416408, -0.8944272, 1.4472136, 3.6832816});
  // Rows [1, 3] and [2, 2] with eps 1: (x - mean) / sqrt(var + 1).
  check(eval(OpId::layer_norm, {f32({2, 2}, {1, 3, 2, 2})}, norm(1, 1.0)), DType::f32, {2, 2},
        {-0.7071068, 0.7071068, 0, 0});
  // Over both dims: mean 2, variance 0.5.
  check(eval(OpId::layer_norm, {f32({2, 2}, {1, 3, 2, 2})}, norm(2, 1e-12)), DType::f32, {2, 2},
        {-1.4142136, 1.4142136, 0, 0});
}

BOOST_AUTO_TEST_CASE(rms_norm_values) {
  // [1, 2, 3, 4]: mean square 7.5, root 2.7386128.
  const TensorData x = f32({4}, {1, 2, 3, 4});
  check(eval(OpId::rms_norm, {x}, norm(1, 1e-12)), DType::f32, {4}, {0.3651484, 0.7302967, 1.0954451, 1.4605935});
  check(eval(OpId::rms_norm, {x, f32({4}, {2, 1, 1, 0.5})}, norm(1, 1e-12)), DType::f32, {4},
        {0.7302967, 0.7302967, 1.0954451, 0.7302967});
  // [3, 4] with eps 0.5: mean square 12.5, sqrt(13) = 3.6055513.
  check(eval(OpId::rms_norm, {f32({1, 2}, {3, 4})}, norm(1, 0.5)), DType::f32, {1, 2}, {0.8320503, 1.1094004});
}

BOOST_AUTO_TEST_CASE(linear_values) {
  const TensorData w = f32({3, 2}, {1, 0, 0, 1, 1, 1});
  check(eval(OpId::linear, {f32({2}, {1, 2}), w}), DType::f32, {3}, {1, 2, 3});
  check(eval(OpId::linear, {f32({2}, {1, 2}), w, f32({3}, {10, 20, 30})}), DType::f32, {3}, {11, 22, 33});
  check(eval(OpId::linear, {f32({2, 2}, {1, 2, 3, 4}), w}), DType::f32, {2, 3}, {1, 2, 3, 3, 4, 7});
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(matmul)

BOOST_AUTO_TEST_CASE(two_d) {
  const TensorData a = f32({2, 2}, {1, 2, 3, 4}), b = f32({2, 2}, {5, 6, 7, 8});
  check(eval(OpId::matmul, {a, b}), DType::f32, {2, 2}, {19, 22, 43, 50});
  check(eval(OpId::matmul, {f32({1, 3}, {1, 2, 3}), f32({3, 1}, {4, 5, 6})}), DType::f32, {1, 1}, {32});
  check(eval(OpId::matmul, {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({3, 2}, {1, 0, 0, 1, 1, 1})}), DType::f32, {2, 2},
        {4, 5, 10, 11});
  check(eval(OpId::matmul, {i32({2, 2}, {1, 2, 3, 4}), i32({2, 2}, {5, 6, 7, 8})}), DType::i32, {2, 2},
        {19, 22, 43, 50}, 0);
  check(eval(OpId::matmul, {i32({1, 2}, {1, 2}), f32({2, 1}, {0.5, 0.25})}), DType::f32, {1, 1}, {1});
  // A transposed view as the left operand: [[1, 3], [2, 4]] @ [[5, 6], [7, 8]].
  TensorData at = a;
  at.strides = {1, 2};
  check(eval(OpId::matmul, {at, b}), DType::f32, {2, 2}, {26, 30, 38, 44});
  // Inner size 0: zeros.
  check(eval(OpId::matmul, {f32({2, 0}, {}), f32({0, 3}, {})}), DType::f32, {2, 3}, {0, 0, 0, 0, 0, 0});
  check_error([] { eval(OpId::matmul, {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({2, 2}, {1, 2, 3, 4})}); }, {"matmul"});
}

BOOST_AUTO_TEST_CASE(one_d_operands) {
  const TensorData m = f32({2, 2}, {5, 6, 7, 8});
  check(eval(OpId::matmul, {f32({2}, {1, 2}), m}), DType::f32, {2}, {19, 22});
  check(eval(OpId::matmul, {f32({2, 2}, {1, 2, 3, 4}), f32({2}, {5, 6})}), DType::f32, {2}, {17, 39});
  check(eval(OpId::matmul, {f32({2}, {1, 2}), f32({2}, {3, 4})}), DType::f32, {}, {11});
  // 1-D @ batched: [2] @ [2, 2, 1] -> [2, 1].
  check(eval(OpId::matmul, {f32({2}, {1, 2}), f32({2, 2, 1}, {1, 1, 3, -1})}), DType::f32, {2, 1}, {3, 1});
}

BOOST_AUTO_TEST_CASE(batched_broadcast) {
  // [2, 1, 2] @ [2, 2]: the matrix is shared by both batches.
  check(eval(OpId::matmul, {f32({2, 1, 2}, {1, 2, 3, 4}), f32({2, 2}, {1, 0, 0, 2})}), DType::f32, {2, 1, 2},
        {1, 4, 3, 8});
  // Batch [2, 1] with batch [3]: rows r0 = [1, 2], r1 = [3, 4]; columns [1, 1], [1, 0], [0, 1].
  check(eval(OpId::matmul, {f32({2, 1, 1, 2}, {1, 2, 3, 4}), f32({3, 2, 1}, {1, 1, 1, 0, 0, 1})}), DType::f32,
        {2, 3, 1, 1}, {3, 1, 2, 7, 3, 4});
  // Batch by batch: [2, 1, 2] @ [2, 2, 1].
  check(eval(OpId::matmul, {f32({2, 1, 2}, {1, 2, 3, 4}), f32({2, 2, 1}, {1, 1, 2, 0})}), DType::f32, {2, 1, 1},
        {3, 6});
}

BOOST_AUTO_TEST_SUITE_END()

// Convolution (through its decomposition: padded windows and a matmul per group) against a
// direct loop over output positions, channels and kernel taps, in f64: 1-D, 2-D and 3-D; strides,
// dilations, asymmetric pads, groups (depthwise too) and a bias.
BOOST_AUTO_TEST_SUITE(convolution)

namespace {

struct ConvCase {
  std::vector<int64_t> x, w;  // [N, C, *S], [M, C/g, *K]
  std::vector<int64_t> strides, pads, dilations;
  int64_t groups = 1;
  bool bias = false;
};

std::vector<double> direct(const ConvCase& c, const std::vector<double>& x, const std::vector<double>& w,
                           const std::vector<double>& b, std::vector<int64_t>& out) {
  const size_t n = c.x.size() - 2;
  out = {c.x[0], c.w[0]};
  for (size_t d = 0; d < n; ++d)
    out.push_back((c.x[2 + d] + c.pads[d] + c.pads[d + n] - (c.w[2 + d] - 1) * c.dilations[d] - 1) / c.strides[d] + 1);
  int64_t total = 1;
  for (int64_t e : out) total *= e;
  std::vector<double> y(static_cast<size_t>(total), 0.0);
  const int64_t cg = c.w[1], mg = c.w[0] / c.groups;
  int64_t taps = 1;
  for (size_t d = 0; d < n; ++d) taps *= c.w[2 + d];
  int64_t xs = 1;
  for (size_t d = 0; d < n; ++d) xs *= c.x[2 + d];
  for (int64_t i = 0; i < total; ++i) {
    int64_t r = i;
    std::vector<int64_t> o(n);
    for (size_t d = n; d-- > 0;) {
      o[d] = r % out[2 + d];
      r /= out[2 + d];
    }
    const int64_t m = r % c.w[0], nb = r / c.w[0];
    const int64_t g = m / mg;
    double acc = c.bias ? b[static_cast<size_t>(m)] : 0.0;
    for (int64_t ci = 0; ci < cg; ++ci)
      for (int64_t t = 0; t < taps; ++t) {
        int64_t tr = t, xoff = 0, stride = 1;
        bool inside = true;
        std::vector<int64_t> k(n);
        for (size_t d = n; d-- > 0;) {
          k[d] = tr % c.w[2 + d];
          tr /= c.w[2 + d];
        }
        for (size_t d = n; d-- > 0;) {
          const int64_t p = o[d] * c.strides[d] + k[d] * c.dilations[d] - c.pads[d];
          inside = inside && p >= 0 && p < c.x[2 + d];
          xoff += p * stride;
          stride *= c.x[2 + d];
        }
        if (!inside) continue;
        const double xv = x[static_cast<size_t>((nb * c.x[1] + g * cg + ci) * xs + xoff)];
        const double wv = w[static_cast<size_t>((m * cg + ci) * taps + t)];
        acc += xv * wv;
      }
    y[static_cast<size_t>(i)] = acc;
  }
  return y;
}

}  // namespace

// prod(s) values drawn from normal(0, 1).
std::vector<double> normal_values(const std::vector<int64_t>& s, std::mt19937_64& rng) {
  std::normal_distribution<double> normal;
  int64_t n = 1;
  for (int64_t e : s) n *= e;
  std::vector<double> v(static_cast<size_t>(n));
  for (double& e : v) e = normal(rng);
  return v;
}

BOOST_AUTO_TEST_CASE(decomposition_matches_a_direct_loop) {
  const std::vector<ConvCase> cases = {
      {{2, 3, 9}, {4, 3, 3}, {2}, {1, 2}, {1}, 1, true},                      // 1-D, stride, asymmetric pad
      {{1, 4, 7, 6}, {6, 2, 3, 2}, {1, 2}, {1, 1, 0, 1}, {2, 1}, 2, false},     // 2-D, groups, dilation
      {{2, 3, 5, 5}, {3, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 3, true},      // depthwise with bias
      {{1, 3, 7, 6}, {6, 1, 3, 2}, {2, 1}, {1, 0, 0, 1}, {1, 2}, 3, false},     // depthwise, 2 per channel, asymmetric
      {{2, 4, 9}, {4, 1, 5}, {2}, {2, 2}, {1}, 4, true},                       // depthwise 1-D
      {{1, 2, 11, 11}, {2, 1, 9, 9}, {1, 1}, {4, 4, 4, 4}, {1, 1}, 2, false},  // depthwise of 81 taps: im2col
      {{1, 2, 8, 8}, {5, 2, 1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, false},     // 1x1, strided
      {{1, 2, 4, 3, 5}, {3, 2, 2, 1, 3}, {1, 1, 2}, {0, 1, 1, 1, 0, 1}, {1, 1, 1}, 1, true},  // 3-D
  };
  std::mt19937_64 rng(11);
  for (const ConvCase& c : cases) {
    auto fill = [&](const std::vector<int64_t>& s) { return normal_values(s, rng); };
    const std::vector<double> xv = fill(c.x), wv = fill(c.w), bv = fill({c.w[0]});
    std::vector<TensorData> in{f64(c.x, xv), f64(c.w, wv)};
    if (c.bias) in.push_back(f64({c.w[0]}, bv));
    std::vector<int64_t> out;
    const std::vector<double> want = direct(c, xv, wv, bv, out);
    check(eval(OpId::convolution, in, {c.strides, c.pads, c.dilations, c.groups}), DType::f64, out, want, 1e-12);
  }
}

// [N, C, *S] values laid out as [N, *S, C] (sizes in channels-first order).
std::vector<double> to_channels_last(const std::vector<int64_t>& s, const std::vector<double>& v) {
  int64_t inner = 1;
  for (size_t d = 2; d < s.size(); ++d) inner *= s[d];
  std::vector<double> out(v.size());
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t c = 0; c < s[1]; ++c)
      for (int64_t i = 0; i < inner; ++i)
        out[static_cast<size_t>((n * inner + i) * s[1] + c)] = v[static_cast<size_t>((n * s[1] + c) * inner + i)];
  return out;
}

std::vector<int64_t> last_sizes(const std::vector<int64_t>& s) {
  std::vector<int64_t> r{s[0]};
  r.insert(r.end(), s.begin() + 2, s.end());
  r.push_back(s[1]);
  return r;
}

// convolution_channels_last's three decompositions (a linear over the channels, the depthwise
// fold, the convolution between permutes) against the same direct loop.
BOOST_AUTO_TEST_CASE(channels_last_matches_a_direct_loop) {
  const std::vector<ConvCase> cases = {
      {{2, 5, 4, 3}, {6, 5, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, true},     // 1x1 of unit stride: a linear
      {{2, 5, 4, 3}, {6, 5, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, false},    // the same without a bias
      {{2, 3, 5, 5}, {3, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 3, true},     // depthwise with bias
      {{1, 3, 7, 6}, {6, 1, 3, 2}, {2, 1}, {1, 0, 0, 1}, {1, 2}, 3, false},    // depthwise, 2 per channel, asymmetric
      {{2, 4, 9}, {4, 1, 5}, {2}, {2, 2}, {1}, 4, true},                      // depthwise 1-D
      {{1, 4, 7, 6}, {6, 2, 3, 2}, {1, 2}, {1, 1, 0, 1}, {2, 1}, 2, false},    // groups, dilation: between permutes
      {{1, 2, 8, 8}, {5, 2, 1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, true},     // 1x1, strided
      {{1, 2, 4, 3, 5}, {3, 2, 2, 1, 3}, {1, 1, 2}, {0, 1, 1, 1, 0, 1}, {1, 1, 1}, 1, true},  // 3-D
  };
  std::mt19937_64 rng(12);
  for (const ConvCase& c : cases) {
    auto fill = [&](const std::vector<int64_t>& s) { return normal_values(s, rng); };
    const std::vector<double> xv = fill(c.x), wv = fill(c.w), bv = fill({c.w[0]});
    std::vector<TensorData> in{f64(last_sizes(c.x), to_channels_last(c.x, xv)), f64(last_sizes(c.w), to_channels_last(c.w, wv))};
    if (c.bias) in.push_back(f64({c.w[0]}, bv));
    std::vector<int64_t> out;
    const std::vector<double> want = direct(c, xv, wv, bv, out);
    check(eval(OpId::convolution_channels_last, in, {c.strides, c.pads, c.dilations, c.groups}), DType::f64, last_sizes(out),
          to_channels_last(out, want), 1e-12);
  }
}

BOOST_AUTO_TEST_CASE(bad_shapes_are_errors) {
  const TensorData x = f32({1, 4, 5, 5}, std::vector<double>(100, 1.0));
  auto message = [&](std::vector<TensorData> in, Attrs a) {
    try {
      eval(OpId::convolution, in, a);
    } catch (const kiln::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const Attrs plain{std::vector<int64_t>{1, 1}, std::vector<int64_t>{0, 0, 0, 0}, std::vector<int64_t>{1, 1}, int64_t{1}};
  BOOST_TEST(message({x, f32({2, 3, 3, 3}, std::vector<double>(54, 1.0))}, plain).find("does not match 4 input channels") !=
             std::string::npos);
  BOOST_TEST(message({x, f32({2, 4, 7, 7}, std::vector<double>(392, 1.0))}, plain).find("larger than the padded input") !=
             std::string::npos);
  const Attrs short_pads{std::vector<int64_t>{1, 1}, std::vector<int64_t>{0, 0}, std::vector<int64_t>{1, 1}, int64_t{1}};
  BOOST_TEST(message({x, f32({2, 4, 3, 3}, std::vector<double>(72, 1.0))}, short_pads).find("4 pads") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
