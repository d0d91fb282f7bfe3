// Dynamic shapes: automatic dynamic, dynamic = true / false, mark_dynamic / mark_static,
// symbol ranges, and a marked dim that the graph forces static. A backend that records
// the graphs it compiles shows which sizes were symbolic.
#include "helpers.h"

using namespace kiln;
using namespace capture_test;

namespace {
std::vector<Graph> recorded() {
  std::lock_guard lock(recorder().mutex);
  return recorder().graphs;
}
auto times3 = [](const Tensor& x) { return x * 3; };
std::vector<double> times3_of(int64_t n) { return mapped(n, [](double v) { return 3 * v; }); }
}  // namespace

BOOST_FIXTURE_TEST_SUITE(dynamic_shapes, Clean)

BOOST_AUTO_TEST_CASE(automatic_dynamic_compiles_twice) {
  use_recorder();
  auto f = kiln::compile(times3, CompileOptions{.backend = "recorder", .arg_names = {"x"}});
  for (int64_t n : {8, 16, 32}) check_values(f(iota_f32(n)), times3_of(n));
  const CompileStats s = f.stats();
  BOOST_TEST(s.compiles == 2);
  BOOST_TEST(s.recompiles == 1);
  BOOST_TEST(s.cache_hits == 1);
  const auto graphs = recorded();
  BOOST_REQUIRE_EQUAL(graphs.size(), 2u);
  BOOST_TEST(input_meta(graphs[0], 0).sizes[0].is_static());
  BOOST_TEST(input_meta(graphs[0], 0).sizes[0].hint() == 8);
  const SymInt& d0 = input_meta(graphs[1], 0).sizes[0];
  BOOST_TEST(d0.is_symbolic());
  BOOST_REQUIRE_EQUAL(graphs[1].shapes().symbols().size(), 1u);
  const SymbolInfo& sym = graphs[1].shapes().symbols()[0];
  BOOST_TEST(sym.min == 2);
  BOOST_TEST(sym.source == "input 0 (x) dim 0");
  BOOST_TEST(!sym.user_dynamic);
  // Sizes 0 and 1 are outside the symbol's range: each specialises.
  check_values(f(iota_f32(1)), {3});
  BOOST_TEST(f.stats().compiles == 3);
  BOOST_TEST(input_meta(recorded().back(), 0).sizes[0] == 1);
}

// Only the dims that changed become symbolic.
BOOST_AUTO_TEST_CASE(automatic_dynamic_only_changed_dims) {
  use_recorder();
  auto f = kiln::compile([](const Tensor& x) { return sum(x, {1}); }, CompileOptions{.backend = "recorder"});
  f(ones({4, 5}));
  f(ones({6, 5}));
  check_values(f(ones({9, 5})), std::vector<double>(9, 5.0));
  BOOST_TEST(f.stats().compiles == 2);
  const auto graphs = recorded();
  BOOST_REQUIRE_EQUAL(graphs.size(), 2u);
  BOOST_TEST(input_meta(graphs[1], 0).sizes[0].is_symbolic());
  BOOST_TEST(input_meta(graphs[1], 0).sizes[1] == 5);
  // A change in the other dim now makes that one symbolic too (the first stays so).
  f(ones({9, 7}));
  BOOST_TEST(f.stats().compiles == 3);
  BOOST_TEST(input_meta(recorded().back(), 0).sizes[0].is_symbolic());
  BOOST_TEST(input_meta(recorded().back(), 0).sizes[1].is_symbolic());
}

BOOST_AUTO_TEST_CASE(dynamic_true_compiles_once) {
  use_recorder();
  auto f = kiln::compile(times3, CompileOptions{.dynamic = true, .backend = "recorder"});
  for (int64_t n : {8, 16, 2, 33}) check_values(f(iota_f32(n)), times3_of(n));
  BOOST_TEST(f.stats().compiles == 1);
  BOOST_TEST(f.stats().cache_hits == 3);
  BOOST_REQUIRE_EQUAL(recorded().size(), 1u);
  BOOST_TEST(input_meta(recorded()[0], 0).sizes[0].is_symbolic());
  // 0 and 1 specialise.
  check_values(f(iota_f32(1)), {3});
  BOOST_TEST(f.stats().compiles == 2);
  BOOST_TEST(input_meta(recorded().back(), 0).sizes[0] == 1);
  BOOST_TEST(f(iota_f32(0)).numel() == 0);
  BOOST_TEST(f.stats().compiles == 3);
  BOOST_TEST(input_meta(recorded().back(), 0).sizes[0] == 0);
  f(iota_f32(1));
  f(iota_f32(0));
  f(iota_f32(100));
  BOOST_TEST(f.stats().compiles == 3);
}

