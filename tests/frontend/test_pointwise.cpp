// Unary, binary and ternary pointwise ops, C++ operators and scalars, type promotion and
// broadcasting (including sizes 0 and 1), each against hand-computed values.
#include <limits>

#include "helpers.h"

using namespace kiln;
using namespace frontend_test;

namespace {
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();
}  // namespace

BOOST_AUTO_TEST_SUITE(pointwise)

BOOST_AUTO_TEST_CASE(unary_sign_and_rounding) {
  const Tensor x = f32({-1.5f, -0.5f, 0.0f, 0.5f, 2.0f});
  check_tensor(neg(x), {5}, DType::f32, {1.5, 0.5, 0, -0.5, -2});
  check_tensor(-x, {5}, DType::f32, {1.5, 0.5, 0, -0.5, -2});
  check_tensor(abs(x), {5}, DType::f32, {1.5, 0.5, 0, 0.5, 2});
  check_tensor(relu(x), {5}, DType::f32, {0, 0, 0, 0.5, 2});
  check_tensor(floor(x), {5}, DType::f32, {-2, -1, 0, 0, 2});
  check_tensor(ceil(x), {5}, DType::f32, {-1, 0, 0, 1, 2});
  check_tensor(sign(x), {5}, DType::f32, {-1, -1, 0, 1, 1});
  // Round half to even.
  check_tensor(round(f32({0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.6f})), {6}, DType::f32, {0, 2, 2, 0, -2, 3});
  // Integer inputs keep their dtype for these.
  check_tensor(abs(from_vector<int32_t>({-3, 4})), {2}, DType::i32, {3, 4});
  check_tensor(neg(from_vector<int64_t>({5})), {1}, DType::i64, {-5});
  check_tensor(sign(from_vector<int64_t>({-9, 0, 9})), {3}, DType::i64, {-1, 0, 1});
}

BOOST_AUTO_TEST_CASE(unary_transcendental) {
  check_tensor(exp(f32({0, 1, -1})), {3}, DType::f32, {1, 2.718281828459045, 0.36787944117144233});
  check_tensor(log(f32({1, 2, 10})), {3}, DType::f32, {0, 0.6931471805599453, 2.302585092994046});
  check_values(log(f32({0, -1})), {-kInf, kNaN});
  check_tensor(sqrt(f32({4, 2.25f, 0})), {3}, DType::f32, {2, 1.5, 0});
  check_tensor(rsqrt(f32({4, 0.25f})), {2}, DType::f32, {0.5, 2});
  check_tensor(reciprocal(f32({4, -0.5f})), {2}, DType::f32, {0.25, -2});
  check_tensor(sin(f32({0, 1, 1.5707963267948966f})), {3}, DType::f32, {0, 0.8414709848078965, 1});
  check_tensor(cos(f32({0, 1})), {2}, DType::f32, {1, 0.5403023058681398});
  check_tensor(tanh(f32({0, 0.5f, -1})), {3}, DType::f32, {0, 0.46211715726000974, -0.7615941559557649});
  check_tensor(sigmoid(f32({0, 1, -2})), {3}, DType::f32, {0.5, 0.7310585786300049, 0.11920292202211755});
  check_tensor(silu(f32({0, 1, -1})), {3}, DType::f32, {0, 0.7310585786300049, -0.2689414213699951});
  check_tensor(erf(f32({0, 0.5f, -1})), {3}, DType::f32, {0, 0.5204998778130465, -0.8427007929497149});
  check_tensor(gelu(f32({-1, 0, 1, 2})), {4}, DType::f32,
               {-0.15865525393145707, 0, 0.8413447460685429, 1.9544997361036416});
  check_tensor(gelu(f32({-1, 0, 1, 2}), "tanh"), {4}, DType::f32,
               {-0.15880800939172324, 0, 0.8411919906082768, 1.954597694087775});
  // Float-only ops promote integers and bools to f32; f64 stays f64.
  check_tensor(exp(from_vector<int32_t>({0, 1})), {2}, DType::f32, {1, 2.718281828459045});
  check_tensor(sqrt(from_vector<bool>({true})), {1}, DType::f32, {1});
  check_tensor(exp(from_vector<double>({1})), {1}, DType::f64, {2.718281828459045}, 1e-15);
  // f16 computes in f32 and rounds once.
  check_tensor(exp(f32({1}).to(DType::f16)), {1}, DType::f16, {2.71875}, 0);
}

