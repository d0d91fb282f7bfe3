// Compile caches seen from a program (docs/cache.md). Compiled plans and their object code are
// cached in memory and in cache_dir (KILN_CACHE_DIR) without anything to call; these functions
// move them between processes and machines as one buffer.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace kiln::cache {
class Store;
}

namespace kiln {

// Every plan and binary this process compiled or loaded (for this host's device), as one byte
// buffer: a versioned bundle with a checksum.
std::string save_cache_artifacts();

struct CacheLoadResult {
  size_t loaded = 0;   // entries put into the memory and disk caches
  std::string reason;  // why nothing (or not everything) was loaded; empty when all were
};
// Fills the caches from a bundle that save_cache_artifacts made, on this machine or another of
// the same device kind. A bundle of another format or Kiln version, or of another device, loads
// nothing and `reason` says why; a damaged bundle is a kiln::Error.
CacheLoadResult load_cache_artifacts(std::string_view bytes);

// The device string compile caches key cpu binaries by: "cpu <cpu name> <features> ...".
std::string cache_device();

// The remote cache (Redis) as compiles in this process use it: null when cache.remote
// (KILN_REMOTE_CACHE) is off, caches are disabled, or this build has no Redis client.
std::shared_ptr<cache::Store> remote_cache_store();

}  // namespace kiln