// dynamic = true with a size-1 first call: 1 is static, a later size still gets a symbol.
BOOST_AUTO_TEST_CASE(dynamic_true_size_one_first) {
  use_recorder();
  auto f = kiln::compile(times3, CompileOptions{.dynamic = true, .backend = "recorder"});
  f(iota_f32(1));
  BOOST_TEST(input_meta(recorded().back(), 0).sizes[0] == 1);
  f(iota_f32(5));
  f(iota_f32(6));
  BOOST_TEST(f.stats().compiles == 2);
  BOOST_TEST(input_meta(recorded().back(), 0).sizes[0].is_symbolic());
}

BOOST_AUTO_TEST_CASE(dynamic_false_specialises_every_size) {
  use_recorder();
  auto f = kiln::compile(times3, CompileOptions{.dynamic = false, .backend = "recorder"});
  for (int64_t n : {8, 16, 32}) check_values(f(iota_f32(n)), times3_of(n));
  BOOST_TEST(f.stats().compiles == 3);
  for (const Graph& g : recorded()) BOOST_TEST(input_meta(g, 0).sizes[0].is_static());
  // mark_dynamic does not override dynamic = false.
  const Tensor x = iota_f32(64);
  mark_dynamic(x, 0);
  f(x);
  BOOST_TEST(input_meta(recorded().back(), 0).sizes[0].is_static());
}

BOOST_AUTO_TEST_CASE(automatic_dynamic_off) {
  use_recorder();
  config::Patch p({{"automatic_dynamic_shapes", false}});
  auto f = kiln::compile(times3, CompileOptions{.backend = "recorder"});
  for (int64_t n : {8, 16, 32}) check_values(f(iota_f32(n)), times3_of(n));
  BOOST_TEST(f.stats().compiles == 3);
  for (const Graph& g : recorded()) BOOST_TEST(input_meta(g, 0).sizes[0].is_static());
}

BOOST_AUTO_TEST_CASE(assume_static_by_default_off) {
  use_recorder();
  config::Patch p({{"assume_static_by_default", false}});
  auto f = kiln::compile(times3, CompileOptions{.backend = "recorder"});
  for (int64_t n : {8, 16, 32}) check_values(f(iota_f32(n)), times3_of(n));
  BOOST_TEST(f.stats().compiles == 1);
  BOOST_TEST(input_meta(recorded()[0], 0).sizes[0].is_symbolic());
}

BOOST_AUTO_TEST_CASE(mark_dynamic_makes_first_compile_dynamic) {
  use_recorder();
  auto f = kiln::compile(times3, CompileOptions{.backend = "recorder", .arg_names = {"x"}});
  const Tensor x = iota_f32(8);
  mark_dynamic(x, 0, 2, 4096);
  check_values(f(x), times3_of(8));
  BOOST_REQUIRE_EQUAL(recorded().size(), 1u);
  const Graph g = recorded()[0];
  BOOST_TEST(input_meta(g, 0).sizes[0].is_symbolic());
  BOOST_REQUIRE_EQUAL(g.shapes().symbols().size(), 1u);
  BOOST_TEST(g.shapes().symbols()[0].min == 2);
  BOOST_TEST(g.shapes().symbols()[0].max == 4096);
  BOOST_TEST(g.shapes().symbols()[0].user_dynamic);
  // Unmarked tensors of other sizes in the range hit the same entry.
  check_values(f(iota_f32(4096)), times3_of(4096));
  check_values(f(iota_f32(3)), times3_of(3));
  BOOST_TEST(f.stats().compiles == 1);
  BOOST_TEST(f.stats().cache_hits == 2);
  // Past the range's max: the dynamic-range guard fails.
  check_values(f(iota_f32(5000)), times3_of(5000));
  const CompileStats s = f.stats();
  BOOST_TEST(s.compiles == 2);
  BOOST_REQUIRE_EQUAL(s.recompile_reasons.size(), 1u);
  BOOST_TEST(s.recompile_reasons[0] ==
             "input 0 (x): size at dim 0 is 5000, outside the range [2, 4096] of its dynamic size s0");
}

