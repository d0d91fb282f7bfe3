// Pointwise ops against hand-computed values.
#include "helpers.h"

using namespace ref_test;
namespace kr = kiln::eval;

BOOST_AUTO_TEST_SUITE(pointwise)

BOOST_AUTO_TEST_CASE(kernel_table_is_complete) { BOOST_CHECK_NO_THROW(kr::check_kernel_table()); }

BOOST_AUTO_TEST_CASE(unary_float_ops) {
  const double pi = 3.14159265358979323846;
  check(eval(OpId::exp, {f32({4}, {0, 1, -1, 2})}), DType::f32, {4}, {1, 2.718281828, 0.3678794412, 7.389056099});
  check(eval(OpId::log, {f32({5}, {1, 2.718281828459045, 10, 0.5, 0})}), DType::f32, {5},
        {0, 1, 2.302585093, -0.6931471806, -kInf});
  check(eval(OpId::log, {f32({1}, {-1})}), DType::f32, {1}, {kNaN});
  check(eval(OpId::sqrt, {f32({4}, {4, 2, 0, 0.25})}), DType::f32, {4}, {2, 1.414213562, 0, 0.5});
  check(eval(OpId::rsqrt, {f32({3}, {4, 0.25, 1})}), DType::f32, {3}, {0.5, 2, 1});
  check(eval(OpId::reciprocal, {f32({4}, {2, -4, 0.5, 0})}), DType::f32, {4}, {0.5, -0.25, 2, kInf});
  check(eval(OpId::sin, {f64({4}, {0, pi / 2, pi / 6, -1})}), DType::f64, {4}, {0, 1, 0.5, -0.8414709848}, 1e-9);
  check(eval(OpId::cos, {f32({4}, {0, pi / 3, pi, 1})}), DType::f32, {4}, {1, 0.5, -1, 0.5403023059});
  check(eval(OpId::tanh, {f32({3}, {0, 1, -2})}), DType::f32, {3}, {0, 0.7615941560, -0.9640275801});
  check(eval(OpId::sigmoid, {f32({4}, {0, 1, -2, -1000})}), DType::f32, {4}, {0.5, 0.7310585786, 0.1192029220, 0});
  check(eval(OpId::silu, {f32({3}, {0, 1, -1})}), DType::f32, {3}, {0, 0.7310585786, -0.2689414214});
  check(eval(OpId::erf, {f32({4}, {0, 0.5, 1, -1})}), DType::f32, {4}, {0, 0.5204998778, 0.8427007929, -0.8427007929});
  check(eval(OpId::gelu, {f32({4}, {0, 1, -1, 2})}, {std::string("none")}), DType::f32, {4},
        {0, 0.8413447461, -0.1586552539, 1.9544997361});
  check(eval(OpId::gelu, {f32({4}, {0, 1, -1, 2})}, {std::string("tanh")}), DType::f32, {4},
        {0, 0.8411919906, -0.1588080094, 1.9545976941});
}

BOOST_AUTO_TEST_CASE(float_only_ops_promote_ints_to_f32) {
  check(eval(OpId::exp, {i32({2}, {0, 1})}), DType::f32, {2}, {1, 2.718281828});
  check(eval(OpId::sqrt, {i64({2}, {9, 2})}), DType::f32, {2}, {3, 1.414213562});
  check(eval(OpId::sigmoid, {boolean({2}, {0, 1})}), DType::f32, {2}, {0.5, 0.7310585786});
}

