// sdk/cache: compile caches. Portable C++ (the standard library, xxHash's header-only mode).
//
// Takes: what a target's compile depends on (KeyInputs), compiled artifacts (Entry: the plan's
//   JSON text, binary blobs such as object code, and the guards the entry was made under), and
//   a place to keep them (Store: in memory, or a directory on the local disk).
// Gives:
//   - make_key(): a 128-bit XXH3 hash over every key component, in hex (docs/cache.md lists
//     them: canonical graph, input metadata and shape constraints, codegen options, target,
//     device, Kiln version, toolchain, cache_key_tag, the pipeline that compiled it);
//   - encode_entry()/decode_entry(): the versioned binary entry format with a checksum over
//     everything; a bad entry is a kiln::Error naming where it came from and what is wrong;
//   - check_guards(): the first guard of an entry that does not hold here, as a sentence;
//   - MemoryStore, DiskStore (one file per entry, written to a temporary name and renamed, so
//     concurrent processes never read a torn entry; a size bound with least-recently-used
//     eviction);
//   - Cache: the layers a compile looks up in order (memory, then disk), per-layer hit and miss
//     counts, a bad entry deleted, logged (KILN_LOGS=cache) and reported as a miss;
//   - records (get_record/put_record): small values kept in the same layers, e.g. the autotune
//     cache (autotune_lookup/autotune_store: max-autotune's winning configuration per kernel
//     signature and device) and the profiles of profile-guided dynamic shapes (sdk/capture);
//   - save_cache_artifacts()/load_cache_artifacts(): every entry and record this process made or
//     loaded, as one portable bundle, and back;
//   - signatures: with a shared secret (set_signer) the disk layer and bundles keep only what
//     the secret signed.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/graph/graph.h"

