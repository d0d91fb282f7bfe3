// Layout ops against hand-computed values.
#include <limits>

#include "helpers.h"

using namespace ref_test;
namespace kr = kiln::eval;

namespace {
using kiln::SymInt;
using Ints = std::vector<int64_t>;
Attrs shape(std::vector<SymInt> s) { return {std::move(s)}; }
TensorData x23() { return f32({2, 3}, {1, 2, 3, 4, 5, 6}); }
TensorData ten() { return i64({10}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}); }
Attrs slice(int64_t dim, int64_t start, int64_t end, int64_t step) { return {dim, start, end, step}; }
}  // namespace

BOOST_AUTO_TEST_SUITE(layout)

BOOST_AUTO_TEST_CASE(reshape_squeeze_unsqueeze) {
  check(eval(OpId::reshape, {x23()}, shape({3, 2})), DType::f32, {3, 2}, {1, 2, 3, 4, 5, 6}, 0);
  check(eval(OpId::reshape, {x23()}, shape({6})), DType::f32, {6}, {1, 2, 3, 4, 5, 6}, 0);
  check(eval(OpId::reshape, {f32({0, 3}, {})}, shape({3, 0})), DType::f32, {3, 0}, {});
  check(eval(OpId::reshape, {f32({1}, {7})}, shape({})), DType::f32, {}, {7}, 0);
  // A transposed view reshapes in its logical order.
  TensorData t = x23();
  t.sizes = {3, 2};
  t.strides = {1, 3};
  check(eval(OpId::reshape, {t}, shape({6})), DType::f32, {6}, {1, 4, 2, 5, 3, 6}, 0);
  check(eval(OpId::squeeze, {f32({1, 2, 1}, {1, 2})}, {Ints{0, 2}}), DType::f32, {2}, {1, 2}, 0);
  check(eval(OpId::unsqueeze, {f32({2}, {1, 2})}, {int64_t{1}}), DType::f32, {2, 1}, {1, 2}, 0);
  check(eval(OpId::unsqueeze, {f32({2}, {1, 2})}, {int64_t{0}}), DType::f32, {1, 2}, {1, 2}, 0);
  check_error([] { eval(OpId::reshape, {x23()}, shape({4})); }, {"reshape"});
}

