// The ops real models are written with: convolutions, pooling (fixed and adaptive), channel
// norms, clamp, masked_fill, stack/split/chunk/unbind and the member forms, against
// hand-computed values; then one small CNN compiled for the CPU against its eager run.
#include "helpers.h"

#include <cmath>
#include <numeric>
#include <random>

#include "kiln/compile.h"

using namespace kiln;
using namespace frontend_test;

namespace {
Tensor grid(int64_t rows, int64_t cols) {  // [1, 1, rows, cols] holding 0, 1, 2, ...
  return reshape(arange(0, static_cast<double>(rows * cols), 1, DType::f32), {1, 1, rows, cols});
}
}  // namespace

BOOST_AUTO_TEST_SUITE(model_ops)

BOOST_AUTO_TEST_CASE(convolutions) {
  const Tensor x = grid(3, 3);
  const Tensor w = ones({1, 1, 2, 2});
  check_tensor(conv2d(x, w), {1, 1, 2, 2}, DType::f32, {8, 12, 20, 24});
  check_tensor(conv2d(x, w, f32({0.5}), {2}, {1}), {1, 1, 2, 2}, DType::f32, {0.5, 3.5, 9.5, 24.5});
  // Two groups of one channel each: each output channel sees its own input channel.
  const Tensor x2 = cat({x, mul(x, 10.0)}, 1);
  check_tensor(conv2d(x2, ones({2, 1, 2, 2}), {}, {1}, {0}, {1}, 2), {1, 2, 2, 2}, DType::f32,
               {8, 12, 20, 24, 80, 120, 200, 240});
  check_tensor(conv1d(reshape(x, {1, 1, 9}), ones({1, 1, 3}), {}, {3}), {1, 1, 3}, DType::f32, {3, 12, 21});
  check_tensor(conv1d(reshape(x, {1, 1, 9}), ones({1, 1, 2}), {}, {1}, {0}, {4}), {1, 1, 5}, DType::f32, {4, 6, 8, 10, 12});
  check_tensor(conv3d(reshape(x, {1, 1, 1, 3, 3}), ones({1, 1, 1, 3, 3})), {1, 1, 1, 1, 1}, DType::f32, {36});
  BOOST_CHECK_THROW(conv2d(reshape(x, {1, 9}), w), Error);               // no spatial dims
  BOOST_CHECK_THROW(conv2d(x, w, {}, {1, 1, 1}), Error);                 // three strides for two dims
  BOOST_CHECK_THROW(conv2d(x, ones({1, 2, 2, 2})), Error);               // channels do not match
}

BOOST_AUTO_TEST_CASE(pooling) {
  const Tensor x = grid(4, 4);
  check_tensor(max_pool2d(x, {2}), {1, 1, 2, 2}, DType::f32, {5, 7, 13, 15});
  check_tensor(avg_pool2d(x, {2}), {1, 1, 2, 2}, DType::f32, {2.5, 4.5, 10.5, 12.5});
  // 3x3 windows, stride 2, pad 1: the pads count (torch's default) or do not.
  check_tensor(avg_pool2d(x, {3}, {2}, {1}), {1, 1, 2, 2}, DType::f32, {10.0 / 9, 24.0 / 9, 51.0 / 9, 10.0}, 1e-6);
  check_tensor(avg_pool2d(x, {3}, {2}, {1}, false, false), {1, 1, 2, 2}, DType::f32, {2.5, 4.0, 8.5, 10.0});
  check_tensor(max_pool2d(x, {3}, {2}, {1}), {1, 1, 2, 2}, DType::f32, {5, 7, 13, 15});
  // ceil_mode keeps the last, partial window.
  check_tensor(max_pool2d(grid(3, 3), {2}, {2}, {0}, {1}, true), {1, 1, 2, 2}, DType::f32, {4, 5, 7, 8});
  check_tensor(max_pool1d(reshape(x, {1, 2, 8}), {3}, {3}), {1, 2, 2}, DType::f32, {2, 5, 10, 13});
  // Adaptive windows [floor(i * 5 / 3), ceil((i + 1) * 5 / 3)) overlap when 3 does not divide 5.
  const Tensor g5 = grid(5, 5);
  check_tensor(adaptive_avg_pool2d(g5, {3}), {1, 1, 3, 3}, DType::f32, {3, 4.5, 6, 10.5, 12, 13.5, 18, 19.5, 21});
  check_tensor(adaptive_max_pool2d(g5, {3}), {1, 1, 3, 3}, DType::f32, {6, 8, 9, 16, 18, 19, 21, 23, 24});
  check_tensor(adaptive_avg_pool2d(x, {1}), {1, 1, 1, 1}, DType::f32, {7.5});
  check_tensor(adaptive_avg_pool2d(x, {2, 4}), {1, 1, 2, 4}, DType::f32, {2, 3, 4, 5, 10, 11, 12, 13});
  BOOST_CHECK_THROW(max_pool2d(x, {5}), Error);                          // larger than the input
  BOOST_CHECK_THROW(max_pool2d(from_vector<int32_t>({1, 2, 3, 4}, {1, 1, 2, 2}), {2}), Error);  // integers
}