BOOST_AUTO_TEST_CASE(unary_logical) {
  check_tensor(logical_not(f32({0, 2, -1})), {3}, DType::bool_, {1, 0, 0});
  check_tensor(!from_vector<bool>({true, false}), {2}, DType::bool_, {0, 1});
  check_tensor(isnan(from_vector<double>({1, kNaN, kInf})), {3}, DType::bool_, {0, 1, 0});
  check_tensor(isnan(from_vector<int32_t>({1})), {1}, DType::bool_, {0});
}

BOOST_AUTO_TEST_CASE(binary_arithmetic) {
  const Tensor a = f32({1, 2, 3, 4});
  const Tensor b = f32({4, 3, 2, 1});
  check_tensor(add(a, b), {4}, DType::f32, {5, 5, 5, 5});
  check_tensor(a + b, {4}, DType::f32, {5, 5, 5, 5});
  check_tensor(sub(a, b), {4}, DType::f32, {-3, -1, 1, 3});
  check_tensor(a - b, {4}, DType::f32, {-3, -1, 1, 3});
  check_tensor(mul(a, b), {4}, DType::f32, {4, 6, 6, 4});
  check_tensor(a * b, {4}, DType::f32, {4, 6, 6, 4});
  check_tensor(div(a, b), {4}, DType::f32, {0.25, 2.0 / 3, 1.5, 4});
  check_tensor(a / b, {4}, DType::f32, {0.25, 2.0 / 3, 1.5, 4});
  check_tensor(pow(a, b), {4}, DType::f32, {1, 8, 9, 4});
  check_tensor(maximum(a, b), {4}, DType::f32, {4, 3, 3, 4});
  check_tensor(minimum(a, b), {4}, DType::f32, {1, 2, 2, 1});
  check_values(div(f32({1, -1, 0}), f32({0, 0, 0})), {kInf, -kInf, kNaN});
  // maximum/minimum propagate NaN.
  check_values(maximum(f32({1}), from_vector<float>({static_cast<float>(kNaN)})), {kNaN});
}

BOOST_AUTO_TEST_CASE(binary_integers) {
  const Tensor a = from_vector<int32_t>({7, -7});
  const Tensor b = from_vector<int32_t>({2, 2});
  check_tensor(a + b, {2}, DType::i32, {9, -5});
  check_tensor(a * b, {2}, DType::i32, {14, -14});
  check_tensor(a / b, {2}, DType::f32, {3.5, -3.5});  // true division
  check_tensor(pow(from_vector<int64_t>({2, 3}), 2), {2}, DType::i64, {4, 9});
  check_tensor(maximum(a, b), {2}, DType::i32, {7, 2});
  // i32 arithmetic wraps.
  check_tensor(from_vector<int32_t>({2147483647}) + 1, {1}, DType::i32, {-2147483648.0});
}