BOOST_AUTO_TEST_CASE(unary_same_dtype_ops) {
  check(eval(OpId::neg, {f32({3}, {1.5, -2, 0})}), DType::f32, {3}, {-1.5, 2, 0});
  check(eval(OpId::neg, {i32({3}, {1, -2, -2147483648.0})}), DType::i32, {3}, {-1, 2, -2147483648.0}, 0);
  check(eval(OpId::abs, {f32({3}, {-1.5, 2, -0.0})}), DType::f32, {3}, {1.5, 2, 0});
  check(eval(OpId::abs, {i64({3}, {-7, 7, 0})}), DType::i64, {3}, {7, 7, 0}, 0);
  check(eval(OpId::relu, {f32({4}, {-1, 0, 2.5, kNaN})}), DType::f32, {4}, {0, 0, 2.5, kNaN});
  check(eval(OpId::relu, {i32({3}, {-3, 4, 0})}), DType::i32, {3}, {0, 4, 0}, 0);
  check(eval(OpId::floor, {f32({4}, {1.5, -1.5, 2.0, -0.2})}), DType::f32, {4}, {1, -2, 2, -1});
  check(eval(OpId::ceil, {f32({4}, {1.5, -1.5, 2.0, -0.2})}), DType::f32, {4}, {2, -1, 2, 0});
  check(eval(OpId::floor, {i32({2}, {-3, 5})}), DType::i32, {2}, {-3, 5}, 0);
  // Half to even.
  check(eval(OpId::round, {f32({7}, {0.5, 1.5, 2.5, -0.5, -1.5, 2.6, -2.4})}), DType::f32, {7},
        {0, 2, 2, 0, -2, 3, -2});
  check(eval(OpId::sign, {f32({4}, {-2, 0, 3, kNaN})}), DType::f32, {4}, {-1, 0, 1, kNaN});
  check(eval(OpId::sign, {i32({3}, {-5, 0, 7})}), DType::i32, {3}, {-1, 0, 1}, 0);
  check(eval(OpId::sign, {boolean({2}, {0, 1})}), DType::bool_, {2}, {0, 1}, 0);
  check_error([] { eval(OpId::neg, {boolean({1}, {1})}); }, {"neg", "bool"});
}

BOOST_AUTO_TEST_CASE(bool_valued_unary_ops) {
  check(eval(OpId::logical_not, {f32({4}, {0, 1.5, -0.0, kNaN})}), DType::bool_, {4}, {1, 0, 1, 0}, 0);
  check(eval(OpId::logical_not, {boolean({2}, {1, 0})}), DType::bool_, {2}, {0, 1}, 0);
  check(eval(OpId::logical_not, {i64({2}, {3, 0})}), DType::bool_, {2}, {0, 1}, 0);
  check(eval(OpId::isnan, {f32({3}, {1, kNaN, kInf})}), DType::bool_, {3}, {0, 1, 0}, 0);
  check(eval(OpId::isnan, {i32({2}, {1, 0})}), DType::bool_, {2}, {0, 0}, 0);
}

BOOST_AUTO_TEST_CASE(casts) {
  const auto to = [](kiln::DType t) { return Attrs{t}; };
  // float -> int truncates toward zero; -> bool is != 0 (NaN is true).
  check(eval(OpId::cast, {f32({4}, {1.7, -1.7, 0.5, 0})}, to(DType::i32)), DType::i32, {4}, {1, -1, 0, 0}, 0);
  check(eval(OpId::cast, {f64({3}, {-2.9, 1e10, 3})}, to(DType::i64)), DType::i64, {3}, {-2, 1e10, 3}, 0);
  check(eval(OpId::cast, {f32({4}, {1.7, -0.2, 0, kNaN})}, to(DType::bool_)), DType::bool_, {4}, {1, 1, 0, 1}, 0);
  check(eval(OpId::cast, {i64({2}, {3, -4})}, to(DType::f32)), DType::f32, {2}, {3, -4});
  check(eval(OpId::cast, {i64({2}, {4294967298.0, -1})}, to(DType::i32)), DType::i32, {2}, {2, -1}, 0);  // wraps
  check(eval(OpId::cast, {boolean({2}, {1, 0})}, to(DType::f64)), DType::f64, {2}, {1, 0}, 0);
  // 16777217 is not a float: i64 -> f32 rounds to nearest even, 16777216.
  check(eval(OpId::cast, {i64({1}, {16777217})}, to(DType::f32)), DType::f32, {1}, {16777216}, 0);
}

