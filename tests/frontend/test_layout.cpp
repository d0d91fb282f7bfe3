// Layout ops: eager views share their input's storage (reshape, permute, transpose, slice,
// expand, squeeze, unsqueeze, flatten), a reshape that cannot be a view copies, and cat,
// pad and index_select give hand-computed values.
#include <limits>
#include <string>
#include <tuple>

#include "helpers.h"

using namespace kiln;
using namespace frontend_test;

namespace {
// [[0, 1, 2], [3, 4, 5]] as f32
Tensor m23() { return from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3}); }
}  // namespace

BOOST_AUTO_TEST_SUITE(layout)

BOOST_AUTO_TEST_CASE(reshape_is_a_view) {
  const Tensor x = m23();
  const Tensor r = reshape(x, {3, 2});
  check_tensor(r, {3, 2}, DType::f32, {0, 1, 2, 3, 4, 5});
  BOOST_TEST(storage_of(r) == storage_of(x));
  const Tensor inferred = reshape(x, {-1});
  check_tensor(inferred, {6}, DType::f32, {0, 1, 2, 3, 4, 5});
  BOOST_TEST(storage_of(inferred) == storage_of(x));
  check_tensor(reshape(x, {1, -1, 2}), {1, 3, 2}, DType::f32, {0, 1, 2, 3, 4, 5});
  check_tensor(reshape(scalar_tensor(5), {1, 1}), {1, 1}, DType::f32, {5});
  check_tensor(reshape(f32({9}), {}), {}, DType::f32, {9});
  check_tensor(reshape(zeros({0, 4}), {-1, 2}), {0, 2}, DType::f32, {});
}

BOOST_AUTO_TEST_CASE(non_contiguous_reshape_copies) {
  const Tensor x = m23();
  const Tensor t = transpose(x, 0, 1);  // [[0, 3], [1, 4], [2, 5]]
  const Tensor r = reshape(t, {6});
  check_tensor(r, {6}, DType::f32, {0, 3, 1, 4, 2, 5});
  BOOST_TEST(storage_of(r) != storage_of(x));
  BOOST_TEST(r.data().is_contiguous());
  const Tensor fl = flatten(t);
  check_tensor(fl, {6}, DType::f32, {0, 3, 1, 4, 2, 5});
  BOOST_TEST(storage_of(fl) != storage_of(x));
  // A contiguous slice with an offset reshapes as a view.
  const Tensor s = slice(reshape(x, {6}), 0, 2, 6);
  const Tensor rs = reshape(s, {2, 2});
  check_tensor(rs, {2, 2}, DType::f32, {2, 3, 4, 5});
  BOOST_TEST(storage_of(rs) == storage_of(x));
}

BOOST_AUTO_TEST_CASE(permute_and_transpose) {
  const Tensor x = m23();
  const Tensor p = permute(x, {1, 0});
  check_tensor(p, {3, 2}, DType::f32, {0, 3, 1, 4, 2, 5});
  BOOST_TEST(storage_of(p) == storage_of(x));
  BOOST_TEST(p.data().strides == (std::vector<int64_t>{1, 3}));
  const Tensor t = transpose(x, -1, 0);
  check_tensor(t, {3, 2}, DType::f32, {0, 3, 1, 4, 2, 5});
  BOOST_TEST(storage_of(t) == storage_of(x));
  const Tensor c = reshape(arange(24), {2, 3, 4});
  const Tensor pc = permute(c, {2, 0, 1});
  BOOST_TEST(sizes_of(pc) == (Sizes{4, 2, 3}));
  BOOST_TEST(storage_of(pc) == storage_of(c));
  // pc[i][j][k] = c[j][k][i] = 12 j + 4 k + i; check row i = 1.
  check_values(slice(pc, 0, 1, 2), {1, 5, 9, 13, 17, 21});
  check_tensor(transpose(transpose(x, 0, 1), 0, 1), {2, 3}, DType::f32, {0, 1, 2, 3, 4, 5});
}

