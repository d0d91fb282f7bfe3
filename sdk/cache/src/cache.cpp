// The layered lookup (the process's artifacts, then the disk), statistics, bundles.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <thread>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "bytes.h"
#include "kiln/cache/cache.h"
#include "kiln/config/config.h"
#include "kiln/config/log.h"
#include "kiln/graph/error.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace kiln::cache {

CacheStats& CacheStats::operator+=(const CacheStats& o) {
  for (const auto& [name, s] : o.layers) {
    LayerStats& t = layers[name];
    t.hits += s.hits;
    t.misses += s.misses;
    t.puts += s.puts;
    t.bad_entries += s.bad_entries;
  }
  return *this;
}

std::string CacheStats::str() const {
  std::string s;
  for (const auto& [name, l] : layers) {
    if (!s.empty()) s += "; ";
    s += name + ": " + std::to_string(l.hits) + (l.hits == 1 ? " hit, " : " hits, ") + std::to_string(l.misses) +
         (l.misses == 1 ? " miss, " : " misses, ") + std::to_string(l.puts) + (l.puts == 1 ? " put" : " puts");
    if (l.bad_entries) s += ", " + std::to_string(l.bad_entries) + " bad entries deleted";
  }
  return s.empty() ? "no cache lookups" : s;
}

std::string cache_dir() {
  const std::string configured = config::get<std::string>("cache_dir");
  if (!configured.empty()) return configured;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return (std::filesystem::path(xdg) / "kiln").string();
  if (const char* home = std::getenv("HOME"); home && *home)
    return (std::filesystem::path(home) / ".cache" / "kiln").string();
  fail("cache: no cache directory: set cache_dir (KILN_CACHE_DIR), XDG_CACHE_HOME or HOME");
}

namespace {
std::mutex g_remote_mu;
RemoteFactory g_remote_factory;
}  // namespace

std::shared_ptr<Store> remote_store() {
  std::lock_guard lock(g_remote_mu);
  return g_remote_factory ? g_remote_factory() : nullptr;
}

namespace {

// Remote writes: one background thread, a queue, never blocking the caller.
struct RemoteWriter {
  std::mutex mu;
  std::condition_variable wake, idle;
  std::deque<std::pair<std::shared_ptr<Store>, std::pair<std::string, std::string>>> queue;
  bool busy = false;
  bool started = false;
};
RemoteWriter& writer() {
  static RemoteWriter* w = new RemoteWriter;  // never destroyed: the thread outlives statics
  return *w;
}

void enqueue_remote(std::shared_ptr<Store> store, std::string key, std::string bytes) {
  RemoteWriter& w = writer();
  std::lock_guard lock(w.mu);
  w.queue.emplace_back(std::move(store), std::make_pair(std::move(key), std::move(bytes)));
  if (!w.started) {
    w.started = true;
    std::thread([&w] {
      std::unique_lock lock(w.mu);
      for (;;) {
        w.wake.wait(lock, [&] { return !w.queue.empty(); });
        auto job = std::move(w.queue.front());
        w.queue.pop_front();
        w.busy = true;
        lock.unlock();
        try {
          job.first->put(job.second.first, job.second.second);
        } catch (const std::exception& e) {
          // Everything, InternalError included: an exception leaving this detached thread would
          // terminate the process, and a failed remote put only costs a later remote miss.
          KILN_LOG(cache, "remote put failed: ", e.what());
        }
        lock.lock();
        w.busy = false;
        if (w.queue.empty()) w.idle.notify_all();
      }
    }).detach();
    std::atexit([] { flush_remote_writes(2.0); });
  }
  w.wake.notify_one();
}
}  // namespace

void set_remote_factory(RemoteFactory factory) {
  std::lock_guard lock(g_remote_mu);
  g_remote_factory = std::move(factory);
}

bool flush_remote_writes(double timeout_seconds) {
  RemoteWriter& w = writer();
  std::unique_lock lock(w.mu);
  return w.idle.wait_for(lock, std::chrono::duration<double>(timeout_seconds),
                         [&] { return w.queue.empty() && !w.busy; });
}

