// Internal to frontends/cpp: what the cpu, cuda and vulkan paths of the "kiln" backend share
// around sdk/cache's plan cache (docs/cache.md): the remote store plugged in, one lookup's
// counts reported to the compiled function, and assert_no_compile.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "kiln/graph/graph.h"

namespace kiln::cache {
struct CacheStats;
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
// Milliseconds since `t` (the plan caches' KILN_LOGS=cache timings).
inline double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace kiln::detail
