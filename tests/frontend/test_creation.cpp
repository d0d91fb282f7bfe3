// Creation functions, from_vector / to_vector / item for every C++ element type, moving
// between dtypes and devices, and printing.
#include <limits>
#include <set>
#include <sstream>

#include "helpers.h"

using namespace kiln;
using namespace frontend_test;

BOOST_AUTO_TEST_SUITE(creation)

BOOST_AUTO_TEST_CASE(from_vector_every_type) {
  const Tensor f = from_vector<float>({1.5f, -2.25f});
  BOOST_TEST(f.dtype() == DType::f32);
  BOOST_TEST(f.to_vector<float>() == (std::vector<float>{1.5f, -2.25f}));
  const Tensor d = from_vector<double>({0.1, 1e300});
  BOOST_TEST(d.dtype() == DType::f64);
  BOOST_TEST(d.to_vector<double>() == (std::vector<double>{0.1, 1e300}));  // exact: no rounding through f32
  const Tensor i = from_vector<int32_t>({-7, 2147483647});
  BOOST_TEST(i.dtype() == DType::i32);
  BOOST_TEST(i.to_vector<int32_t>() == (std::vector<int32_t>{-7, 2147483647}));
  const int64_t big = (int64_t{1} << 60) + 1;  // not representable in a double
  const Tensor l = from_vector<int64_t>({big, -3});
  BOOST_TEST(l.dtype() == DType::i64);
  BOOST_TEST(l.to_vector<int64_t>() == (std::vector<int64_t>{big, -3}));
  BOOST_TEST(slice(l, 0, 0, 1).item<int64_t>() == big);
  const Tensor b = from_vector<bool>({true, false, true});
  BOOST_TEST(b.dtype() == DType::bool_);
  BOOST_TEST(b.to_vector<bool>() == (std::vector<bool>{true, false, true}));
  BOOST_TEST(b.to_vector<int64_t>() == (std::vector<int64_t>{1, 0, 1}));
  // Reading as another C++ type converts.
  BOOST_TEST(f.to_vector<int32_t>() == (std::vector<int32_t>{1, -2}));
  BOOST_TEST(i.to_vector<double>() == (std::vector<double>{-7, 2147483647}));
}

BOOST_AUTO_TEST_CASE(from_vector_shapes) {
  const Tensor m = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  check_tensor(m, {2, 3}, DType::f32, {1, 2, 3, 4, 5, 6});
  BOOST_TEST(m.rank() == 2);
  BOOST_TEST(m.size(1) == 3);
  BOOST_TEST(m.size(-1) == 3);
  BOOST_TEST(m.numel() == 6);
  BOOST_TEST(m.device() == Device::cpu());
  BOOST_TEST(m.data().is_contiguous());
  // Default shape: 1-D of values.size(), including an empty vector.
  const Tensor e = from_vector<float>({});
  BOOST_TEST(sizes_of(e) == Sizes{0});
  BOOST_TEST(e.to_vector<float>().empty());
  const Tensor z = from_vector<float>({}, {2, 0});
  BOOST_TEST(sizes_of(z) == (Sizes{2, 0}));
  const Tensor one = from_vector<double>({4.5}, {1, 1});
  BOOST_TEST(sizes_of(one) == (Sizes{1, 1}));
  BOOST_TEST(one.item<double>() == 4.5);
}