BOOST_AUTO_TEST_CASE(channel_norms) {
  // Channel 0 holds 0..3, channel 1 holds 4..7.
  const Tensor x = reshape(arange(0, 8, 1, DType::f32), {1, 2, 2, 2});
  const Tensor mean = f32({1, 2}), var = f32({4, 1}), w = f32({2, 3}), b = f32({-1, 1});
  check_tensor(batch_norm(x, mean, var, w, b, 0.0), {1, 2, 2, 2}, DType::f32,
               {-2, -1, 0, 1, 7, 10, 13, 16});
  check_tensor(batch_norm(x, mean, var, {}, {}, 0.0), {1, 2, 2, 2}, DType::f32, {-0.5, 0, 0.5, 1, 2, 3, 4, 5});
  // Instance norm: each channel 0..3 (or 4..7) normalised to mean 0, variance 1.
  const double s = 1 / std::sqrt(1.25 + 1e-5);
  const std::vector<double> z{-1.5 * s, -0.5 * s, 0.5 * s, 1.5 * s};
  check_tensor(instance_norm(x), {1, 2, 2, 2}, DType::f32, {z[0], z[1], z[2], z[3], z[0], z[1], z[2], z[3]}, 1e-5);
  check_tensor(group_norm(x, 2, w, b), {1, 2, 2, 2}, DType::f32,
               {2 * z[0] - 1, 2 * z[1] - 1, 2 * z[2] - 1, 2 * z[3] - 1, 3 * z[0] + 1, 3 * z[1] + 1, 3 * z[2] + 1,
                3 * z[3] + 1},
               1e-5);
  const double t = 1 / std::sqrt(5.25 + 1e-5);  // one group over 0..7: mean 3.5, variance 5.25
  check_tensor(group_norm(x, 1), {1, 2, 2, 2}, DType::f32,
               {-3.5 * t, -2.5 * t, -1.5 * t, -0.5 * t, 0.5 * t, 1.5 * t, 2.5 * t, 3.5 * t}, 1e-5);
  BOOST_CHECK_THROW(group_norm(x, 3), Error);
  BOOST_CHECK_THROW(batch_norm(x, f32({1, 2, 3}), var), Error);
}

