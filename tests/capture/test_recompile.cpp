// Recompile limits (per function and process-wide), kiln::reset(), and the stances.
#include "helpers.h"

using namespace kiln;
using namespace capture_test;

BOOST_FIXTURE_TEST_SUITE(recompile, Clean)

BOOST_AUTO_TEST_CASE(recompile_limit_runs_eagerly_with_one_warning) {
  config::Patch p({{"recompile_limit", 2}});
  LogCapture log;
  auto f = kiln::compile([](const Tensor& x) { return x * 2 + 1; }, CompileOptions{.dynamic = false});
  check_values(f(iota_f32(4)), mapped(4, [](double v) { return 2 * v + 1; }));
  check_values(f(iota_f32(8)), mapped(8, [](double v) { return 2 * v + 1; }));
  BOOST_TEST(f.stats().compiles == 2);
  BOOST_TEST(f.stats().eager_calls == 0);
  BOOST_TEST(log.str().empty(), log.str());

  // The third shape is past the limit: eager, still correct.
  check_values(f(iota_f32(16)), mapped(16, [](double v) { return 2 * v + 1; }));
  CompileStats s = f.stats();
  BOOST_TEST(s.compiles == 2);
  BOOST_TEST(s.recompiles == 1);
  BOOST_TEST(s.eager_calls == 1);
  BOOST_TEST(s.guard_failures == 2);
  BOOST_TEST(count_of(log.str(), "[kiln warning]") == 1u, log.str());
  BOOST_TEST(contains(log.str(), "recompile_limit (2)"), log.str());
  BOOST_TEST(contains(log.str(), "size mismatch at dim 0"), log.str());

  // More misses: eager again, no second warning; known shapes still hit.
  check_values(f(iota_f32(32)), mapped(32, [](double v) { return 2 * v + 1; }));
  check_values(f(iota_f32(4)), mapped(4, [](double v) { return 2 * v + 1; }));
  s = f.stats();
  BOOST_TEST(s.compiles == 2);
  BOOST_TEST(s.eager_calls == 2);
  BOOST_TEST(s.cache_hits == 1);
  BOOST_TEST(count_of(log.str(), "[kiln warning]") == 1u, log.str());
}

BOOST_AUTO_TEST_CASE(recompile_limit_default_is_8) {
  auto f = kiln::compile([](const Tensor& x) { return x + 1; }, CompileOptions{.dynamic = false});
  LogCapture log;
  for (int64_t n = 1; n <= 10; ++n) check_values(sum(f(iota_f32(n))), {static_cast<double>(n * (n + 1) / 2 + n)});
  BOOST_TEST(f.stats().compiles == 8);
  BOOST_TEST(f.stats().eager_calls == 2);
  BOOST_TEST(count_of(log.str(), "[kiln warning]") == 1u, log.str());
}

BOOST_AUTO_TEST_CASE(fail_on_recompile_limit_hit_throws) {
  config::Patch p({{"recompile_limit", 2}, {"fail_on_recompile_limit_hit", true}});
  auto f = kiln::compile([](const Tensor& x) { return x * 2; }, CompileOptions{.dynamic = false});
  f(iota_f32(4));
  f(iota_f32(8));
  const std::string msg = error_of([&] { f(iota_f32(16)); });
  BOOST_TEST(contains(msg, "recompile_limit (2)"), msg);
  BOOST_TEST(contains(msg, "size mismatch at dim 0: expected 8, got 16"), msg);
  BOOST_TEST(f.stats().compiles == 2);
  BOOST_TEST(f.stats().eager_calls == 0);
}

// The process-wide limit counts compiles of every function together.
BOOST_AUTO_TEST_CASE(accumulated_recompile_limit_across_functions) {
  config::Patch p({{"accumulated_recompile_limit", 3}});
  LogCapture log;
  auto f = kiln::compile([](const Tensor& x) { return x + 1; }, CompileOptions{.dynamic = false});
  auto g = kiln::compile([](const Tensor& x) { return x - 1; }, CompileOptions{.dynamic = false});
  f(iota_f32(2));
  g(iota_f32(2));
  f(iota_f32(3));  // third compile in the process
  BOOST_TEST(accumulated_compiles() == 3);
  BOOST_TEST(f.stats().compiles == 2);
  // g has one entry only, far below recompile_limit, but the process is at its limit.
  check_values(g(iota_f32(4)), {0, 1, 2, 3});
  BOOST_TEST(g.stats().compiles == 1);
  BOOST_TEST(g.stats().eager_calls == 1);
  BOOST_TEST(contains(log.str(), "accumulated_recompile_limit (3)"), log.str());
  BOOST_TEST(accumulated_compiles() == 3);

  {
    config::Patch fail({{"fail_on_recompile_limit_hit", true}});
    const std::string msg = error_of([&] { f(iota_f32(5)); });
    BOOST_TEST(contains(msg, "accumulated_recompile_limit (3)"), msg);
  }

  // reset() forgets every function's entries and the process-wide count.
  kiln::reset();
  BOOST_TEST(accumulated_compiles() == 0);
  BOOST_TEST(f.stats().compiles == 0);
  BOOST_TEST(g.stats().compiles == 0);
  BOOST_TEST(g.stats().eager_calls == 0);
  check_values(g(iota_f32(4)), {0, 1, 2, 3});
  BOOST_TEST(g.stats().compiles == 1);
  BOOST_TEST(g.stats().eager_calls == 0);
  BOOST_TEST(accumulated_compiles() == 1);
}