BOOST_AUTO_TEST_CASE(slice_views) {
  const Tensor v = arange(10);
  const Tensor a = slice(v, 0, 2, 5);
  check_tensor(a, {3}, DType::i64, {2, 3, 4});
  BOOST_TEST(storage_of(a) == storage_of(v));
  BOOST_TEST(a.data().offset == 2);
  check_tensor(slice(v, 0, -3), {3}, DType::i64, {7, 8, 9});
  check_tensor(slice(v, 0, 1, 8, 3), {3}, DType::i64, {1, 4, 7});
  check_tensor(slice(v, 0, 8, 100), {2}, DType::i64, {8, 9});  // clamps
  check_tensor(slice(v, 0, 5, 2), {0}, DType::i64, {});
  check_tensor(slice(v, 0, -100, 2), {2}, DType::i64, {0, 1});
  const Tensor x = m23();
  const Tensor col = slice(x, 1, 1, 3);
  check_tensor(col, {2, 2}, DType::f32, {1, 2, 4, 5});
  BOOST_TEST(storage_of(col) == storage_of(x));
  // A slice of a slice.
  check_tensor(slice(slice(v, 0, 1, 9, 2), 0, 1, 3), {2}, DType::i64, {3, 5});
}

BOOST_AUTO_TEST_CASE(unfold_views) {
  const Tensor v = arange(10);
  const Tensor w = unfold(v, 0, 4, 3);  // windows at 0, 3, 6
  check_tensor(w, {3, 4}, DType::i64, {0, 1, 2, 3, 3, 4, 5, 6, 6, 7, 8, 9});
  BOOST_TEST(storage_of(w) == storage_of(v));
  BOOST_TEST((w.data().strides == std::vector<int64_t>{3, 1}));
  // Windows along the columns of a transposed matrix, then of those windows' rows.
  const Tensor x = m23();  // [[0, 1, 2], [3, 4, 5]]
  check_tensor(unfold(transpose(x, 0, 1), 0, 2, 1), {2, 2, 2}, DType::f32, {0, 1, 3, 4, 1, 2, 4, 5});
  check_tensor(unfold(unfold(x, 1, 2, 1), 0, 2, 1), {1, 2, 2, 2}, DType::f32, {0, 3, 1, 4, 1, 4, 2, 5});
  BOOST_CHECK_THROW(unfold(v, 0, 11, 1), kiln::Error);  // a window larger than the dim
  BOOST_CHECK_THROW(unfold(v, 0, 2, 0), kiln::Error);
}

BOOST_AUTO_TEST_CASE(expand_views) {
  const Tensor x = f32({1, 2, 3}, {3, 1});
  const Tensor e = expand(x, {3, 4});
  check_tensor(e, {3, 4}, DType::f32, {1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3});
  BOOST_TEST(storage_of(e) == storage_of(x));
  BOOST_TEST(e.data().strides[1] == 0);
  const Tensor lead = expand(f32({5, 6}), {2, -1});
  check_tensor(lead, {2, 2}, DType::f32, {5, 6, 5, 6});
  check_tensor(expand(scalar_tensor(7), {2, 2}), {2, 2}, DType::f32, {7, 7, 7, 7});
  check_tensor(expand(f32({1}), {0}), {0}, DType::f32, {});
}