BOOST_AUTO_TEST_CASE(item_every_type) {
  BOOST_TEST(from_vector<float>({2.5f}).item<float>() == 2.5f);
  BOOST_TEST(from_vector<float>({2.5f}).item<double>() == 2.5);
  BOOST_TEST(from_vector<float>({2.5f}).item<int64_t>() == 2);  // truncation, as a cast
  BOOST_TEST(from_vector<double>({-0.125}).item<double>() == -0.125);
  BOOST_TEST(from_vector<int32_t>({-9}).item<int32_t>() == -9);
  BOOST_TEST(from_vector<int64_t>({1234567890123}).item<int64_t>() == 1234567890123);
  BOOST_TEST(from_vector<bool>({true}).item<bool>());
  BOOST_TEST(!from_vector<bool>({false}).item<bool>());
  BOOST_TEST(scalar_tensor(3.0).item<float>() == 3.0f);
  BOOST_TEST(scalar_tensor(3.0).rank() == 0);
  BOOST_TEST(scalar_tensor(7, DType::i64).dtype() == DType::i64);
  // A size-1 tensor of any rank has an item; bool conversion reads it.
  BOOST_TEST(from_vector<float>({5}, {1, 1, 1}).item<float>() == 5.0f);
  // Reading numbers as bool means "non-zero", as a cast to bool does (no truncation first).
  BOOST_TEST(from_vector<float>({0.5f}).item<bool>());
  BOOST_TEST(from_vector<float>({-0.25f, 0.0f, 3.0f}).to_vector<bool>() == (std::vector<bool>{true, false, true}));
  BOOST_TEST(from_vector<float>({0.5f}).to(DType::bool_).item<bool>());
  BOOST_TEST(static_cast<bool>(scalar_tensor(0.5)));
  BOOST_TEST(static_cast<bool>(scalar_tensor(2.0)));
  BOOST_TEST(!static_cast<bool>(scalar_tensor(0.0)));
}

BOOST_AUTO_TEST_CASE(zeros_ones_full) {
  check_tensor(zeros({2, 2}), {2, 2}, DType::f32, {0, 0, 0, 0});
  check_tensor(ones({3}, DType::i32), {3}, DType::i32, {1, 1, 1});
  check_tensor(full({2}, 7, DType::i64), {2}, DType::i64, {7, 7});
  check_tensor(full({2, 1}, -0.5, DType::f64), {2, 1}, DType::f64, {-0.5, -0.5});
  check_tensor(full({}, 3.25), {}, DType::f32, {3.25});
  check_tensor(ones({2}, DType::bool_), {2}, DType::bool_, {1, 1});
  check_tensor(zeros({0, 4}), {0, 4}, DType::f32, {});
  check_tensor(full({2}, 1.0 / 3, DType::f16), {2}, DType::f16, {0.333251953125, 0.333251953125}, 0);
}

BOOST_AUTO_TEST_CASE(arange_values) {
  check_tensor(arange(5), {5}, DType::i64, {0, 1, 2, 3, 4});
  check_tensor(arange(2, 5), {3}, DType::i64, {2, 3, 4});
  check_tensor(arange(0, 1, 0.25, DType::f32), {4}, DType::f32, {0, 0.25, 0.5, 0.75});
  check_tensor(arange(5, 0, -2), {3}, DType::i64, {5, 3, 1});
  check_tensor(arange(0, 10, 3), {4}, DType::i64, {0, 3, 6, 9});  // ceil((10 - 0) / 3)
  check_tensor(arange(0), {0}, DType::i64, {});
}

BOOST_AUTO_TEST_CASE(randn_is_reproducible) {
  const Tensor a = randn({4, 5}, DType::f32, Device::cpu(), 7);
  const Tensor b = randn({4, 5}, DType::f32, Device::cpu(), 7);
  const Tensor c = randn({4, 5}, DType::f32, Device::cpu(), 8);
  BOOST_TEST(a.to_vector<float>() == b.to_vector<float>());
  BOOST_TEST(a.to_vector<float>() != c.to_vector<float>());
  // Element i depends only on (seed, i): shape does not matter, and a longer draw starts
  // with the shorter one.
  const std::vector<float> flat = randn({20}, DType::f32, Device::cpu(), 7).to_vector<float>();
  BOOST_TEST(flat == a.to_vector<float>());
  const std::vector<float> longer = randn({30}, DType::f32, Device::cpu(), 7).to_vector<float>();
  BOOST_TEST(std::vector<float>(longer.begin(), longer.begin() + 20) == flat);
  // f64 draws are the same numbers, unrounded.
  const std::vector<double> wide = randn({20}, DType::f64, Device::cpu(), 7).to_vector<double>();
  for (size_t i = 0; i < flat.size(); ++i) BOOST_TEST(static_cast<float>(wide[i]) == flat[i]);
  // Standard normal: mean ~0, variance ~1.
  const Tensor many = randn({20000}, DType::f64, Device::cpu(), 1);
  BOOST_TEST(std::abs(mean(many).item<double>()) < 0.03);
  BOOST_TEST(std::abs(var(many).item<double>() - 1) < 0.05);
  BOOST_TEST(max(abs(many)).item<double>() < 6.5);
  // The default seed is 0.
  BOOST_TEST(randn({3}).to_vector<float>() == randn({3}, DType::f32, Device::cpu(), 0).to_vector<float>());
}