BOOST_AUTO_TEST_CASE(conveniences) {
  const Tensor x = f32({-2, -0.5, 0.5, 2, 4, 7}, {2, 3});
  check_tensor(clamp(x, -1, 3), {2, 3}, DType::f32, {-1, -0.5, 0.5, 2, 3, 3});
  check_tensor(clamp(x, std::nullopt, 0.0), {2, 3}, DType::f32, {-2, -0.5, 0, 0, 0, 0});
  check_tensor(clamp(x, f32({0, 1, 2}), Tensor()), {2, 3}, DType::f32, {0, 1, 2, 2, 4, 7});
  BOOST_CHECK_THROW(clamp(x, std::nullopt, std::nullopt), Error);
  check_tensor(masked_fill(x, gt(x, 1.0), -9.0), {2, 3}, DType::f32, {-2, -0.5, 0.5, -9, -9, -9});
  check_tensor(stack({x, x}, 1), {2, 2, 3}, DType::f32, {-2, -0.5, 0.5, -2, -0.5, 0.5, 2, 4, 7, 2, 4, 7});
  const std::vector<Tensor> parts = split(x, 2, 1);
  BOOST_TEST_REQUIRE(parts.size() == 2u);
  check_tensor(parts[0], {2, 2}, DType::f32, {-2, -0.5, 2, 4});
  check_tensor(parts[1], {2, 1}, DType::f32, {0.5, 7});
  const std::vector<Tensor> sized = split(x, Dims{1, 0, 2}, -1);
  BOOST_TEST_REQUIRE(sized.size() == 3u);
  BOOST_TEST(sizes_of(sized[1]) == (Sizes{2, 0}));
  BOOST_CHECK_THROW(split(x, Dims{1, 1}, 1), Error);
  BOOST_TEST(chunk(arange(5), 3).size() == 3u);  // sizes 2, 2, 1 as torch.chunk
  BOOST_TEST(chunk(arange(6), 4).size() == 3u);  // sizes 2, 2, 2: fewer chunks than asked, as torch.chunk
  const std::vector<Tensor> rows = unbind(x);
  BOOST_TEST_REQUIRE(rows.size() == 2u);
  check_tensor(rows[1], {3}, DType::f32, {2, 4, 7});
}

BOOST_AUTO_TEST_CASE(member_forms) {
  const Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  check_tensor(x.sum({-1}), {2}, DType::f32, {6, 15});
  check_tensor(x.mean({0}, true), {1, 3}, DType::f32, {2.5, 3.5, 4.5});
  check_tensor(x.max(), {}, DType::f32, {6});
  check_tensor(x.view({3, 2}).transpose(0, 1), {2, 3}, DType::f32, {1, 3, 5, 2, 4, 6});
  check_tensor(x.unsqueeze(0).flatten(), {6}, DType::f32, {1, 2, 3, 4, 5, 6});
  check_tensor(x.matmul(x.permute({1, 0})), {2, 2}, DType::f32, {14, 32, 32, 77});
  check_tensor(x.argmax(1), {2}, DType::i64, {2, 2});
  check_tensor(x.softmax(0).sum({0}), {3}, DType::f32, {1, 1, 1}, 1e-6);
  check_tensor((x - 3.5).relu().sqrt(), {2, 3}, DType::f32, {0, 0, 0, std::sqrt(0.5), std::sqrt(1.5), std::sqrt(2.5)}, 1e-6);
}

// A small CNN (conv, batch norm, relu, max pool, grouped conv, group norm, adaptive pool, linear)
// compiled for the CPU, with a dynamic batch, against the same calls run eagerly.
BOOST_AUTO_TEST_CASE(masks_and_indices) {
  const Tensor x = add(reshape(arange(0, 12, 1, DType::f32), {3, 4}), 1.0);
  check_tensor(tril(x), {3, 4}, DType::f32, {1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0});
  check_tensor(triu(x, 1), {3, 4}, DType::f32, {0, 2, 3, 4, 0, 0, 7, 8, 0, 0, 0, 12});
  check_tensor(tril(x, -1), {3, 4}, DType::f32, {0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0});
  check_tensor(tril(ones({2, 2, 2}, DType::bool_)), {2, 2, 2}, DType::bool_, {1, 0, 1, 1, 1, 0, 1, 1});
  check_tensor(one_hot(from_vector<int64_t>({2, 0, 1}), 3), {3, 3}, DType::i64, {0, 0, 1, 1, 0, 0, 0, 1, 0});
  check_tensor(iota({2, 3}, 1, DType::i32), {2, 3}, DType::i32, {0, 1, 2, 0, 1, 2});
  check_tensor(cumsum(x, 1), {3, 4}, DType::f32, {1, 3, 6, 10, 5, 11, 18, 26, 9, 19, 30, 42});
  check_tensor(cumsum(x, 0), {3, 4}, DType::f32, {1, 2, 3, 4, 6, 8, 10, 12, 15, 18, 21, 24});
  check_tensor(cumsum(from_vector<int32_t>({3, -1, 4}), 0), {3}, DType::i64, {3, 2, 6});
  check_tensor(cumprod(x, 1), {3, 4}, DType::f32, {1, 2, 6, 24, 5, 30, 210, 1680, 9, 90, 990, 11880});
  check_tensor(cumprod(x, -2), {3, 4}, DType::f32, {1, 2, 3, 4, 5, 12, 21, 32, 45, 120, 231, 384});
  check_tensor(cumprod(from_vector<int32_t>({3, -1, 4, 0, 7}), 0), {5}, DType::i64, {3, -3, -12, 0, 0});
  check_tensor(arange(SymInt(4)), {4}, DType::i64, {0, 1, 2, 3});
  check_tensor(where(gt(x, 6.0), 1.5, 0), {3, 4}, DType::f32, {0, 0, 0, 0, 0, 0, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5});
  check_tensor(where(gt(x, 10.0), 1, 0), {3, 4}, DType::i64, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1});
  BOOST_CHECK_THROW(one_hot(from_vector<int64_t>({3}), 3), Error);  // class outside [0, 3)
  BOOST_CHECK_THROW(one_hot(x, 3), Error);                          // not integers
  BOOST_CHECK_THROW(tril(ones({4})), Error);                        // no matrix
}