BOOST_AUTO_TEST_CASE(comparisons_and_logical) {
  const Tensor a = f32({1, 2, 3});
  const Tensor b = f32({1, 5, 0});
  check_tensor(eq(a, b), {3}, DType::bool_, {1, 0, 0});
  check_tensor(a == b, {3}, DType::bool_, {1, 0, 0});
  check_tensor(ne(a, b), {3}, DType::bool_, {0, 1, 1});
  check_tensor(a != b, {3}, DType::bool_, {0, 1, 1});
  check_tensor(lt(a, b), {3}, DType::bool_, {0, 1, 0});
  check_tensor(a < b, {3}, DType::bool_, {0, 1, 0});
  check_tensor(le(a, b), {3}, DType::bool_, {1, 1, 0});
  check_tensor(a <= b, {3}, DType::bool_, {1, 1, 0});
  check_tensor(gt(a, b), {3}, DType::bool_, {0, 0, 1});
  check_tensor(a > b, {3}, DType::bool_, {0, 0, 1});
  check_tensor(ge(a, b), {3}, DType::bool_, {1, 0, 1});
  check_tensor(a >= b, {3}, DType::bool_, {1, 0, 1});
  check_tensor(a > 1.5, {3}, DType::bool_, {0, 1, 1});
  check_tensor(2 == a, {3}, DType::bool_, {0, 1, 0});
  const Tensor p = from_vector<bool>({true, true, false, false});
  const Tensor q = from_vector<bool>({true, false, true, false});
  check_tensor(logical_and(p, q), {4}, DType::bool_, {1, 0, 0, 0});
  check_tensor(p & q, {4}, DType::bool_, {1, 0, 0, 0});
  check_tensor(logical_or(p, q), {4}, DType::bool_, {1, 1, 1, 0});
  check_tensor(p | q, {4}, DType::bool_, {1, 1, 1, 0});
  // Logical ops read numbers as "non-zero".
  check_tensor(logical_and(f32({0, 2}), f32({3, 3})), {2}, DType::bool_, {0, 1});
  // NaN compares unequal to everything.
  const Tensor n = from_vector<float>({static_cast<float>(kNaN)});
  check_tensor(n == n, {1}, DType::bool_, {0});
  check_tensor(n != n, {1}, DType::bool_, {1});
}

BOOST_AUTO_TEST_CASE(scalars_on_either_side) {
  const Tensor x = f32({1, 2, 4});
  check_tensor(x + 1, {3}, DType::f32, {2, 3, 5});
  check_tensor(10 - x, {3}, DType::f32, {9, 8, 6});
  check_tensor(x - 0.5, {3}, DType::f32, {0.5, 1.5, 3.5});
  check_tensor(2 * x, {3}, DType::f32, {2, 4, 8});
  check_tensor(1 / x, {3}, DType::f32, {1, 0.5, 0.25});
  check_tensor(x / 4, {3}, DType::f32, {0.25, 0.5, 1});
  check_tensor(pow(x, 2), {3}, DType::f32, {1, 4, 16});
  check_tensor(pow(2, x), {3}, DType::f32, {2, 4, 16});
  check_tensor(maximum(x, 2), {3}, DType::f32, {2, 2, 4});
  check_tensor(minimum(3, x), {3}, DType::f32, {1, 2, 3});
  check_tensor(x + true, {3}, DType::f32, {2, 3, 5});
}

BOOST_AUTO_TEST_CASE(scalar_promotion) {
  // A scalar takes the tensor's dtype unless it is of a higher category.
  check_tensor(from_vector<int32_t>({1, 2}) + 0.5, {2}, DType::f32, {1.5, 2.5});
  check_tensor(from_vector<int32_t>({1, 2}) * 0.5, {2}, DType::f32, {0.5, 1});
  check_tensor(from_vector<int32_t>({1, 2}) + 1, {2}, DType::i32, {2, 3});
  check_tensor(from_vector<int64_t>({1, 2}) + 1, {2}, DType::i64, {2, 3});
  const Tensor h = f32({1, 2}).to(DType::f16);
  check_tensor(h + 1, {2}, DType::f16, {2, 3});
  check_tensor(h * 0.5, {2}, DType::f16, {0.5, 1});
  check_tensor(f32({1, 2}).to(DType::bf16) + 1, {2}, DType::bf16, {2, 3});
  check_tensor(from_vector<double>({1}) + 0.1, {1}, DType::f64, {1.1}, 1e-15);
  check_tensor(from_vector<bool>({true, false}) + 1, {2}, DType::i64, {2, 1});
  check_tensor(from_vector<bool>({true, false}) * 0.5, {2}, DType::f32, {0.5, 0});
  // A C++ double next to f32 stays f32 (the value is rounded to f32).
  check_tensor(f32({0}) + 0.1, {1}, DType::f32, {static_cast<double>(0.1f)}, 0);
}

