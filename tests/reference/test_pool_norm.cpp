// Pooling and channel normalisation (through their decompositions) against direct loops in f64:
// max_pool and avg_pool over 1-3 spatial dims with strides, dilations, asymmetric pads,
// ceil_mode and both divisor rules; batch_norm and group_norm with and without affine params.
#include <boost/test/unit_test.hpp>

#include <random>

#include "helpers.h"

using namespace ref_test;

namespace {

std::vector<double> random_values(std::mt19937_64& rng, const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t e : sizes) n *= e;
  std::normal_distribution<double> normal;
  std::vector<double> v(static_cast<size_t>(n));
  for (double& e : v) e = normal(rng);
  return v;
}

struct PoolCase {
  std::vector<int64_t> x;  // [N, C, *S]
  std::vector<int64_t> kernel, strides, pads, dilations;
  bool ceil_mode = false;
  bool count_include_pad = false;
};

// Output size as torch documents it (pooling, with ceil_mode's rule for the last window).
int64_t pooled_size(int64_t in, int64_t k, int64_t s, int64_t pb, int64_t pe, int64_t d, bool ceil_mode) {
  const double q = static_cast<double>(in + pb + pe - d * (k - 1) - 1) / static_cast<double>(s);
  int64_t o = static_cast<int64_t>(ceil_mode ? std::ceil(q) : std::floor(q)) + 1;
  if (ceil_mode && (o - 1) * s >= in + pb) --o;
  return o;
}

