// kiln::compile's surface: result types, inputs returned unchanged, captured constants,
// scalar arguments, backends, options and modes, disable, is_compiling, escaping traced
// tensors, nested compiled functions, KILN_LOGS categories and debug_dir dumps.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "helpers.h"

using namespace kiln;
using namespace capture_test;

namespace {
std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
}  // namespace

BOOST_FIXTURE_TEST_SUITE(compile_api, Clean)

// ---- results ---------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(returns_tuple_pair_vector) {
  auto ft = kiln::compile([](const Tensor& x) { return std::tuple<Tensor, Tensor, Tensor>{x + 1, x * 2, sum(x)}; });
  for (int i = 0; i < 2; ++i) {
    auto [a, b, c] = ft(iota_f32(3));
    check_values(a, {2, 3, 4});
    check_values(b, {2, 4, 6});
    check_values(c, {6});
    BOOST_TEST(c.rank() == 0);
  }
  BOOST_TEST(ft.stats().compiles == 1);
  BOOST_TEST(ft.stats().cache_hits == 1);

  auto fp = kiln::compile([](const Tensor& x, const Tensor& y) { return std::pair<Tensor, Tensor>{x - y, x * y}; });
  for (int i = 0; i < 2; ++i) {
    auto [d, p] = fp(iota_f32(2), from_vector<float>({3, 5}));
    check_values(d, {-2, -3});
    check_values(p, {3, 10});
  }
  BOOST_TEST(fp.stats().cache_hits == 1);

  auto fv = kiln::compile([](const Tensor& x) { return std::vector<Tensor>{x, neg(x), x * x, x}; });
  for (int i = 0; i < 2; ++i) {
    const std::vector<Tensor> out = fv(iota_f32(2));
    BOOST_REQUIRE_EQUAL(out.size(), 4u);
    check_values(out[0], {1, 2});
    check_values(out[1], {-1, -2});
    check_values(out[2], {1, 4});
    check_values(out[3], {1, 2});
  }
  BOOST_TEST(fv.stats().cache_hits == 1);
}

BOOST_AUTO_TEST_CASE(returns_input_unchanged) {
  auto f = kiln::compile([](const Tensor& x, const Tensor&) { return x; });
  const Tensor x = iota_f32(3);
  for (int i = 0; i < 2; ++i) {
    const Tensor y = f(x, ones({2}));
    check_values(y, {1, 2, 3});
    BOOST_TEST(sizes_of(y) == (std::vector<int64_t>{3}));
    BOOST_TEST(y.dtype() == DType::f32);
  }
  BOOST_TEST(f.stats().compiles == 1);
  BOOST_TEST(f.stats().cache_hits == 1);
  // A non-contiguous input returned unchanged keeps its values.
  const Tensor t = transpose(reshape(iota_f32(6), {2, 3}), 0, 1);
  check_values(f(t, ones({2})), {1, 4, 2, 5, 3, 6});
  check_values(f(t, ones({2})), {1, 4, 2, 5, 3, 6});
}

BOOST_AUTO_TEST_CASE(captured_tensor_constant) {
  const Tensor w = from_vector<float>({10, 20, 30});
  const Tensor strided = slice(iota_f32(6), 0, 0, 6, 2);  // 1, 3, 5: a view with strides
  auto f = kiln::compile([w, strided](const Tensor& x) { return x * w + strided; });
  for (int i = 0; i < 3; ++i) check_values(f(iota_f32(3)), {11, 43, 95});
  BOOST_TEST(f.stats().compiles == 1);
  BOOST_TEST(f.stats().cache_hits == 2);
  // Returning a captured tensor itself.
  auto g = kiln::compile([w](const Tensor&) { return w; });
  check_values(g(ones({1})), {10, 20, 30});
  check_values(g(ones({1})), {10, 20, 30});
  // A tensor created inside the function from nothing.
  auto h = kiln::compile([](const Tensor& x) { return std::pair<Tensor, Tensor>{arange(4), x}; });
  auto [r, same] = h(ones({2}));
  check_values(r, {0, 1, 2, 3});
  BOOST_TEST(r.dtype() == DType::i64);
  check_values(same, {1, 1});
}

