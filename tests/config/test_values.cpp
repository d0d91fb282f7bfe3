// ConfigValue, typing and validation, names, the option catalogue, modes, generation and the
// codegen hash.
#include "fixture.h"

#include "../../sdk/config/src/registry.h"  // coerce_type / parse_text: no Float option exists yet

#include <algorithm>
#include <atomic>
#include <set>
#include <thread>
#include <tuple>
#include <type_traits>

using kiln::ConfigValue;
using kiln::config::OptionType;
namespace config = kiln::config;
using kiln_test::contains;
using kiln_test::error_of;

BOOST_AUTO_TEST_SUITE(config_value)

BOOST_AUTO_TEST_CASE(implicit_construction_picks_the_right_type) {
  BOOST_TEST((ConfigValue(4).type() == OptionType::Int));
  BOOST_TEST((ConfigValue(int64_t{1} << 40).type() == OptionType::Int));
  BOOST_TEST((ConfigValue(7LL).type() == OptionType::Int));
  BOOST_TEST((ConfigValue(7u).type() == OptionType::Int));
  BOOST_TEST((ConfigValue(short{3}).type() == OptionType::Int));
  BOOST_TEST((ConfigValue(0.5).type() == OptionType::Float));
  BOOST_TEST((ConfigValue(0.5f).type() == OptionType::Float));
  BOOST_TEST((ConfigValue(true).type() == OptionType::Bool));
  // The classic trap: a string literal must not become a bool.
  BOOST_TEST((ConfigValue("on").type() == OptionType::String));
  BOOST_TEST((ConfigValue(std::string("x")).type() == OptionType::String));
  BOOST_TEST((ConfigValue(std::string_view("x")).type() == OptionType::String));
  BOOST_TEST((ConfigValue().type() == OptionType::Bool));

  BOOST_TEST(ConfigValue(4).as<int64_t>() == 4);
  BOOST_TEST(ConfigValue("abc").as<std::string>() == "abc");
  BOOST_TEST(ConfigValue(false).as<bool>() == false);

  // Pointers other than const char* and chars do not convert at all.
  static_assert(!std::is_convertible_v<const int*, ConfigValue>);
  static_assert(!std::is_convertible_v<char, ConfigValue>);
  static_assert(std::is_convertible_v<const char*, ConfigValue>);
  static_assert(std::is_convertible_v<int, ConfigValue>);

  // A map literal with mixed types compiles (this is how Patch and CompileScope are used).
  std::map<std::string, ConfigValue> m{{"a", 1}, {"b", true}, {"c", "s"}, {"d", 2.5}};
  BOOST_TEST((m.at("a") == ConfigValue(int64_t{1})));
  BOOST_TEST((m.at("c") == ConfigValue(std::string("s"))));
}

BOOST_AUTO_TEST_CASE(equality_distinguishes_types) {
  BOOST_TEST((ConfigValue(1) != ConfigValue(1.0)));
  BOOST_TEST((ConfigValue(1) != ConfigValue(true)));
  BOOST_TEST((ConfigValue("1") != ConfigValue(1)));
  BOOST_TEST((ConfigValue(3) == 3));
}

BOOST_AUTO_TEST_CASE(unsigned_out_of_range_throws) {
  std::string msg = error_of([] { ConfigValue v(~uint64_t{0}); (void)v; });
  BOOST_TEST(contains(msg, "does not fit"));
}

BOOST_AUTO_TEST_CASE(as_with_wrong_type_throws) {
  std::string msg = error_of([] { (void)ConfigValue(3).as<bool>(); });
  BOOST_TEST(msg == "config value 3 is an Int, not a Bool.");
}