// sdpa's mask, is_causal and enable_gqa against the attention written out.
BOOST_AUTO_TEST_CASE(attention_masks) {
  const Tensor q = randn({2, 4, 5, 8}, DType::f32, Device::cpu(), 1);
  const Tensor k = randn({2, 2, 5, 8}, DType::f32, Device::cpu(), 2);
  const Tensor v = randn({2, 2, 5, 8}, DType::f32, Device::cpu(), 3);
  const double scale = 1.0 / std::sqrt(8.0);
  // GQA: each of k's 2 heads serves 2 of q's 4 heads, in order.
  const Tensor kr = reshape(expand(unsqueeze(k, 2), {2, 2, 2, 5, 8}), {2, 4, 5, 8});
  const Tensor vr = reshape(expand(unsqueeze(v, 2), {2, 2, 2, 5, 8}), {2, 4, 5, 8});
  const Tensor scores = mul(matmul(q, transpose(kr, -1, -2)), scale);
  const Tensor causal = tril(ones({5, 5}, DType::bool_));
  const Tensor want = matmul(softmax(where(causal, scores, -INFINITY), -1), vr);
  const Tensor got = scaled_dot_product_attention(q, k, v, {.is_causal = true, .enable_gqa = true});
  check_values(got, want.to_vector<double>(), 1e-5);
  const Tensor bias = randn({5, 5}, DType::f32, Device::cpu(), 4);
  check_values(scaled_dot_product_attention(q, kr, vr, {.mask = bias}),
               matmul(softmax(add(scores, bias), -1), vr).to_vector<double>(), 1e-5);
  check_values(scaled_dot_product_attention(q, kr, vr, {.mask = causal}), want.to_vector<double>(), 1e-5);
  BOOST_CHECK_THROW(scaled_dot_product_attention(q, k, v, {.is_causal = true}), Error);  // heads differ, no gqa
  BOOST_CHECK_THROW(scaled_dot_product_attention(q, kr, vr, {.mask = causal, .is_causal = true}), Error);
  BOOST_CHECK_THROW(scaled_dot_product_attention(q, kr, vr, {.mask = ones({5, 6}, DType::bool_)}), Error);
}