BOOST_AUTO_TEST_CASE(reset_forgets_entries) {
  auto f = kiln::compile([](const Tensor& x) { return x * 5; });
  f(iota_f32(3));
  f(iota_f32(3));
  BOOST_TEST(f.stats().cache_hits == 1);
  kiln::reset();
  const CompileStats s = f.stats();
  BOOST_TEST(s.compiles == 0);
  BOOST_TEST(s.cache_hits == 0);
  BOOST_TEST(s.recompile_reasons.empty());
  check_values(f(iota_f32(3)), {5, 10, 15});
  BOOST_TEST(f.stats().compiles == 1);
  BOOST_TEST(f.stats().recompiles == 0);  // a fresh first compile, not a recompile
  // The per-function reset as well.
  f.reset();
  BOOST_TEST(f.stats().compiles == 0);
  f(iota_f32(3));
  BOOST_TEST(f.stats().compiles == 1);
}

// ---- stances ---------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(force_eager) {
  int traced = 0;
  auto f = kiln::compile([&traced](const Tensor& x) {
    traced += kiln::is_compiling() ? 1 : 0;
    return x * 2;
  });
  set_stance(Stance::force_eager);
  BOOST_TEST(stance() == Stance::force_eager);
  check_values(f(iota_f32(3)), {2, 4, 6});
  check_values(f(iota_f32(3)), {2, 4, 6});
  BOOST_TEST(traced == 0);  // run eagerly: nothing was traced
  CompileStats s = f.stats();
  BOOST_TEST(s.compiles == 0);
  BOOST_TEST(s.eager_calls == 2);
  set_stance(Stance::default_);
  check_values(f(iota_f32(3)), {2, 4, 6});
  s = f.stats();
  BOOST_TEST(s.compiles == 1);
  BOOST_TEST(s.eager_calls == 2);
  // force_eager also bypasses existing entries.
  set_stance(Stance::force_eager);
  f(iota_f32(3));
  BOOST_TEST(f.stats().cache_hits == 0);
  BOOST_TEST(f.stats().eager_calls == 3);
  set_stance(Stance::default_);
}

BOOST_AUTO_TEST_CASE(eager_on_recompile) {
  auto f = kiln::compile([](const Tensor& x) { return x + 10; });
  set_stance(Stance::eager_on_recompile);
  check_values(f(iota_f32(2)), {11, 12});  // a first compile is allowed
  BOOST_TEST(f.stats().compiles == 1);
  check_values(f(iota_f32(3)), {11, 12, 13});
  BOOST_TEST(f.stats().compiles == 1);
  BOOST_TEST(f.stats().eager_calls == 1);
  check_values(f(iota_f32(2)), {11, 12});
  BOOST_TEST(f.stats().cache_hits == 1);
  set_stance(Stance::default_);
  check_values(f(iota_f32(3)), {11, 12, 13});
  BOOST_TEST(f.stats().compiles == 2);
}

BOOST_AUTO_TEST_CASE(fail_on_recompile) {
  auto f = kiln::compile([](const Tensor& x) { return x * x; }, CompileOptions{.arg_names = {"x"}});
  set_stance(Stance::fail_on_recompile);
  check_values(f(iota_f32(3)), {1, 4, 9});  // the first compile is allowed
  check_values(f(iota_f32(3)), {1, 4, 9});
  const std::string msg = error_of([&] { f(iota_f32(4)); });
  BOOST_TEST(contains(msg, "fail_on_recompile"), msg);
  BOOST_TEST(contains(msg, "input 0 (x): size mismatch at dim 0: expected 3, got 4"), msg);
  BOOST_TEST(f.stats().compiles == 1);
  set_stance(Stance::default_);
  check_values(f(iota_f32(4)), {1, 4, 9, 16});
  BOOST_TEST(f.stats().compiles == 2);
}

BOOST_AUTO_TEST_CASE(scoped_stance_restores) {
  auto f = kiln::compile([](const Tensor& x) { return x - 1; });
  BOOST_TEST(stance() == Stance::default_);
  {
    ScopedStance outer(Stance::force_eager);
    BOOST_TEST(stance() == Stance::force_eager);
    check_values(f(iota_f32(2)), {0, 1});
    BOOST_TEST(f.stats().compiles == 0);
    {
      ScopedStance inner(Stance::fail_on_recompile);
      BOOST_TEST(stance() == Stance::fail_on_recompile);
    }
    BOOST_TEST(stance() == Stance::force_eager);
  }
  BOOST_TEST(stance() == Stance::default_);
  check_values(f(iota_f32(2)), {0, 1});
  BOOST_TEST(f.stats().compiles == 1);
  // A scoped stance wins over the process-wide one and gives it back.
  set_stance(Stance::eager_on_recompile);
  {
    ScopedStance s(Stance::default_);
    BOOST_TEST(stance() == Stance::default_);
  }
  BOOST_TEST(stance() == Stance::eager_on_recompile);
  set_stance(Stance::default_);
  BOOST_TEST(stance_name(Stance::force_eager) == "force_eager");
  BOOST_TEST(stance_name(Stance::eager_on_recompile) == "eager_on_recompile");
  BOOST_TEST(stance_name(Stance::fail_on_recompile) == "fail_on_recompile");
  BOOST_TEST(stance_name(Stance::default_) == "default");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(verbose_lists_every_entry_reason) {
  kiln::reset();
  kiln::config::Patch p({{"verbose", true}, {"automatic_dynamic_shapes", false}});
  auto f = kiln::compile([](const Tensor& x) { return x * 2; }, CompileOptions{.arg_names = {"x"}});
  f(ones({2}));
  f(ones({3}));
  f(ones({4}));
  const auto reasons = f.stats().recompile_reasons;
  BOOST_REQUIRE_EQUAL(reasons.size(), 2u);
  BOOST_TEST(reasons[1] == "input 0 (x): size mismatch at dim 0: expected 3, got 4; entry 1: input 0 (x): size "
                           "mismatch at dim 0: expected 2, got 4");
}