BOOST_AUTO_TEST_CASE(f16_and_bf16) {
  // Round trips: f32 -> f16 / bf16 rounds to the nearest representable value.
  check(eval(OpId::cast, {f32({4}, {0.1, 3.14159, 65504, 1})}, {DType::f16}), DType::f16, {4},
        {0.0999755859375, 3.140625, 65504, 1}, 0);
  check(eval(OpId::cast, {f32({3}, {0.1, 3.14159, 1})}, {DType::bf16}), DType::bf16, {3}, {0.10009765625, 3.140625, 1},
        0);
  check(eval(OpId::cast, {f32({1}, {70000})}, {DType::f16}), DType::f16, {1}, {kInf});
  check(eval(OpId::cast, {tensor(DType::f16, {2}, {0.5, -2})}, {DType::f32}), DType::f32, {2}, {0.5, -2}, 0);
  // f16 -> bf16: 1 + 2^-10 is a half but not a bfloat16 (rounds to 1).
  check(eval(OpId::cast, {tensor(DType::f16, {1}, {1.0009765625})}, {DType::bf16}), DType::bf16, {1}, {1}, 0);
  // One op each: 1 + 2^-11 is a tie in f16, rounding to even gives 1; 1.5 + 1.25 = 2.75 exact.
  check(eval(OpId::add, {tensor(DType::f16, {2}, {1, 1.5}), tensor(DType::f16, {2}, {0.00048828125, 1.25})}),
        DType::f16, {2}, {1, 2.75}, 0);
  // bf16: 1 + 1/256 is a tie between 1 and 1 + 1/128; even is 1. 3 * 0.5 = 1.5 exact.
  check(eval(OpId::add, {tensor(DType::bf16, {1}, {1}), tensor(DType::bf16, {1}, {0.00390625})}), DType::bf16, {1},
        {1}, 0);
  check(eval(OpId::mul, {tensor(DType::bf16, {1}, {3}), tensor(DType::bf16, {1}, {0.5})}), DType::bf16, {1}, {1.5}, 0);
  check(eval(OpId::exp, {tensor(DType::f16, {2}, {0, 1})}), DType::f16, {2}, {1, 2.71875}, 0);
  check(eval(OpId::sqrt, {tensor(DType::bf16, {1}, {2})}), DType::bf16, {1}, {1.4140625}, 0);
  // f16 with bf16 promotes to f32.
  check(eval(OpId::add, {tensor(DType::f16, {1}, {1}), tensor(DType::bf16, {1}, {2})}), DType::f32, {1}, {3}, 0);
}

BOOST_AUTO_TEST_CASE(binary_arithmetic) {
  const TensorData a = f32({3}, {1, 2, 3}), b = f32({3}, {0.5, -2, 10});
  check(eval(OpId::add, {a, b}), DType::f32, {3}, {1.5, 0, 13});
  check(eval(OpId::sub, {a, b}), DType::f32, {3}, {0.5, 4, -7});
  check(eval(OpId::mul, {a, b}), DType::f32, {3}, {0.5, -4, 30});
  check(eval(OpId::div, {a, b}), DType::f32, {3}, {2, -1, 0.3});
  check(eval(OpId::div, {f32({2}, {1, -1}), f32({2}, {0, 0})}), DType::f32, {2}, {kInf, -kInf});
  check(eval(OpId::pow, {f32({3}, {2, 4, 9}), f32({3}, {3, 0.5, -0.5})}), DType::f32, {3}, {8, 2, 1.0 / 3});
  check(eval(OpId::maximum, {f32({3}, {1, 5, kNaN}), f32({3}, {2, 3, 0})}), DType::f32, {3}, {2, 5, kNaN});
  check(eval(OpId::minimum, {f32({3}, {1, 5, 0}), f32({3}, {2, 3, kNaN})}), DType::f32, {3}, {1, 3, kNaN});
}

BOOST_AUTO_TEST_CASE(binary_integer) {
  check(eval(OpId::add, {i32({2}, {2147483647, 5}), i32({2}, {1, -7})}), DType::i32, {2}, {-2147483648.0, -2}, 0);
  check(eval(OpId::sub, {i64({2}, {5, 0}), i64({2}, {7, 3})}), DType::i64, {2}, {-2, -3}, 0);
  check(eval(OpId::mul, {i32({2}, {65536, -3}), i32({2}, {65536, 4})}), DType::i32, {2}, {0, -12}, 0);  // 2^32 wraps
  check(eval(OpId::pow, {i32({4}, {2, 3, -2, 5}), i32({4}, {10, 3, 3, 0})}), DType::i32, {4}, {1024, 27, -8, 1}, 0);
  check(eval(OpId::maximum, {i64({2}, {1, 9}), i64({2}, {4, 2})}), DType::i64, {2}, {4, 9}, 0);
  check(eval(OpId::minimum, {i32({2}, {1, 9}), i32({2}, {4, 2})}), DType::i32, {2}, {1, 2}, 0);
  check_error([] { eval(OpId::pow, {i32({2}, {2, 3}), i32({2}, {1, -1})}); },
              {"Integers to negative integer powers are not allowed"});
  // True division of integers gives f32.
  check(eval(OpId::div, {i32({3}, {7, -7, 1}), i32({3}, {2, 2, 3})}), DType::f32, {3}, {3.5, -3.5, 0.3333333});
  // bool + bool stays bool (or), bool * bool is and.
  check(eval(OpId::add, {boolean({3}, {1, 1, 0}), boolean({3}, {1, 0, 0})}), DType::bool_, {3}, {1, 1, 0}, 0);
  check(eval(OpId::mul, {boolean({3}, {1, 1, 0}), boolean({3}, {1, 0, 0})}), DType::bool_, {3}, {1, 0, 0}, 0);
}

