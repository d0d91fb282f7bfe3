// The public API exactly as the foundation issue writes it: if a name or signature drifts,
// this file stops compiling.
#include <kiln/kiln.h>

#include <boost/test/unit_test.hpp>
#include <sstream>

using namespace kiln;

BOOST_AUTO_TEST_SUITE(api_contract)

BOOST_AUTO_TEST_CASE(issue_snippet_compiles_and_runs) {
  kiln::reset();
  std::vector<float> values(64 * 8);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 7) / 7.0f;
  Tensor x = randn({16, 64});                        // DType::f32, Device::cpu(), seed 0
  Tensor w = from_vector<float>(values, {64, 8});    // copies; Device::cpu() by default
  Tensor z = zeros({3}), o = ones({3}, DType::i64), f = full({2, 2}, 0.5), r = arange(10);
  BOOST_TEST((x.shape() == Shape({16, 64})));
  BOOST_TEST((x.dtype() == DType::f32));
  BOOST_TEST((x.device() == Device::cpu()));
  BOOST_TEST((x.to(Device::cpu()).dtype() == DType::f32));
  BOOST_TEST((x.to(DType::bf16).dtype() == DType::bf16));
  std::vector<float> v = x.to_vector<float>();
  float s = sum(x).item<float>();
  BOOST_TEST(v.size() == 16u * 64u);
  BOOST_TEST(std::abs(s - sum(from_vector<float>(v)).item<float>()) < 1e-3);
  BOOST_TEST((o.dtype() == DType::i64));
  BOOST_TEST(r.to_vector<int64_t>()[9] == 9);
  BOOST_TEST(f.to_vector<double>()[3] == 0.5);
  BOOST_TEST(z.to_vector<float>()[2] == 0.0f);

  auto fn = [](const Tensor& x, const Tensor& w) { return softmax(matmul(x, w), -1); };
  auto cf = kiln::compile(fn, CompileOptions{.fullgraph = true});
  Tensor y = cf(x, w);  // first call traces, compiles, caches; later calls hit the cache
  y = cf(x, w);
  const CompileStats st = cf.stats();
  BOOST_TEST(st.compiles == 1);
  BOOST_TEST(st.cache_hits == 1);
  BOOST_TEST(st.recompiles == 0);
  BOOST_TEST(st.guard_failures == 0);
  BOOST_TEST(st.graph_breaks == 0);
  BOOST_TEST(st.recompile_reasons.empty());
  const ExplainOutput e = kiln::explain(fn, x, w);  // graph_count, graph_break_count, op_count, break_reasons
  BOOST_TEST(e.graph_count == 1);
  BOOST_TEST(e.graph_break_count == 0);
  BOOST_TEST(e.op_count == 2);
  BOOST_TEST(e.break_reasons.empty());
  std::ostringstream printed;
  printed << e;
  BOOST_TEST(printed.str().find("graphs: 1") != std::string::npos);

  CompileOptions options{.fullgraph = false, .dynamic = std::nullopt, .backend = "kiln", .mode = "default",
                         .options = {{"recompile_limit", 4}}, .disable = false};
  auto g = kiln::compile(fn, options);
  BOOST_TEST(max(abs(g(x, w) - y)).item<float>() == 0.0f);

  const auto backends = kiln::list_backends();
  BOOST_TEST((std::find(backends.begin(), backends.end(), "eager") != backends.end()));
  kiln::register_backend("contract_eager", [](const Graph& graph, std::span<const TensorMeta> metas) {
    return BackendRegistry::get("eager")(graph, metas);
  });
  {
    kiln::set_stance(Stance::force_eager);  // also eager_on_recompile, fail_on_recompile, default
    BOOST_TEST(!kiln::is_compiling());
    kiln::set_stance(Stance::default_);
    ScopedStance scoped(Stance::fail_on_recompile);
    BOOST_TEST((kiln::stance() == Stance::fail_on_recompile));
  }
  BOOST_TEST((kiln::stance() == Stance::default_));
  kiln::graph_break();  // outside tracing: nothing happens
  kiln::mark_dynamic(x, 0 /*dim*/, 2 /*min*/, 4096 /*max*/);
  kiln::mark_static(x, 1);
  kiln::config::set("recompile_limit", 4);
  BOOST_TEST(kiln::config::get<int64_t>("recompile_limit") == 4);
  {
    kiln::config::Patch p({{"recompile_limit", 1}}); /* restored at scope exit */
    BOOST_TEST(kiln::config::get<int64_t>("recompile_limit") == 1);
  }
  BOOST_TEST(kiln::config::get<int64_t>("recompile_limit") == 4);
  kiln::config::set("recompile_limit", 8);
  BOOST_TEST(!kiln::config::list_options().empty());
  BOOST_TEST(kiln::config::mode_options("max-autotune").count("max_autotune") == 1u);
}

BOOST_AUTO_TEST_CASE(functions_return_tuples_pairs_vectors_and_take_scalars) {
  auto f = kiln::compile([](const Tensor& x, int64_t n, double a, bool flip) {
    const Tensor y = x * a + static_cast<double>(n);
    return std::make_tuple(flip ? -y : y, std::vector<Tensor>{y}.front());
  });
  auto [p, q] = f(ones({2}), int64_t{3}, 0.5, true);
  BOOST_TEST(p.to_vector<float>()[0] == -3.5f);
  BOOST_TEST(q.to_vector<float>()[1] == 3.5f);
}

BOOST_AUTO_TEST_SUITE_END()
