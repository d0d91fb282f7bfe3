// Source ops, the shared random numbers, and whole-graph interpretation with symbolic sizes.
#include <cstring>
#include <limits>

#include "helpers.h"
#include "kiln/eval/random.h"

using namespace ref_test;
namespace kr = kiln::eval;

namespace {
using kiln::SymInt;
using kiln::SymShape;
using Ints = std::vector<int64_t>;

Attrs randn_attrs(SymShape shape, int64_t seed, DType t = DType::f32) { return {std::move(shape), seed, t}; }
}  // namespace

BOOST_AUTO_TEST_SUITE(sources)

BOOST_AUTO_TEST_CASE(full_arange_constant) {
  check(eval(OpId::full, {}, {SymShape{2, 2}, 3.5, DType::f32}), DType::f32, {2, 2}, {3.5, 3.5, 3.5, 3.5}, 0);
  check(eval(OpId::full, {}, {SymShape{3}, -2.7, DType::i32}), DType::i32, {3}, {-2, -2, -2}, 0);
  check(eval(OpId::full, {}, {SymShape{2}, 0.5, DType::bool_}), DType::bool_, {2}, {1, 1}, 0);
  check(eval(OpId::full, {}, {SymShape{}, 7.0, DType::i64}), DType::i64, {}, {7}, 0);
  check(eval(OpId::full, {}, {SymShape{0, 3}, 1.0, DType::f32}), DType::f32, {0, 3}, {}, 0);
  check(eval(OpId::arange, {}, {0.0, 5.0, 1.0, DType::i64}), DType::i64, {5}, {0, 1, 2, 3, 4}, 0);
  check(eval(OpId::arange, {}, {1.0, 2.0, 0.25, DType::f32}), DType::f32, {4}, {1, 1.25, 1.5, 1.75}, 0);
  check(eval(OpId::arange, {}, {5.0, 0.0, -2.0, DType::i32}), DType::i32, {3}, {5, 3, 1}, 0);
  check(eval(OpId::arange, {}, {0.0, 0.0, 1.0, DType::f32}), DType::f32, {0}, {}, 0);

  auto c = std::make_shared<kiln::ConstantData>();
  c->dtype = DType::i32;
  c->sizes = {2, 2};
  const int32_t raw[4] = {1, -2, 3, 400000};
  c->bytes.resize(sizeof raw);
  std::memcpy(c->bytes.data(), raw, sizeof raw);
  check(eval(OpId::constant, {}, {std::shared_ptr<const kiln::ConstantData>(c)}), DType::i32, {2, 2},
        {1, -2, 3, 400000}, 0);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(random_numbers)

BOOST_AUTO_TEST_CASE(philox_known_answers) {
  // Random123's tests/kat_vectors, the three "philox4x32 10" lines (counter, key -> result).
  using A4 = std::array<uint32_t, 4>;
  BOOST_TEST((kiln::philox4x32_10({0, 0, 0, 0}, {0, 0}) == A4{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  BOOST_TEST((kiln::philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}) ==
              A4{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  BOOST_TEST((kiln::philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}) ==
              A4{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

BOOST_AUTO_TEST_CASE(randn_at_is_box_muller_on_philox) {
  // Key 0, element 0: counter (0, 0, 0, 0): r0 = 0x6627e8d5, r1 = 0xe169c58d.
  BOOST_TEST(kiln::philox_bits(0, 0, 0) == 0x6627e8d5u >> 8);
  BOOST_TEST(kiln::philox_bits(0, 0, 3) == 0x9b00dbd8u >> 8);
  const double u1 = ((0x6627e8d5u >> 8) + 1) / 16777216.0, u2 = (0xe169c58du >> 8) / 16777216.0;
  const double radius = std::sqrt(-2 * std::log(u1)), theta = 2 * 3.14159265358979323846 * u2;
  BOOST_CHECK_CLOSE(kr::randn_at(0, 0), radius * std::cos(theta), 1e-3);  // percent
  BOOST_TEST(kr::rand_at(0, 0) == (0x6627e8d5u >> 8) / 16777216.0);
  // Key and counter split into 32-bit words (low first): Random123's third known answer's key.
  BOOST_TEST(kiln::philox_bits(0x299f31d0a4093822ull, 0x85a308d3243f6a88ull, 1) ==
             kiln::philox4x32_10({0x243f6a88, 0x85a308d3, 0, 0}, {0xa4093822, 0x299f31d0})[1] >> 8);
}

// The op philox, and rand and randn's key input, which adds to the seed.
BOOST_AUTO_TEST_CASE(philox_op_and_run_time_keys) {
  TensorData key = kiln::TensorData::empty_host(DType::i64, {});
  key.data_as<int64_t>()[0] = -5;
  TensorData counter = kiln::TensorData::empty_host(DType::i32, {3});
  for (int k = 0; k < 3; ++k) counter.data_as<int32_t>()[k] = k - 1;
  const std::vector<double> p = values(eval(OpId::philox, {key, counter}, {int64_t{2}, int64_t{7}}));
  for (int k = 0; k < 3; ++k)
    BOOST_TEST(p[static_cast<size_t>(k)] == kiln::philox_bits(2, static_cast<uint64_t>(int64_t{k - 1}), 2));
  const std::vector<double> u = values(eval(OpId::rand, {key}, randn_attrs({4}, 7)));
  const std::vector<double> z = values(eval(OpId::randn, {key}, randn_attrs({4}, 7)));
  for (size_t k = 0; k < 4; ++k) {
    BOOST_TEST(u[k] == kr::rand_at(2, k));
    BOOST_CHECK_CLOSE(z[k], kr::randn_at(2, k), 1e-4);  // percent: logf and cosf against the reference's
    BOOST_TEST(u[k] >= 0.0);
    BOOST_TEST(u[k] < 1.0);
  }
}

BOOST_AUTO_TEST_CASE(randn_is_deterministic_and_size_independent) {
  const TensorData a = eval(OpId::randn, {}, randn_attrs({10}, 42));
  const TensorData b = eval(OpId::randn, {}, randn_attrs({10}, 42));
  const TensorData c = eval(OpId::randn, {}, randn_attrs({10}, 43));
  const TensorData prefix = eval(OpId::randn, {}, randn_attrs({5}, 42));
  const TensorData grid = eval(OpId::randn, {}, randn_attrs({2, 5}, 42));
  const std::vector<double> va = values(a), vb = values(b), vc = values(c), vp = values(prefix), vg = values(grid);
  BOOST_TEST(va == vb);
  BOOST_TEST(va == vg);
  int differing = 0;
  for (size_t k = 0; k < va.size(); ++k) differing += va[k] != vc[k];
  BOOST_TEST(differing == 10);
  for (size_t k = 0; k < vp.size(); ++k) BOOST_TEST(vp[k] == va[k]);
  for (size_t k = 0; k < va.size(); ++k) BOOST_CHECK_CLOSE(va[k], kr::randn_at(42, k), 1e-4);  // percent
  // rand's elements are those of its own formula.
  const std::vector<double> vu = values(eval(OpId::rand, {}, randn_attrs({10}, 42)));
  for (size_t k = 0; k < vu.size(); ++k) BOOST_TEST(vu[k] == static_cast<double>(kr::rand_at(42, k)));
  // Seeds above 32 bits matter too.
  BOOST_TEST(kr::randn_at(1ull << 32, 0) != kr::randn_at(0, 0));
  // Other dtypes round the same float values.
  const std::vector<double> vh = values(eval(OpId::randn, {}, randn_attrs({10}, 42, DType::f16)));
  for (size_t k = 0; k < va.size(); ++k)
    BOOST_TEST(vh[k] == kiln::half_bits_to_float(kiln::float_to_half_bits(static_cast<float>(va[k]))));
}

BOOST_AUTO_TEST_CASE(randn_moments) {
  const int64_t n = 100000;
  const std::vector<double> v = values(eval(OpId::randn, {}, randn_attrs({n}, 7)));
  double sum = 0, squares = 0;
  int64_t beyond3 = 0;
  for (double x : v) {
    sum += x;
    squares += x * x;
    beyond3 += std::fabs(x) > 3;
  }
  const double mean = sum / n, stddev = std::sqrt(squares / n - mean * mean);
  BOOST_TEST(std::fabs(mean) < 0.02);
  BOOST_TEST(std::fabs(stddev - 1) < 0.02);
  // P(|z| > 3) = 0.0027: about 270 of 100000.
  BOOST_TEST(beyond3 > 150);
  BOOST_TEST(beyond3 < 400);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(graphs)

namespace {
// x: f32[s0, 3], y: f32[3]; outputs sum(x + y, dim 1) + full([s0], 1), reshape(x + y, [3*s0]),
// softmax(x, dim 1). A dead randn node is never run.
kiln::Graph symbolic_graph() {
  kiln::Graph g;
  const SymInt s0 = g.shapes().create_symbol(2, 2, std::numeric_limits<int64_t>::max(), "input 0 (x) dim 0", false);
  const auto x = g.add_input({DType::f32, kiln::Device::cpu(), {s0, 3}, {}}, "x");
  const auto y = g.add_input({DType::f32, kiln::Device::cpu(), {3}, {}}, "y");
  const auto z = g.add(OpId::add, {x, y});
  const auto w = g.add(OpId::sum, {z}, {Ints{1}, false});
  const auto ones = g.add(OpId::full, {}, {SymShape{s0}, 1.0, DType::f32});
  const auto v = g.add(OpId::add, {w, ones});
  const auto r = g.add(OpId::reshape, {z}, {SymShape{s0 * 3}});
  const auto sm = g.add(OpId::softmax, {x}, {int64_t{1}});
  g.add(OpId::randn, {}, {SymShape{s0}, int64_t{1}, DType::f32});
  g.set_outputs({v, r, sm});
  return g;
}
}  // namespace

BOOST_AUTO_TEST_CASE(symbolic_dim_bound_from_two_sizes) {
  const kiln::Graph g = symbolic_graph();
  {
    const std::vector<TensorData> in = {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({3}, {10, 20, 30})};
    BOOST_TEST(kr::bind_symbols(g, in) == Ints{2});
    const std::vector<TensorData> out = kr::run_graph(g, in);
    BOOST_REQUIRE_EQUAL(out.size(), 3u);
    // x + y = [[11, 22, 33], [14, 25, 36]].
    check(out[0], DType::f32, {2}, {67, 76});
    check(out[1], DType::f32, {6}, {11, 22, 33, 14, 25, 36});
    check(out[2], DType::f32, {2, 3}, {0.0900306, 0.2447285, 0.6652410, 0.0900306, 0.2447285, 0.6652410});
  }
  {
    const std::vector<TensorData> in = {f32({4, 3}, {0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3}), f32({3}, {1, 1, 1})};
    BOOST_TEST(kr::bind_symbols(g, in) == Ints{4});
    const std::vector<TensorData> out = kr::run_graph(g, in);
    check(out[0], DType::f32, {4}, {4, 7, 10, 13});
    check(out[1], DType::f32, {12}, {1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4});
    check(out[2], DType::f32, {4, 3}, std::vector<double>(12, 1.0 / 3));
  }
}

BOOST_AUTO_TEST_CASE(input_mismatches_name_the_input) {
  const kiln::Graph g = symbolic_graph();
  const TensorData y = f32({3}, {1, 2, 3});
  check_error([&] { kr::run_graph(g, std::vector<TensorData>{i32({2, 3}, {1, 2, 3, 4, 5, 6}), y}); },
              {"input 0 (x)", "dtype i32", "f32"});
  check_error([&] { kr::run_graph(g, std::vector<TensorData>{f32({6}, {1, 2, 3, 4, 5, 6}), y}); },
              {"input 0 (x)", "rank 1"});
  check_error([&] { kr::run_graph(g, std::vector<TensorData>{f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({4}, {1, 2, 3, 4})}); },
              {"input 1 (y) size mismatch at dim 0: expected 3, got 4"});
  check_error([&] { kr::run_graph(g, std::vector<TensorData>{y}); }, {"takes 2 inputs, got 1"});
}

BOOST_AUTO_TEST_CASE(one_symbol_two_inputs) {
  kiln::Graph g;
  const SymInt s0 = g.shapes().create_symbol(3, 2, std::numeric_limits<int64_t>::max(), "input 0 (a) dim 0", false);
  const auto a = g.add_input({DType::i32, kiln::Device::cpu(), {s0}, {}}, "a");
  const auto b = g.add_input({DType::i32, kiln::Device::cpu(), {s0}, {}}, "b");
  g.set_outputs({g.add(OpId::mul, {a, b})});
  check(kr::run_graph(g, std::vector<TensorData>{i32({2}, {3, 4}), i32({2}, {5, -6})})[0], DType::i32, {2}, {15, -24},
        0);
  check_error([&] { kr::run_graph(g, std::vector<TensorData>{i32({2}, {3, 4}), i32({3}, {5, 6, 7})}); },
              {"input 1 (b) dim 0 is 3", "s0 is 2", "input 0 (a) dim 0"});
}

BOOST_AUTO_TEST_CASE(output_may_be_an_input_and_scalars_are_0d) {
  kiln::Graph g;
  const auto x = g.add_input({DType::f32, kiln::Device::cpu(), {2}, {}}, "x");
  const auto k = g.add_input({DType::f64, kiln::Device::cpu(), {}, {}}, "k");
  g.set_outputs({g.add(OpId::mul, {x, k}), x});
  const std::vector<TensorData> out = kr::run_graph(g, std::vector<TensorData>{f32({2}, {1, 2}), scalar(DType::f64, 3)});
  check(out[0], DType::f32, {2}, {3, 6});
  check(out[1], DType::f32, {2}, {1, 2});
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(run_op_directly)

BOOST_AUTO_TEST_CASE(output_dtype_and_sizes_come_from_the_caller) {
  const std::vector<TensorData> in = {f32({2}, {1, 2}), f32({2}, {0.5, 0.25})};
  // Computes in the requested output dtype.
  check(kr::run_op(OpId::add, in, {}, DType::f64, Ints{2}), DType::f64, {2}, {1.5, 2.25}, 0);
  // Sizes that the inputs cannot fill are an error, not a wrong read.
  check_error([&] { kr::run_op(OpId::add, in, {}, DType::f32, Ints{3}); }, {"does not broadcast"});
  check_error([&] { kr::run_op(OpId::reshape, std::vector<TensorData>{in[0]}, {SymShape{3}}, DType::f32, Ints{3}); },
              {"cannot view"});
  check_error([&] { kr::run_op(OpId::input, {}, {int64_t{0}}, DType::f32, Ints{}); }, {"run_graph"});
  check_error([&] { kr::run_op(OpId::neg, in, {}, DType::f32, Ints{2}); }, {"neg takes 1 inputs, got 2"});
  // A composite through its decomposition.
  check(kr::run_op(OpId::transpose, std::vector<TensorData>{f32({1, 2}, {1, 2})}, {int64_t{0}, int64_t{1}}, DType::f32,
                   Ints{2, 1}),
        DType::f32, {2, 1}, {1, 2}, 0);
}

BOOST_AUTO_TEST_SUITE_END()