BOOST_AUTO_TEST_CASE(permute_transpose_flatten) {
  check(eval(OpId::permute, {x23()}, {Ints{1, 0}}), DType::f32, {3, 2}, {1, 4, 2, 5, 3, 6}, 0);
  // [2, 2, 2] of 0..7 with dims (2, 0, 1): out[i][j][k] = x[j][k][i].
  const TensorData c = i32({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  check(eval(OpId::permute, {c}, {Ints{2, 0, 1}}), DType::i32, {2, 2, 2}, {0, 2, 4, 6, 1, 3, 5, 7}, 0);
  check(eval(OpId::transpose, {x23()}, {int64_t{0}, int64_t{1}}), DType::f32, {3, 2}, {1, 4, 2, 5, 3, 6}, 0);
  check(eval(OpId::transpose, {c}, {int64_t{0}, int64_t{2}}), DType::i32, {2, 2, 2}, {0, 4, 2, 6, 1, 5, 3, 7}, 0);
  check(eval(OpId::flatten, {c}, {int64_t{1}, int64_t{2}}), DType::i32, {2, 4}, {0, 1, 2, 3, 4, 5, 6, 7}, 0);
  check(eval(OpId::flatten, {c}, {int64_t{0}, int64_t{1}}), DType::i32, {4, 2}, {0, 1, 2, 3, 4, 5, 6, 7}, 0);
  check(eval(OpId::flatten, {scalar(DType::f32, 3)}, {int64_t{0}, int64_t{0}}), DType::f32, {1}, {3}, 0);
}

BOOST_AUTO_TEST_CASE(expand_reads_with_broadcasting) {
  check(eval(OpId::expand, {f32({3, 1}, {1, 2, 3})}, shape({3, 2})), DType::f32, {3, 2}, {1, 1, 2, 2, 3, 3}, 0);
  check(eval(OpId::expand, {f32({3}, {1, 2, 3})}, shape({2, 3})), DType::f32, {2, 3}, {1, 2, 3, 1, 2, 3}, 0);
  check(eval(OpId::expand, {f32({1}, {5})}, shape({2, 0})), DType::f32, {2, 0}, {});
  check_error([] { eval(OpId::expand, {f32({2}, {1, 2})}, shape({3})); }, {"expand"});
}

BOOST_AUTO_TEST_CASE(slices) {
  check(eval(OpId::slice, {ten()}, slice(0, 1, 8, 3)), DType::i64, {3}, {1, 4, 7}, 0);
  check(eval(OpId::slice, {ten()}, slice(0, -3, kEnd, 1)), DType::i64, {3}, {7, 8, 9}, 0);
  check(eval(OpId::slice, {ten()}, slice(0, -100, 2, 1)), DType::i64, {2}, {0, 1}, 0);
  check(eval(OpId::slice, {ten()}, slice(0, 2, -5, 2)), DType::i64, {2}, {2, 4}, 0);
  check(eval(OpId::slice, {ten()}, slice(0, 5, 2, 1)), DType::i64, {0}, {}, 0);
  check(eval(OpId::slice, {ten()}, slice(0, 8, 100, 5)), DType::i64, {1}, {8}, 0);
  // Columns 0 and 2 of [[1, 2, 3], [4, 5, 6]].
  check(eval(OpId::slice, {x23()}, slice(1, 0, kEnd, 2)), DType::f32, {2, 2}, {1, 3, 4, 6}, 0);
  check(eval(OpId::slice, {x23()}, slice(0, -1, kEnd, 1)), DType::f32, {1, 3}, {4, 5, 6}, 0);
}

BOOST_AUTO_TEST_CASE(unfolds) {
  // torch.arange(10).unfold(0, 4, 3): [[0, 1, 2, 3], [3, 4, 5, 6], [6, 7, 8, 9]]
  check(eval(OpId::unfold, {ten()}, {int64_t{0}, int64_t{4}, int64_t{3}}), DType::i64, {3, 4},
        {0, 1, 2, 3, 3, 4, 5, 6, 6, 7, 8, 9}, 0);
  check(eval(OpId::unfold, {ten()}, {int64_t{0}, int64_t{3}, int64_t{4}}), DType::i64, {2, 3}, {0, 1, 2, 4, 5, 6}, 0);
  // Windows of 2 along the columns of [[1, 2, 3], [4, 5, 6]]: [2, 2, 2].
  check(eval(OpId::unfold, {x23()}, {int64_t{1}, int64_t{2}, int64_t{1}}), DType::f32, {2, 2, 2},
        {1, 2, 2, 3, 4, 5, 5, 6}, 0);
}

BOOST_AUTO_TEST_CASE(cats) {
  check(eval(OpId::cat, {f32({1}, {1}), f32({2}, {2, 3}), f32({3}, {4, 5, 6})}, {int64_t{0}}), DType::f32, {6},
        {1, 2, 3, 4, 5, 6}, 0);
  check(eval(OpId::cat, {f32({2, 1}, {1, 2}), f32({2, 2}, {3, 4, 5, 6}), f32({2, 1}, {7, 8})}, {int64_t{1}}),
        DType::f32, {2, 4}, {1, 3, 4, 7, 2, 5, 6, 8}, 0);
  // Promotes: i32 with f32 gives f32.
  check(eval(OpId::cat, {i32({2}, {1, 2}), f32({1}, {0.5})}, {int64_t{0}}), DType::f32, {3}, {1, 2, 0.5}, 0);
  // Empty pieces.
  check(eval(OpId::cat, {f32({0, 2}, {}), f32({1, 2}, {1, 2}), f32({0, 2}, {})}, {int64_t{0}}), DType::f32, {1, 2},
        {1, 2}, 0);
  check(eval(OpId::cat, {f32({2}, {1, 2})}, {int64_t{0}}), DType::f32, {2}, {1, 2}, 0);
}

BOOST_AUTO_TEST_CASE(pads) {
  check(eval(OpId::pad, {f32({3}, {1, 2, 3})}, {Ints{1, 2}, 0.0}), DType::f32, {6}, {0, 1, 2, 3, 0, 0}, 0);
  // Negative pads crop.
  check(eval(OpId::pad, {f32({3}, {1, 2, 3})}, {Ints{-1, 1}, 9.0}), DType::f32, {3}, {2, 3, 9}, 0);
  check(eval(OpId::pad, {f32({3}, {1, 2, 3})}, {Ints{-3, 1}, 9.0}), DType::f32, {1}, {9}, 0);
  // [[1, 2], [3, 4]] with one column on the left and one row below.
  check(eval(OpId::pad, {f32({2, 2}, {1, 2, 3, 4})}, {Ints{1, 0, 0, 1}, -1.0}), DType::f32, {3, 3},
        {-1, 1, 2, -1, 3, 4, -1, -1, -1}, 0);
  // Crop a row, pad a column on the right; ints take the value truncated.
  check(eval(OpId::pad, {i32({2, 2}, {1, 2, 3, 4})}, {Ints{0, 1, -1, 0}, 7.0}), DType::i32, {1, 3}, {3, 4, 7}, 0);
}

BOOST_AUTO_TEST_CASE(index_selects) {
  const TensorData x = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  check(eval(OpId::index_select, {x, i64({3}, {2, 0, 2})}, {int64_t{0}}), DType::f32, {3, 2}, {5, 6, 1, 2, 5, 6}, 0);
  check(eval(OpId::index_select, {x, i32({1}, {1})}, {int64_t{1}}), DType::f32, {3, 1}, {2, 4, 6}, 0);
  check(eval(OpId::index_select, {x, i64({0}, {})}, {int64_t{0}}), DType::f32, {0, 2}, {}, 0);
  check_error([&] { eval(OpId::index_select, {x, i64({2}, {0, 3})}, {int64_t{0}}); }, {"index 3", "size 3"});
  check_error([&] { eval(OpId::index_select, {x, i64({1}, {-1})}, {int64_t{0}}); }, {"index -1", "size 3"});
}

BOOST_AUTO_TEST_CASE(gathers) {
  const TensorData x = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  // Along dim 0: y[i][j] = x[index[i][j]][j]; along dim 1: y[i][j] = x[i][index[i][j]].
  check(eval(OpId::gather, {x, i64({2, 2}, {2, 0, 1, 1})}, {int64_t{0}}), DType::f32, {2, 2}, {5, 2, 3, 4}, 0);
  check(eval(OpId::gather, {x, i32({3, 3}, {1, 0, 1, 0, 0, 0, 1, 1, 1})}, {int64_t{1}}), DType::f32, {3, 3},
        {2, 1, 2, 3, 3, 3, 6, 6, 6}, 0);
  check(eval(OpId::gather, {x, i64({1, 1}, {1})}, {int64_t{1}}), DType::f32, {1, 1}, {2}, 0);
  check(eval(OpId::gather, {x, i64({0, 2}, {})}, {int64_t{0}}), DType::f32, {0, 2}, {}, 0);
  check_error([&] { eval(OpId::gather, {x, i64({1, 2}, {0, 3})}, {int64_t{0}}); }, {"index 3", "size 3"});
  check_error([&] { eval(OpId::gather, {x, i64({1, 1}, {-1})}, {int64_t{1}}); }, {"index -1", "size 2"});
}

BOOST_AUTO_TEST_CASE(scatter_adds) {
  const TensorData x = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  // Along dim 0: y[index[i][j]][j] += src[i][j]; a repeated index adds twice.
  check(eval(OpId::scatter_add, {x, i64({2, 2}, {2, 0, 2, 1}), f32({2, 2}, {10, 20, 30, 40})}, {int64_t{0}}), DType::f32,
        {3, 2}, {1, 22, 3, 44, 45, 6}, 0);
  // Along dim 1, an index with fewer rows than x: y[i][index[i][j]] += src[i][j].
  check(eval(OpId::scatter_add, {x, i32({1, 3}, {1, 1, 0}), f32({1, 3}, {1, 2, 4})}, {int64_t{1}}), DType::f32, {3, 2},
        {5, 5, 3, 4, 5, 6}, 0);
  check(eval(OpId::scatter_add, {i64({2}, {7, 8}), i64({3}, {1, 1, 1}), i64({3}, {1, 2, 3})}, {int64_t{0}}), DType::i64,
        {2}, {7, 14}, 0);
  check(eval(OpId::scatter_add, {x, i64({0, 2}, {}), f32({0, 2}, {})}, {int64_t{0}}), DType::f32, {3, 2}, {1, 2, 3, 4, 5, 6}, 0);
  check_error([&] { eval(OpId::scatter_add, {x, i64({1, 2}, {0, 3}), f32({1, 2}, {1, 1})}, {int64_t{0}}); },
              {"index 3", "size 3"});
  check_error([&] { eval(OpId::scatter_add, {x, i64({1, 1}, {-1}), f32({1, 1}, {1})}, {int64_t{1}}); }, {"index -1", "size 2"});
}

// torch.scatter_reduce(x, 0, index, src, reduce) with include_self: every src value reaching an
// element is combined with it; NaN on either side wins a maximum or minimum; i32 products wrap.
BOOST_AUTO_TEST_CASE(scatter_reductions) {
  const TensorData x = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  const TensorData index = i64({3, 2}, {2, 0, 2, 0, 0, 0});
  const TensorData src = f32({3, 2}, {10, -20, 0.5, 40, -1, 60});
  auto reduce = [](const char* r) { return Attrs{int64_t{0}, std::string(r)}; };
  check(eval(OpId::scatter_reduce, {x, index, src}, reduce("amax")), DType::f32, {3, 2}, {1, 60, 3, 4, 10, 6}, 0);
  check(eval(OpId::scatter_reduce, {x, index, src}, reduce("amin")), DType::f32, {3, 2}, {-1, -20, 3, 4, 0.5, 6}, 0);
  check(eval(OpId::scatter_reduce, {x, index, src}, reduce("prod")), DType::f32, {3, 2}, {-1, 2 * -20 * 40 * 60, 3, 4, 25, 6},
        0);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const TensorData with_nan = f32({3, 2}, {nan, 2, 3, 4, 5, 6});
  check(eval(OpId::scatter_reduce, {with_nan, index, f32({3, 2}, {10, nan, 0.5, 40, -1, 60})}, reduce("amax")), DType::f32,
        {3, 2}, {nan, nan, 3, 4, 10, 6}, 0);
  check(eval(OpId::scatter_reduce, {with_nan, index, src}, reduce("amin")), DType::f32, {3, 2}, {nan, -20, 3, 4, 0.5, 6}, 0);
  // 65536 * 65536 wraps to 0 in i32; 46341^2 = 2147488281 wraps to -2147479015.
  check(eval(OpId::scatter_reduce, {i32({2}, {65536, 46341}), i64({2}, {0, 1}), i32({2}, {65536, 46341})}, reduce("prod")),
        DType::i32, {2}, {0, -2147479015}, 0);
  check(eval(OpId::scatter_reduce, {i64({2}, {7, -8}), i64({3}, {1, 1, 0}), i64({3}, {3, -9, 2})}, reduce("amin")),
        DType::i64, {2}, {2, -9}, 0);
  check_error([&] { eval(OpId::scatter_reduce, {x, i64({1, 2}, {0, 3}), f32({1, 2}, {1, 1})}, reduce("amax")); },
              {"index 3", "size 3"});
}

BOOST_AUTO_TEST_CASE(scatters) {
  const TensorData x = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  // y[index[i][j]][j] = src[i][j]; the rest of x stays.
  check(eval(OpId::scatter, {x, i64({1, 2}, {2, 0}), f32({1, 2}, {10, 20})}, {int64_t{0}}), DType::f32, {3, 2},
        {1, 20, 3, 4, 10, 6}, 0);
  check(eval(OpId::scatter, {boolean({2}, {1, 0}), i64({1}, {1}), boolean({1}, {1})}, {int64_t{0}}), DType::bool_, {2}, {1, 1}, 0);
  check_error([&] { eval(OpId::scatter, {x, i64({1, 1}, {3}), f32({1, 1}, {1})}, {int64_t{0}}); }, {"scatter: index 3", "size 3"});
}

BOOST_AUTO_TEST_CASE(contiguous_and_convert) {
  TensorData t = x23();
  t.sizes = {3, 2};
  t.strides = {1, 3};
  check(kr::contiguous(t), DType::f32, {3, 2}, {1, 4, 2, 5, 3, 6}, 0);
  check(kr::convert(f32({3}, {1.9, -1.9, 0}), DType::i64), DType::i64, {3}, {1, -1, 0}, 0);
  check(kr::convert(f32({3}, {1.9, -1.9, 0}), DType::bool_), DType::bool_, {3}, {1, 1, 0}, 0);
  // Broadcast views (stride 0) copy out.
  TensorData b = f32({2}, {1, 2});
  b.sizes = {3, 2};
  b.strides = {0, 1};
  check(kr::contiguous(b), DType::f32, {3, 2}, {1, 2, 1, 2, 1, 2}, 0);
}

BOOST_AUTO_TEST_SUITE_END()