namespace kiln::cache {

// Version of the entry and bundle formats; a change that makes old entries unreadable bumps it
// (old entries then fail to decode, are deleted and recompiled).
inline constexpr uint32_t kEntryFormatVersion = 1;
inline constexpr uint32_t kBundleFormatVersion = 1;

// The project's version and a fingerprint of the sources that make plans and binaries, e.g.
// "0.1.0+3f2a9c0d11e4b7a2": entries and bundles of other code never load.
std::string kiln_version();

// ---- the key ----------------------------------------------------------------------------------
// Everything that can change what a compile produces. Each field is hashed length-prefixed, in
// this order, so no two different field lists give the same byte stream.
struct KeyInputs {
  std::string pipeline;      // what produced the entry: "cpu.graph" (graph passes + schedule), "cpu.eager"
  std::string graph;         // the canonical graph, serialised losslessly (ops, attributes, edges,
                             // constants, every node's metadata, symbols with their ranges, facts)
  std::string inputs;        // the input metadata: dtype, sizes (symbolic), strides, device per input
  uint64_t codegen_hash = 0; // config::codegen_hash(): every option marked affects_codegen
  std::string target;        // "cpu", "cuda", ...
  std::string device;        // for cpu: host CPU name, features, vector width, libmvec
  std::string toolchain;     // e.g. "llvm 16.0.6 opt3"
  std::string kiln_version;  // kiln_version()
  std::string tag;           // cache_key_tag
};

struct Key {
  std::string hex;  // 32 lowercase hex digits: XXH3-128 of the fields
};
Key make_key(const KeyInputs& in);
bool is_valid_key(std::string_view hex);  // 32 lowercase hex digits
// The key inputs of a compiled graph, the same for every target and for the browser: `graph_json`
// the canonical graph serialised (format::key_json(canonical, hash_hex_of): losslessly, big
// constants by their hash), each input's
// metadata from `canonical`, config::codegen_hash(), cache_key_tag and kiln_version(); the
// caller names the pipeline, target, device and toolchain.
KeyInputs graph_key_inputs(const Graph& canonical, std::string graph_json, std::string pipeline, std::string target,
                           std::string device, std::string toolchain);

// 128-bit XXH3 of bytes, in hex (32 digits). Used for keys, checksums and guards.
std::string hash_hex(std::string_view bytes);
inline std::string hash_hex_of(std::span<const std::byte> bytes) {
  return hash_hex(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

// ---- the entry --------------------------------------------------------------------------------
struct Guard {
  std::string name;   // "target", "device", "graph", ...
  std::string value;  // what it had when the entry was made
  bool operator==(const Guard&) const = default;
};

struct Entry {
  std::string key;          // Key::hex it was stored under
  std::string description;  // one line for `kiln cache ls`: pipeline, ops, kernels
  std::string plan;         // the KernelPlan's JSON text (kiln.plan)
  std::vector<std::pair<std::string, std::string>> blobs;  // name -> bytes (e.g. "module0.o")
  std::vector<Guard> guards;
  int64_t created_unix = 0;  // seconds
  bool operator==(const Entry&) const = default;
};

// The standard guards of an entry: target, device, toolchain, kiln_version, and hashes of the
// graph, the inputs and the codegen options (so a key collision or a copied file cannot serve
// code made for something else).
std::vector<Guard> guards_for(const KeyInputs& in);

// Bytes: "KILNENTRY" magic, format version, length, the fields, XXH3-128 checksum of all that.
std::string encode_entry(const Entry& e);
// Throws kiln::Error starting with `source` ("cache entry /path/x.kce: ...") on a wrong magic,
// an unknown version, a truncated or overlong entry, or a checksum mismatch.
Entry decode_entry(std::string_view bytes, std::string_view source);

// The first guard of `e` that `expected` contradicts (a guard `expected` does not name is not
// checked), as "device: entry made for 'x', this process has 'y'"; empty when all hold.
std::string check_guards(const Entry& e, const std::vector<Guard>& expected);

// ---- stores -----------------------------------------------------------------------------------
struct StoredInfo {
  std::string key;
  uint64_t bytes = 0;
  int64_t last_used_unix = 0;  // disk: modification time, which reads refresh
};

// Keys are Key::hex strings (anything else is a kiln::Error). Stores keep bytes; they do not
// look inside them. Safe to use from several threads.
class Store {
 public:
  virtual ~Store() = default;
  virtual std::string name() const = 0;  // "memory", "disk"
  virtual std::optional<std::string> get(const std::string& key) = 0;
  virtual void put(const std::string& key, std::string_view bytes) = 0;
  virtual bool remove(const std::string& key) = 0;  // false: there was nothing
  virtual std::vector<StoredInfo> list() = 0;       // most recently used first
};

class MemoryStore : public Store {
 public:
  explicit MemoryStore(std::string name = "memory") : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  std::optional<std::string> get(const std::string& key) override;
  void put(const std::string& key, std::string_view bytes) override;
  bool remove(const std::string& key) override;
  std::vector<StoredInfo> list() override;
  void clear();

 private:
  std::string name_;
  std::mutex mu_;
  std::map<std::string, StoredInfo> info_;
  std::map<std::string, std::string> bytes_;
  int64_t clock_ = 0;
};

// One file per entry, <dir>/<key>.kce. put() writes <dir>/.tmp-<key>-<pid>-<n> and renames it
// over the entry (atomic on POSIX), so a reader sees the whole old entry, the whole new one, or
// none, and a writer killed mid-write leaves only a temporary file (removed by later puts once
// it is an hour old). get() refreshes the file's modification time (the LRU clock); put()
// evicts the least recently used entries while the directory holds more than size_limit bytes.
// I/O failures on put are kiln::Errors naming the path; a missing directory is created.
// With a signer set (signatures, below) put() signs and get() returns only what it signed.
class DiskStore : public Store {
 public:
  DiskStore(std::string dir, uint64_t size_limit_bytes);
  std::string name() const override { return "disk"; }
  const std::string& dir() const { return dir_; }
  std::string path_of(const std::string& key) const;
  std::optional<std::string> get(const std::string& key) override;
  void put(const std::string& key, std::string_view bytes) override;
  bool remove(const std::string& key) override;
  std::vector<StoredInfo> list() override;
  // Removes every entry and temporary file; returns how many entries went.
  size_t clear();
  // Evicts least recently used entries (never `keep`) until the entries fit the bound; returns
  // how many were removed.
  size_t evict(const std::string& keep = "");

 private:
  std::string dir_;
  uint64_t limit_;
};

// ---- the layered cache ------------------------------------------------------------------------
struct LayerStats {
  int64_t hits = 0;
  int64_t misses = 0;
  int64_t puts = 0;
  int64_t bad_entries = 0;  // failed to decode or failed a guard: deleted
};

// Counts per layer name; `+=` adds counts.
struct CacheStats {
  std::map<std::string, LayerStats> layers;
  CacheStats& operator+=(const CacheStats& o);
  std::string str() const;  // "memory: 1 hit, 0 misses; disk: ..."
};

// The resolved cache directory: config cache_dir, else $XDG_CACHE_HOME/kiln, else
// $HOME/.cache/kiln (an error when none is set).
std::string cache_dir();

// What the current configuration enables (force_disable_caches turns everything off).
struct Enabled {
  bool memory = true;  // the "artifacts" layer (and the targets' in-process caches of executables)
  bool disk = true;
  bool remote = false;  // cache.remote and a remote factory set
};
Enabled enabled_layers();
// The layers of the autotune cache: memory and disk with autotune.cache (default on), the
// remote with cache.remote or autotune.remote_cache; none with force_disable_caches.
Enabled autotune_layers();

// The disk store at cache_dir() with cache.size_limit_mb.
DiskStore disk_store();

// Layers, top first: "artifacts" (entries stored or loaded in this process: what bundles hold),
// "disk" (cache_dir). Both off with force_disable_caches; disk off with cache.plan_cache=false.
// Looks `key` up in the layers the configuration enables, top first. A hit in a lower layer
// is copied into the layers above it. A bad entry (decode error, or a guard in `expected` that
// fails) is deleted from the layer that had it, logged under KILN_LOGS=cache, counted, and the
// lookup goes on below. Counts go to the process totals and to `stats` when given.
std::optional<Entry> lookup(const std::string& key, const std::vector<Guard>& expected, CacheStats* stats = nullptr);
// Removes an entry from every layer (an entry that decoded but could not be used); logs why.
void discard(const std::string& key, const std::string& why);
// Stores an entry in every enabled layer (and in the process's bundle registry). A failure to
// write the disk layer is logged as a warning and the program goes on.
void store(const Entry& e, CacheStats* stats = nullptr);
// The same in the layers `on` names (still only those the configuration allows: callers pass
// enabled_layers() or autotune_layers()).
std::optional<Entry> lookup(const std::string& key, const std::vector<Guard>& expected, CacheStats* stats,
                            const Enabled& on);
void store(const Entry& e, CacheStats* stats, const Enabled& on);

// ---- the remote layer ---------------------------------------------------------------------------
// A shared store below the disk ("remote": native/cache's Redis store). The factory is asked for
// the store each time the layer is used (it may cache connections); null means none. The layer
// is used when cache.remote is set (and force_disable_caches is not): a remote hit is written to
// the disk and artifacts layers; stores queue the remote write on a background thread, so the
// caller never waits for the network.
using RemoteFactory = std::function<std::shared_ptr<Store>()>;
void set_remote_factory(RemoteFactory factory);
// The store the factory gives now (null: none set); whether the layer is used is
// enabled_layers().remote.
std::shared_ptr<Store> remote_store();
// Waits until the queued remote writes are done, at most `timeout_seconds`; false when some are
// left. Also run at process exit (2 s at most).
bool flush_remote_writes(double timeout_seconds = 5);

// ---- signatures ---------------------------------------------------------------------------------
// A cache entry holds code that runs, so with a shared secret (KILN_CACHE_SECRET; native/cache
// installs its HMAC-SHA256) nothing outside the process is trusted unless that secret signed
// it: signed bytes are "KSIG1" + the 32-byte MAC of the payload + the payload. The disk layer
// writes signed entries and reads only entries the secret signed (an unsigned one, made before
// the secret was set, another secret's or an edited one is removed with a warning and counted
// as a miss, so the compile fills it again); bundles are signed and a bundle the secret did not
// sign loads nothing (a kiln::Error). Without a secret a signed entry is read as its payload.
struct Signer {
  std::string name;  // what the secret is called in messages: "KILN_CACHE_SECRET"
  std::function<std::string(std::string_view bytes)> mac;  // 32 bytes
};
// Sets (or with nullopt clears) the process's signer; DiskStore, bundles and the remote layer
// use it from then on.
void set_signer(std::optional<Signer> s);
std::optional<Signer> signer();
std::string sign(std::string_view payload, const Signer& s);
// The payload when `bytes` is signed by `s` (compared in constant time), else nullopt.
std::optional<std::string> verify(std::string_view bytes, const Signer& s);
// Whether a and b hold the same bytes, every byte compared whatever the first difference (no
// timing oracle for forging a MAC): what verify() and plan signatures compare with.
bool equal_in_constant_time(std::string_view a, std::string_view b);
// `bytes` without a signature, if it has one (what a process without a secret reads).
std::string_view strip_signature(std::string_view bytes);

// Totals of every lookup and store in this process.
CacheStats process_stats();
// Forgets the memory layer and the process totals (tests).
void reset_memory_for_testing();

// ---- records: autotune choices and dynamic-shape profiles -------------------------------------
// Small values the compilers keep beside the compiled entries, in the same layers (artifacts,
// disk, remote, with the same signing) and in bundles. A record is an Entry whose `plan` field
// holds the value (a short JSON or text) and which has no blobs; its key is make_key() over the
// RecordKey with the pipeline "<kind>" (so it never collides with a plan). A record of another
// device, Kiln version or kind fails its guards and is not used.
struct RecordKey {
  std::string kind;     // "autotune", "dynamic_profile", ...
  std::string subject;  // what it is about: a kernel's generated code, a function's name and place
  std::string context;  // what else the value depends on: problem sizes, a job id
  std::string target;   // "cpu", "cuda", ...
  std::string device;   // the device description the value was measured on ("" = any)
};
KeyInputs record_key_inputs(const RecordKey& k);
// The value, or nullopt (absent, disabled, or a bad record: deleted and logged).
std::optional<std::string> get_record(const RecordKey& k, CacheStats* stats = nullptr,
                                      std::optional<Enabled> layers = std::nullopt);  // default: enabled_layers()
// Stores (or replaces) the value in every enabled layer; `description` is the `kiln cache ls`
// line ("autotune cpu k0: k0_tiled, chunks of 64").
void put_record(const RecordKey& k, const std::string& value, const std::string& description,
                CacheStats* stats = nullptr, std::optional<Enabled> layers = std::nullopt);

// The autotune cache: the winning configuration of max-autotune for one kernel on one device,
// so another process (or machine, through Redis or a bundle) does not time the candidates
// again. `kernel` is the kernel's signature (its generated code: entry and variants, or for a
// CUDA kernel its source and template parameters), `problem` what the timing depended on (the
// sizes), `config_json` the chosen configuration as a small JSON object whose fields the target
// defines (cpu: {"function": "k0_tiled", "chunk": 64}; a CUDA launch configuration would be
// {"block": [..], "grid": [..], ...}). Keys include the target, the device and Kiln's version.
// They use autotune_layers().
std::optional<std::string> autotune_lookup(const std::string& target, const std::string& device,
                                           const std::string& kernel, const std::string& problem,
                                           CacheStats* stats = nullptr);
void autotune_store(const std::string& target, const std::string& device, const std::string& kernel,
                    const std::string& problem, const std::string& config_json, const std::string& description,
                    CacheStats* stats = nullptr);

// ---- bundles ----------------------------------------------------------------------------------
// Every entry this process stored or loaded, as one buffer: "KILNBNDL" magic, bundle version,
// entry format version, kiln version, the device string of `device` (entries of other devices
// are not put in), the entries, and a checksum; signed when a signer is set.
std::string save_cache_artifacts(const std::string& device);
struct LoadResult {
  size_t loaded = 0;   // entries put into the caches
  std::string reason;  // why nothing (or not everything) was loaded; empty when all were
};
// Fills the memory and disk layers from a bundle. A bundle of another format version, Kiln
// version or device loads nothing and says why in `reason`; a damaged bundle (bad magic,
// truncated, checksum), or with a signer set one that it did not sign, is a kiln::Error.
LoadResult load_cache_artifacts(std::string_view bytes, const std::string& device);

}  // namespace kiln::cache