BOOST_AUTO_TEST_CASE(scalar_args_guarded_by_value) {
  auto f = kiln::compile([](const Tensor& x, int64_t n, double scale, bool shift) {
    Tensor y = x * scale + static_cast<double>(n);
    return shift ? y + 1000 : y;
  });
  const Tensor x = iota_f32(2);
  check_values(f(x, int64_t{1}, 2.0, false), {3, 5});
  check_values(f(x, int64_t{1}, 2.0, false), {3, 5});
  BOOST_TEST(f.stats().compiles == 1);
  check_values(f(x, int64_t{1}, 2.5, false), {3.5, 6});
  BOOST_TEST(f.stats().compiles == 2);
  check_values(f(x, int64_t{2}, 2.5, false), {4.5, 7});
  BOOST_TEST(f.stats().compiles == 3);
  check_values(f(x, int64_t{2}, 2.5, true), {1004.5, 1007});
  BOOST_TEST(f.stats().compiles == 4);
  // Every earlier combination is still served from its entry.
  check_values(f(x, int64_t{1}, 2.0, false), {3, 5});
  check_values(f(x, int64_t{1}, 2.5, false), {3.5, 6});
  const CompileStats s = f.stats();
  BOOST_TEST(s.compiles == 4);
  BOOST_TEST(s.cache_hits == 3);
  BOOST_REQUIRE_EQUAL(s.recompile_reasons.size(), 3u);
  BOOST_TEST(s.recompile_reasons[0] == "input 2: value mismatch: expected 2, got 2.5");
  BOOST_TEST(s.recompile_reasons[1] == "input 1: value mismatch: expected 1, got 2");
  BOOST_TEST(s.recompile_reasons[2] == "input 3: value mismatch: expected false, got true");
  // The printer: counts first, then each reason on its own line.
  std::ostringstream printed;
  printed << s;
  const std::string head =
      "compiles 4 (3 recompiles), cache hits 3, guard failures 3, graph breaks 0, eager calls 0\n"
      "  recompile 1: input 2: value mismatch: expected 2, got 2.5\n"
      "  recompile 2: input 1: value mismatch: expected 1, got 2\n"
      "  recompile 3: input 3: value mismatch: expected false, got true\n";
  BOOST_TEST(printed.str().rfind(head, 0) == 0u, printed.str());
  // then the compile-cache layers the backend looked in (which of them hit depends on the cache
  // directory this process found)
  BOOST_TEST(contains(printed.str(), "  compile cache memory: "), printed.str());
}

// ---- backends and options ---------------------------------------------------------------

BOOST_AUTO_TEST_CASE(builtin_backends_listed) {
  const std::vector<std::string> names = list_backends();
  for (const char* n : {"eager", "kiln", "cudagraphs"})
    BOOST_TEST((std::find(names.begin(), names.end(), n) != names.end()), "missing backend " << n);
  BOOST_TEST(std::is_sorted(names.begin(), names.end()));
}

BOOST_AUTO_TEST_CASE(cudagraphs_needs_cuda) {
  auto f = kiln::compile([](const Tensor& x) { return x + 1; }, CompileOptions{.backend = "cudagraphs"});
  const std::string msg = error_of([&] { f(ones({2})); });
  BOOST_TEST(contains(msg, "CUDA"), msg);
  BOOST_TEST(f.stats().compiles == 0);
  // With suppress_errors the graph runs with the eager backend, with a warning.
  config::Patch p({{"suppress_errors", true}});
  LogCapture log;
  check_values(f(ones({2})), {2, 2});
  BOOST_TEST(contains(log.str(), "[kiln warning]"), log.str());
  BOOST_TEST(contains(log.str(), "cudagraphs"), log.str());
}