Enabled enabled_layers() {
  Enabled e;
  if (config::get<bool>("force_disable_caches")) return Enabled{false, false, false};
  e.disk = config::get<bool>("cache.plan_cache");
  if (config::get<bool>("cache.remote")) {
    std::lock_guard lock(g_remote_mu);
    e.remote = static_cast<bool>(g_remote_factory);
  }
  return e;
}

DiskStore disk_store() {
  return DiskStore(cache_dir(), static_cast<uint64_t>(config::get<int64_t>("cache.size_limit_mb")) << 20);
}

namespace {

struct Process {
  std::mutex mu;
  CacheStats stats;
  MemoryStore artifacts{"artifacts"};  // every entry stored or loaded in this process: the memory layer, and bundles
};
Process& process() {
  static Process* p = new Process;  // never destroyed: caches may be used from static destructors
  return *p;
}

void count(CacheStats* local, const std::string& layer, int64_t LayerStats::*field) {
  {
    std::lock_guard lock(process().mu);
    process().stats.layers[layer].*field += 1;
  }
  if (local) local->layers[layer].*field += 1;
}

// One layer's lookup: the entry, or nullopt (absent, or bad and deleted). `kept` receives the
// entry's bytes as stored, for the layers above (no second encoding).
std::optional<Entry> lookup_in(Store& store, const std::string& where, const std::string& key,
                               const std::vector<Guard>& expected, CacheStats* stats, std::string* kept = nullptr) {
  std::optional<std::string> bytes;
  try {
    bytes = store.get(key);
  } catch (const Error& e) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      logs::warn(std::string("cache: ") + e.what() + "; going on without it (warned once)");
    else
      KILN_LOG(cache, "read failed: ", e.what());
    count(stats, store.name(), &LayerStats::misses);
    return std::nullopt;
  }
  if (!bytes) {
    count(stats, store.name(), &LayerStats::misses);
    return std::nullopt;
  }
  std::string problem;
  Entry e;
  try {
    e = decode_entry(*bytes, where);
    if (e.key != key) problem = where + ": stored under key " + key + " but made for key " + e.key;
    else if (std::string g = check_guards(e, expected); !g.empty()) problem = where + ": guard failed: " + g;
  } catch (const Error& err) {
    problem = err.what();
  }
  if (!problem.empty()) {
    store.remove(key);
    KILN_LOG(cache, problem, "; deleted it, compiling again");
    count(stats, store.name(), &LayerStats::bad_entries);
    count(stats, store.name(), &LayerStats::misses);
    return std::nullopt;
  }
  count(stats, store.name(), &LayerStats::hits);
  if (kept) *kept = std::move(*bytes);
  return e;
}

}  // namespace

Enabled autotune_layers() {
  if (config::get<bool>("force_disable_caches")) return Enabled{false, false, false};
  Enabled e;
  e.memory = e.disk = config::get<bool>("autotune.cache");
  if (config::get<bool>("cache.remote") || config::get<bool>("autotune.remote_cache")) {
    std::lock_guard lock(g_remote_mu);
    e.remote = static_cast<bool>(g_remote_factory);
  }
  return e;
}

std::optional<Entry> lookup(const std::string& key, const std::vector<Guard>& expected, CacheStats* stats) {
  return lookup(key, expected, stats, enabled_layers());
}