BOOST_AUTO_TEST_CASE(tensor_promotion) {
  check_tensor(from_vector<int32_t>({1}) + from_vector<int64_t>({2}), {1}, DType::i64, {3});
  check_tensor(f32({1}) + from_vector<double>({2}), {1}, DType::f64, {3});
  check_tensor(from_vector<int64_t>({1}) + f32({0.5f}), {1}, DType::f32, {1.5});
  check_tensor(f32({1}).to(DType::f16) + f32({1}).to(DType::bf16), {1}, DType::f32, {2});
  check_tensor(from_vector<bool>({true}) + from_vector<int32_t>({2}), {1}, DType::i32, {3});
  // 0-d tensors do not widen dimensioned ones within a category, but lift them across.
  check_tensor(f32({1, 2}) + scalar_tensor(0.5, DType::f64), {2}, DType::f32, {1.5, 2.5});
  check_tensor(from_vector<int32_t>({1}) + scalar_tensor(0.5, DType::f32), {1}, DType::f32, {1.5});
  check_tensor(from_vector<int32_t>({1}) + scalar_tensor(5, DType::i64), {1}, DType::i32, {6});
  check_tensor(scalar_tensor(1, DType::f32) + scalar_tensor(2, DType::f64), {}, DType::f64, {3});
}

BOOST_AUTO_TEST_CASE(where_selects) {
  const Tensor c = from_vector<bool>({true, false, true});
  const Tensor a = f32({1, 2, 3});
  const Tensor b = f32({10, 20, 30});
  check_tensor(where(c, a, b), {3}, DType::f32, {1, 20, 3});
  check_tensor(where(c, a, 0.5), {3}, DType::f32, {1, 0.5, 3});
  check_tensor(where(c, -1, b), {3}, DType::f32, {-1, 20, -1});
  check_tensor(where(a > 1.5, a, b), {3}, DType::f32, {10, 2, 3});
  // Promotes the two branches; broadcasts all three.
  check_tensor(where(c, from_vector<int32_t>({1, 2, 3}), from_vector<double>({0})), {3}, DType::f64, {1, 0, 3});
  check_tensor(where(from_vector<bool>({true, false}, {2, 1}), a, b), {2, 3}, DType::f32, {1, 2, 3, 10, 20, 30});
}

BOOST_AUTO_TEST_CASE(broadcasting) {
  const Tensor col = f32({1, 2, 3}, {3, 1});
  const Tensor row = f32({10, 20, 30, 40}, {1, 4});
  check_tensor(col + row, {3, 4}, DType::f32, {11, 21, 31, 41, 12, 22, 32, 42, 13, 23, 33, 43});
  check_tensor(f32({1, 2, 3, 4, 5, 6}, {2, 3}) * f32({1, 10, 100}), {2, 3}, DType::f32, {1, 20, 300, 4, 50, 600});
  check_tensor(scalar_tensor(2.0) * f32({1, 2, 3, 4}, {2, 2}), {2, 2}, DType::f32, {2, 4, 6, 8});
  check_tensor(f32({5}) - f32({1, 2, 3}, {3, 1, 1}), {3, 1, 1}, DType::f32, {4, 3, 2});
  // Sizes 0 and 1.
  check_tensor(zeros({0, 3}) + f32({1, 2, 3}), {0, 3}, DType::f32, {});
  check_tensor(f32({7}) + zeros({0}), {0}, DType::f32, {});
  check_tensor(zeros({2, 0}) + zeros({1, 0}), {2, 0}, DType::f32, {});
  check_tensor(f32({1}, {1, 1}) + f32({1, 2}), {1, 2}, DType::f32, {2, 3});
  // Broadcast inputs that are views (expanded, transposed) give the same values.
  const Tensor t = transpose(f32({1, 2, 3, 4, 5, 6}, {2, 3}), 0, 1);
  check_tensor(t + f32({100, 200}), {3, 2}, DType::f32, {101, 204, 102, 205, 103, 206});
  check_tensor(expand(f32({1, 2}), {2, 2}) * f32({1, 10}, {2, 1}), {2, 2}, DType::f32, {1, 2, 10, 20});
}

BOOST_AUTO_TEST_CASE(cast_op) {
  check_tensor(cast(f32({1.9f, -1.9f}), DType::i64), {2}, DType::i64, {1, -1});
  check_tensor(cast(from_vector<int32_t>({0, 3}), DType::bool_), {2}, DType::bool_, {0, 1});
  check_tensor(cast(from_vector<int32_t>({3}), DType::f64), {1}, DType::f64, {3});
}

BOOST_AUTO_TEST_SUITE_END()
