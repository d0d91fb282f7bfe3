// The environment layer: KILN_<NAME> variables, parsing by type, bad values, laziness.
#include "fixture.h"

using kiln::ConfigValue;
using kiln::config::Layer;
namespace config = kiln::config;
using kiln_test::contains;
using kiln_test::error_of;

namespace {
void set_env(const char* name, const char* value) {
  ::setenv(name, value, 1);
  config::reset_for_testing();
}
}  // namespace

BOOST_FIXTURE_TEST_SUITE(environment, kiln_test::CleanConfig)

BOOST_AUTO_TEST_CASE(int_and_string_values) {
  set_env("KILN_RECOMPILE_LIMIT", "12");
  BOOST_TEST(config::get<int64_t>("recompile_limit") == 12);
  BOOST_TEST((config::layer_of("recompile_limit") == Layer::Env));
  set_env("KILN_CACHE_DIR", "/tmp/kiln cache");
  BOOST_TEST(config::get<std::string>("cache_dir") == "/tmp/kiln cache");
  set_env("KILN_ACCUMULATED_RECOMPILE_LIMIT", " +300 ");
  BOOST_TEST(config::get<int64_t>("accumulated_recompile_limit") == 300);
}

BOOST_AUTO_TEST_CASE(dotted_names_map_to_underscores) {
  set_env("KILN_FUSION_MAX_FUSION_SIZE", "32");
  BOOST_TEST(config::get<int64_t>("fusion.max_fusion_size") == 32);
  set_env("KILN_REDIS_HOST", "redis.internal");
  BOOST_TEST(config::get<std::string>("cache.redis_host") == "redis.internal");
  set_env("KILN_CUDA_ALLOW_TF32", "on");
  BOOST_TEST(config::get<bool>("cuda.allow_tf32") == true);
}

BOOST_AUTO_TEST_CASE(bool_forms) {
  for (const char* text : {"1", "true", "TRUE", "True", "yes", "YES", "on", "On", " true "}) {
    BOOST_TEST_CONTEXT("KILN_VERBOSE=" << text) {
      set_env("KILN_VERBOSE", text);
      BOOST_TEST(config::get<bool>("verbose") == true);
    }
  }
  for (const char* text : {"0", "false", "FALSE", "no", "No", "off", "OFF"}) {
    BOOST_TEST_CONTEXT("KILN_AUTOMATIC_DYNAMIC_SHAPES=" << text) {
      set_env("KILN_AUTOMATIC_DYNAMIC_SHAPES", text);
      BOOST_TEST(config::get<bool>("automatic_dynamic_shapes") == false);
      BOOST_TEST((config::layer_of("automatic_dynamic_shapes") == Layer::Env));
    }
  }
}

BOOST_AUTO_TEST_CASE(bad_bool_names_variable_value_and_type) {
  set_env("KILN_VERBOSE", "maybe");
  const std::string expected =
      "environment variable KILN_VERBOSE='maybe' is not a valid Bool for config option "
      "'verbose' (expected 1/0, true/false, yes/no or on/off).";
  BOOST_TEST(error_of([] { (void)config::get<bool>("verbose"); }) == expected);
  BOOST_TEST(error_of([] { (void)config::get_value("verbose"); }) == expected);
  // Other options still read; a higher layer makes the bad value irrelevant.
  BOOST_TEST(config::get<int64_t>("recompile_limit") == 8);
  config::set("verbose", true);
  BOOST_TEST(config::get<bool>("verbose") == true);
}

BOOST_AUTO_TEST_CASE(bad_int_and_broken_constraint) {
  set_env("KILN_RECOMPILE_LIMIT", "lots");
  BOOST_TEST(error_of([] { (void)config::get<int64_t>("recompile_limit"); }) ==
             "environment variable KILN_RECOMPILE_LIMIT='lots' is not a valid Int for config "
             "option 'recompile_limit' (expected an integer such as 8).");
  set_env("KILN_RECOMPILE_LIMIT", "8.5");
  BOOST_TEST(contains(error_of([] { (void)config::get<int64_t>("recompile_limit"); }),
                      "KILN_RECOMPILE_LIMIT='8.5' is not a valid Int"));
  set_env("KILN_RECOMPILE_LIMIT", "0");
  BOOST_TEST(error_of([] { (void)config::get<int64_t>("recompile_limit"); }) ==
             "environment variable KILN_RECOMPILE_LIMIT='0' is invalid for config option "
             "'recompile_limit': it must be at least 1.");
}

BOOST_AUTO_TEST_CASE(bad_codegen_env_fails_the_hash) {
  set_env("KILN_CPU_THREADS", "many");
  BOOST_TEST(contains(error_of([] { (void)config::codegen_hash(); }), "KILN_CPU_THREADS='many'"));
  config::Patch p({{"cpu.threads", 2}});
  BOOST_CHECK_NO_THROW(config::codegen_hash());
}

BOOST_AUTO_TEST_CASE(env_is_read_once_until_reset) {
  BOOST_TEST(config::get<int64_t>("recompile_limit") == 8);
  ::setenv("KILN_RECOMPILE_LIMIT", "20", 1);
  BOOST_TEST(config::get<int64_t>("recompile_limit") == 8);  // not re-read on every get
  config::reset_for_testing();
  BOOST_TEST(config::get<int64_t>("recompile_limit") == 20);
}

BOOST_AUTO_TEST_CASE(set_beats_env_and_reset_clears_set) {
  set_env("KILN_JOB_ID", "from-env");
  config::set("job_id", "from-set");
  BOOST_TEST(config::get<std::string>("job_id") == "from-set");
  config::reset_for_testing();
  BOOST_TEST(config::get<std::string>("job_id") == "from-env");
}

BOOST_AUTO_TEST_CASE(env_changes_the_codegen_hash) {
  uint64_t h0 = config::codegen_hash();
  set_env("KILN_FUSION_HORIZONTAL", "0");
  BOOST_TEST(config::codegen_hash() != h0);
  set_env("KILN_VERBOSE", "1");
  ::unsetenv("KILN_FUSION_HORIZONTAL");
  config::reset_for_testing();
  BOOST_TEST(config::codegen_hash() == h0);
}

BOOST_AUTO_TEST_SUITE_END()