// randint: every value of [low, high) about equally often, in the dtype asked; a key draws new
// integers in a compiled function without a recompile; eager and compiled draw the same.
BOOST_AUTO_TEST_CASE(randint_draws_each_integer_about_equally_often) {
  const std::vector<int64_t> v = randint(-3, 7, {50000}, DType::i64, Device::cpu(), 11).to_vector<int64_t>();
  std::vector<int64_t> counts(10, 0);
  for (int64_t x : v) {
    BOOST_TEST((x >= -3 && x < 7));
    if (x >= -3 && x < 7) ++counts[static_cast<size_t>(x + 3)];
  }
  for (int64_t c : counts) BOOST_TEST(std::abs(static_cast<double>(c) / 5000.0 - 1.0) < 0.06);
  // A range of 2^40: the draws spread over it (no two of 1000 alike, the mean near the middle).
  const std::vector<int64_t> wide = randint(0, int64_t{1} << 40, {1000}, DType::i64, Device::cpu(), 2).to_vector<int64_t>();
  double mean = 0;
  for (int64_t x : wide) mean += static_cast<double>(x) / 1000.0;
  BOOST_TEST(std::abs(mean / 0x1p40 - 0.5) < 0.05);
  BOOST_TEST(std::set<int64_t>(wide.begin(), wide.end()).size() == wide.size());
  const Tensor small = randint(0, 2, {2, 3}, DType::bool_);
  BOOST_TEST(small.dtype() == DType::bool_);
  BOOST_TEST((small.shape() == Shape{2, 3}));
  BOOST_TEST(randint(5, 6, {4}, DType::i32).to_vector<int32_t>() == std::vector<int32_t>(4, 5));

  auto draw = kiln::compile([](const Tensor& key) { return randint(0, 1000, {256}, key); });
  const Tensor key1 = full({}, 1, DType::i64), key2 = full({}, 2, DType::i64);
  const std::vector<int64_t> a = draw(key1).to_vector<int64_t>(), b = draw(key2).to_vector<int64_t>();
  BOOST_TEST(a != b);
  BOOST_TEST(draw(key1).to_vector<int64_t>() == a);
  BOOST_TEST(randint(0, 1000, {256}, key1).to_vector<int64_t>() == a);
  BOOST_TEST(draw.stats().compiles == 1);
  // The key adds to the seed, as rand's.
  BOOST_TEST(randint(0, 1000, {256}, DType::i64, Device::cpu(), 1).to_vector<int64_t>() == a);

  BOOST_TEST(contains(error_of([] { randint(3, 3, {2}); }), "randint: low (3) must be less than high (3)"));
  BOOST_TEST(contains(error_of([] { randint(0, int64_t{1} << 50, {2}); }), "randint: high - low must be at most 2^48"));
  BOOST_TEST(contains(error_of([] { randint(0, 3, {2}, DType::bool_); }), "randint: bool draws from [0, 2)"));
  BOOST_TEST(contains(error_of([] { randint(0, int64_t{1} << 40, {2}, DType::i32); }), "randint: i32 cannot hold [0, 1099511627776)"));
  BOOST_TEST(randint(-5, int64_t{1} << 31, {2}, DType::i32).dtype() == DType::i32);  // its largest value fits
  BOOST_TEST(contains(error_of([] { randint(0, 3, {2}, full({2}, 1, DType::i64)); }),
                      "randint: the key must be a 0-d integer tensor, got i64[2]"));
}

