// Composite ops (softmax, log_softmax, layer_norm, rms_norm, linear) and matmul against
// hand-computed values.
#include "helpers.h"

using namespace kiln;
using namespace frontend_test;

BOOST_AUTO_TEST_SUITE(composite)

BOOST_AUTO_TEST_CASE(softmax_values) {
  check_tensor(softmax(f32({1, 2, 3}), 0), {3}, DType::f32, {0.0900306, 0.2447285, 0.6652410}, 1e-6);
  check_tensor(softmax(f32({1, 2, 3}), -1), {3}, DType::f32,
               {0.09003057317038046, 0.24472847105479767, 0.6652409557748219});
  // Along dim 0 of [[1, 2, 3], [1, 2, 3]]: every column is uniform.
  check_tensor(softmax(f32({1, 2, 3, 1, 2, 3}, {2, 3}), 0), {2, 3}, DType::f32, {0.5, 0.5, 0.5, 0.5, 0.5, 0.5});
  // Shift invariance keeps large inputs finite.
  check_tensor(softmax(f32({1001, 1002, 1003}), 0), {3}, DType::f32,
               {0.09003057317038046, 0.24472847105479767, 0.6652409557748219});
  check_tensor(softmax(from_vector<int32_t>({0, 0}), 0), {2}, DType::f32, {0.5, 0.5});
  check_tensor(log_softmax(f32({1, 2, 3}), 0), {3}, DType::f32,
               {-2.40760596444438, -1.40760596444438, -0.40760596444438});
  check_tensor(log_softmax(f32({1, 2, 3, 4, 5, 6}, {2, 3}), 1), {2, 3}, DType::f32,
               {-2.40760596444438, -1.40760596444438, -0.40760596444438, -2.40760596444438, -1.40760596444438,
                -0.40760596444438});
}

BOOST_AUTO_TEST_CASE(layer_norm_values) {
  // mean 2.5, biased variance 1.25, eps 1e-5.
  const std::vector<double> normed{-1.3416354199689269, -0.447211806656309, 0.447211806656309, 1.3416354199689269};
  check_tensor(layer_norm(f32({1, 2, 3, 4}), {4}), {4}, DType::f32, normed, 1e-5);
  const Tensor w = f32({1, 1, 2, 2});
  const Tensor b = f32({0, 0, 1, 1});
  check_tensor(layer_norm(f32({1, 2, 3, 4}), {4}, w), {4}, DType::f32,
               {normed[0], normed[1], 2 * normed[2], 2 * normed[3]}, 1e-5);
  check_tensor(layer_norm(f32({1, 2, 3, 4}), {4}, w, b), {4}, DType::f32,
               {normed[0], normed[1], 2 * normed[2] + 1, 2 * normed[3] + 1}, 1e-5);
  check_tensor(layer_norm(f32({1, 2, 3, 4}), {4}, Tensor(), b), {4}, DType::f32,
               {normed[0], normed[1], normed[2] + 1, normed[3] + 1}, 1e-5);
  // Each row on its own; over two trailing dims at once.
  check_tensor(layer_norm(f32({1, 2, 3, 4, 10, 20, 30, 40}, {2, 4}), {4}), {2, 4}, DType::f32,
               {normed[0], normed[1], normed[2], normed[3], normed[0], normed[1], normed[2], normed[3]}, 1e-4);
  check_tensor(layer_norm(f32({1, 2, 3, 4}, {1, 2, 2}), {2, 2}), {1, 2, 2}, DType::f32, normed, 1e-5);
  // Larger eps changes the result.
  const double d = std::sqrt(1.25 + 0.75);
  check_tensor(layer_norm(f32({1, 2, 3, 4}), {4}, Tensor(), Tensor(), 0.75), {4}, DType::f32,
               {-1.5 / d, -0.5 / d, 0.5 / d, 1.5 / d}, 1e-6);
}

BOOST_AUTO_TEST_CASE(rms_norm_values) {
  const std::vector<double> normed{0.3651483473268884, 0.7302966946537768, 1.0954450419806652, 1.4605933893075536};
  check_tensor(rms_norm(f32({1, 2, 3, 4}), {4}), {4}, DType::f32, normed, 1e-6);
  check_tensor(rms_norm(f32({1, 2, 3, 4}), {4}, f32({2, 2, 0, 1})), {4}, DType::f32,
               {2 * normed[0], 2 * normed[1], 0, normed[3]}, 1e-6);
  check_tensor(rms_norm(f32({3, 4}, {1, 2}), {2}), {1, 2}, DType::f32,
               {3 / std::sqrt(12.5 + 1e-6), 4 / std::sqrt(12.5 + 1e-6)}, 1e-6);
}

BOOST_AUTO_TEST_CASE(linear_values) {
  const Tensor x = f32({1, 2}, {1, 2});
  const Tensor w = f32({1, 0, 0, 1, 1, 1}, {3, 2});
  check_tensor(linear(x, w), {1, 3}, DType::f32, {1, 2, 3});
  check_tensor(linear(x, w, f32({10, 20, 30})), {1, 3}, DType::f32, {11, 22, 33});
  // Batched input, 1-D input.
  check_tensor(linear(f32({1, 2, 3, 4}, {2, 2}), w), {2, 3}, DType::f32, {1, 2, 3, 3, 4, 7});
  check_tensor(linear(f32({1, 2}), w), {3}, DType::f32, {1, 2, 3});
}

BOOST_AUTO_TEST_CASE(matmul_values) {
  const Tensor a = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor b = f32({7, 8, 9, 10, 11, 12}, {3, 2});
  check_tensor(matmul(a, b), {2, 2}, DType::f32, {58, 64, 139, 154});
  // 1-D operands: a dot product (0-d), a vector-matrix and a matrix-vector product.
  check_tensor(matmul(f32({1, 2, 3}), f32({4, 5, 6})), {}, DType::f32, {32});
  check_tensor(matmul(f32({1, 1, 1}), b), {2}, DType::f32, {27, 30});
  check_tensor(matmul(a, f32({1, 0, -1})), {2}, DType::f32, {-2, -2});
  // Batch dims broadcast: [2, 1, 2] @ [2, 2] -> [2, 1, 2].
  check_tensor(matmul(f32({1, 0, 0, 1}, {2, 1, 2}), f32({1, 2, 3, 4}, {2, 2})), {2, 1, 2}, DType::f32, {1, 2, 3, 4});
  check_tensor(matmul(f32({1, 2}, {1, 1, 2}), f32({1, 0, 0, 1, 2, 0, 0, 2}, {2, 2, 2})), {2, 1, 2}, DType::f32,
               {1, 2, 2, 4});
  // Transposed operands (views) and integer operands.
  check_tensor(matmul(transpose(b, 0, 1), transpose(a, 0, 1)), {2, 2}, DType::f32, {58, 139, 64, 154});
  check_tensor(matmul(from_vector<int32_t>({1, 2, 3, 4}, {2, 2}), from_vector<int32_t>({1, 1}, {2, 1})), {2, 1},
               DType::i32, {3, 7});
  // An empty inner dim sums nothing.
  check_tensor(matmul(zeros({2, 0}), zeros({0, 3})), {2, 3}, DType::f32, {0, 0, 0, 0, 0, 0});
}

BOOST_AUTO_TEST_SUITE_END()