BOOST_AUTO_TEST_CASE(comparisons_and_logic) {
  const TensorData a = f32({4}, {1, 2, 3, kNaN}), b = f32({4}, {2, 2, 1, kNaN});
  check(eval(OpId::eq, {a, b}), DType::bool_, {4}, {0, 1, 0, 0}, 0);
  check(eval(OpId::ne, {a, b}), DType::bool_, {4}, {1, 0, 1, 1}, 0);
  check(eval(OpId::lt, {a, b}), DType::bool_, {4}, {1, 0, 0, 0}, 0);
  check(eval(OpId::le, {a, b}), DType::bool_, {4}, {1, 1, 0, 0}, 0);
  check(eval(OpId::gt, {a, b}), DType::bool_, {4}, {0, 0, 1, 0}, 0);
  check(eval(OpId::ge, {a, b}), DType::bool_, {4}, {0, 1, 1, 0}, 0);
  check(eval(OpId::lt, {i32({3}, {-1, 0, 5}), i32({3}, {0, 0, 4})}), DType::bool_, {3}, {1, 0, 0}, 0);
  // i32 compared with f32 compares in f32.
  check(eval(OpId::eq, {i32({2}, {2, 3}), f32({2}, {2, 2.5})}), DType::bool_, {2}, {1, 0}, 0);
  // i64 with f32: 16777217 becomes 16777216 in f32, as torch does.
  check(eval(OpId::eq, {i64({1}, {16777217}), f32({1}, {16777216})}), DType::bool_, {1}, {1}, 0);
  check(eval(OpId::logical_and, {f32({4}, {0, 2.5, 0, -1}), f32({4}, {0, 0, 3, 0.5})}), DType::bool_, {4},
        {0, 0, 0, 1}, 0);
  check(eval(OpId::logical_or, {boolean({4}, {0, 1, 0, 1}), i32({4}, {0, 0, 3, 2})}), DType::bool_, {4}, {0, 1, 1, 1},
        0);
}

BOOST_AUTO_TEST_CASE(where_selects_and_promotes) {
  check(eval(OpId::where, {boolean({3}, {1, 0, 1}), f32({3}, {1, 2, 3}), f32({3}, {-1, -2, -3})}), DType::f32, {3},
        {1, -2, 3});
  // Broadcast condition [2,1] against [3]; i32 with f32 promotes to f32.
  check(eval(OpId::where, {boolean({2, 1}, {1, 0}), i32({3}, {1, 2, 3}), f32({1}, {0.5})}), DType::f32, {2, 3},
        {1, 2, 3, 0.5, 0.5, 0.5});
  check_error([] { eval(OpId::where, {f32({1}, {1}), f32({1}, {1}), f32({1}, {2})}); }, {"where", "bool"});
}

BOOST_AUTO_TEST_CASE(broadcasting) {
  check(eval(OpId::add, {f32({2, 1}, {10, 20}), f32({3}, {1, 2, 3})}), DType::f32, {2, 3}, {11, 12, 13, 21, 22, 23});
  check(eval(OpId::mul, {f32({1, 3}, {1, 2, 3}), f32({2, 1}, {1, -1})}), DType::f32, {2, 3}, {1, 2, 3, -1, -2, -3});
  // Size-1 broadcast against size 1, and a 0-d operand.
  check(eval(OpId::sub, {f32({1}, {5}), f32({1, 1}, {2})}), DType::f32, {1, 1}, {3});
  check(eval(OpId::add, {f32({2}, {1, 2}), scalar(DType::f32, 10)}), DType::f32, {2}, {11, 12});
  check_error([] { eval(OpId::add, {f32({2}, {1, 2}), f32({3}, {1, 2, 3})}); }, {"broadcast"});
}

