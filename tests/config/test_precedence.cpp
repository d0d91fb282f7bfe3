// The six layers and their order: patch > options > mode > set > env > default.
#include "fixture.h"

#include <memory>
#include <optional>
#include <stdexcept>

using kiln::ConfigValue;
using kiln::config::Layer;
namespace config = kiln::config;
using kiln_test::error_of;

namespace {

const Layer kAllLayers[] = {Layer::Env, Layer::Set, Layer::Mode, Layer::Options, Layer::Patch};

// Holds the layers that set "cudagraphs" (the one option a mode preset sets on its own) to
// chosen values. Mode can only set it to true ("reduce-overhead").
struct Stack {
  std::optional<config::CompileScope> scope;
  std::optional<config::Patch> patch;

  Stack(const std::map<Layer, bool>& values) {
    if (auto it = values.find(Layer::Env); it != values.end()) {
      ::setenv("KILN_CUDAGRAPHS", it->second ? "1" : "0", 1);
      config::reset_for_testing();
    }
    if (auto it = values.find(Layer::Set); it != values.end()) config::set("cudagraphs", it->second);
    bool has_mode = values.count(Layer::Mode) > 0;
    std::map<std::string, ConfigValue> options;
    if (auto it = values.find(Layer::Options); it != values.end())
      options["cudagraphs"] = it->second;
    if (has_mode || !options.empty()) scope.emplace(has_mode ? "reduce-overhead" : "default", options);
    if (auto it = values.find(Layer::Patch); it != values.end())
      patch.emplace(std::map<std::string, ConfigValue>{{"cudagraphs", it->second}});
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(precedence, kiln_test::CleanConfig)

BOOST_AUTO_TEST_CASE(each_layer_alone) {
  BOOST_TEST(config::get<bool>("cudagraphs") == false);
  BOOST_TEST((config::layer_of("cudagraphs") == Layer::Default));
  for (Layer layer : kAllLayers) {
    BOOST_TEST_CONTEXT("layer " << config::layer_name(layer)) {
      kiln_test::CleanConfig clean;
      Stack stack({{layer, true}});
      BOOST_TEST(config::get<bool>("cudagraphs") == true);
      BOOST_TEST((config::layer_of("cudagraphs") == layer));
    }
  }
}

BOOST_AUTO_TEST_CASE(every_pair_higher_wins) {
  // Layers are listed lowest first, so kAllLayers[j] outranks kAllLayers[i] when j > i; the
  // default is the sixth layer and loses to each (each_layer_alone).
  int pairs = 0;
  for (size_t i = 0; i < std::size(kAllLayers); ++i) {
    for (size_t j = i + 1; j < std::size(kAllLayers); ++j) {
      Layer low = kAllLayers[i], high = kAllLayers[j];
      BOOST_TEST_CONTEXT(config::layer_name(high) << " over " << config::layer_name(low)) {
        kiln_test::CleanConfig clean;
        // The two layers disagree; mode can only say true, so its partner says false.
        bool high_value = high == Layer::Mode;
        bool low_value = !high_value;
        Stack stack({{low, low_value}, {high, high_value}});
        BOOST_TEST(config::get<bool>("cudagraphs") == high_value);
        BOOST_TEST((config::layer_of("cudagraphs") == high));
        ++pairs;
      }
    }
  }
  BOOST_TEST(pairs == 10);
}

BOOST_AUTO_TEST_CASE(peel_layers_off_one_at_a_time) {
  // An Int option through every layer but mode (no mode sets one).
  ::setenv("KILN_RECOMPILE_LIMIT", "2", 1);
  config::reset_for_testing();
  config::set("recompile_limit", 3);
  auto scope = std::make_unique<config::CompileScope>(
      "max-autotune", std::map<std::string, ConfigValue>{{"recompile_limit", 5}});
  auto patch = std::make_unique<config::Patch>(std::map<std::string, ConfigValue>{{"recompile_limit", 6}});
  BOOST_TEST(config::get<int64_t>("recompile_limit") == 6);
  patch.reset();
  BOOST_TEST(config::get<int64_t>("recompile_limit") == 5);
  BOOST_TEST(config::get<bool>("max_autotune") == true);  // mode still applies
  scope.reset();
  BOOST_TEST(config::get<int64_t>("recompile_limit") == 3);
  BOOST_TEST(config::get<bool>("max_autotune") == false);
  ::unsetenv("KILN_RECOMPILE_LIMIT");
  config::reset_for_testing();  // clears set, re-reads env
  BOOST_TEST(config::get<int64_t>("recompile_limit") == 8);
  ::setenv("KILN_RECOMPILE_LIMIT", "2", 1);
  config::reset_for_testing();
  BOOST_TEST(config::get<int64_t>("recompile_limit") == 2);
}

BOOST_AUTO_TEST_CASE(patches_nest_innermost_first) {
  config::set("recompile_limit", 3);
  {
    config::Patch outer({{"recompile_limit", 4}, {"verbose", true}});
    BOOST_TEST(config::get<int64_t>("recompile_limit") == 4);
    {
      config::Patch inner({{"recompile_limit", 5}});
      BOOST_TEST(config::get<int64_t>("recompile_limit") == 5);
      BOOST_TEST(config::get<bool>("verbose") == true);  // from outer, untouched by inner
    }
    BOOST_TEST(config::get<int64_t>("recompile_limit") == 4);
  }
  BOOST_TEST(config::get<int64_t>("recompile_limit") == 3);
  BOOST_TEST(config::get<bool>("verbose") == false);
}

BOOST_AUTO_TEST_CASE(patch_restores_on_exception) {
  try {
    config::Patch p({{"recompile_limit", 1}});
    BOOST_TEST(config::get<int64_t>("recompile_limit") == 1);
    throw std::runtime_error("boom");
  } catch (const std::runtime_error&) {
  }
  BOOST_TEST(config::get<int64_t>("recompile_limit") == 8);
  BOOST_TEST((config::layer_of("recompile_limit") == Layer::Default));
}

BOOST_AUTO_TEST_CASE(invalid_patch_changes_nothing) {
  std::string msg = error_of([] { config::Patch p({{"recompile_limit", 1}, {"verbose", "yes"}}); });
  BOOST_TEST(msg == "config option 'verbose' expects a Bool, but got the String \"yes\".");
  BOOST_TEST(config::get<int64_t>("recompile_limit") == 8);
}

BOOST_AUTO_TEST_CASE(patches_destroyed_out_of_order) {
  auto a = std::make_unique<config::Patch>(std::map<std::string, ConfigValue>{{"recompile_limit", 2}});
  auto b = std::make_unique<config::Patch>(std::map<std::string, ConfigValue>{{"job_id", "b"}});
  a.reset();  // not the innermost
  BOOST_TEST(config::get<int64_t>("recompile_limit") == 8);
  BOOST_TEST(config::get<std::string>("job_id") == "b");
  b.reset();
  BOOST_TEST(config::get<std::string>("job_id") == "");
}

BOOST_AUTO_TEST_CASE(patch_outside_a_scope_still_beats_its_options) {
  config::Patch p({{"recompile_limit", 7}});
  config::CompileScope s("default", {{"recompile_limit", 5}});
  BOOST_TEST(config::get<int64_t>("recompile_limit") == 7);
  BOOST_TEST((config::layer_of("recompile_limit") == Layer::Patch));
}

BOOST_AUTO_TEST_CASE(options_beat_their_own_mode) {
  config::CompileScope s("max-autotune", {{"cudagraphs", false}});
  BOOST_TEST(config::get<bool>("cudagraphs") == false);
  BOOST_TEST((config::layer_of("cudagraphs") == Layer::Options));
  BOOST_TEST(config::get<bool>("max_autotune_gemm") == true);
  BOOST_TEST((config::layer_of("max_autotune_gemm") == Layer::Mode));
}

BOOST_AUTO_TEST_CASE(only_the_innermost_scope_applies) {
  config::CompileScope outer("max-autotune", {{"recompile_limit", 3}});
  BOOST_TEST(config::get<bool>("max_autotune") == true);
  {
    config::CompileScope inner("default", {{"job_id", "inner"}});
    BOOST_TEST(config::get<bool>("max_autotune") == false);
    BOOST_TEST(config::get<int64_t>("recompile_limit") == 8);
    BOOST_TEST(config::get<std::string>("job_id") == "inner");
  }
  BOOST_TEST(config::get<bool>("max_autotune") == true);
  BOOST_TEST(config::get<int64_t>("recompile_limit") == 3);
  BOOST_TEST(config::get<std::string>("job_id") == "");
}

BOOST_AUTO_TEST_CASE(scope_validates_options) {
  std::string msg = error_of([] { config::CompileScope s("default", {{"recompile_limit", 0}}); });
  BOOST_TEST(msg == "config option 'recompile_limit' must be at least 1, but got 0.");
  msg = error_of([] { config::CompileScope s("max-autotune", {{"cudagraphs", "no"}}); });
  BOOST_TEST(msg == "config option 'cudagraphs' expects a Bool, but got the String \"no\".");
  BOOST_TEST(config::get<bool>("max_autotune") == false);  // nothing was pushed
}

BOOST_AUTO_TEST_CASE(set_inside_a_patch_shows_after_it) {
  {
    config::Patch p({{"recompile_limit", 2}});
    config::set("recompile_limit", 5);
    BOOST_TEST(config::get<int64_t>("recompile_limit") == 2);
  }
  BOOST_TEST(config::get<int64_t>("recompile_limit") == 5);
}

BOOST_AUTO_TEST_SUITE_END()
