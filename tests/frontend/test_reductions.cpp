// Reductions over all dims, some dims, negative dims, keepdim, empty inputs, and their
// result dtypes, against hand-computed values.
#include <limits>

#include "helpers.h"

using namespace kiln;
using namespace frontend_test;

namespace {
// [[1, 2, 3], [4, 5, 6]]
Tensor m23() { return from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}); }
}  // namespace

BOOST_AUTO_TEST_SUITE(reductions)

BOOST_AUTO_TEST_CASE(sum_and_mean) {
  check_tensor(sum(m23()), {}, DType::f32, {21});
  check_tensor(sum(m23(), {0}), {3}, DType::f32, {5, 7, 9});
  check_tensor(sum(m23(), {1}), {2}, DType::f32, {6, 15});
  check_tensor(sum(m23(), {-1}, true), {2, 1}, DType::f32, {6, 15});
  check_tensor(sum(m23(), {0, 1}, true), {1, 1}, DType::f32, {21});
  check_tensor(sum(m23(), {1, 0}), {}, DType::f32, {21});
  check_tensor(mean(m23()), {}, DType::f32, {3.5});
  check_tensor(mean(m23(), {1}), {2}, DType::f32, {2, 5});
  check_tensor(mean(m23(), {0}, true), {1, 3}, DType::f32, {2.5, 3.5, 4.5});
  // Result dtypes: sum of ints and bools is i64; mean of ints is f32.
  check_tensor(sum(from_vector<int32_t>({1, 2, 3})), {}, DType::i64, {6});
  check_tensor(sum(from_vector<bool>({true, false, true})), {}, DType::i64, {2});
  check_tensor(mean(from_vector<int64_t>({1, 2})), {}, DType::f32, {1.5});
  check_tensor(sum(from_vector<double>({0.1, 0.2})), {}, DType::f64, {0.1 + 0.2}, 1e-15);
  // A non-contiguous view reduces its own elements.
  check_tensor(sum(transpose(m23(), 0, 1), {1}), {3}, DType::f32, {5, 7, 9});
  check_tensor(sum(slice(m23(), 1, 0, 3, 2)), {}, DType::f32, {1 + 3 + 4 + 6});
}

BOOST_AUTO_TEST_CASE(max_min_prod) {
  check_tensor(kiln::max(m23()), {}, DType::f32, {6});
  check_tensor(kiln::max(m23(), {0}), {3}, DType::f32, {4, 5, 6});
  check_tensor(kiln::min(m23(), {1}), {2}, DType::f32, {1, 4});
  check_tensor(kiln::min(m23(), {1}, true), {2, 1}, DType::f32, {1, 4});
  check_tensor(prod(m23()), {}, DType::f32, {720});
  check_tensor(prod(m23(), {1}), {2}, DType::f32, {6, 120});
  check_tensor(prod(from_vector<int32_t>({2, 3})), {}, DType::i64, {6});
  check_tensor(kiln::max(from_vector<int32_t>({-5, 3, 2})), {}, DType::i32, {3});
  check_tensor(kiln::min(f32({-1, -7, 4})), {}, DType::f32, {-7});
}

BOOST_AUTO_TEST_CASE(var_and_logsumexp) {
  // 1..6: mean 3.5, squared deviations sum to 17.5.
  check_tensor(var(m23()), {}, DType::f32, {17.5 / 5});
  check_tensor(var(m23(), {}, 0), {}, DType::f32, {17.5 / 6});
  check_tensor(var(m23(), {1}), {2}, DType::f32, {1, 1});
  check_tensor(var(m23(), {0}, 1, true), {1, 3}, DType::f32, {4.5, 4.5, 4.5});
  check_tensor(var(f32({1, 2, 3, 4})), {}, DType::f32, {5.0 / 3});
  check_tensor(var(from_vector<int32_t>({1, 3})), {}, DType::f32, {2});
  check_tensor(logsumexp(f32({1, 2, 3})), {}, DType::f32, {3.40760596444438});
  check_tensor(logsumexp(m23(), {1}), {2}, DType::f32, {3.40760596444438, 6.407605964444381});
  // Large values do not overflow.
  check_tensor(logsumexp(f32({1000, 1000})), {}, DType::f32, {1000 + 0.6931471805599453});
}

BOOST_AUTO_TEST_CASE(argmax_argmin) {
  check_tensor(argmax(m23()), {}, DType::i64, {5});
  check_tensor(argmax(m23(), 0), {3}, DType::i64, {1, 1, 1});
  check_tensor(argmin(m23(), 1), {2}, DType::i64, {0, 0});
  check_tensor(argmax(m23(), -1, true), {2, 1}, DType::i64, {2, 2});
  // The first extreme wins ties.
  check_tensor(argmax(f32({1, 3, 3})), {}, DType::i64, {1});
  check_tensor(argmin(f32({2, 1, 1})), {}, DType::i64, {1});
  check_tensor(argmin(from_vector<int32_t>({4, -2, 9, -2})), {}, DType::i64, {1});
}

BOOST_AUTO_TEST_CASE(empty_and_size_one) {
  check_tensor(sum(zeros({0, 3}), {0}), {3}, DType::f32, {0, 0, 0});
  check_tensor(sum(zeros({0})), {}, DType::f32, {0});
  check_tensor(prod(zeros({0})), {}, DType::f32, {1});
  check_values(mean(zeros({0})), {std::numeric_limits<double>::quiet_NaN()});
  check_tensor(sum(zeros({3, 0}), {1}), {3}, DType::f32, {0, 0, 0});
  check_tensor(sum(f32({7}, {1, 1}), {0}), {1}, DType::f32, {7});
  check_tensor(kiln::max(f32({7}, {1})), {}, DType::f32, {7});
  // A max over an empty dim has no identity.
  BOOST_CHECK_THROW(kiln::max(zeros({0})), kiln::Error);
  BOOST_CHECK_THROW(argmax(zeros({2, 0}), 1), kiln::Error);
  // Reducing a non-empty dim of a tensor with an empty other dim is fine.
  check_tensor(kiln::max(zeros({0, 3}), {1}), {0}, DType::f32, {});
}

BOOST_AUTO_TEST_SUITE_END()