BOOST_AUTO_TEST_CASE(unknown_backend_lists_registered) {
  auto f = kiln::compile([](const Tensor& x) { return x + 1; }, CompileOptions{.backend = "no_such_backend"});
  const std::string msg = error_of([&] { f(ones({2})); });
  BOOST_TEST(contains(msg, "no_such_backend"), msg);
  BOOST_TEST(contains(msg, "eager"), msg);
  BOOST_TEST(contains(msg, "kiln"), msg);
  BOOST_TEST(contains(msg, "cudagraphs"), msg);
  BOOST_CHECK_THROW(register_backend("", [](const Graph& g, std::span<const TensorMeta> m) {
                      return BackendRegistry::get("eager")(g, m);
                    }),
                    kiln::Error);
  BOOST_CHECK_THROW(register_backend("empty", Backend{}), kiln::Error);
}

BOOST_AUTO_TEST_CASE(custom_backend_counts_calls) {
  static int compiles = 0;
  static int runs = 0;
  static size_t last_inputs = 0;
  compiles = runs = 0;
  register_backend("counting", [](const Graph& g, std::span<const TensorMeta> metas) {
    ++compiles;
    last_inputs = metas.size();
    Executable inner = BackendRegistry::get("eager")(g, metas);
    return Executable([inner](std::span<const TensorData* const> in) {
      ++runs;
      return inner(in);
    });
  });
  const std::vector<std::string> names = list_backends();
  BOOST_TEST((std::find(names.begin(), names.end(), "counting") != names.end()));
  auto f = kiln::compile([](const Tensor& x, const Tensor& y) { return x * y; }, CompileOptions{.backend = "counting"});
  for (int i = 0; i < 4; ++i) check_values(f(iota_f32(3), iota_f32(3)), {1, 4, 9});
  BOOST_TEST(compiles == 1);
  BOOST_TEST(runs == 4);
  BOOST_TEST(last_inputs == 2u);
}

BOOST_AUTO_TEST_CASE(eager_backend_matches_kiln) {
  auto fn = [](const Tensor& x, const Tensor& w) { return log_softmax(matmul(x, w) + 0.5, -1) * 2; };
  auto fe = kiln::compile(fn, CompileOptions{.backend = "eager"});
  auto fk = kiln::compile(fn, CompileOptions{.backend = "kiln"});
  const Tensor x = randn({5, 3}, DType::f32, Device::cpu(), 11);
  const Tensor w = randn({3, 4}, DType::f32, Device::cpu(), 12);
  const std::vector<double> e = fe(x, w).to_vector<double>();
  const std::vector<double> k = fk(x, w).to_vector<double>();
  const std::vector<double> plain = fn(x, w).to_vector<double>();
  BOOST_REQUIRE_EQUAL(e.size(), 20u);
  for (size_t i = 0; i < e.size(); ++i) {
    BOOST_TEST(std::abs(e[i] - k[i]) < 1e-6);
    BOOST_TEST(std::abs(e[i] - plain[i]) < 1e-6);
  }
  BOOST_TEST(fe.stats().compiles == 1);
  BOOST_TEST(fk.stats().compiles == 1);
}

BOOST_AUTO_TEST_CASE(modes_and_options_are_validated) {
  auto fn = [](const Tensor& x) { return x + 1; };
  std::string msg = error_of([&] { kiln::compile(fn, CompileOptions{.mode = "fastest"}); });
  BOOST_TEST(contains(msg, "fastest"), msg);
  BOOST_TEST(contains(msg, "max-autotune"), msg);
  msg = error_of([&] { kiln::compile(fn, CompileOptions{.options = {{"fusion.max_fusoin_size", 8}}}); });
  BOOST_TEST(contains(msg, "fusion.max_fusoin_size"), msg);
  BOOST_TEST(contains(msg, "did you mean"), msg);
  BOOST_TEST(contains(msg, "fusion.max_fusion_size"), msg);
  msg = error_of([&] { kiln::compile(fn, CompileOptions{.options = {{"recompile_limit", "many"}}}); });
  BOOST_TEST(contains(msg, "recompile_limit"), msg);
  // Valid ones compile and run.
  for (const std::string& mode : config::list_modes()) {
    auto f = kiln::compile(fn, CompileOptions{.mode = mode, .options = {{"fusion.max_fusion_size", 8}}});
    check_values(f(ones({2})), {2, 2});
    BOOST_TEST(f.stats().compiles == 1);
    BOOST_TEST(f.options().mode == mode);
  }
}