// A causal decoder step whose mask and positions come from the sequence length: one compile
// serves every length once the length is dynamic (nothing in it specialises the dim).
BOOST_AUTO_TEST_CASE(a_causal_attention_keeps_its_length_dynamic) {
  const Tensor pos_table = randn({16, 8}, DType::f32, Device::cpu(), 7);
  auto step = [](const Tensor& x, const Tensor& table) {
    const Tensor pos = index_select(table, 0, arange(x.shape()[1]));  // [L, 8]
    const Tensor h = add(x, pos);
    return scaled_dot_product_attention(h, h, h, {.is_causal = true});
  };
  auto compiled = kiln::compile(step);
  for (int64_t len : {5, 7, 9}) {
    Tensor x = randn({2, len, 8}, DType::f32, Device::cpu(), static_cast<uint64_t>(len));
    mark_dynamic(x, 1);
    check_values(compiled(x, pos_table), step(x, pos_table).to_vector<double>(), 1e-5);
  }
  BOOST_TEST(compiled.stats().compiles == 1);
}

BOOST_AUTO_TEST_CASE(a_compiled_cnn_matches_eager) {
  const Tensor w1 = randn({8, 3, 3, 3}, DType::f32, Device::cpu(), 1), b1 = randn({8}, DType::f32, Device::cpu(), 2);
  const Tensor mean = randn({8}, DType::f32, Device::cpu(), 3);
  const Tensor var = add(abs(randn({8}, DType::f32, Device::cpu(), 4)), 0.5);
  const Tensor w2 = randn({8, 2, 3, 3}, DType::f32, Device::cpu(), 5), fc = randn({5, 8}, DType::f32, Device::cpu(), 6);
  auto net = [](const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& mean, const Tensor& var,
                const Tensor& w2, const Tensor& fc) {
    Tensor y = conv2d(x, w1, b1, {1}, {1});
    y = batch_norm(y, mean, var).relu();
    y = max_pool2d(y, {3}, {2}, {1});
    y = clamp(conv2d(y, w2, {}, {1}, {1}, {1}, 4), 0.0, 6.0);
    y = group_norm(y, 4);
    y = adaptive_avg_pool2d(y, {1}).flatten(1);
    return linear(y, fc);
  };
  auto compiled = kiln::compile(net);
  for (int64_t batch : {2, 3}) {
    const Tensor x = randn({batch, 3, 11, 11}, DType::f32, Device::cpu(), static_cast<uint64_t>(10 + batch));
    const Tensor want = net(x, w1, b1, mean, var, w2, fc);
    const Tensor got = compiled(x, w1, b1, mean, var, w2, fc);
    BOOST_TEST(sizes_of(got) == (Sizes{batch, 5}));
    check_values(got, want.to_vector<double>() /* eager */, 1e-4);
  }
}

