// Composite ops (run through their decompositions) and matmul against hand-computed values.
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