BOOST_AUTO_TEST_CASE(squeeze_unsqueeze_views) {
  const Tensor x = f32({1, 2, 3}, {1, 3, 1});
  const Tensor s = squeeze(x);
  check_tensor(s, {3}, DType::f32, {1, 2, 3});
  BOOST_TEST(storage_of(s) == storage_of(x));
  const Tensor s0 = squeeze(x, 0);
  check_tensor(s0, {3, 1}, DType::f32, {1, 2, 3});
  BOOST_TEST(storage_of(s0) == storage_of(x));
  check_tensor(squeeze(x, -1), {1, 3}, DType::f32, {1, 2, 3});
  const Tensor u = unsqueeze(m23(), 1);
  check_tensor(u, {2, 1, 3}, DType::f32, {0, 1, 2, 3, 4, 5});
  const Tensor base = m23();
  BOOST_TEST(storage_of(unsqueeze(base, 0)) == storage_of(base));
  BOOST_TEST(storage_of(unsqueeze(base, -1)) == storage_of(base));
  check_tensor(unsqueeze(base, -1), {2, 3, 1}, DType::f32, {0, 1, 2, 3, 4, 5});
  check_tensor(unsqueeze(scalar_tensor(4), 0), {1}, DType::f32, {4});
  // Views of a transposed tensor keep their values.
  check_tensor(unsqueeze(transpose(base, 0, 1), 1), {3, 1, 2}, DType::f32, {0, 3, 1, 4, 2, 5});
  check_tensor(squeeze(f32({8}, {1, 1})), {}, DType::f32, {8});
}

BOOST_AUTO_TEST_CASE(flatten_views) {
  const Tensor x = reshape(arange(24), {2, 3, 4});
  const Tensor f = flatten(x, 1);
  check_tensor(f, {2, 12}, DType::i64, [] {
    std::vector<double> v;
    for (int i = 0; i < 24; ++i) v.push_back(i);
    return v;
  }());
  BOOST_TEST(storage_of(f) == storage_of(x));
  BOOST_TEST(sizes_of(flatten(x, 0, 1)) == (Sizes{6, 4}));
  BOOST_TEST(sizes_of(flatten(x)) == (Sizes{24}));
  check_tensor(flatten(scalar_tensor(3)), {1}, DType::f32, {3});
}

BOOST_AUTO_TEST_CASE(cat_values) {
  check_tensor(cat({f32({1, 2}), f32({3})}), {3}, DType::f32, {1, 2, 3});
  const Tensor a = m23();
  check_tensor(cat({a, f32({9, 9}, {2, 1})}, 1), {2, 4}, DType::f32, {0, 1, 2, 9, 3, 4, 5, 9});
  check_tensor(cat({a, a}, 0), {4, 3}, DType::f32, {0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5});
  check_tensor(cat({a, a}, -1), {2, 6}, DType::f32, {0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5});
  // Promotes dtypes; empty pieces contribute nothing; one piece is a copy.
  check_tensor(cat({from_vector<int32_t>({1}), f32({0.5f})}), {2}, DType::f32, {1, 0.5});
  check_tensor(cat({zeros({0}), f32({4})}), {1}, DType::f32, {4});
  check_tensor(cat({transpose(a, 0, 1)}), {3, 2}, DType::f32, {0, 3, 1, 4, 2, 5});
}

BOOST_AUTO_TEST_CASE(pad_values) {
  check_tensor(pad(f32({1, 2, 3}), {1, 2}, 9), {6}, DType::f32, {9, 1, 2, 3, 9, 9});
  check_tensor(pad(f32({1, 2, 3}), {-1, 0}), {2}, DType::f32, {2, 3});
  check_tensor(pad(f32({1, 2, 3}), {0, 1}), {4}, DType::f32, {1, 2, 3, 0});
  // Pairs go last dim first: (left, right) of dim 1, then (top, bottom) of dim 0.
  check_tensor(pad(f32({1, 2, 3, 4}, {2, 2}), {1, 0, 0, 1}, -1), {3, 3}, DType::f32,
               {-1, 1, 2, -1, 3, 4, -1, -1, -1});
  check_tensor(pad(from_vector<int32_t>({5}), {1, 1}, 7), {3}, DType::i32, {7, 5, 7});
}

BOOST_AUTO_TEST_CASE(index_select_values) {
  const Tensor x = f32({1, 2, 3, 4, 5, 6}, {3, 2});
  check_tensor(index_select(x, 0, from_vector<int64_t>({2, 0})), {2, 2}, DType::f32, {5, 6, 1, 2});
  check_tensor(index_select(x, 1, from_vector<int32_t>({1, 1, 0})), {3, 3}, DType::f32,
               {2, 2, 1, 4, 4, 3, 6, 6, 5});
  check_tensor(index_select(x, -2, from_vector<int64_t>({})), {0, 2}, DType::f32, {});
  check_tensor(index_select(transpose(x, 0, 1), 0, from_vector<int64_t>({1})), {1, 3}, DType::f32, {2, 4, 6});
}