BOOST_AUTO_TEST_CASE(rand_and_dropout_with_run_time_keys) {
  const std::vector<float> u = rand({4000}, DType::f32, Device::cpu(), 3).to_vector<float>();
  double total = 0;
  for (float v : u) {
    BOOST_TEST(v >= 0.0f);
    BOOST_TEST(v < 1.0f);
    total += v;
  }
  BOOST_TEST(std::abs(total / 4000 - 0.5) < 0.02);
  // A key adds to the seed; rand and randn draw different numbers from one key.
  const Tensor key5 = full({}, 5, DType::i64), key6 = full({}, 6, DType::i64);
  BOOST_TEST(rand({8}, key5, DType::f32, 2).to_vector<float>() == rand({8}, DType::f32, Device::cpu(), 7).to_vector<float>());
  BOOST_TEST(randn({8}, key5).to_vector<float>() == randn({8}, DType::f32, Device::cpu(), 5).to_vector<float>());
  BOOST_TEST(contains(error_of([] { rand({2}, full({}, 1.0)); }), "rand: the key must be a 0-d integer tensor, got f32[]"));

  // Compiled with the key as an argument: a new key draws a new mask without a recompile.
  auto step = kiln::compile([](const Tensor& x, const Tensor& key) { return dropout(x, 0.25, key); });
  const Tensor x = ones({64, 128});
  const std::vector<float> y5 = step(x, key5).to_vector<float>(), y6 = step(x, key6).to_vector<float>();
  BOOST_TEST(step(x, key5).to_vector<float>() == y5);
  BOOST_TEST(y5 != y6);
  BOOST_TEST(step.stats().compiles == 1);
  BOOST_TEST(step.stats().recompiles == 0);
  BOOST_TEST(dropout(x, 0.25, key5).to_vector<float>() == y5);  // eager makes the same mask
  int64_t zeros = 0;
  for (float v : y5) {
    BOOST_TEST((v == 0.0f || v == 1.0f / 0.75f));
    zeros += v == 0.0f;
  }
  BOOST_TEST(std::abs(static_cast<double>(zeros) / static_cast<double>(y5.size()) - 0.25) < 0.02);
  // The gradient is the same mask and scale.
  const Tensor w = ones({64, 128});
  w.requires_grad_();
  const std::vector<Tensor> g = grad({sum(dropout(w, 0.25, key5))}, {w});
  BOOST_TEST(g[0].to_vector<float>() == y5);
  BOOST_TEST(dropout(x, 0.0, key5).to_vector<float>() == x.to_vector<float>());
  BOOST_TEST(max(dropout(x, 1.0, key5)).item<float>() == 0.0f);
  BOOST_TEST(contains(error_of([&] { dropout(x, 1.5, key5); }), "dropout: p must be in [0, 1], got 1.5"));
  // nn::Dropout is the identity until trained.
  const nn::Dropout layer{0.25};
  BOOST_TEST(layer(x).to_vector<float>() == x.to_vector<float>());
  BOOST_TEST(layer.train(x, key5).to_vector<float>() == y5);
}

