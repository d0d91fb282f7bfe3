// Graph breaks: item(), to_vector(), bool(tensor) and graph_break() split a traced function
// into segments that are cached by structure; fullgraph = true makes each an error naming the
// op and the caller's file and line; kiln::explain reports them.
#include <sstream>
#include <string>

#include "helpers.h"

using namespace kiln;
using namespace capture_test;

namespace {

int g_item_line = 0;
// Scales x by its own sum: a concrete value in the middle of the function.
Tensor scale_by_sum(const Tensor& x) {
  const Tensor y = x + 1;
  const float s = sum(y).item<float>(); g_item_line = __LINE__;
  return y * s;
}

int g_to_vector_line = 0;
Tensor scale_by_first(const Tensor& x) {
  const std::vector<float> v = x.to_vector<float>(); g_to_vector_line = __LINE__;
  return x * v[0];
}

int g_break_line = 0;
Tensor explicit_break(const Tensor& x) {
  const Tensor y = exp(x);
  kiln::graph_break(); g_break_line = __LINE__;
  return y * 2;
}

Tensor branch_on_sign(const Tensor& x) {
  if (sum(x).item<float>() > 0) return x * 2;
  return x * 3;
}

Tensor branch_on_bool(const Tensor& x) {
  if (sum(x) > 0) return x + 100;
  return x - 100;
}

// sum(x + 1) * (x + 1) by hand.
std::vector<double> scale_by_sum_expected(int64_t n) {
  const double s = static_cast<double>(n * (n + 1) / 2 + n);
  return mapped(n, [s](double v) { return (v + 1) * s; });
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(graph_breaks, Clean)

BOOST_AUTO_TEST_CASE(item_breaks_and_segments_are_cached) {
  auto f = kiln::compile(scale_by_sum);
  check_values(f(iota_f32(4)), scale_by_sum_expected(4));
  CompileStats s = f.stats();
  BOOST_TEST(s.graph_breaks == 1);
  BOOST_TEST(s.compiles == 2);  // one graph before the break, one after
  const int64_t hits = s.cache_hits;

  // The same shapes again: every segment is found, nothing compiles.
  check_values(f(iota_f32(4)), scale_by_sum_expected(4));
  s = f.stats();
  BOOST_TEST(s.compiles == 2);
  BOOST_TEST(s.cache_hits == hits + 2);
  BOOST_TEST(s.graph_breaks == 1);

  // Other values of the same shape: the concrete value is recomputed, not reused. The
  // segment before the break is found again; the one after it holds the new value as a
  // constant, so it is a new graph.
  const Tensor other = from_vector<float>({-1, 0, 2, 5});
  check_values(f(other), {0 * 10, 1 * 10, 3 * 10, 6 * 10});
  BOOST_TEST(f.stats().compiles == 3);
  check_values(f(iota_f32(4)), scale_by_sum_expected(4));
  BOOST_TEST(f.stats().compiles == 3);
  // A new shape compiles new segments and stays correct.
  check_values(f(iota_f32(6)), scale_by_sum_expected(6));
  BOOST_TEST(f.stats().compiles == 5);
}

BOOST_AUTO_TEST_CASE(data_dependent_branch) {
  auto f = kiln::compile(branch_on_sign);
  const Tensor pos = from_vector<float>({1, 2, -1});
  const Tensor neg = from_vector<float>({-1, -2, 1});
  check_values(f(pos), {2, 4, -2});
  check_values(f(neg), {-3, -6, 3});
  check_values(f(pos), {2, 4, -2});
  check_values(f(neg), {-3, -6, 3});
  const CompileStats s = f.stats();
  BOOST_TEST(s.compiles == 3);  // sum, x * 2, x * 3
  BOOST_TEST(s.graph_breaks >= 1);
}

BOOST_AUTO_TEST_CASE(bool_conversion_breaks) {
  auto f = kiln::compile(branch_on_bool);
  check_values(f(from_vector<float>({1, 2})), {101, 102});
  check_values(f(from_vector<float>({-1, -2})), {-101, -102});
  check_values(f(from_vector<float>({3, 4})), {103, 104});
  BOOST_TEST(f.stats().graph_breaks >= 1);
  BOOST_TEST(f.stats().compiles == 3);
}

BOOST_AUTO_TEST_CASE(to_vector_breaks) {
  auto f = kiln::compile(scale_by_first);
  check_values(f(from_vector<float>({2, 3})), {4, 6});
  check_values(f(from_vector<float>({5, 1})), {25, 5});
  BOOST_TEST(f.stats().graph_breaks >= 1);
  // The segment before the break has no ops: only the one after it compiles.
  BOOST_TEST(f.stats().compiles == 2);
}

BOOST_AUTO_TEST_CASE(explicit_graph_break) {
  auto f = kiln::compile(explicit_break);
  check_values(f(from_vector<float>({0, 1})), {2, 2 * std::exp(1.0)});
  BOOST_TEST(f.stats().graph_breaks == 1);
  BOOST_TEST(f.stats().compiles == 2);
  check_values(f(from_vector<float>({1, 0})), {2 * std::exp(1.0), 2});
  BOOST_TEST(f.stats().compiles == 2);
  // Outside a trace graph_break() does nothing.
  kiln::graph_break();
  check_values(explicit_break(from_vector<float>({0})), {2});
}

BOOST_AUTO_TEST_CASE(fullgraph_item_names_op_file_and_line) {
  auto f = kiln::compile(scale_by_sum, CompileOptions{.fullgraph = true});
  const std::string msg = error_of([&] { f(iota_f32(4)); });
  BOOST_TEST(g_item_line > 0);
  BOOST_TEST(contains(msg, "item()"), msg);
  BOOST_TEST(contains(msg, "test_graph_breaks.cpp"), msg);
  BOOST_TEST(contains(msg, std::string(__FILE__) + ":" + std::to_string(g_item_line)), msg);
  BOOST_TEST(contains(msg, "fullgraph"), msg);
  BOOST_TEST(f.stats().compiles == 0);
  BOOST_TEST(f.stats().graph_breaks == 0);
}

BOOST_AUTO_TEST_CASE(fullgraph_other_breaks) {
  auto fv = kiln::compile(scale_by_first, CompileOptions{.fullgraph = true});
  std::string msg = error_of([&] { fv(iota_f32(2)); });
  BOOST_TEST(contains(msg, "to_vector()"), msg);
  BOOST_TEST(contains(msg, std::string(__FILE__) + ":" + std::to_string(g_to_vector_line)), msg);

  auto fb = kiln::compile(explicit_break, CompileOptions{.fullgraph = true});
  msg = error_of([&] { fb(iota_f32(2)); });
  BOOST_TEST(contains(msg, "graph_break()"), msg);
  BOOST_TEST(contains(msg, std::string(__FILE__) + ":" + std::to_string(g_break_line)), msg);

  // A conversion operator cannot learn its caller's line; the message names the op and the
  // compiled function (whose label has this file).
  auto fc = kiln::compile(branch_on_bool, CompileOptions{.fullgraph = true});
  msg = error_of([&] { fc(iota_f32(2)); });
  BOOST_TEST(contains(msg, "converting a tensor to bool"), msg);
  BOOST_TEST(contains(msg, "test_graph_breaks.cpp"), msg);
  BOOST_TEST(!contains(msg, "tensor.cpp"), msg);
}

BOOST_AUTO_TEST_CASE(explain_reports_breaks) {
  const ExplainOutput e = kiln::explain(scale_by_sum, iota_f32(3));
  BOOST_TEST(e.graph_count == 2);
  BOOST_TEST(e.graph_break_count == 1);
  // Before the break: full(1), add, sum. After it: full(s), mul.
  BOOST_TEST(e.op_count == 5);
  BOOST_REQUIRE_EQUAL(e.break_reasons.size(), 1u);
  BOOST_TEST(e.break_reasons[0] == "item() at " + std::string(__FILE__) + ":" + std::to_string(g_item_line));
  BOOST_TEST(e.graphs.size() == 2u);
  const std::string text = e.str();
  BOOST_TEST(contains(text, "graphs: 2"), text);
  BOOST_TEST(contains(text, "graph breaks: 1"), text);
  BOOST_TEST(contains(text, "ops: 5"), text);
  BOOST_TEST(contains(text, "1. item() at "), text);
  BOOST_TEST(contains(text, "sum("), text);
  std::ostringstream streamed;
  streamed << e;
  BOOST_TEST(streamed.str() == text);

  // No break: one graph.
  const ExplainOutput whole = kiln::explain([](const Tensor& x, const Tensor& y) { return exp(x) + y; },
                                            iota_f32(3), iota_f32(3));
  BOOST_TEST(whole.graph_count == 1);
  BOOST_TEST(whole.graph_break_count == 0);
  BOOST_TEST(whole.op_count == 2);
  BOOST_TEST(whole.break_reasons.empty());

  // Two breaks.
  const ExplainOutput two = kiln::explain(
      [](const Tensor& x) {
        const Tensor a = x * 2;
        graph_break();
        const Tensor b = a + 1;
        graph_break();
        return b - 3;
      },
      iota_f32(2));
  BOOST_TEST(two.graph_count == 3);
  BOOST_TEST(two.graph_break_count == 2);
  BOOST_REQUIRE_EQUAL(two.break_reasons.size(), 2u);
  BOOST_TEST(contains(two.break_reasons[1], "graph_break()"));
  // explain caches nothing.
  BOOST_TEST(accumulated_compiles() == 0);
}

// A break in a realistic function: the compiled result matches eager.
BOOST_AUTO_TEST_CASE(break_results_match_eager) {
  auto f = kiln::compile([](const Tensor& x, const Tensor& w) {
    const Tensor h = matmul(x, w);
    const double m = max(h).item<double>();
    return softmax(h - m, -1);
  });
  const Tensor x = randn({3, 4}, DType::f32, Device::cpu(), 1);
  const Tensor w = randn({4, 5}, DType::f32, Device::cpu(), 2);
  const Tensor expected = softmax(matmul(x, w), -1);
  for (int i = 0; i < 3; ++i) BOOST_TEST(max(abs(f(x, w) - expected)).item<double>() < 1e-5);
  BOOST_TEST(f.stats().graph_breaks == 1);
}

// Segments obey the config guard: an option that changes code generation recompiles them.
BOOST_AUTO_TEST_CASE(segments_follow_config_changes) {
  auto f = kiln::compile(explicit_break);
  f(from_vector<float>({0, 1}));
  BOOST_TEST(f.stats().compiles == 2);
  config::set("fusion.max_fusion_size", 16);
  check_values(f(from_vector<float>({0, 1})), {2, 2 * std::exp(1.0)});
  BOOST_TEST(f.stats().compiles == 4);
  check_values(f(from_vector<float>({0, 1})), {2, 2 * std::exp(1.0)});
  BOOST_TEST(f.stats().compiles == 4);
  config::set("recompile_limit", 3);  // no codegen effect
  f(from_vector<float>({0, 1}));
  BOOST_TEST(f.stats().compiles == 4);
}

// The recompile limit holds for segments too: each value of sum() makes a new graph after the
// break; past the limit that segment runs eagerly, still correct, with one warning.
BOOST_AUTO_TEST_CASE(segments_obey_recompile_limit) {
  config::Patch p({{"recompile_limit", 2}});
  LogCapture log;
  auto f = kiln::compile(scale_by_sum);
  for (int64_t shift = 0; shift < 5; ++shift) {
    const Tensor x = iota_f32(4) + static_cast<double>(shift);
    const double s = 4 * (2.5 + static_cast<double>(shift) + 1);
    std::vector<double> expect;
    for (int i = 1; i <= 4; ++i) expect.push_back((i + static_cast<double>(shift) + 1) * s);
    check_values(f(x), expect);
  }
  const CompileStats st = f.stats();
  BOOST_TEST(st.compiles == 3);  // segment 0 once, segment 1 twice
  BOOST_TEST(st.recompiles == 1);
  BOOST_TEST(st.eager_calls == 3);
  BOOST_TEST(count_of(log.str(), "[kiln warning]") == 1u, log.str());
  BOOST_TEST(contains(log.str(), "recompile_limit (2)"), log.str());
  {
    config::Patch fail({{"fail_on_recompile_limit_hit", true}});
    const std::string msg = error_of([&] { f(iota_f32(4) + 10); });
    BOOST_TEST(contains(msg, "recompile_limit (2)"), msg);
  }
}

BOOST_AUTO_TEST_CASE(segments_obey_stances) {
  auto f = kiln::compile(branch_on_sign);
  const Tensor pos = from_vector<float>({1, 2, -1});
  const Tensor neg = from_vector<float>({-1, -2, 1});
  {
    ScopedStance s(Stance::fail_on_recompile);
    check_values(f(pos), {2, 4, -2});  // first compile of each segment: allowed
    check_values(f(pos), {2, 4, -2});
    const std::string msg = error_of([&] { f(neg); });
    BOOST_TEST(contains(msg, "fail_on_recompile"), msg);
  }
  {
    ScopedStance s(Stance::eager_on_recompile);
    check_values(f(neg), {-3, -6, 3});
    BOOST_TEST(f.stats().compiles == 2);
    BOOST_TEST(f.stats().eager_calls == 1);
  }
  check_values(f(neg), {-3, -6, 3});
  BOOST_TEST(f.stats().compiles == 3);
  {
    ScopedStance s(Stance::force_eager);
    check_values(f(neg), {-3, -6, 3});
    BOOST_TEST(f.stats().compiles == 3);
  }
}

// A break only on some calls (a scalar flag): before, a whole-graph entry; after, segments.
BOOST_AUTO_TEST_CASE(break_on_some_calls_only) {
  auto f = kiln::compile([](const Tensor& x, bool brk) {
    const Tensor y = x + 1;
    if (brk) graph_break();
    return y * 2;
  });
  const Tensor x = iota_f32(3);
  check_values(f(x, false), {4, 6, 8});
  BOOST_TEST(f.stats().graph_breaks == 0);
  check_values(f(x, true), {4, 6, 8});
  BOOST_TEST(f.stats().graph_breaks == 1);
  check_values(f(x, false), {4, 6, 8});
  check_values(f(x, true), {4, 6, 8});
  check_values(f(iota_f32(2), false), {4, 6});
}

BOOST_AUTO_TEST_SUITE_END()
