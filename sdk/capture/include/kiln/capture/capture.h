// The capture stage's policy and bookkeeping for compiled functions, independent of the
// C++ Tensor type (the frontend traces; this stage decides and remembers):
// - CompileOptions and CompileStats of kiln::compile;
// - the per-function cache of compiled entries behind guards, the recompile limits, the
//   stances, and the reasons each recompile happened;
// - automatic dynamic shapes: which dims of the next trace are symbolic;
// - the segment cache used once a function has graph breaks.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kiln/capture/backend.h"
#include "kiln/capture/guards.h"
#include "kiln/config/config.h"

namespace kiln {

struct CompileOptions {
  bool fullgraph = false;
  std::optional<bool> dynamic;      // nullopt: automatic dynamic shapes
  std::string backend = "kiln";     // "kiln", "eager", "cudagraphs", or a registered name
  std::string mode = "default";     // "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"
  std::map<std::string, ConfigValue> options;  // per-compile config overrides, validated
  bool disable = false;
  // Optional names of the top-level arguments, used in guard messages ("input 0 (x)"); a pytree
  // argument's leaves are named by their paths from it ("xs[1]", "params[\"w\"]", "state.h",
  // "len(xs)"), from "argK" where no name is given.
  std::vector<std::string> arg_names;
};

struct CompileStats {
  int64_t compiles = 0;        // graphs compiled (first compiles, recompiles and segments)
  int64_t recompiles = 0;      // compiles caused by a guard failure
  int64_t cache_hits = 0;      // calls (or segments) served by a compiled entry
  int64_t guard_failures = 0;  // calls whose arguments failed every entry's guards
  int64_t graph_breaks = 0;    // graph breaks met while compiling
  int64_t eager_calls = 0;     // calls (or segments) run eagerly (limits, stances)
  std::vector<std::string> recompile_reasons;
  // Compile-cache lookups the backend made while compiling this function's graphs, per layer
  // ("memory": plans compiled earlier in this process; "artifacts": entries stored or loaded
  // from a bundle in this process; "disk": the cache directory). docs/cache.md.
  struct CacheLayer {
    int64_t hits = 0;
    int64_t misses = 0;
  };
  std::map<std::string, CacheLayer> cache;
  // "compiles 2 (1 recompile), cache hits 5, ..." then each recompile reason and cache layer
  // on its own line.
  std::string str() const;
};
std::ostream& operator<<(std::ostream& out, const CompileStats& s);

// Backends report their compile-cache lookups here; those made while the capture stage compiles
// a function's graph go to that function's stats().cache (elsewhere they are not counted).
void note_cache_lookup(std::string_view layer, bool hit);
// The compiled function whose graph this thread is compiling now ("" outside such a compile).
const std::string& compiling_function();

enum class Stance { default_, force_eager, eager_on_recompile, fail_on_recompile };
void set_stance(Stance s);
Stance stance();
std::string_view stance_name(Stance s);
// Sets a stance for the current scope (this thread), restoring the previous one after.
class ScopedStance {
 public:
  explicit ScopedStance(Stance s);
  ~ScopedStance();
  ScopedStance(const ScopedStance&) = delete;
  ScopedStance& operator=(const ScopedStance&) = delete;

 private:
  std::optional<Stance> previous_;
};

// A per-dimension request from mark_dynamic / mark_static.
struct DimMark {
  int64_t dim = 0;
  bool dynamic = true;
  int64_t min = 2;
  int64_t max = std::numeric_limits<int64_t>::max();
};

// How the next trace treats one dim of one tensor argument.
struct DimPlan {
  bool dynamic = false;
  bool user_dynamic = false;
  int64_t min = 2;
  int64_t max = std::numeric_limits<int64_t>::max();
};

struct CompiledEntry {
  GuardSet guards;
  Executable executable;
  std::shared_ptr<const Graph> graph;
  std::vector<int32_t> tensor_arg_of_input;  // graph input k <- call argument index
  // The frontend's description of how the function's result is rebuilt from the graph's
  // outputs (opaque here: the C++ frontend keeps its result type with its Tensors cleared).
  std::shared_ptr<const void> result_structure;
};

// Profile-guided dynamic shapes: one dim automatic dynamic found dynamic (tensor argument,
// its rank, the dim). With job_id set (KILN_JOB_ID) they are kept per function (its name, which
// holds its source location) and job in the store set_dynamic_profile_store() plugs in (the
// native frontend plugs in the compile caches' records: docs/cache.md); without a job id, or
// without a store, nothing is read or saved.
struct ProfileDim {
  size_t arg = 0;
  size_t rank = 0;
  size_t dim = 0;
  bool operator==(const ProfileDim&) const = default;
};
struct ProfileStore {
  // The profile text ("arg rank dim" lines) kept for (function, job), or nullopt.
  std::function<std::optional<std::string>(const std::string& function, const std::string& job)> load;
  std::function<void(const std::string& function, const std::string& job, const std::string& profile)> save;
};
void set_dynamic_profile_store(ProfileStore store);
std::vector<ProfileDim> load_dynamic_profile(const std::string& function);
void save_dynamic_profile(const std::string& function, const std::vector<ProfileDim>& dims);

// What to do with a call that no entry accepts.
enum class MissAction { compile, run_eager };

class FunctionCache {
 public:
  FunctionCache(CompileOptions options, std::string name);
  ~FunctionCache();

