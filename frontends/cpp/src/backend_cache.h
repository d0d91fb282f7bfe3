// Internal to frontends/cpp: what the cpu, cuda and vulkan paths of the "kiln" backend share
// around sdk/cache's plan cache (docs/cache.md): the remote store plugged in, one lookup's
// counts reported to the compiled function, and assert_no_compile.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "kiln/graph/graph.h"
#include "kiln/plan/plan.h"

namespace kiln::cache {
struct CacheStats;
struct Entry;
}

namespace kiln::detail {

// Plugs the Redis remote store into sdk/cache (once; builds with KILN_WITH_REDIS): before the
// first lookup of a process, including the dynamic-shape profile read before the first trace.
// A build without Redis warns once when cache.remote is on.
void install_remote_cache();
// One lookup's per-layer counts into the compiled function's stats().cache.
void note_cache_stats(const cache::CacheStats& s);
// assert_no_compile: a kiln::Error naming the graph, its pipeline and its cache key ("" when
// caches are off) instead of compiling it.
void check_may_compile(const Graph& g, std::string_view pipeline, const std::string& key);
// A plan as the cache entries of every target keep it: its JSON without the module text, which
// goes into blobs of its own (plan::take_plan_text), so that a hit takes the bulk of a plan as
// plain bytes instead of unescaping it from JSON (~0.04 ms of a process's first cpu hit).
// take_plan parses e.plan and moves those blobs back into the plan and out of e.blobs, so that
// the target's own blobs remain.
void put_plan(cache::Entry& e, plan::KernelPlan p);
plan::KernelPlan take_plan(cache::Entry& e);
// Milliseconds since `t` (the plan caches' KILN_LOGS=cache timings).
inline double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace kiln::detail