// torch.gather(x, 1, [[1, 0], [0, 0], [1, 1]]) and torch.take_along_dim with broadcasting.
BOOST_AUTO_TEST_CASE(gather_values) {
  const Tensor x = f32({1, 2, 3, 4, 5, 6}, {3, 2});
  const Tensor i = reshape(from_vector<int64_t>({1, 0, 0, 0, 1, 1}), {3, 2});
  check_tensor(gather(x, 1, i), {3, 2}, DType::f32, {2, 1, 3, 3, 6, 6});
  check_tensor(gather(x, -2, reshape(from_vector<int32_t>({2, 0}), {1, 2})), {1, 2}, DType::f32, {5, 2});
  check_tensor(gather(transpose(x, 0, 1), 1, reshape(from_vector<int64_t>({2, 1}), {2, 1})), {2, 1}, DType::f32, {5, 4});
  // The index of the largest element per row, picked back out: the row maxima.
  check_tensor(take_along_dim(x, argmax(x, 1, true), 1), {3, 1}, DType::f32, {2, 4, 6});
  // A [1, 2] index broadcast over x's 3 rows.
  check_tensor(take_along_dim(x, reshape(from_vector<int64_t>({1, 0}), {1, 2}), 1), {3, 2}, DType::f32,
               {2, 1, 4, 3, 6, 5});
  check_tensor(x.gather(1, i), {3, 2}, DType::f32, {2, 1, 3, 3, 6, 6});
}

// torch.scatter_add / scatter / index_add / index_put on x = [[1, 2], [3, 4], [5, 6]].
BOOST_AUTO_TEST_CASE(scatter_values) {
  const Tensor x = f32({1, 2, 3, 4, 5, 6}, {3, 2});
  const Tensor i = reshape(from_vector<int64_t>({2, 0, 2, 1}), {2, 2});
  const Tensor src = f32({10, 20, 30, 40, 50, 60}, {3, 2});  // only its first 2 rows are read
  check_tensor(scatter_add(x, 0, i, src), {3, 2}, DType::f32, {1, 22, 3, 44, 45, 6});
  check_tensor(x.scatter(0, reshape(from_vector<int64_t>({2, 0}), {1, 2}), src), {3, 2}, DType::f32, {1, 20, 3, 4, 10, 6});
  check_tensor(index_add(x, 1, from_vector<int32_t>({1, 1}), f32({1, 2, 3, 4, 5, 6}, {3, 2}), 2.0), {3, 2}, DType::f32,
               {1, 8, 3, 18, 5, 28});
  // Rows 2 and -1 (= 2) accumulate; two index tensors pick elements.
  check_tensor(index_put(x, {from_vector<int64_t>({2, -1})}, f32({1, 1}, {2}), true), {3, 2}, DType::f32,
               {1, 2, 3, 4, 7, 8});
  check_tensor(x.index_put({from_vector<int64_t>({0, 2}), from_vector<int64_t>({1, 0})}, f32({9, 8}, {2})), {3, 2},
               DType::f32, {1, 9, 3, 4, 8, 6});
  BOOST_TEST(contains(error_of([&] { sum(index_put(x, {from_vector<int64_t>({3})}, f32({0}, {1}))).item<float>(); }), "out of range"));
  BOOST_TEST(contains(error_of([&] { scatter_add(x, 0, i, f32({1}, {1})); }), "scatter_add"));
}