BOOST_AUTO_TEST_CASE(to_string_forms) {
  BOOST_TEST(config::to_string(true) == "true");
  BOOST_TEST(config::to_string(false) == "false");
  BOOST_TEST(config::to_string(-42) == "-42");
  BOOST_TEST(config::to_string(0.5) == "0.5");
  BOOST_TEST(config::to_string(2.0) == "2.0");
  BOOST_TEST(config::to_string(1e100) == "1e+100");
  BOOST_TEST(config::to_string("a\"b\\c") == "\"a\\\"b\\\\c\"");
  BOOST_TEST(config::to_string("") == "\"\"");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(typing, kiln_test::CleanConfig)

BOOST_AUTO_TEST_CASE(set_and_get_each_type) {
  config::set("recompile_limit", 4);
  BOOST_TEST(config::get<int64_t>("recompile_limit") == 4);
  config::set("verbose", true);
  BOOST_TEST(config::get<bool>("verbose") == true);
  config::set("cache_dir", "/tmp/kiln-test");
  BOOST_TEST(config::get<std::string>("cache_dir") == "/tmp/kiln-test");
  config::set("job_id", std::string("job-7"));
  BOOST_TEST((config::get_value("job_id") == ConfigValue("job-7")));
}

BOOST_AUTO_TEST_CASE(integral_double_is_an_int_fractional_is_not) {
  config::set("recompile_limit", 3.0);
  BOOST_TEST(config::get<int64_t>("recompile_limit") == 3);
  BOOST_TEST((config::get_value("recompile_limit").type() == OptionType::Int));

  std::string msg = error_of([] { config::set("recompile_limit", 2.5); });
  BOOST_TEST(msg == "config option 'recompile_limit' expects an Int, but got the Float 2.5.");
  BOOST_TEST(config::get<int64_t>("recompile_limit") == 3);  // unchanged
}

BOOST_AUTO_TEST_CASE(ill_typed_values_name_option_type_and_value) {
  std::string msg = error_of([] { config::set("recompile_limit", "abc"); });
  BOOST_TEST(msg == "config option 'recompile_limit' expects an Int, but got the String \"abc\".");

  msg = error_of([] { config::set("verbose", 1); });
  BOOST_TEST(msg == "config option 'verbose' expects a Bool, but got the Int 1.");

  msg = error_of([] { config::set("cache_dir", 5); });
  BOOST_TEST(msg == "config option 'cache_dir' expects a String, but got the Int 5.");

  msg = error_of([] { config::set("recompile_limit", true); });
  BOOST_TEST(contains(msg, "expects an Int, but got the Bool true"));
}

BOOST_AUTO_TEST_CASE(int_for_float_is_fine) {
  // No Float option is declared yet, so check the conversion rule the layers share directly.
  auto f = config::internal::coerce_type(OptionType::Float, 3);
  BOOST_REQUIRE(f.has_value());
  BOOST_TEST((*f == ConfigValue(3.0)));
  BOOST_TEST(!config::internal::coerce_type(OptionType::Float, "3").has_value());
  BOOST_TEST(!config::internal::coerce_type(OptionType::Int, 1e300).has_value());
  BOOST_TEST(!config::internal::coerce_type(OptionType::Int, 9223372036854775808.0).has_value());
  auto p = config::internal::parse_text(OptionType::Float, " 0.25 ");
  BOOST_REQUIRE(p.has_value());
  BOOST_TEST((*p == ConfigValue(0.25)));
  BOOST_TEST(!config::internal::parse_text(OptionType::Float, "1.5x").has_value());
}

BOOST_AUTO_TEST_CASE(constraints) {
  std::string msg = error_of([] { config::set("recompile_limit", 0); });
  BOOST_TEST(msg == "config option 'recompile_limit' must be at least 1, but got 0.");
  msg = error_of([] { config::set("accumulated_recompile_limit", -5); });
  BOOST_TEST(contains(msg, "must be at least 1"));
  msg = error_of([] { config::set("cache.redis_port", 70000); });
  BOOST_TEST(msg == "config option 'cache.redis_port' must be between 1 and 65535, but got 70000.");
  msg = error_of([] { config::set("cpu.vector_width", 3); });
  BOOST_TEST(contains(msg, "'cpu.vector_width' must be 0 (the host's), 128, 256 or 512"));
  msg = error_of([] { config::set("cpu.vector_width", 1024); });
  BOOST_TEST(contains(msg, "128, 256 or 512"));
  msg = error_of([] { config::set("cpu.matmul", "mkl"); });
  BOOST_TEST(contains(msg, "'cpu.matmul' must be auto, blas or generated"));
  msg = error_of([] { config::set("cpu.opt_level", 4); });
  BOOST_TEST(msg == "config option 'cpu.opt_level' must be between 0 and 3, but got 4.");
  msg = error_of([] { config::set("cpu.threads", -1); });
  BOOST_TEST(contains(msg, "'cpu.threads' must be 0 or more"));
  msg = error_of([] { config::set("cache.redis_host", ""); });
  BOOST_TEST(contains(msg, "must not be empty"));

  config::set("cpu.vector_width", 256);
  BOOST_TEST(config::get<int64_t>("cpu.vector_width") == 256);
  config::set("cpu.threads", 0);
  config::set("recompile_limit", 1);
  BOOST_TEST(config::get<int64_t>("recompile_limit") == 1);
}

BOOST_AUTO_TEST_CASE(parse_value_uses_env_rules) {
  BOOST_TEST((config::parse_value("verbose", "Yes") == ConfigValue(true)));
  BOOST_TEST((config::parse_value("recompile_limit", " 12 ") == ConfigValue(12)));
  BOOST_TEST((config::parse_value("cache_dir", " a b ") == ConfigValue(" a b ")));
  std::string msg = error_of([] { config::parse_value("recompile_limit", "twelve"); });
  BOOST_TEST(msg ==
             "'twelve' is not a valid Int for config option 'recompile_limit' (expected an "
             "integer such as 8).");
  msg = error_of([] { config::parse_value("recompile_limit", "0"); });
  BOOST_TEST(contains(msg, "must be at least 1"));
}

BOOST_AUTO_TEST_CASE(get_with_wrong_type) {
  std::string msg = error_of([] { (void)config::get<bool>("recompile_limit"); });
  BOOST_TEST(msg ==
             "config option 'recompile_limit' is an Int option; read it with get<int64_t>, not "
             "get<bool>.");
  msg = error_of([] { (void)config::get<std::string>("verbose"); });
  BOOST_TEST(msg ==
             "config option 'verbose' is a Bool option; read it with get<bool>, not "
             "get<std::string>.");
  msg = error_of([] { (void)config::get<double>("cache_dir"); });
  BOOST_TEST(contains(msg, "get<std::string>, not get<double>"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(names, kiln_test::CleanConfig)

BOOST_AUTO_TEST_CASE(unknown_name_suggests_the_nearest) {
  std::string msg = error_of([] { config::set("recompile_limt", 1); });
  BOOST_TEST(msg == "unknown config option 'recompile_limt'; did you mean 'recompile_limit'?");

  // Same error from every entry point.
  BOOST_TEST(error_of([] { (void)config::get<int64_t>("recompile_limt"); }) == msg);
  BOOST_TEST(error_of([] { (void)config::get_value("recompile_limt"); }) == msg);
  BOOST_TEST(error_of([] { config::Patch p({{"recompile_limt", 1}}); }) == msg);
  BOOST_TEST(error_of([] { config::CompileScope s("default", {{"recompile_limt", 1}}); }) == msg);
}

BOOST_AUTO_TEST_CASE(suggestions_are_at_most_three_nearest_first) {
  std::string msg = error_of([] { config::set("max_autotune_gem", true); });
  BOOST_TEST(contains(msg, "did you mean 'max_autotune_gemm'"));  // distance 1 comes first
  BOOST_TEST(std::count(msg.begin(), msg.end(), '\'') <= 2 + 3 * 2);

  msg = error_of([] { config::set("cudagraph", true); });
  BOOST_TEST(contains(msg, "did you mean 'cudagraphs'"));
}

BOOST_AUTO_TEST_CASE(missing_prefix_finds_dotted_name) {
  std::string msg = error_of([] { (void)config::get_value("max_fusion_size"); });
  BOOST_TEST(contains(msg, "'fusion.max_fusion_size'"));
  msg = error_of([] { (void)config::get_value("triton.cudagraphs"); });
  BOOST_TEST(contains(msg, "'cudagraphs'"));
}

BOOST_AUTO_TEST_CASE(every_declared_name_is_found_and_near_misses_are_not) {
  for (const auto& o : config::list_options()) {
    BOOST_TEST_CONTEXT("option " << o.name) {
      BOOST_TEST((config::get_value(o.name).type() == o.type));
      BOOST_CHECK_THROW(config::get_value(o.name + "_"), kiln::Error);
      BOOST_CHECK_THROW(config::get_value(o.name.substr(0, o.name.size() - 1)), kiln::Error);
    }
  }
  BOOST_TEST(contains(error_of([] { (void)config::get_value(""); }), "unknown config option ''"));
}

BOOST_AUTO_TEST_CASE(far_names_get_no_suggestion) {
  std::string msg = error_of([] { (void)config::get_value("zzzzzzzzzzzzzzzzzzzzzzzzzzzz"); });
  BOOST_TEST(msg ==
             "unknown config option 'zzzzzzzzzzzzzzzzzzzzzzzzzzzz'; kiln::config::list_options() "
             "and docs/config.md list the valid names.");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(catalogue)

struct Expected {
  const char* name;
  const char* env;
  OptionType type;
  ConfigValue def;
  bool codegen;
  bool used;
};

BOOST_AUTO_TEST_CASE(list_options_has_every_option_spelled_right) {
  using T = OptionType;
  const Expected expected[] = {
      {"recompile_limit", "KILN_RECOMPILE_LIMIT", T::Int, 8, false, true},
      {"accumulated_recompile_limit", "KILN_ACCUMULATED_RECOMPILE_LIMIT", T::Int, 256, false, true},
      {"fail_on_recompile_limit_hit", "KILN_FAIL_ON_RECOMPILE_LIMIT_HIT", T::Bool, false, false, true},
      {"automatic_dynamic_shapes", "KILN_AUTOMATIC_DYNAMIC_SHAPES", T::Bool, true, false, true},
      {"assume_static_by_default", "KILN_ASSUME_STATIC_BY_DEFAULT", T::Bool, true, false, true},
      {"specialize_scalars", "KILN_SPECIALIZE_SCALARS", T::Bool, true, false, false},
      {"force_disable_caches", "KILN_FORCE_DISABLE_CACHES", T::Bool, false, false, true},
      {"assert_no_compile", "KILN_ASSERT_NO_COMPILE", T::Bool, false, false, true},
      {"cache_dir", "KILN_CACHE_DIR", T::String, "", false, true},
      {"module_dir", "KILN_MODULE_DIR", T::String, "", false, true},
      {"job_id", "KILN_JOB_ID", T::String, "", false, true},
      {"debug_dir", "KILN_DEBUG_DIR", T::String, "", false, true},
      {"verbose", "KILN_VERBOSE", T::Bool, false, false, true},
      {"suppress_errors", "KILN_SUPPRESS_ERRORS", T::Bool, false, false, true},
      {"capture_scalar_outputs", "KILN_CAPTURE_SCALAR_OUTPUTS", T::Bool, false, false, false},
      {"fusion.max_fusion_size", "KILN_FUSION_MAX_FUSION_SIZE", T::Int, 64, true, true},
      {"fusion.epilogue_fusion", "KILN_FUSION_EPILOGUE_FUSION", T::Bool, true, true, true},
      {"fusion.aggressive_fusion", "KILN_FUSION_AGGRESSIVE_FUSION", T::Bool, false, true, true},
      {"fusion.horizontal", "KILN_FUSION_HORIZONTAL", T::Bool, true, true, true},
      {"max_autotune", "KILN_MAX_AUTOTUNE", T::Bool, false, true, true},
      {"max_autotune_pointwise", "KILN_MAX_AUTOTUNE_POINTWISE", T::Bool, false, true, true},
      {"max_autotune_gemm", "KILN_MAX_AUTOTUNE_GEMM", T::Bool, false, true, true},
      {"autotune.cache", "KILN_AUTOTUNE_CACHE", T::Bool, true, false, true},
      {"autotune.remote_cache", "KILN_AUTOTUNE_REMOTE_CACHE", T::Bool, false, false, true},
      {"autotune.num_trials", "KILN_AUTOTUNE_NUM_TRIALS", T::Int, 30, false, true},
      {"early_library_start", "KILN_EARLY_LIBRARY_START", T::Bool, true, false, true},
      {"cudagraphs", "KILN_CUDAGRAPHS", T::Bool, false, true, true},
      {"cudagraph_trees", "KILN_CUDAGRAPH_TREES", T::Bool, true, true, false},
      {"cuda.allow_tf32", "KILN_CUDA_ALLOW_TF32", T::Bool, false, true, true},
      {"cuda.cudnn", "KILN_CUDA_CUDNN", T::Bool, true, true, true},
      {"cuda.channels_last", "KILN_CUDA_CHANNELS_LAST", T::Bool, true, true, true},
      {"cuda.pad_matmuls", "KILN_CUDA_PAD_MATMULS", T::Bool, true, true, true},
      {"cuda.precise_math", "KILN_CUDA_PRECISE_MATH", T::Bool, false, true, true},
      {"cuda.compiler", "KILN_CUDA_COMPILER", T::String, "llvm", true, true},
      {"cuda.column_loads_ahead", "KILN_CUDA_COLUMN_LOADS_AHEAD", T::Int, 4, true, true},
      {"vulkan.fuse_gemm_epilogue", "KILN_VULKAN_FUSE_GEMM_EPILOGUE", T::Bool, true, true, true},
      {"vulkan.gemm_blocking", "KILN_VULKAN_GEMM_BLOCKING", T::String, "auto", true, true},
      {"memory_budget_mb", "KILN_MEMORY_BUDGET_MB", T::Int, int64_t{0}, false, true},
      {"keep_buffers", "KILN_KEEP_BUFFERS", T::Bool, false, false, true},
      {"cpu.keep_buffers", "KILN_CPU_KEEP_BUFFERS", T::Bool, false, false, true},
      {"cpu.eager_compile_threshold", "KILN_CPU_EAGER_COMPILE_THRESHOLD", T::Int, 4096, false, true},
      {"cpu.matmul", "KILN_CPU_MATMUL", T::String, "auto", true, true},
      {"cpu.blas", "KILN_CPU_BLAS", T::String, "auto", false, true},
      {"cpu.threads", "KILN_CPU_THREADS", T::Int, 0, true, true},
      {"cpu.vector_width", "KILN_CPU_VECTOR_WIDTH", T::Int, 0, true, true},
      {"cpu.opt_level", "KILN_CPU_OPT_LEVEL", T::Int, 3, true, true},
      {"cache.plan_cache", "KILN_CACHE_PLAN_CACHE", T::Bool, true, false, true},
      {"cache.remote", "KILN_REMOTE_CACHE", T::Bool, false, false, true},
      {"cache.redis_host", "KILN_REDIS_HOST", T::String, "localhost", false, true},
      {"cache.redis_port", "KILN_REDIS_PORT", T::Int, 6379, false, true},
      {"cache.redis_password", "KILN_REDIS_PASSWORD", T::String, "", false, true},
      {"cache.redis_timeout_ms", "KILN_REDIS_TIMEOUT_MS", T::Int, 200, false, true},
      {"cache.size_limit_mb", "KILN_CACHE_SIZE_LIMIT_MB", T::Int, 1024, false, true},
      {"cache_key_tag", "KILN_CACHE_KEY_TAG", T::String, "", true, true},
      {"emulate_precision_casts", "KILN_EMULATE_PRECISION_CASTS", T::Bool, false, true, true},
      {"fallback_random", "KILN_FALLBACK_RANDOM", T::Bool, false, true, false},
  };
  const auto options = config::list_options();
  BOOST_TEST(options.size() == std::size(expected));
  for (const Expected& e : expected) {
    BOOST_TEST_CONTEXT("option " << e.name) {
      auto it = std::find_if(options.begin(), options.end(),
                             [&](const auto& o) { return o.name == e.name; });
      BOOST_REQUIRE(it != options.end());
      BOOST_TEST(it->env_var == e.env);
      BOOST_TEST((it->type == e.type));
      BOOST_TEST((it->default_value == e.def));
      BOOST_TEST((it->default_value.type() == it->type));
      BOOST_TEST(it->affects_codegen == e.codegen);
      BOOST_TEST(it->used == e.used);
      BOOST_TEST(!it->doc.empty());
      // Options not read yet say so in their doc line.
      BOOST_TEST(contains(it->doc, "Not yet used") == !e.used);
      BOOST_TEST((config::option_info(e.name).env_var == e.env));
    }
  }
  std::set<std::string> envs, names;
  for (const auto& o : options) {
    envs.insert(o.env_var);
    names.insert(o.name);
  }
  BOOST_TEST(envs.size() == options.size());  // no two options share a variable
  BOOST_TEST(names.size() == options.size());
}

BOOST_AUTO_TEST_CASE(defaults_are_what_get_returns) {
  kiln_test::CleanConfig clean;
  for (const auto& o : config::list_options()) {
    BOOST_TEST_CONTEXT("option " << o.name) {
      BOOST_TEST((config::get_value(o.name) == o.default_value));
      BOOST_TEST((config::layer_of(o.name) == config::Layer::Default));
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(modes)

BOOST_AUTO_TEST_CASE(mode_contents) {
  using Map = std::map<std::string, ConfigValue>;
  BOOST_TEST((config::mode_options("default") == Map{}));
  BOOST_TEST((config::mode_options("") == Map{}));
  BOOST_TEST((config::mode_options("reduce-overhead") == Map{{"cudagraphs", true}, {"keep_buffers", true}}));
  BOOST_TEST((config::mode_options("max-autotune") == Map{{"max_autotune", true},
                                                          {"max_autotune_pointwise", true},
                                                          {"max_autotune_gemm", true},
                                                          {"cudagraphs", true},
                                                          {"keep_buffers", true}}));
  BOOST_TEST((config::mode_options("max-autotune-no-cudagraphs") ==
              Map{{"max_autotune", true},
                  {"max_autotune_pointwise", true},
                  {"max_autotune_gemm", true}}));
  BOOST_TEST((config::list_modes() == std::vector<std::string>{"default", "reduce-overhead",
                                                                 "max-autotune",
                                                                 "max-autotune-no-cudagraphs"}));
}

BOOST_AUTO_TEST_CASE(unknown_mode_lists_valid_modes) {
  const std::string expected =
      "unknown compile mode 'fast'; valid modes are 'default', 'reduce-overhead', "
      "'max-autotune' and 'max-autotune-no-cudagraphs'.";
  BOOST_TEST(error_of([] { (void)config::mode_options("fast"); }) == expected);
  BOOST_TEST(error_of([] { config::CompileScope s("fast", {}); }) == expected);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(change_tracking, kiln_test::CleanConfig)

BOOST_AUTO_TEST_CASE(generation_bumps_on_every_layer_change) {
  uint64_t g = config::generation();
  (void)config::get_value("recompile_limit");
  (void)config::codegen_hash();
  BOOST_TEST(config::generation() == g);  // reads change nothing

  config::set("recompile_limit", 3);
  BOOST_TEST(config::generation() > g);
  g = config::generation();
  {
    config::Patch p({{"verbose", true}});
    BOOST_TEST(config::generation() > g);
    g = config::generation();
  }
  BOOST_TEST(config::generation() > g);
  g = config::generation();
  {
    config::CompileScope s("max-autotune", {});
    BOOST_TEST(config::generation() > g);
    g = config::generation();
  }
  BOOST_TEST(config::generation() > g);
  g = config::generation();
  config::reset_for_testing();
  BOOST_TEST(config::generation() > g);
  g = config::generation();

  // A rejected change is no change.
  BOOST_CHECK_THROW(config::set("recompile_limit", 0), kiln::Error);
  BOOST_CHECK_THROW(config::Patch({{"recompile_limit", 2}, {"verbose", 1}}), kiln::Error);
  BOOST_TEST(config::generation() == g);
}

BOOST_AUTO_TEST_CASE(codegen_hash_tracks_codegen_options_only) {
  const uint64_t h0 = config::codegen_hash();
  BOOST_TEST(config::codegen_hash() == h0);  // stable

  config::set("recompile_limit", 2);
  config::set("verbose", true);
  config::set("cache_dir", "/elsewhere");
  BOOST_TEST(config::codegen_hash() == h0);

  config::set("fusion.max_fusion_size", 32);
  const uint64_t h1 = config::codegen_hash();
  BOOST_TEST(h1 != h0);
  {
    config::Patch p({{"cuda.allow_tf32", true}});
    BOOST_TEST(config::codegen_hash() != h1);
    BOOST_TEST(config::codegen_hash() != h0);
  }
  BOOST_TEST(config::codegen_hash() == h1);  // back after the patch
  {
    config::Patch p({{"cache_key_tag", "a"}});
    uint64_t ha = config::codegen_hash();
    config::Patch q({{"cache_key_tag", "b"}});
    BOOST_TEST(config::codegen_hash() != ha);
  }
  {
    config::CompileScope s("max-autotune-no-cudagraphs", {});
    BOOST_TEST(config::codegen_hash() != h1);
  }
  config::set("fusion.max_fusion_size", 64);  // the default again, now from the set layer
  BOOST_TEST(config::codegen_hash() == h0);   // values, not layers, are hashed
}

BOOST_AUTO_TEST_CASE(codegen_values_sorted_and_effective) {
  config::Patch p({{"cpu.threads", 4}});
  auto values = config::codegen_values();
  BOOST_TEST(std::is_sorted(values.begin(), values.end(),
                            [](const auto& a, const auto& b) { return a.first < b.first; }));
  size_t expected_count = 0;
  for (const auto& o : config::list_options()) expected_count += o.affects_codegen;
  BOOST_TEST(values.size() == expected_count);
  auto it = std::find_if(values.begin(), values.end(),
                         [](const auto& kv) { return kv.first == "cpu.threads"; });
  BOOST_REQUIRE(it != values.end());
  BOOST_TEST((it->second == ConfigValue(4)));
  BOOST_TEST(std::none_of(values.begin(), values.end(),
                          [](const auto& kv) { return kv.first == "recompile_limit"; }));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(threads, kiln_test::CleanConfig)

BOOST_AUTO_TEST_CASE(patch_and_scope_are_per_thread_set_is_global) {
  config::Patch p({{"recompile_limit", 2}});
  config::CompileScope s("reduce-overhead", {});
  int64_t other_limit = -1;
  bool other_cudagraphs = true;
  std::thread([&] {
    other_limit = config::get<int64_t>("recompile_limit");
    other_cudagraphs = config::get<bool>("cudagraphs");
  }).join();
  BOOST_TEST(other_limit == 8);
  BOOST_TEST(other_cudagraphs == false);
  BOOST_TEST(config::get<int64_t>("recompile_limit") == 2);
  BOOST_TEST(config::get<bool>("cudagraphs") == true);

  std::thread([] { config::set("job_id", "from-thread"); }).join();
  BOOST_TEST(config::get<std::string>("job_id") == "from-thread");
}

BOOST_AUTO_TEST_CASE(concurrent_readers_and_a_writer) {
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      while (!stop.load()) {
        int64_t v = config::get<int64_t>("fusion.max_fusion_size");
        if (v != 64 && v != 16) ++bad;
        (void)config::codegen_hash();
      }
    });
  }
  for (int i = 0; i < 2000; ++i) config::set("fusion.max_fusion_size", i % 2 ? 16 : 64);
  stop = true;
  for (auto& r : readers) r.join();
  BOOST_TEST(bad.load() == 0);
  config::set("fusion.max_fusion_size", 16);
  uint64_t h16 = config::codegen_hash();
  config::set("fusion.max_fusion_size", 64);
  BOOST_TEST(config::codegen_hash() != h16);
}

BOOST_AUTO_TEST_SUITE_END()