// Each output visits its window's taps: max over the taps inside x, or their sum divided by the
// taps inside x (or inside x and its explicit pads).
std::vector<double> direct_pool(const PoolCase& c, const std::vector<double>& x, bool is_max, std::vector<int64_t>& out) {
  const size_t n = c.x.size() - 2;
  out = {c.x[0], c.x[1]};
  for (size_t d = 0; d < n; ++d)
    out.push_back(pooled_size(c.x[2 + d], c.kernel[d], c.strides[d], c.pads[d], c.pads[d + n], c.dilations[d], c.ceil_mode));
  int64_t total = 1, plane = 1, taps = 1;
  for (int64_t e : out) total *= e;
  for (size_t d = 0; d < n; ++d) plane *= c.x[2 + d];
  for (int64_t k : c.kernel) taps *= k;
  std::vector<double> y(static_cast<size_t>(total));
  for (int64_t i = 0; i < total; ++i) {
    int64_t r = i;
    std::vector<int64_t> o(n);
    for (size_t d = n; d-- > 0;) {
      o[d] = r % out[2 + d];
      r /= out[2 + d];
    }
    double best = -kInf, sum = 0, count = 0;
    for (int64_t t = 0; t < taps; ++t) {
      int64_t tr = t, off = 0, stride = 1;
      bool inside = true, inside_pads = true;
      std::vector<int64_t> k(n);
      for (size_t d = n; d-- > 0;) {
        k[d] = tr % c.kernel[d];
        tr /= c.kernel[d];
      }
      for (size_t d = n; d-- > 0;) {
        const int64_t p = o[d] * c.strides[d] + k[d] * c.dilations[d] - c.pads[d];
        inside = inside && p >= 0 && p < c.x[2 + d];
        inside_pads = inside_pads && p >= -c.pads[d] && p < c.x[2 + d] + c.pads[d + n];
        off += p * stride;
        stride *= c.x[2 + d];
      }
      if (c.count_include_pad ? inside_pads : inside) count += 1;
      if (!inside) continue;
      const double v = x[static_cast<size_t>(r * plane + off)];
      best = std::max(best, v);
      sum += v;
    }
    y[static_cast<size_t>(i)] = is_max ? best : sum / count;
  }
  return y;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(pooling)

BOOST_AUTO_TEST_CASE(decompositions_match_a_direct_loop) {
  const std::vector<PoolCase> cases = {
      {{2, 3, 9}, {3}, {2}, {1, 1}, {1}, false, false},                          // 1-D, stride, pads
      {{1, 2, 7, 6}, {3, 2}, {2, 2}, {1, 0, 1, 1}, {1, 1}, true, false},          // ceil_mode, asymmetric
      {{1, 2, 7, 6}, {3, 2}, {2, 2}, {1, 0, 1, 1}, {1, 1}, true, true},           // ceil_mode, pads counted
      {{2, 2, 8, 8}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false, true},          // resnet's stem pool shape
      {{1, 3, 9, 7}, {2, 3}, {1, 2}, {0, 1, 0, 1}, {2, 1}, false, false},         // dilation
      {{1, 2, 6, 6}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, false, false},         // no padding
      {{1, 2, 4, 5, 5}, {2, 3, 2}, {2, 1, 2}, {0, 1, 1, 1, 1, 0}, {1, 1, 1}, true, false},  // 3-D
  };
  std::mt19937_64 rng(5);
  for (const PoolCase& c : cases) {
    const std::vector<double> xv = random_values(rng, c.x);
    std::vector<int64_t> out;
    const std::vector<double> want_max = direct_pool(c, xv, true, out);
    check(eval(OpId::max_pool, {f64(c.x, xv)}, {c.kernel, c.strides, c.pads, c.dilations, c.ceil_mode}), DType::f64, out,
          want_max, 1e-15);
    const std::vector<double> want_avg = direct_pool(c, xv, false, out);
    check(eval(OpId::avg_pool, {f64(c.x, xv)}, {c.kernel, c.strides, c.pads, c.dilations, c.ceil_mode, c.count_include_pad}),
          DType::f64, out, want_avg, 1e-12);
  }
}

BOOST_AUTO_TEST_CASE(bad_attributes_are_errors) {
  const TensorData x = f32({1, 2, 5, 5}, std::vector<double>(50, 1.0));
  auto message = [&](Attrs a) {
    try {
      eval(OpId::max_pool, {x}, std::move(a));
    } catch (const kiln::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  using I = std::vector<int64_t>;
  BOOST_TEST(message({I{7, 7}, I{1, 1}, I{0, 0, 0, 0}, I{1, 1}, false}).find("larger than the padded input") != std::string::npos);
  BOOST_TEST(message({I{2, 2}, I{1, 1}, I{0, 0}, I{1, 1}, false}).find("4 pads") != std::string::npos);
  BOOST_TEST(message({I{2, 2}, I{0, 1}, I{0, 0, 0, 0}, I{1, 1}, false}).find("must be positive") != std::string::npos);
  try {
    eval(OpId::max_pool, {tensor(DType::i32, {1, 1, 2}, {1, 2})}, {I{1}, I{1}, I{0, 0}, I{1}, false});
    BOOST_ERROR("an integer max_pool was accepted");
  } catch (const kiln::Error& e) {
    BOOST_TEST(std::string(e.what()).find("floating point") != std::string::npos);
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(channel_norms)

BOOST_AUTO_TEST_CASE(batch_norm_matches_a_direct_loop) {
  std::mt19937_64 rng(9);
  const std::vector<int64_t> xs{2, 3, 4, 5};
  const std::vector<double> x = random_values(rng, xs), mean = random_values(rng, {3}), w = random_values(rng, {3}),
                            b = random_values(rng, {3});
  std::vector<double> var = random_values(rng, {3});
  for (double& v : var) v = v * v + 0.1;
  const double eps = 1e-3;
  for (size_t inputs = 3; inputs <= 5; ++inputs) {
    std::vector<double> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const size_t ch = (i / 20) % 3;
      double y = (x[i] - mean[ch]) / std::sqrt(var[ch] + eps);
      if (inputs > 3) y *= w[ch];
      if (inputs > 4) y += b[ch];
      want[i] = y;
    }
    std::vector<TensorData> in{f64(xs, x), f64({3}, mean), f64({3}, var), f64({3}, w), f64({3}, b)};
    in.resize(inputs);
    check(eval(OpId::batch_norm, in, {eps}), DType::f64, xs, want, 1e-12);
  }
}

BOOST_AUTO_TEST_CASE(group_norm_matches_a_direct_loop) {
  std::mt19937_64 rng(10);
  const std::vector<int64_t> xs{2, 6, 3, 2};
  const std::vector<double> x = random_values(rng, xs), w = random_values(rng, {6}), b = random_values(rng, {6});
  for (int64_t groups : {1, 2, 3, 6}) {
    const int64_t per = 6 / groups * 6;  // elements of a group: its channels times the 3x2 plane
    std::vector<double> want(x.size());
    for (int64_t start = 0; start < static_cast<int64_t>(x.size()); start += per) {
      double mean = 0, var = 0;
      for (int64_t i = start; i < start + per; ++i) mean += x[static_cast<size_t>(i)] / static_cast<double>(per);
      for (int64_t i = start; i < start + per; ++i)
        var += (x[static_cast<size_t>(i)] - mean) * (x[static_cast<size_t>(i)] - mean) / static_cast<double>(per);
      for (int64_t i = start; i < start + per; ++i) {
        const size_t ch = static_cast<size_t>((i / 6) % 6);
        want[static_cast<size_t>(i)] = (x[static_cast<size_t>(i)] - mean) / std::sqrt(var + 1e-5) * w[ch] + b[ch];
      }
    }
    check(eval(OpId::group_norm, {f64(xs, x), f64({6}, w), f64({6}, b)}, {groups, 1e-5}), DType::f64, xs, want, 1e-12);
  }
  try {
    eval(OpId::group_norm, {f64(xs, x)}, {int64_t{4}, 1e-5});
    BOOST_ERROR("6 channels in 4 groups were accepted");
  } catch (const kiln::Error& e) {
    BOOST_TEST(std::string(e.what()).find("do not split into 4 groups") != std::string::npos);
  }
}

BOOST_AUTO_TEST_SUITE_END()