// sort, argsort and topk against std::stable_sort (NaN above every number, ties in order), eager
// and compiled, and the values' gradient (the permutation back).
BOOST_AUTO_TEST_CASE(sort_argsort_topk_match_a_stable_sort) {
  std::mt19937 rng(5);
  for (int64_t n : {1, 2, 7, 16, 100, 1000}) {
    std::vector<float> v(static_cast<size_t>(3 * n));
    for (float& e : v) e = static_cast<float>(static_cast<int>(rng() % 11) - 5);  // many ties
    if (n > 2) v[1] = NAN, v[static_cast<size_t>(n + 2)] = NAN, v[2] = -0.0f;
    const Tensor x = from_vector<float>(v, {3, n});
    for (bool descending : {false, true}) {
      const auto [values, indices] = sort(x, 1, descending);
      auto cf = kiln::compile([descending](const Tensor& a) { return argsort(a, -1, descending); });
      const std::vector<int64_t> compiled = cf(x).to_vector<int64_t>();
      const std::vector<float> got = values.to_vector<float>();
      const std::vector<int64_t> pos = indices.to_vector<int64_t>();
      for (int64_t r = 0; r < 3; ++r) {
        std::vector<int64_t> want(static_cast<size_t>(n));
        std::iota(want.begin(), want.end(), 0);
        auto key = [&](int64_t j) { return v[static_cast<size_t>(r * n + j)]; };
        std::stable_sort(want.begin(), want.end(), [&](int64_t a, int64_t b) {
          const float ka = key(a), kb = key(b);
          if (std::isnan(ka) || std::isnan(kb)) return descending ? (std::isnan(ka) && !std::isnan(kb)) : (!std::isnan(ka) && std::isnan(kb));
          return descending ? ka > kb : ka < kb;
        });
        for (int64_t j = 0; j < n; ++j) {
          const size_t at = static_cast<size_t>(r * n + j);
          BOOST_TEST(pos[at] == want[static_cast<size_t>(j)], "n " << n << " row " << r << " position " << j);
          BOOST_TEST(compiled[at] == want[static_cast<size_t>(j)]);
          const float w = key(want[static_cast<size_t>(j)]);
          BOOST_TEST((std::isnan(w) ? std::isnan(got[at]) : got[at] == w));
        }
      }
    }
  }
  // Integers and bool; topk's k largest and smallest.
  check_tensor(argsort(from_vector<int64_t>({3, -1, 3, 2})), {4}, DType::i64, {1, 3, 0, 2});
  check_tensor(sort(from_vector<bool>({true, false, true, false})).first, {4}, DType::bool_, {0, 0, 1, 1});
  const auto [top, at] = topk(from_vector<float>({0.5f, 3, -2, 3, 1}), 3);
  check_tensor(top, {3}, DType::f32, {3, 3, 1});
  check_tensor(at, {3}, DType::i64, {1, 3, 4});
  check_tensor(topk(from_vector<int32_t>({4, 1, 2}, {1, 3}), 2, 1, false).first, {1, 2}, DType::i32, {1, 2});
  BOOST_CHECK_THROW(topk(from_vector<float>({1, 2}), 3), Error);
  // The gradient of the sorted values is the permutation back.
  const Tensor w = from_vector<float>({2, -1, 5, 0});
  w.requires_grad_();
  const std::vector<Tensor> g = grad({sum(sort(w).first * from_vector<float>({1, 10, 100, 1000}))}, {w});
  check_tensor(g[0], {4}, DType::f32, {100, 1, 1000, 10});
}

// Along a dim of dynamic size (a counting sort: one compile for every size), against the eager
// sorting network; the sorted values' gradient is still the permutation back.
BOOST_AUTO_TEST_CASE(sort_along_a_dynamic_dim) {
  auto f = kiln::compile([](const Tensor& x) {
    const auto [values, positions] = sort(x, 1, true);
    return std::vector<Tensor>{values, positions, argsort(x, 0)};
  }, CompileOptions{.dynamic = true});
  std::mt19937 rng(9);
  for (int64_t n : {5, 13, 70}) {
    std::vector<float> v(static_cast<size_t>(4 * n));
    for (float& e : v) e = static_cast<float>(static_cast<int>(rng() % 7) - 3);  // many ties
    v[3] = NAN;
    v[4] = -0.0f;
    const Tensor x = from_vector<float>(v, {4, n});
    const std::vector<Tensor> got = f(x);
    const auto [values, positions] = sort(x, 1, true);
    BOOST_TEST(got[1].to_vector<int64_t>() == positions.to_vector<int64_t>(), boost::test_tools::per_element());
    BOOST_TEST(got[2].to_vector<int64_t>() == argsort(x, 0).to_vector<int64_t>(), boost::test_tools::per_element());
    const std::vector<float> a = got[0].to_vector<float>(), b = values.to_vector<float>();
    for (size_t i = 0; i < a.size(); ++i)
      BOOST_TEST((std::isnan(b[i]) ? std::isnan(a[i]) : (a[i] == b[i] && std::signbit(a[i]) == std::signbit(b[i]))), i);
  }
  BOOST_TEST(f.stats().compiles == 1);
  BOOST_TEST(f.stats().graph_breaks == 0);
  auto g = kiln::compile([](const Tensor& w, const Tensor& scale) { return sum(sort(w, 0).first * scale); },
                         CompileOptions{.dynamic = true});
  const Tensor w = from_vector<float>({2, -1, 5, 0}, {4});
  w.requires_grad_();
  const Tensor loss = g(w, from_vector<float>({1, 10, 100, 1000}, {4}));
  const std::vector<Tensor> dw = grad({loss}, {w});
  check_tensor(dw[0], {4}, DType::f32, {100, 1, 1000, 10});
}

BOOST_AUTO_TEST_SUITE_END()