BOOST_AUTO_TEST_CASE(mark_dynamic_min_violated) {
  auto f = kiln::compile(times3, CompileOptions{.arg_names = {"x"}});
  const Tensor x = iota_f32(16);
  mark_dynamic(x, 0, 10, 20);
  f(x);
  f(iota_f32(9));
  const CompileStats s = f.stats();
  BOOST_REQUIRE_EQUAL(s.recompile_reasons.size(), 1u);
  BOOST_TEST(s.recompile_reasons[0] ==
             "input 0 (x): size at dim 0 is 9, outside the range [10, 20] of its dynamic size s0");
  // A marked tensor whose own size is outside its range is an error.
  const Tensor small = iota_f32(5);
  mark_dynamic(small, 0, 10, 20);
  auto g = kiln::compile(times3);
  const std::string msg = error_of([&] { g(small); });
  BOOST_TEST(contains(msg, "outside its dynamic range [10, 20]"), msg);
  // mark_dynamic checks its own arguments.
  BOOST_CHECK_THROW(mark_dynamic(x, 0, 5, 4), kiln::Error);
  BOOST_CHECK_THROW(mark_dynamic(x, 3), kiln::Error);
  BOOST_CHECK_THROW(mark_static(x, -2), kiln::Error);
  BOOST_CHECK_THROW(mark_dynamic(Tensor(), 0), kiln::Error);
}

BOOST_AUTO_TEST_CASE(mark_static_under_dynamic_true) {
  use_recorder();
  auto f = kiln::compile([](const Tensor& x) { return x + 1; }, CompileOptions{.dynamic = true, .backend = "recorder"});
  const Tensor x = ones({8, 4});
  mark_static(x, 0);
  f(x);
  BOOST_REQUIRE_EQUAL(recorded().size(), 1u);
  BOOST_TEST(input_meta(recorded()[0], 0).sizes[0] == 8);
  BOOST_TEST(input_meta(recorded()[0], 0).sizes[1].is_symbolic());
  f(ones({8, 9}));
  BOOST_TEST(f.stats().compiles == 1);
  f(ones({9, 9}));
  BOOST_TEST(f.stats().compiles == 2);
  // mark_static replaces an earlier mark_dynamic of the same dim.
  const Tensor y = ones({8, 4});
  mark_dynamic(y, 0);
  mark_static(y, 0);
  auto g = kiln::compile([](const Tensor& x) { return x + 1; }, CompileOptions{.dynamic = true, .backend = "recorder"});
  g(y);
  BOOST_TEST(input_meta(recorded().back(), 0).sizes[0] == 8);
  BOOST_TEST(input_meta(recorded().back(), 0).sizes[1].is_symbolic());
}

// A dim marked dynamic that the graph needs static: an error naming the op.
BOOST_AUTO_TEST_CASE(marked_dim_forced_static_by_reshape) {
  auto f = kiln::compile([](const Tensor& x) { return reshape(x, {4, 8}); });
  const Tensor x = iota_f32(32);
  mark_dynamic(x, 0);
  const std::string msg = error_of([&] { f(x); });
  BOOST_TEST(contains(msg, "reshape"), msg);
  BOOST_TEST(contains(msg, "mark_dynamic"), msg);
  BOOST_TEST(contains(msg, "input 0 dim 0"), msg);
  // Unmarked, the same function compiles (the size is specialised).
  check_values(sum(f(iota_f32(32))), {32.0 * 33 / 2});
}

BOOST_AUTO_TEST_CASE(marked_dim_forced_static_by_size) {
  auto f = kiln::compile([](const Tensor& x) { return x * static_cast<double>(x.size(0)); });
  const Tensor x = iota_f32(6);
  mark_dynamic(x, 0);
  const std::string msg = error_of([&] { f(x); });
  BOOST_TEST(contains(msg, "size()"), msg);
  BOOST_TEST(contains(msg, "mark_dynamic"), msg);
}

// Automatic dynamic with size(): the symbol is pinned by a fact, so each size recompiles
// and the results stay right.
BOOST_AUTO_TEST_CASE(size_of_automatic_dynamic_dim_stays_correct) {
  auto f = kiln::compile([](const Tensor& x) { return x * static_cast<double>(x.size(0)); });
  check_values(f(iota_f32(2)), {2, 4});
  check_values(f(iota_f32(3)), {3, 6, 9});
  check_values(f(iota_f32(4)), {4, 8, 12, 16});
  check_values(f(iota_f32(3)), {3, 6, 9});
  BOOST_TEST(f.stats().compiles == 3);
  // The recompile names the size() call that pinned the dim.
  const std::vector<std::string> reasons = f.stats().recompile_reasons;
  BOOST_REQUIRE_EQUAL(reasons.size(), 2u);
  BOOST_TEST(contains(reasons[1], "size() at test_dynamic.cpp:226"), reasons[1]);
}