// torch.scatter_reduce(x, 0, index, src, reduce, include_self) by hand: column 0 sends 10 and 0.5
// to row 2 and -1 to row 0; column 1 sends -20, 40 and 60 to row 0. Eager and compiled (the
// compiled kernels combine atomically on the cpu target) give torch's values.
BOOST_AUTO_TEST_CASE(scatter_reductions_as_torch) {
  const Tensor x = f32({1, 2, 3, 4, 5, 6}, {3, 2});
  const Tensor index = reshape(from_vector<int64_t>({2, 0, 2, 0, 0, 0}), {3, 2});
  const Tensor src = f32({10, -20, 0.5, 40, -1, 60}, {3, 2});
  const std::vector<std::tuple<std::string, bool, std::vector<double>>> cases{
      {"sum", true, {0, 82, 3, 4, 15.5, 6}},
      {"sum", false, {-1, 80, 3, 4, 10.5, 6}},
      {"prod", true, {-1, -96000, 3, 4, 25, 6}},
      {"prod", false, {-1, -48000, 3, 4, 5, 6}},
      {"mean", true, {0, 20.5, 3, 4, 15.5 / 3, 6}},
      {"mean", false, {-1, 80.0 / 3, 3, 4, 5.25, 6}},
      {"amax", true, {1, 60, 3, 4, 10, 6}},
      {"amax", false, {-1, 60, 3, 4, 10, 6}},
      {"amin", true, {-1, -20, 3, 4, 0.5, 6}},
      {"amin", false, {-1, -20, 3, 4, 0.5, 6}},
  };
  for (const auto& [reduce, include_self, want] : cases) {
    BOOST_TEST_CONTEXT(reduce << (include_self ? "" : ", include_self=false")) {
      check_tensor(scatter_reduce(x, 0, index, src, reduce, include_self), {3, 2}, DType::f32, want);
      auto f = kiln::compile([reduce = reduce, include_self = include_self](const Tensor& a, const Tensor& i, const Tensor& s) {
        return a.scatter_reduce(0, i, s, reduce, include_self);
      });
      check_tensor(f(x, index, src), {3, 2}, DType::f32, want);
    }
  }
  // Integers: a mean rounds down (-0.5 -> -1, 16 / 3 -> 5), products wrap.
  const Tensor xi = x.to(DType::i64), si = f32({10, -20, 1, 40, -2, 60}, {3, 2}).to(DType::i64);
  check_tensor(scatter_reduce(xi, 0, index, si, "mean"), {3, 2}, DType::i64, {-1, 20, 3, 4, 5, 6});
  check_tensor(scatter_reduce(from_vector<int32_t>({65536}), 0, from_vector<int64_t>({0}), from_vector<int32_t>({65536}), "prod"),
               {1}, DType::i32, {0});
  // NaN wins a maximum from either side; a minimum over x without x ignores x's NaN.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor xn = f32({nan, 2, 3, 4, 5, 6}, {3, 2});
  check_tensor(scatter_reduce(xn, 0, index, f32({10, nan, 0.5, 40, -1, 60}, {3, 2}), "amax"), {3, 2}, DType::f32,
               {nan, nan, 3, 4, 10, 6});
  check_tensor(scatter_reduce(xn, 0, index, src, "amin", false), {3, 2}, DType::f32, {-1, -20, 3, 4, 0.5, 6});
  // index_reduce: source's rows 0 and 2 into x's row 1, row 1 into row 0.
  check_tensor(index_reduce(x, 0, from_vector<int64_t>({1, 0, 1}), src, "amax"), {3, 2}, DType::f32, {1, 40, 10, 60, 5, 6});
  check_tensor(x.index_reduce(0, from_vector<int64_t>({1, 0, 1}), src, "prod", false), {3, 2}, DType::f32,
               {0.5, 40, -10, -1200, 5, 6});
  BOOST_TEST(contains(error_of([&] { scatter_reduce(x, 0, index, src, "max"); }), "reduce must be"));
  BOOST_TEST(contains(error_of([&] { scatter_reduce(x.to(DType::bool_), 0, index, src, "amax"); }), "bool"));
  BOOST_TEST(contains(error_of([&] { index_reduce(x, 0, from_vector<int64_t>({0}), src, "sum"); }), "index_reduce"));
}

BOOST_AUTO_TEST_SUITE_END()
