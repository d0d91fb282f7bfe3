// Reductions against hand-computed values.
#include "helpers.h"

using namespace ref_test;

namespace {
using Dims = std::vector<int64_t>;
Attrs red(Dims dims, bool keepdim = false) { return {std::move(dims), keepdim}; }
Attrs var_attrs(Dims dims, bool keepdim, int64_t correction) { return {std::move(dims), keepdim, correction}; }
// [[1, 2, 3], [4, 5, 6]]
TensorData x23() { return f32({2, 3}, {1, 2, 3, 4, 5, 6}); }
}  // namespace

BOOST_AUTO_TEST_SUITE(reductions)

BOOST_AUTO_TEST_CASE(sum_over_dims) {
  check(eval(OpId::sum, {x23()}, red({})), DType::f32, {}, {21});
  check(eval(OpId::sum, {x23()}, red({0})), DType::f32, {3}, {5, 7, 9});
  check(eval(OpId::sum, {x23()}, red({1})), DType::f32, {2}, {6, 15});
  check(eval(OpId::sum, {x23()}, red({1}, true)), DType::f32, {2, 1}, {6, 15});
  check(eval(OpId::sum, {x23()}, red({0, 1})), DType::f32, {}, {21});
  check(eval(OpId::sum, {x23()}, red({}, true)), DType::f32, {1, 1}, {21});
  // [2, 2, 2] holding 1..8, over dims 0 and 2: dim-1 index 0 has 1, 2, 5, 6; index 1 has 3, 4, 7, 8.
  const TensorData c = f32({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  check(eval(OpId::sum, {c}, red({0, 2})), DType::f32, {2}, {14, 22});
  check(eval(OpId::sum, {c}, red({0, 2}, true)), DType::f32, {1, 2, 1}, {14, 22});
}

BOOST_AUTO_TEST_CASE(sum_and_prod_dtypes) {
  check(eval(OpId::sum, {boolean({4}, {1, 0, 1, 1})}, red({})), DType::i64, {}, {3}, 0);
  check(eval(OpId::sum, {i32({3}, {2147483647, 1, 1})}, red({})), DType::i64, {}, {2147483649.0}, 0);
  check(eval(OpId::prod, {i32({3}, {2, -3, 4})}, red({})), DType::i64, {}, {-24}, 0);
  check(eval(OpId::sum, {f64({2}, {0.5, 0.25})}, red({})), DType::f64, {}, {0.75}, 0);
  check(eval(OpId::sum, {tensor(DType::f16, {3}, {1, 2, 0.5})}, red({})), DType::f16, {}, {3.5}, 0);
}

BOOST_AUTO_TEST_CASE(mean_max_min_prod) {
  check(eval(OpId::mean, {x23()}, red({1})), DType::f32, {2}, {2, 5});
  check(eval(OpId::mean, {x23()}, red({})), DType::f32, {}, {3.5});
  check(eval(OpId::mean, {i32({4}, {1, 2, 3, 5})}, red({})), DType::f32, {}, {2.75});
  check(eval(OpId::max, {x23()}, red({0})), DType::f32, {3}, {4, 5, 6});
  check(eval(OpId::max, {x23()}, red({})), DType::f32, {}, {6});
  check(eval(OpId::min, {x23()}, red({1}, true)), DType::f32, {2, 1}, {1, 4});
  check(eval(OpId::max, {i32({3}, {-5, 7, 2})}, red({})), DType::i32, {}, {7}, 0);
  check(eval(OpId::min, {i64({3}, {-5, 7, 2})}, red({0})), DType::i64, {}, {-5}, 0);
  check(eval(OpId::prod, {x23()}, red({1})), DType::f32, {2}, {6, 120});
  check(eval(OpId::prod, {x23()}, red({})), DType::f32, {}, {720});
}

BOOST_AUTO_TEST_CASE(argmax_argmin) {
  check(eval(OpId::argmax, {x23()}, red({1})), DType::i64, {2}, {2, 2}, 0);
  check(eval(OpId::argmin, {x23()}, red({0})), DType::i64, {3}, {0, 0, 0}, 0);
  // No dim: the index into the flattened tensor.
  check(eval(OpId::argmax, {x23()}, red({})), DType::i64, {}, {5}, 0);
  check(eval(OpId::argmin, {f32({2, 2}, {3, 1, 0, 2})}, red({})), DType::i64, {}, {2}, 0);
  check(eval(OpId::argmax, {x23()}, red({1}, true)), DType::i64, {2, 1}, {2, 2}, 0);
  // Ties: the first index.
  check(eval(OpId::argmax, {f32({3}, {3, 1, 3})}, red({})), DType::i64, {}, {0}, 0);
  check(eval(OpId::argmin, {i32({3}, {1, 0, 0})}, red({0})), DType::i64, {}, {1}, 0);
  // NaN counts as the extreme, the first one wins.
  check(eval(OpId::argmax, {f32({4}, {1, kNaN, 3, kNaN})}, red({})), DType::i64, {}, {1}, 0);
  check(eval(OpId::argmin, {f32({3}, {1, kNaN, 0})}, red({})), DType::i64, {}, {1}, 0);
}

BOOST_AUTO_TEST_CASE(var_corrections) {
  check(eval(OpId::var, {x23()}, var_attrs({1}, false, 1)), DType::f32, {2}, {1, 1});
  check(eval(OpId::var, {x23()}, var_attrs({1}, false, 0)), DType::f32, {2}, {2.0 / 3, 2.0 / 3});
  // All of 1..6: mean 3.5, squared deviations sum to 17.5.
  check(eval(OpId::var, {x23()}, var_attrs({}, false, 1)), DType::f32, {}, {3.5});
  check(eval(OpId::var, {x23()}, var_attrs({}, true, 0)), DType::f32, {1, 1}, {2.9166667});
  check(eval(OpId::var, {x23()}, var_attrs({0}, false, 1)), DType::f32, {3}, {4.5, 4.5, 4.5});
  // N - correction = 0: 0 / 0.
  check(eval(OpId::var, {f32({1}, {5})}, var_attrs({}, false, 1)), DType::f32, {}, {kNaN});
  check(eval(OpId::var, {i32({3}, {1, 2, 3})}, var_attrs({}, false, 1)), DType::f32, {}, {1});
}

BOOST_AUTO_TEST_CASE(logsumexp_values) {
  check(eval(OpId::logsumexp, {f32({3}, {1, 2, 3})}, red({})), DType::f32, {}, {3.4076059644});
  check(eval(OpId::logsumexp, {f32({2, 3}, {1, 2, 3, 0, 0, 0})}, red({1})), DType::f32, {2},
        {3.4076059644, 1.0986122887});
  check(eval(OpId::logsumexp, {f32({2, 2}, {1000, 1000, -kInf, -kInf})}, red({1}, true)), DType::f32, {2, 1},
        {1000.6931471806, -kInf});
  check(eval(OpId::logsumexp, {f32({2}, {kInf, 1})}, red({})), DType::f32, {}, {kInf});
}

BOOST_AUTO_TEST_CASE(nan_propagation) {
  check(eval(OpId::sum, {f32({3}, {1, kNaN, 2})}, red({})), DType::f32, {}, {kNaN});
  check(eval(OpId::max, {f32({3}, {1, kNaN, 3})}, red({})), DType::f32, {}, {kNaN});
  check(eval(OpId::min, {f32({2, 2}, {kNaN, 1, 0, 2})}, red({1})), DType::f32, {2}, {kNaN, 0});
  check(eval(OpId::mean, {f32({2}, {kNaN, 1})}, red({})), DType::f32, {}, {kNaN});
}

BOOST_AUTO_TEST_CASE(empty_reductions) {
  check(eval(OpId::sum, {f32({0}, {})}, red({})), DType::f32, {}, {0});
  check(eval(OpId::prod, {f32({0}, {})}, red({})), DType::f32, {}, {1});
  check(eval(OpId::mean, {f32({0}, {})}, red({})), DType::f32, {}, {kNaN});
  check(eval(OpId::sum, {f32({2, 0}, {})}, red({1})), DType::f32, {2}, {0, 0});
  check(eval(OpId::sum, {f32({0, 3}, {})}, red({1})), DType::f32, {0}, {});
  check(eval(OpId::sum, {i32({0}, {})}, red({})), DType::i64, {}, {0}, 0);
  check_error([] { eval(OpId::max, {f32({0}, {})}, red({})); }, {"max", "empty"});
  check_error([] { eval(OpId::argmax, {f32({2, 0}, {})}, red({1})); }, {"argmax", "empty"});
}

BOOST_AUTO_TEST_CASE(size_one_and_scalar) {
  check(eval(OpId::sum, {f32({1}, {4})}, red({0})), DType::f32, {}, {4});
  check(eval(OpId::max, {scalar(DType::f32, 2.5)}, red({})), DType::f32, {}, {2.5});
  check(eval(OpId::argmax, {scalar(DType::f32, 2.5)}, red({})), DType::i64, {}, {0}, 0);
}

BOOST_AUTO_TEST_CASE(strided_input) {
  // The transpose of [[1, 2, 3], [4, 5, 6]] as a view: [[1, 4], [2, 5], [3, 6]].
  TensorData t = x23();
  t.sizes = {3, 2};
  t.strides = {1, 3};
  check(eval(OpId::sum, {t}, red({1})), DType::f32, {3}, {5, 7, 9});
  check(eval(OpId::argmax, {t}, red({})), DType::i64, {}, {5}, 0);  // flat index of 6 in [1, 4, 2, 5, 3, 6]
}

// Running sums and products along a dim, inclusive or exclusive, forwards or reversed, written
// out by hand (the op cases compare targets with the reference; these pin the reference itself).
BOOST_AUTO_TEST_CASE(running_sums_and_products) {
  auto scan = [](int64_t dim, bool exclusive, bool reverse) { return Attrs{dim, exclusive, reverse}; };
  const TensorData x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  check(eval(OpId::cumprod, {x}, scan(1, false, false)), DType::f32, {2, 3}, {1, 2, 6, 4, 20, 120});
  check(eval(OpId::cumprod, {x}, scan(1, true, false)), DType::f32, {2, 3}, {1, 1, 2, 1, 4, 20});
  check(eval(OpId::cumprod, {x}, scan(1, false, true)), DType::f32, {2, 3}, {6, 6, 3, 120, 30, 6});
  check(eval(OpId::cumprod, {x}, scan(1, true, true)), DType::f32, {2, 3}, {6, 3, 1, 30, 6, 1});
  check(eval(OpId::cumprod, {x}, scan(0, false, false)), DType::f32, {2, 3}, {1, 2, 3, 4, 10, 18});
  check(eval(OpId::cumsum, {x}, scan(1, true, true)), DType::f32, {2, 3}, {5, 3, 0, 11, 6, 0});
  // Integers and bool in i64 (wrapping as torch's); NaN and inf carry on; a 0-d x is itself.
  check(eval(OpId::cumprod, {i32({4}, {65536, 65536, 65536, 0})}, scan(0, false, false)), DType::i64, {4},
        {65536, 4294967296.0, 281474976710656.0, 0}, 0);
  check(eval(OpId::cumprod, {boolean({3}, {1, 1, 0})}, scan(0, false, false)), DType::i64, {3}, {1, 1, 0}, 0);
  check(eval(OpId::cumprod, {f32({4}, {2, kNaN, 0, kInf})}, scan(0, false, false)), DType::f32, {4}, {2, kNaN, kNaN, kNaN});
  check(eval(OpId::cumprod, {f32({3}, {2, 0, kInf})}, scan(0, false, false)), DType::f32, {3}, {2, 0, kNaN});
  check(eval(OpId::cumprod, {scalar(DType::f32, 3)}, scan(0, false, false)), DType::f32, {}, {3});
  // A sum skips what it does not add: inf and NaN carry on from where they are, not back.
  check(eval(OpId::cumsum, {f32({4}, {1, kInf, 2, kNaN})}, scan(0, false, false)), DType::f32, {4}, {1, kInf, kInf, kNaN});
  check(eval(OpId::cumsum, {f32({4}, {1, kInf, 2, kNaN})}, scan(0, true, true)), DType::f32, {4}, {kNaN, kNaN, kNaN, 0});
}

// Dims longer than two blocks (64) scan each block and add (multiply) the running totals of the
// blocks before: every combination of exclusive and reverse, lengths that fill the last block or
// not, and three levels of blocks (n > 64 * 64 * 2), against a sequential scan written out here.
BOOST_AUTO_TEST_CASE(running_sums_and_products_of_long_dims) {
  for (const int64_t n : {129, 192, 1000, 9000}) {
    std::vector<double> x(static_cast<size_t>(2 * n));
    for (size_t k = 0; k < x.size(); ++k) x[k] = static_cast<double>(static_cast<int64_t>((k * 7919) % 201) - 100);
    for (const bool exclusive : {false, true}) {
      for (const bool reverse : {false, true}) {
        std::vector<double> want(x.size());
        for (int64_t row = 0; row < 2; ++row) {
          double acc = 0;
          for (int64_t s = 0; s < n; ++s) {
            const size_t k = static_cast<size_t>(row * n + (reverse ? n - 1 - s : s));
            if (!exclusive) acc += x[k];
            want[k] = acc;
            if (exclusive) acc += x[k];
          }
        }
        // Integers exactly, in i64; f64 exactly too (integer values far below 2^53).
        check(eval(OpId::cumsum, {i32({2, n}, x)}, Attrs{int64_t{1}, exclusive, reverse}), DType::i64, {2, n}, want, 0);
        check(eval(OpId::cumsum, {f64({2, n}, x)}, Attrs{int64_t{1}, exclusive, reverse}), DType::f64, {2, n}, want, 0);
      }
    }
  }
  // Products: factors of 1 and -1 and one 2 keep the exact value small; a 0 in block 3 ends them.
  const int64_t n = 700;
  std::vector<double> x(static_cast<size_t>(n), 1.0), want(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; k += 3) x[static_cast<size_t>(k)] = -1;
  x[100] = 2;
  x[200] = 0;
  double acc = 1;
  for (size_t k = 0; k < x.size(); ++k) want[k] = acc *= x[k];
  check(eval(OpId::cumprod, {f32({n}, x)}, Attrs{int64_t{0}, false, false}), DType::f32, {n}, want, 0);
  check(eval(OpId::cumprod, {i64({n}, x)}, Attrs{int64_t{0}, false, false}), DType::i64, {n}, want, 0);
}

BOOST_AUTO_TEST_SUITE_END()
