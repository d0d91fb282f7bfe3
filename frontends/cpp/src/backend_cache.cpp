// The plan caches' hooks the cpu, cuda and vulkan paths of the "kiln" backend share
// (backend_cache.h).
#include "backend_cache.h"

#include <cstdlib>
#include <mutex>
#include <utility>
#include <vector>

#include "kiln/cache/cache.h"
#if KILN_HAVE_REDIS
#include "kiln/cache/redis_store.h"
#endif
#include "kiln/caches.h"
#include "kiln/capture/capture.h"
#include "kiln/config/config.h"
#include "kiln/config/log.h"
#include "kiln/plan/plan_json.h"
#include "kiln/graph/error.h"

namespace kiln::detail {

void install_remote_cache() {
#if KILN_HAVE_REDIS
  static std::once_flag redis_installed;
  std::call_once(redis_installed, [] {
    cache::install_secret_signer();
    cache::install_redis_remote();
  });
#else
  // A secret asks for signed entries, which need native/cache's HMAC: say that it is not used.
  static std::once_flag secret_warned;
  if (const char* secret = std::getenv("KILN_CACHE_SECRET"); secret && *secret)
    std::call_once(secret_warned, [] {
      logs::warn("KILN_CACHE_SECRET is set, but this build of Kiln has no signing (KILN_WITH_REDIS=OFF): cache "
                 "entries on disk are not verified");
    });
  // Asked for a remote cache that this build cannot reach: say so once instead of silently
  // running with the local cache alone.
  static std::once_flag warned;
  if (config::get<bool>("cache.remote"))
    std::call_once(warned, [] {
      logs::warn("cache.remote (KILN_REMOTE_CACHE) is on, but this build of Kiln has no Redis client "
                 "(KILN_WITH_REDIS=OFF): only the local caches are used");
    });
#endif
}

// Reports one lookup's per-layer counts to the function being compiled (compiled.stats().cache).
void note_cache_stats(const cache::CacheStats& s) {
  for (const auto& [layer, l] : s.layers) {
    for (int64_t i = 0; i < l.hits; ++i) ::kiln::note_cache_lookup(layer, true);
    for (int64_t i = 0; i < l.misses; ++i) ::kiln::note_cache_lookup(layer, false);
  }
}

namespace {
std::string graph_name(const Graph& g, std::string_view pipeline) {
  const std::string& fn = ::kiln::compiling_function();
  std::string s = fn.empty() ? "a graph" : "the graph of " + fn;
  return s + " (" + std::string(pipeline) + ", " + std::to_string(g.op_count()) + " ops)";
}
}  // namespace

void check_may_compile(const Graph& g, std::string_view pipeline, const std::string& key) {
  if (!config::get<bool>("assert_no_compile")) return;
  fail("assert_no_compile is set, but ", graph_name(g, pipeline), " would be compiled: no cache holds it",
       key.empty() ? std::string(" (caches are off)") : " (cache key " + key + ")");
}

void put_plan(cache::Entry& e, plan::KernelPlan p) {
  std::vector<std::pair<std::string, std::string>> text = plan::take_plan_text(p);
  e.plan = plan::plan_to_json(p);
  e.blobs.insert(e.blobs.end(), std::make_move_iterator(text.begin()), std::make_move_iterator(text.end()));
}

plan::KernelPlan take_plan(cache::Entry& e) {
  // The kernels' text is put back before the plan is checked (a kernel of fixed signature must
  // have its source: checked before the text was back, every cuda plan with a flash kernel was
  // refused and compiled again).
  return plan::plan_from_json(e.plan, "cache entry " + e.key + ": plan", e.blobs);
}

}  // namespace kiln::detail

namespace kiln {

std::shared_ptr<cache::Store> remote_cache_store() {
  detail::install_remote_cache();
  return cache::enabled_layers().remote ? cache::remote_store() : nullptr;
}

}  // namespace kiln