// Per-compile options apply while that function compiles, not around it.
BOOST_AUTO_TEST_CASE(per_compile_options_apply_inside_backend) {
  static int64_t seen = 0;
  register_backend("reads_config", [](const Graph& g, std::span<const TensorMeta> metas) {
    seen = config::get<int64_t>("fusion.max_fusion_size");
    return BackendRegistry::get("eager")(g, metas);
  });
  auto f = kiln::compile([](const Tensor& x) { return x + 1; },
                         CompileOptions{.backend = "reads_config", .options = {{"fusion.max_fusion_size", 5}}});
  f(ones({2}));
  BOOST_TEST(seen == 5);
  BOOST_TEST(config::get<int64_t>("fusion.max_fusion_size") == 64);
  f(ones({2}));
  BOOST_TEST(f.stats().compiles == 1);  // the per-compile value is not a config change
}

BOOST_AUTO_TEST_CASE(disable_runs_eagerly) {
  int traced = 0;
  auto f = kiln::compile(
      [&traced](const Tensor& x) {
        traced += kiln::is_compiling() ? 1 : 0;
        return x * 4;
      },
      CompileOptions{.disable = true});
  check_values(f(iota_f32(2)), {4, 8});
  check_values(f(iota_f32(2)), {4, 8});
  BOOST_TEST(f.stats().compiles == 0);
  BOOST_TEST(f.stats().cache_hits == 0);
  BOOST_TEST(traced == 0);
  BOOST_TEST(accumulated_compiles() == 0);
}

// ---- tracing -------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(is_compiling_inside_only) {
  int inside = 0;
  int calls = 0;
  auto f = kiln::compile([&](const Tensor& x) {
    ++calls;
    inside += kiln::is_compiling() ? 1 : 0;
    return x + 1;
  });
  BOOST_TEST(!kiln::is_compiling());
  f(iota_f32(2));
  BOOST_TEST(!kiln::is_compiling());
  BOOST_TEST(calls == 1);
  BOOST_TEST(inside == 1);
  f(iota_f32(2));  // a hit: the function does not run
  BOOST_TEST(calls == 1);
  // A traced tensor says so.
  bool saw_traced = false;
  auto g = kiln::compile([&](const Tensor& x) {
    saw_traced = x.is_traced();
    return x;
  });
  g(iota_f32(2));
  BOOST_TEST(saw_traced);
}

BOOST_AUTO_TEST_CASE(escaped_traced_tensor_is_an_error) {
  static Tensor escaped;
  auto f = kiln::compile([](const Tensor& x) {
    const Tensor y = x * 2;
    escaped = y;
    return y + 1;
  });
  check_values(f(iota_f32(2)), {3, 5});
  BOOST_REQUIRE(escaped.defined());
  BOOST_TEST(escaped.is_traced());
  std::string msg = error_of([&] { (void)(escaped + 1); });
  BOOST_TEST(contains(msg, "escaped"), msg);
  msg = error_of([&] { (void)escaped.item<float>(); });
  BOOST_TEST(contains(msg, "escaped"), msg);
  msg = error_of([&] { (void)escaped.to_vector<float>(); });
  BOOST_TEST(contains(msg, "escaped"), msg);
  BOOST_CHECK_THROW((void)escaped.data(), kiln::Error);
  BOOST_CHECK_NO_THROW((void)escaped.str());
  // Used in a later trace of another function.
  auto g = kiln::compile([](const Tensor& x) { return x + escaped; });
  msg = error_of([&] { g(iota_f32(2)); });
  BOOST_TEST(contains(msg, "escaped"), msg);
  // As an argument of a compiled function.
  msg = error_of([&] { f(escaped); });
  BOOST_TEST(contains(msg, "escaped"), msg);
  escaped = Tensor();
}