std::optional<Entry> lookup(const std::string& key, const std::vector<Guard>& expected, CacheStats* stats,
                            const Enabled& on) {
  KILN_CHECK(is_valid_key(key), "cache lookup: '", key, "' is not a cache key");
  if (on.memory) {
    if (auto e = lookup_in(process().artifacts, "cache entry " + key + " (artifacts)", key, expected, stats)) {
      KILN_LOG(cache, "artifacts hit: ", key, " (", e->description, ")");
      return e;
    }
  }
  if (on.disk) {
    std::optional<DiskStore> opened;
    try {
      opened.emplace(disk_store());
    } catch (const Error& err) {
      static std::atomic<bool> warned{false};
      if (!warned.exchange(true)) logs::warn(std::string(err.what()) + "; going on without the disk cache (warned once)");
      return std::nullopt;
    }
    DiskStore& disk = *opened;
    std::string bytes;
    if (auto e = lookup_in(disk, "cache entry " + disk.path_of(key), key, expected, stats, &bytes)) {
      KILN_LOG(cache, "disk hit: ", disk.path_of(key), " (", e->description, ")");
      if (on.memory) process().artifacts.put(key, bytes);
      return e;
    }
  }
  if (on.remote) {
    if (std::shared_ptr<Store> remote = remote_store()) {
      std::string bytes;
      if (auto e = lookup_in(*remote, "remote cache entry " + key, key, expected, stats, &bytes)) {
        KILN_LOG(cache, "remote hit: ", key, " (", e->description, ")");
        if (on.memory) process().artifacts.put(key, bytes);
        if (on.disk) {
          try {
            disk_store().put(key, bytes);
          } catch (const Error& err) {
            KILN_LOG(cache, "could not keep a remote hit on disk: ", err.what());
          }
        }
        return e;
      }
    }
  }
  return std::nullopt;
}

void store(const Entry& e, CacheStats* stats) { store(e, stats, enabled_layers()); }

void store(const Entry& e, CacheStats* stats, const Enabled& on) {
  KILN_CHECK(is_valid_key(e.key), "cache store: '", e.key, "' is not a cache key");
  if (!on.memory && !on.disk && !on.remote) return;
  const std::string bytes = encode_entry(e);
  if (on.remote) {
    if (std::shared_ptr<Store> remote = remote_store()) {
      enqueue_remote(std::move(remote), e.key, bytes);
      count(stats, "remote", &LayerStats::puts);
    }
  }
  if (on.memory) {
    process().artifacts.put(e.key, bytes);
    count(stats, "artifacts", &LayerStats::puts);
  }
  if (on.disk) {
    try {
      DiskStore disk = disk_store();
      disk.put(e.key, bytes);
      count(stats, "disk", &LayerStats::puts);
      KILN_LOG(cache, "disk put: ", disk.path_of(e.key), " (", bytes.size(), " bytes; ", e.description, ")");
    } catch (const Error& err) {
      // One warning per process: a read-only or full disk should not flood the log.
      static std::atomic<bool> warned{false};
      if (!warned.exchange(true))
        logs::warn(std::string("cache: ") + err.what() + "; entries stay in memory only (warned once)");
      else
        KILN_LOG(cache, "disk put failed: ", err.what());
    }
  }
}

void discard(const std::string& key, const std::string& why) {
  KILN_CHECK(is_valid_key(key), "cache discard: '", key, "' is not a cache key");
  process().artifacts.remove(key);
  try {
    disk_store().remove(key);
  } catch (const Error&) {
  }
  KILN_LOG(cache, "discarded ", key, ": ", why);
}

CacheStats process_stats() {
  std::lock_guard lock(process().mu);
  return process().stats;
}

void reset_memory_for_testing() {
  process().artifacts.clear();
  std::lock_guard lock(process().mu);
  process().stats = CacheStats{};
}

// ---- bundles ----------------------------------------------------------------------------------

namespace {
constexpr char kBundleMagic[8] = {'K', 'I', 'L', 'N', 'B', 'N', 'D', 'L'};

std::string device_of(const Entry& e) {
  for (const Guard& g : e.guards)
    if (g.name == "device") return g.value;
  return "";
}
}  // namespace

std::string save_cache_artifacts(const std::string& device) {
  MemoryStore& m = process().artifacts;
  std::vector<std::pair<std::string, std::string>> entries;
  for (const StoredInfo& i : m.list()) {
    std::optional<std::string> bytes = m.get(i.key);
    if (!bytes) continue;
    const Entry e = decode_entry(*bytes, "cache entry " + i.key + " (artifacts)");
    // Device-independent records (dynamic-shape profiles) have an empty device.
    if (const std::string d = device_of(e); d == device || d.empty()) entries.emplace_back(i.key, std::move(*bytes));
  }
  detail::Writer w;
  w.out.append(kBundleMagic, sizeof kBundleMagic);
  w.u32(kBundleFormatVersion);
  w.u32(kEntryFormatVersion);
  w.str(kiln_version());
  w.str(device);
  w.u64(entries.size());
  for (const auto& [k, b] : entries) {
    w.str(k);
    w.str(b);
  }
  const XXH128_hash_t h = XXH3_128bits(w.out.data(), w.out.size());
  w.u64(h.high64);
  w.u64(h.low64);
  KILN_LOG(cache, "saved a bundle of ", entries.size(), " entries (", w.out.size(), " bytes)");
  if (const std::optional<Signer> s = signer()) return sign(w.out, *s);
  return std::move(w.out);
}