  const CompileOptions& options() const { return options_; }
  const std::string& name() const { return name_; }

  // The entry whose guards accept `args` (symbol values written to `symbols`), or null.
  // Counts hits and guard failures.
  std::shared_ptr<const CompiledEntry> lookup(std::span<const ArgView> args, std::vector<int64_t>& symbols);
  // Applies stances and recompile limits to a miss and records why it happened.
  MissAction on_miss(std::span<const ArgView> args);
  // Symbolic-or-static decision for every dim of every tensor argument of the next trace.
  std::vector<std::vector<DimPlan>> plan_dims(std::span<const ArgView> args,
                                              std::span<const std::vector<DimMark>* const> marks);
  // Compiles a traced graph with the function's backend and adds it behind its guards.
  // `arg_names` name args in its guards' messages (the leaves' paths for pytree arguments).
  // compile_now false: the entry's graph is compiled at its first run (a call differentiated
  // from outside runs a forward graph of its own first, and may never run this one).
  std::shared_ptr<const CompiledEntry> add(std::shared_ptr<const Graph> graph, std::span<const ArgView> args,
                                           std::vector<int32_t> tensor_arg_of_input, std::vector<std::string> arg_names,
                                           std::shared_ptr<const void> result_structure = {}, bool compile_now = true);

  // Graph-break mode: the function runs in segments, each found by its canonical graph and
  // the codegen config. `index` is the segment's position in the call (0: before the first
  // break); a new graph at a position that already has one is a recompile, subject to the
  // stances and limits (past them the segment runs with the eager backend, uncached).
  bool segmented() const { return segmented_; }
  void set_segmented();
  Executable segment(const Graph& graph, std::span<const TensorMeta> inputs, size_t index, bool& compiled);
  void count_graph_breaks(int64_t n);
  void count_eager_call();
  // Compiles `graph` as this function's graphs are compiled (its backend, mode and options;
  // suppress_errors), its cache layers counted in stats(): the entries', and the forward and
  // backward graphs of a call differentiated from outside (frontends/cpp).
  Executable compile_graph(const Graph& graph, std::span<const TensorMeta> inputs);

  CompileStats stats() const;
  void clear();  // forget every entry and statistic

 private:
  CompileOptions options_;
  std::string name_;
  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<const CompiledEntry>> entries_;
  CompileStats stats_;
  bool segmented_ = false;
  bool limit_warned_ = false;
  // Automatic dynamic: the sizes seen so far per tensor argument; -1 marks a dim that changed.
  std::vector<std::vector<int64_t>> seen_sizes_;
  // Profile-guided dynamic shapes (job_id): read once, at the first plan_dims.
  bool profile_loaded_ = false;
  std::vector<ProfileDim> profile_;
  struct Segment {
    Graph graph;  // canonical
    uint64_t config_hash = 0;
    Executable executable;
  };
  std::map<uint64_t, std::vector<Segment>> segments_;
  std::vector<int64_t> segment_variants_;  // graphs compiled per segment position

  // Stances and recompile limits for a miss of something with `existing` compiled variants
  // (mutex_ held): records the reason when it compiles.
  MissAction miss_policy(int64_t existing, const std::string& reason);
};

// Forgets every compiled function's entries and the process-wide recompile count.
void reset_all_function_caches();
int64_t accumulated_compiles();

}  // namespace kiln
