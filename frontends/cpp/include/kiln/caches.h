// Compile caches seen from a program (docs/cache.md). Compiled plans and their object code are
// cached in memory and in cache_dir (KILN_CACHE_DIR) without anything to call; these functions
// move them between processes and machines as one buffer.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {
class Graph;
struct Device;
}
namespace kiln::cache {
class Store;
}
namespace kiln::target {
class LoadedPlan;
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

// The plan of an optimised graph (the default passes run) loaded on `device`, through the same
// caches as kiln::compile (in memory, then sdk/cache's layers; assert_no_compile applies):
// tools that run a graph file (kiln run) compile it once, as a program would.
std::shared_ptr<target::LoadedPlan> cached_target_plan(const Graph& optimised, Device device);

// Starts in the background the device set-up that compiling `g` (as imported or traced) for
// `device` will need, so that it overlaps what the caller does first: an ONNX import reading its
// weights (the CUDA target loads cuBLASLt, and cuDNN for a graph with convolutions; nothing on
// the CPU). Hold the returned token until the compile's first call has returned: its destruction
// waits for the work. Failures are left to the compile, which reports them itself.
std::shared_ptr<void> start_device_setup(const Graph& g, Device device);

// One entry of the disk cache, checked as a compile would use it (kiln cache verify).
struct CacheEntryCheck {
  enum Verdict { ok, removed, skipped };
  std::string key;
  std::string description;  // what it holds, when it decoded
  Verdict verdict = ok;
  std::string detail;  // what was checked, or why it was removed or skipped
};
// Checks every entry of the disk cache (cache_dir): its signature (with KILN_CACHE_SECRET), its
// format and checksum, and its plan and artifacts loaded by its target as a cache hit loads
// them (the plan validated, cpu objects linked, GPU images loaded; nothing runs). An entry that
// fails is removed, so that the next compile writes it again. One that this process cannot
// check is skipped, saying why: another Kiln version (never loaded), a target this build or
// host lacks, another device or toolchain. Records (autotune, profiles) are checked as entries.
// With remove_failed false (kiln cache ls) failed entries stay and are only reported (their
// verdict still says `removed`: what verify would do).
std::vector<CacheEntryCheck> verify_disk_cache(bool remove_failed = true);

// The device string compile caches key cpu binaries by: "cpu <cpu name> <features> ...".
std::string cache_device();

// The remote cache (Redis) as compiles in this process use it: null when cache.remote
// (KILN_REMOTE_CACHE) is off, caches are disabled, or this build has no Redis client.
std::shared_ptr<cache::Store> remote_cache_store();

}  // namespace kiln