LoadResult load_cache_artifacts(std::string_view signed_bytes, const std::string& device) {
  const std::string where = "cache bundle";
  // A bundle is code for every process that loads it: with a secret, only one it signed.
  std::string verified;
  std::string_view bytes = strip_signature(signed_bytes);
  if (const std::optional<Signer> s = signer()) {
    std::optional<std::string> payload = verify(signed_bytes, *s);
    KILN_CHECK(payload, where, ": not signed with ", s->name, " (",
               bytes.size() == signed_bytes.size() ? "it has no signature: made without the secret"
                                                   : "signed with another secret, or edited",
               "); nothing was loaded");
    verified = std::move(*payload);
    bytes = verified;
  }
  KILN_CHECK(bytes.size() >= sizeof kBundleMagic + 16 && std::memcmp(bytes.data(), kBundleMagic, sizeof kBundleMagic) == 0,
             where, ": not a Kiln cache bundle (wrong magic bytes or too short: ", bytes.size(), " bytes)");
  const size_t body = bytes.size() - 16;
  const XXH128_hash_t h = XXH3_128bits(bytes.data(), body);
  detail::Reader tail(bytes.substr(body), where);
  const uint64_t hi = tail.u64(), lo = tail.u64();
  detail::Reader r(bytes.substr(sizeof kBundleMagic, body - sizeof kBundleMagic), where);
  const uint32_t bundle_version = r.u32();
  LoadResult result;
  if (bundle_version != kBundleFormatVersion) {
    result.reason = "the bundle has format version " + std::to_string(bundle_version) + ", this build reads version " +
                    std::to_string(kBundleFormatVersion);
    return result;
  }
  KILN_CHECK(hi == h.high64 && lo == h.low64, where, ": checksum mismatch (the bundle is damaged)");
  const uint32_t entry_version = r.u32();
  const std::string version = r.str();
  const std::string bundle_device = r.str();
  if (entry_version != kEntryFormatVersion)
    result.reason = "the bundle holds entries of format version " + std::to_string(entry_version) +
                    ", this build reads version " + std::to_string(kEntryFormatVersion);
  else if (version != kiln_version())
    result.reason = "the bundle was made by Kiln " + version + ", this is Kiln " + kiln_version();
  else if (bundle_device != device)
    result.reason = "the bundle was made for device '" + bundle_device + "', this process runs on '" + device + "'";
  if (!result.reason.empty()) {
    KILN_LOG(cache, "loaded nothing from a bundle: ", result.reason);
    return result;
  }
  const uint64_t n = r.u64();
  std::vector<Entry> entries;
  for (uint64_t i = 0; i < n; ++i) {
    const std::string key = r.str();
    const std::string entry = r.str();
    KILN_CHECK(is_valid_key(key), where, ": entry ", i, " has no valid key");
    Entry e = decode_entry(entry, where + " entry " + std::to_string(i));
    KILN_CHECK(e.key == key, where, ": entry ", i, " is stored under ", key, " but made for ", e.key);
    entries.push_back(std::move(e));
  }
  r.expect_end();
  for (const Entry& e : entries) {
    if (const std::string d = device_of(e); d != device && !d.empty()) continue;
    store(e);
    ++result.loaded;
  }
  if (result.loaded != entries.size())
    result.reason = std::to_string(entries.size() - result.loaded) + " entries were made for another device";
  KILN_LOG(cache, "loaded ", result.loaded, " entries from a bundle");
  return result;
}

}  // namespace kiln::cache