BOOST_AUTO_TEST_CASE(nested_compiled_function_is_inlined) {
  auto inner = kiln::compile([](const Tensor& x) { return exp(x); });
  auto outer = kiln::compile([&inner](const Tensor& x) { return inner(x) + 1; });
  check_values(outer(from_vector<float>({0, 1})), {2, std::exp(1.0) + 1});
  check_values(outer(from_vector<float>({0, 1})), {2, std::exp(1.0) + 1});
  BOOST_TEST(outer.stats().compiles == 1);
  BOOST_TEST(inner.stats().compiles == 0);
}

BOOST_AUTO_TEST_CASE(undefined_argument_is_an_error) {
  auto f = kiln::compile([](const Tensor& x) { return x + 1; });
  BOOST_CHECK_THROW(f(Tensor()), kiln::Error);
}

// Scalars only: the graph has no inputs and each value has its entry.
BOOST_AUTO_TEST_CASE(scalar_only_arguments) {
  auto f = kiln::compile([](int64_t n, double v) { return full({n}, v); });
  check_values(f(int64_t{3}, 1.5), {1.5, 1.5, 1.5});
  check_values(f(int64_t{2}, 1.5), {1.5, 1.5});
  check_values(f(int64_t{3}, 1.5), {1.5, 1.5, 1.5});
  BOOST_TEST(f.stats().compiles == 2);
  BOOST_TEST(f.stats().cache_hits == 1);
  auto g = kiln::compile([]() { return arange(3); });
  check_values(g(), {0, 1, 2});
  check_values(g(), {0, 1, 2});
  BOOST_TEST(g.stats().compiles == 1);
  BOOST_TEST(g.stats().cache_hits == 1);
}

// The same tensor passed twice, and two arguments sharing storage.
BOOST_AUTO_TEST_CASE(aliased_arguments) {
  auto f = kiln::compile([](const Tensor& a, const Tensor& b) { return a * 10 + b; });
  const Tensor x = iota_f32(3);
  check_values(f(x, x), {11, 22, 33});
  const Tensor base = iota_f32(6);
  check_values(f(slice(base, 0, 0, 3), slice(base, 0, 3, 6)), {14, 25, 36});
  check_values(f(x, x), {11, 22, 33});
}

// Dynamic sizes through a matmul: the inner dims are equated, the outer ones vary freely.
BOOST_AUTO_TEST_CASE(dynamic_matmul) {
  auto f = kiln::compile([](const Tensor& a, const Tensor& b) { return matmul(a, b); },
                         CompileOptions{.dynamic = true});
  for (int64_t m : {2, 3, 5}) {
    const Tensor a = ones({m, 4});
    const Tensor b = reshape(iota_f32(8), {4, 2});
    const Tensor y = f(a, b);
    BOOST_TEST(sizes_of(y) == (std::vector<int64_t>{m, 2}));
    std::vector<double> expect;
    for (int64_t i = 0; i < m; ++i) expect.insert(expect.end(), {16, 20});
    check_values(y, expect);
  }
  BOOST_TEST(f.stats().compiles == 1);
  BOOST_CHECK_THROW(f(ones({2, 4}), ones({3, 2})), kiln::Error);
  BOOST_TEST(f.stats().recompile_reasons.size() == 1u);
  BOOST_TEST(contains(f.stats().recompile_reasons.at(0), "no longer holds"));
}

// Concurrent calls of one compiled function from several threads give correct results.
BOOST_AUTO_TEST_CASE(concurrent_calls) {
  auto f = kiln::compile([](const Tensor& x) { return exp(x) * 2; });
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        const int64_t n = 2 + (t + i) % 3;
        const std::vector<double> got = f(zeros({n})).to_vector<double>();
        if (got != std::vector<double>(static_cast<size_t>(n), 2.0)) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  BOOST_TEST(wrong.load() == 0);
  const CompileStats s = f.stats();
  BOOST_TEST(s.compiles >= 1);
  BOOST_TEST(s.compiles + s.cache_hits == 80);
}