// The symbolic graph computes with the actual sizes, including reductions and views.
BOOST_AUTO_TEST_CASE(dynamic_graph_values) {
  auto f = kiln::compile([](const Tensor& x) { return softmax(transpose(x, 0, 1), 0) * sum(x); },
                         CompileOptions{.dynamic = true});
  for (int64_t n : {2, 3, 5}) {
    const Tensor x = reshape(iota_f32(2 * n), {n, 2});
    const Tensor y = f(x);
    BOOST_TEST(sizes_of(y) == (std::vector<int64_t>{2, n}));
    const double total = static_cast<double>(n * (2 * n + 1));
    const double lo = 1 / (1 + std::exp(1.0));
    std::vector<double> expect(static_cast<size_t>(2 * n));
    for (int64_t i = 0; i < n; ++i) {
      expect[static_cast<size_t>(i)] = lo * total;
      expect[static_cast<size_t>(n + i)] = (1 - lo) * total;
    }
    check_values(y, expect);
  }
  BOOST_TEST(f.stats().compiles == 1);
}

// reshape(x, {-1, 2}) of a dynamic size s0 would need s0 / 2, which is no polynomial: the
// size is specialised (a guard), so each size compiles and every result is right.
BOOST_AUTO_TEST_CASE(reshape_infer_specialises_dynamic_size) {
  use_recorder();
  auto f = kiln::compile([](const Tensor& x) { return sum(reshape(x, {-1, 2}), {1}); },
                         CompileOptions{.dynamic = true, .backend = "recorder"});
  for (int64_t n : {4, 6, 10, 6}) {
    std::vector<double> expect;
    for (int64_t i = 0; i < n / 2; ++i) expect.push_back(static_cast<double>(4 * i + 3));
    check_values(f(iota_f32(n)), expect);
  }
  BOOST_TEST(f.stats().compiles == 3);
  BOOST_TEST(f.stats().cache_hits == 1);
  const std::vector<Graph> graphs = recorded();
  BOOST_REQUIRE(!graphs.empty());
  BOOST_TEST(graphs[0].shapes().facts().size() == 1u);
  // With automatic dynamic shapes the second size would otherwise fail to trace.
  auto g = kiln::compile([](const Tensor& x) { return sum(reshape(x, {-1, 2}), {1}); });
  check_values(g(iota_f32(4)), {3, 7});
  check_values(g(iota_f32(6)), {3, 7, 11});
  check_values(g(iota_f32(8)), {3, 7, 11, 15});
}

// A non-contiguous input keeps static sizes (its strides are guarded), so a size change
// does not make it symbolic; a dim marked dynamic on one is an error that says what to do.
BOOST_AUTO_TEST_CASE(non_contiguous_inputs_stay_static) {
  auto f = kiln::compile([](const Tensor& x) { return x * 2; });
  check_values(f(reshape(iota_f32(6), {2, 3})), {2, 4, 6, 8, 10, 12});
  // Another size, as a transposed view: [3, 2] with strides [1, 3].
  check_values(f(transpose(reshape(iota_f32(6), {2, 3}), 0, 1)), {2, 8, 4, 10, 6, 12});
  check_values(f(transpose(reshape(iota_f32(8), {2, 4}), 0, 1)), {2, 10, 4, 12, 6, 14, 8, 16});
  BOOST_TEST(f.stats().compiles == 3);
  auto g = kiln::compile([](const Tensor& x) { return x * 2; }, CompileOptions{.dynamic = true});
  check_values(g(transpose(reshape(iota_f32(6), {2, 3}), 0, 1)), {2, 8, 4, 10, 6, 12});
  const Tensor t = transpose(reshape(iota_f32(6), {2, 3}), 0, 1);
  mark_dynamic(t, 0);
  auto h = kiln::compile([](const Tensor& x) { return x * 2; });
  const std::string msg = error_of([&] { h(t); });
  BOOST_TEST(contains(msg, "contiguous()"), msg);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(dynamic_creation, Clean)

// Creation ops over symbolic sizes (zeros/full/ones of x.shape(), a causal mask from tril of a
// [n, n] ones, arange of a symbolic size) keep a dynamic dim dynamic: one recompile to the
// dynamic graph, then every size served by it.
BOOST_AUTO_TEST_CASE(creation_ops_on_symbolic_sizes_do_not_specialise) {
  auto f = kiln::compile([](const Tensor& x) {
    const SymInt n = x.shape()[0];
    const Tensor z = zeros(x.shape()) + full(x.shape(), 2.0) + ones({n, SymInt(3)});
    const Tensor mask = tril(ones({n, n}));
    const Tensor pos = arange(n, DType::f32);
    return std::tuple<Tensor, Tensor, Tensor>{x + z, mask, pos};
  });
  for (int64_t n : {4, 5, 6, 7}) {
    auto [a, mask, pos] = f(ones({n, 3}));
    check_values(sum(a), {4.0 * static_cast<double>(n) * 3});
    check_values(sum(mask), {static_cast<double>(n * (n + 1) / 2)});
    check_values(sum(pos), {static_cast<double>(n * (n - 1) / 2)});
  }
  BOOST_TEST(f.stats().compiles == 2);
}

BOOST_AUTO_TEST_SUITE_END()