BOOST_AUTO_TEST_CASE(to_dtype_rounds) {
  const Tensor x = from_vector<float>({1.00390625f, 1.01171875f, 3.14159f, -2.5f, 1e-3f});
  // bf16 keeps 8 significant bits, rounding to nearest even.
  const Tensor b = x.to(DType::bf16);
  BOOST_TEST(b.dtype() == DType::bf16);
  check_values(b, {1.0, 1.015625, 3.140625, -2.5, 0.00099945068359375}, 0);
  // f16: 11 significant bits.
  const Tensor h = from_vector<float>({2049, 2051, 1.0f / 3, 70000}).to(DType::f16);
  BOOST_TEST(h.dtype() == DType::f16);
  check_values(h, {2048, 2052, 0.333251953125, std::numeric_limits<double>::infinity()}, 0);
  // To integers: truncation toward zero; to bool: != 0.
  check_tensor(from_vector<float>({1.7f, -1.7f, 0.2f}).to(DType::i32), {3}, DType::i32, {1, -1, 0});
  check_tensor(from_vector<float>({0, 0.5f, -2}).to(DType::bool_), {3}, DType::bool_, {0, 1, 1});
  check_tensor(from_vector<bool>({true, false}).to(DType::f32), {2}, DType::f32, {1, 0});
  // The same dtype is the same tensor.
  BOOST_TEST(x.to(DType::f32).impl() == x.impl());
  check_tensor(cast(from_vector<int64_t>({300}), DType::i32), {1}, DType::i32, {300});
}

BOOST_AUTO_TEST_CASE(to_device) {
  const Tensor x = ones({2});
  BOOST_TEST(x.to(Device::cpu()).impl() == x.impl());
  // CUDA: where this build and machine have a device, copies there and back; else an error that
  // names CUDA and the device.
  Tensor d;
  std::string msg;
  try {
    d = x.to(Device::cuda(0));
  } catch (const std::exception& e) {
    msg = e.what();
  }
  if (d.defined()) {
    BOOST_TEST_MESSAGE("this machine has cuda:0: round trips checked");
    BOOST_TEST((d.device() == Device::cuda(0)));
    check_tensor(d.to(Device::cpu()), {2}, DType::f32, {1, 1});
    check_tensor(zeros({2}, DType::f32, Device::cuda(0)).to(Device::cpu()), {2}, DType::f32, {0, 0});
    check_tensor(from_vector<float>({1}, {}, Device::cuda(0)).to(Device::cpu()), {1}, DType::f32, {1});
    msg = error_of([&] { x.to(Device::cuda(1000)); });
    BOOST_TEST(contains(msg, "cuda:1000"), msg);
  } else {
    BOOST_TEST(contains(msg, "CUDA"), msg);
    BOOST_TEST(contains(msg, "cuda:0"), msg);
    msg = error_of([&] { zeros({2}, DType::f32, Device::cuda(0)); });
    BOOST_TEST(contains(msg, "CUDA"), msg);
    msg = error_of([&] { from_vector<float>({1}, {}, Device::cuda(0)); });
    BOOST_TEST(contains(msg, "CUDA"), msg);
  }
  msg = error_of([&] { x.to(Device::vulkan(1)); });
  BOOST_TEST(contains(msg, "Vulkan"), msg);
}

BOOST_AUTO_TEST_CASE(printing) {
  BOOST_TEST(from_vector<float>({1, 2.5f}).str() == "Tensor(f32[2], [1, 2.5])");
  BOOST_TEST(Tensor().str() == "Tensor(undefined)");
  std::ostringstream out;
  out << from_vector<int32_t>({3}, {1, 1});
  BOOST_TEST(out.str() == "Tensor(i32[1, 1], [3])");
  // Large tensors print their meta only.
  BOOST_TEST(zeros({100}).str() == "Tensor(f32[100])");
}

BOOST_AUTO_TEST_CASE(contiguous_copies_only_when_needed) {
  const Tensor x = reshape(arange(6), {2, 3});
  BOOST_TEST(x.contiguous().impl() == x.impl());
  const Tensor t = transpose(x, 0, 1);
  BOOST_TEST(!t.data().is_contiguous());
  const Tensor c = t.contiguous();
  BOOST_TEST(c.data().is_contiguous());
  BOOST_TEST(storage_of(c) != storage_of(x));
  check_tensor(c, {3, 2}, DType::i64, {0, 3, 1, 4, 2, 5});
}

BOOST_AUTO_TEST_SUITE_END()