// ---- logging and dumps ----------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(logs_recompiles_guards_and_graphs) {
  LogCapture log("recompiles,guards,graph");
  auto f = kiln::compile([](const Tensor& x) { return x * 2; }, CompileOptions{.dynamic = false, .arg_names = {"x"}});
  f(ones({4}));
  const std::string first = log.str();
  BOOST_TEST(contains(first, "[kiln:guards] "), first);
  BOOST_TEST(contains(first, "input 0 (x) size[0] == 4"), first);
  BOOST_TEST(contains(first, "[kiln:graph] "), first);
  BOOST_TEST(contains(first, "mul("), first);
  BOOST_TEST(!contains(first, "[kiln:recompiles]"), first);
  f(ones({8}));
  const std::string all = log.str();
  BOOST_TEST(contains(all, "[kiln:recompiles] "), all);
  BOOST_TEST(contains(all, "input 0 (x): size mismatch at dim 0: expected 4, got 8"), all);
  BOOST_TEST(contains(all, "input 0 (x) size[0] == 8"), all);
  // Categories not asked for stay silent.
  BOOST_TEST(!contains(all, "[kiln:graph_breaks]"), all);
}

BOOST_AUTO_TEST_CASE(logs_graph_breaks) {
  LogCapture log("graph_breaks");
  auto f = kiln::compile([](const Tensor& x) {
    graph_break();
    return x + 1;
  });
  f(ones({2}));
  BOOST_TEST(contains(log.str(), "[kiln:graph_breaks] graph break in "), log.str());
  BOOST_TEST(contains(log.str(), "graph_break() at "), log.str());
}

BOOST_AUTO_TEST_CASE(nothing_logged_by_default) {
  LogCapture log;
  auto f = kiln::compile([](const Tensor& x) { return x * 2; });
  f(ones({4}));
  f(ones({8}));
  BOOST_TEST(log.str().empty(), log.str());
}

BOOST_AUTO_TEST_CASE(debug_dir_dumps) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kiln_capture_debug_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  {
    config::Patch p({{"debug_dir", dir.string()}});
    auto f = kiln::compile([](const Tensor& x) { return exp(x) + 1; }, CompileOptions{.arg_names = {"x"}});
    f(ones({3}));
    f(ones({3}));
    f(ones({5}));
  }
  std::vector<std::filesystem::path> dumps;
  for (const auto& e : std::filesystem::directory_iterator(dir)) dumps.push_back(e.path());
  BOOST_REQUIRE_EQUAL(dumps.size(), 2u);  // one per compiled graph
  std::sort(dumps.begin(), dumps.end());
  for (const auto& d : dumps) {
    for (const char* file : {"graph.txt", "graph.json", "guards.txt"})
      BOOST_TEST(std::filesystem::exists(d / file), d / file);
    BOOST_TEST(contains(read_file(d / "graph.txt"), "exp("));
    BOOST_TEST(contains(read_file(d / "graph.json"), "\"exp\""));
    BOOST_TEST(contains(read_file(d / "guards.txt"), "input 0 (x) dtype == f32"));
  }
  // With the CPU target, the kiln backend adds its plan, code and fusion decisions beside them.
  const bool cpu = kiln::explain([](const Tensor& x) { return exp(x); }, ones({3})).kernel_count > 0;
  if (cpu)
    for (const auto& d : dumps) {
      for (const char* file : {"plan.json", "plan.txt", "kernels.ll", "schedule.txt"})
        BOOST_TEST(std::filesystem::exists(d / file), d / file);
      BOOST_TEST(contains(read_file(d / "plan.json"), "\"kiln.plan\""));
      BOOST_TEST(contains(read_file(d / "kernels.ll"), "define void @k0("));
    }
  std::string guards;
  for (const auto& d : dumps) guards += read_file(d / "guards.txt");
  BOOST_TEST(contains(guards, "input 0 (x) size[0] == 3"), guards);
  BOOST_TEST(contains(guards, "input 0 (x) size[0] == s0 in [2, "), guards);
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()