BOOST_AUTO_TEST_CASE(type_promotion) {
  check(eval(OpId::add, {i32({3}, {1, 2, 3}), f32({3}, {0.5, 0.25, -1})}), DType::f32, {3}, {1.5, 2.25, 2});
  check(eval(OpId::add, {i32({2}, {1, 2}), i64({2}, {10, 20})}), DType::i64, {2}, {11, 22}, 0);
  check(eval(OpId::mul, {boolean({2}, {1, 0}), i32({2}, {5, 5})}), DType::i32, {2}, {5, 0}, 0);
  check(eval(OpId::add, {f32({2}, {1, 2}), f64({2}, {0.5, 0.5})}), DType::f64, {2}, {1.5, 2.5}, 0);
  // 0-d operands: a 0-d f64 does not widen an f32 tensor, but lifts an integer one (to f64, its dtype).
  check(eval(OpId::add, {f32({2}, {1, 2}), scalar(DType::f64, 0.5)}), DType::f32, {2}, {1.5, 2.5}, 0);
  check(eval(OpId::add, {i32({2}, {1, 2}), scalar(DType::f64, 0.5)}), DType::f64, {2}, {1.5, 2.5}, 0);
  check(eval(OpId::add, {i32({2}, {1, 2}), scalar(DType::i64, 3)}), DType::i32, {2}, {4, 5}, 0);
}

BOOST_AUTO_TEST_CASE(empty_and_size_one) {
  check(eval(OpId::add, {f32({0}, {}), f32({0}, {})}), DType::f32, {0}, {});
  check(eval(OpId::add, {f32({2, 0}, {}), f32({1}, {7})}), DType::f32, {2, 0}, {});
  check(eval(OpId::exp, {f32({1}, {0})}), DType::f32, {1}, {1});
  check(eval(OpId::neg, {scalar(DType::f32, 2)}), DType::f32, {}, {-2});
}

BOOST_AUTO_TEST_CASE(strided_and_offset_inputs) {
  // x = [[1, 2, 3], [4, 5, 6]]; its transpose as a view: sizes [3, 2], strides [1, 3].
  const TensorData x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  TensorData xt = x;
  xt.sizes = {3, 2};
  xt.strides = {1, 3};
  check(eval(OpId::add, {xt, f32({2}, {10, 20})}), DType::f32, {3, 2}, {11, 24, 12, 25, 13, 26});
  check(kr::contiguous(xt), DType::f32, {3, 2}, {1, 4, 2, 5, 3, 6}, 0);
  // A slice with an offset: row 1, columns 1..2 -> [5, 6].
  TensorData s = x;
  s.sizes = {2};
  s.strides = {1};
  s.offset = 4;
  check(eval(OpId::neg, {s}), DType::f32, {2}, {-5, -6});
  // Every other element, from the end: offset 5, stride -2 -> [6, 4, 2].
  TensorData r = x;
  r.sizes = {3};
  r.strides = {-2};
  r.offset = 5;
  check(eval(OpId::mul, {r, f32({1}, {2})}), DType::f32, {3}, {12, 8, 4});
  check(kr::convert(r, DType::i32), DType::i32, {3}, {6, 4, 2}, 0);
  // A view reaching past its storage is an error, not a crash.
  TensorData bad = x;
  bad.sizes = {4};
  bad.strides = {2};
  check_error([&] { eval(OpId::neg, {bad}); }, {"outside its storage"});
}

BOOST_AUTO_TEST_CASE(large_add_is_fast_enough) {
  const TensorData a = TensorData::empty_host(DType::f32, {1024, 4096});
  const TensorData b = TensorData::empty_host(DType::f32, {4096});
  for (int64_t k = 0; k < a.numel(); ++k) a.data_as<float>()[k] = static_cast<float>(k % 7);
  for (int64_t k = 0; k < b.numel(); ++k) b.data_as<float>()[k] = 0.5f;
  const TensorData c = eval(OpId::add, {a, b});
  BOOST_TEST(c.data_as<float>()[0] == 0.5f);
  BOOST_TEST(c.data_as<float>()[1024 * 4096 - 1] == static_cast<float>((1024 * 4096 - 1) % 7) + 0.5f);
}

BOOST_AUTO_TEST_SUITE_END()
