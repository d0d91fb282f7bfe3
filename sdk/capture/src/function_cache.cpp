#include <algorithm>
#include <mutex>
#include <sstream>

#include "kiln/capture/capture.h"
#include "kiln/config/config.h"
#include "kiln/config/log.h"
#include "kiln/graph/error.h"

namespace kiln {

namespace {

// Profile-guided dynamic shapes (docs/cache.md): with job_id set, the dims automatic dynamic
// marked dynamic are kept per function (its name holds its source location) and job in the
// store the frontend plugs in (the native frontend: the compile caches' records). The value
// is one line per dim: "arg rank dim".
std::mutex g_profile_mu;
ProfileStore g_profile_store;

ProfileStore profile_store() {
  std::lock_guard lock(g_profile_mu);
  return g_profile_store;
}

}  // namespace

void set_dynamic_profile_store(ProfileStore store) {
  std::lock_guard lock(g_profile_mu);
  g_profile_store = std::move(store);
}

std::vector<ProfileDim> load_dynamic_profile(const std::string& function) {
  const std::string job = config::get<std::string>("job_id");
  const ProfileStore store = profile_store();
  if (job.empty() || !store.load) return {};
  const std::optional<std::string> v = store.load(function, job);
  if (!v) return {};
  std::vector<ProfileDim> dims;
  std::istringstream in(*v);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream l(line);
    ProfileDim d{};
    std::string rest;
    if (!(l >> d.arg >> d.rank >> d.dim) || (l >> rest) || d.dim >= d.rank) {
      logs::warn("dynamic-shape profile of " + function + " (job " + job + "): bad line '" + line +
                 "'; compiling without the profile");
      return {};
    }
    dims.push_back(d);
  }
  KILN_LOG(cache, "dynamic-shape profile of ", function, " (job ", job, "): ", dims.size(), " dims dynamic from the start");
  return dims;
}

void save_dynamic_profile(const std::string& function, const std::vector<ProfileDim>& dims) {
  const std::string job = config::get<std::string>("job_id");
  const ProfileStore store = profile_store();
  if (job.empty() || !store.save) return;
  std::string v;
  for (const ProfileDim& d : dims)
    v += std::to_string(d.arg) + " " + std::to_string(d.rank) + " " + std::to_string(d.dim) + "\n";
  store.save(function, job, v);
  KILN_LOG(cache, "saved the dynamic-shape profile of ", function, " (job ", job, "): ", dims.size(), " dims");
}

namespace {

std::atomic<Stance> g_stance{Stance::default_};
thread_local std::optional<Stance> t_scoped_stance;
std::atomic<int64_t> g_accumulated{0};

struct LiveCaches {
  std::mutex mutex;
  std::vector<FunctionCache*> caches;
};
LiveCaches& live_caches() {
  static LiveCaches* l = new LiveCaches;  // never destroyed: caches may outlive static teardown
  return *l;
}

}  // namespace

void set_stance(Stance s) { g_stance.store(s, std::memory_order_relaxed); }
Stance stance() { return t_scoped_stance ? *t_scoped_stance : g_stance.load(std::memory_order_relaxed); }
std::string_view stance_name(Stance s) {
  switch (s) {
    case Stance::default_: return "default";
    case Stance::force_eager: return "force_eager";
    case Stance::eager_on_recompile: return "eager_on_recompile";
    case Stance::fail_on_recompile: return "fail_on_recompile";
  }
  return "?";
}
ScopedStance::ScopedStance(Stance s) : previous_(t_scoped_stance) { t_scoped_stance = s; }
ScopedStance::~ScopedStance() { t_scoped_stance = previous_; }

int64_t accumulated_compiles() { return g_accumulated.load(); }

void reset_all_function_caches() {
  auto& l = live_caches();
  std::lock_guard lock(l.mutex);
  for (FunctionCache* c : l.caches) c->clear();
  g_accumulated = 0;
}

FunctionCache::FunctionCache(CompileOptions options, std::string name)
    : options_(std::move(options)), name_(std::move(name)) {
  // Validate mode and options once, at compile() time, so mistakes surface early.
  config::CompileScope check(options_.mode, options_.options);
  auto& l = live_caches();
  std::lock_guard lock(l.mutex);
  l.caches.push_back(this);
}

FunctionCache::~FunctionCache() {
  auto& l = live_caches();
  std::lock_guard lock(l.mutex);
  std::erase(l.caches, this);
}

void FunctionCache::clear() {
  std::lock_guard lock(mutex_);
  entries_.clear();
  segments_.clear();
  segment_variants_.clear();
  segmented_ = false;
  limit_warned_ = false;
  seen_sizes_.clear();
  stats_ = {};
}

std::shared_ptr<const CompiledEntry> FunctionCache::lookup(std::span<const ArgView> args,
                                                           std::vector<int64_t>& symbols) {
  std::lock_guard lock(mutex_);
  for (const auto& e : entries_) {
    if (symbols.size() < e->guards.num_symbols()) symbols.resize(e->guards.num_symbols());
    if (e->guards.check(args, symbols.data())) {
      ++stats_.cache_hits;
      return e;
    }
  }
  if (!entries_.empty()) ++stats_.guard_failures;
  return nullptr;
}

MissAction FunctionCache::on_miss(std::span<const ArgView> args) {
  std::lock_guard lock(mutex_);
  if (entries_.empty()) return MissAction::compile;
  // Why the newest entry refused these arguments: the reason users care about; with
  // `verbose`, every entry's reason.
  std::string reason = entries_.front()->guards.failure(args).value_or("no guard failed (entry was cleared)");
  if (config::get<bool>("verbose"))
    for (size_t i = 1; i < entries_.size(); ++i)
      reason += "; entry " + std::to_string(i) + ": " + entries_[i]->guards.failure(args).value_or("passed");
  KILN_LOG(recompiles, "recompiling ", name_, ": ", reason);
  return miss_policy(static_cast<int64_t>(entries_.size()), reason);
}

MissAction FunctionCache::miss_policy(int64_t existing, const std::string& reason) {
  switch (stance()) {
    case Stance::fail_on_recompile:
      fail("recompilation of ", name_, " refused by stance fail_on_recompile: ", reason);
    case Stance::eager_on_recompile:
      ++stats_.eager_calls;
      return MissAction::run_eager;
    default:
      break;
  }
  const int64_t limit = config::get<int64_t>("recompile_limit");
  const int64_t total_limit = config::get<int64_t>("accumulated_recompile_limit");
  const bool over = existing >= limit || g_accumulated.load() >= total_limit;
  if (over) {
    const std::string what = existing >= limit
                                 ? "recompile_limit (" + std::to_string(limit) + ")"
                                 : "accumulated_recompile_limit (" + std::to_string(total_limit) + ")";
    KILN_CHECK(!config::get<bool>("fail_on_recompile_limit_hit"), name_, " hit ", what, "; last reason: ", reason);
    if (!limit_warned_) {
      logs::warn(name_ + " hit " + what + "; running it eagerly from now on. Last recompile reason: " + reason);
      limit_warned_ = true;
    }
    ++stats_.eager_calls;
    return MissAction::run_eager;
  }
  stats_.recompile_reasons.push_back(reason);
  return MissAction::compile;
}

std::vector<std::vector<DimPlan>> FunctionCache::plan_dims(std::span<const ArgView> args,
                                                           std::span<const std::vector<DimMark>* const> marks) {
  std::lock_guard lock(mutex_);
  const bool automatic = config::get<bool>("automatic_dynamic_shapes");
  const bool all_dynamic =
      options_.dynamic.value_or(false) || (!options_.dynamic && !config::get<bool>("assume_static_by_default"));
  if (seen_sizes_.size() != args.size()) seen_sizes_.assign(args.size(), {});
  if (automatic && !profile_loaded_) {
    profile_loaded_ = true;
    config::CompileScope scope(options_.mode, options_.options);  // job_id may be a per-compile option
    profile_ = load_dynamic_profile(name_);
  }
  bool profile_changed = false;
  std::vector<std::vector<DimPlan>> plan(args.size());
  for (size_t a = 0; a < args.size(); ++a) {
    if (args[a].kind != ArgView::Kind::tensor) continue;
    const TensorData& t = *args[a].tensor;
    // Automatic dynamic: remember sizes; a dim whose size changed becomes dynamic.
    auto& seen = seen_sizes_[a];
    if (seen.size() != t.sizes.size()) {
      seen = t.sizes;  // first sight, or the rank changed: start over for this argument
      // Profile-guided: dims an earlier run of this job found dynamic are dynamic at once.
      for (const auto& [arg, rank, dim] : profile_)
        if (arg == a && rank == seen.size() && dim < rank) seen[dim] = -1;
    } else {
      for (size_t d = 0; d < seen.size(); ++d)
        if (seen[d] != t.sizes[d] && seen[d] != -1) {
          seen[d] = -1;
          profile_changed = true;
        }
    }
    auto& p = plan[a];
    p.resize(t.sizes.size());
    // A non-contiguous input is traced with its strides, which are static: its sizes stay
    // static too unless the user marks a dim (then the trace asks for contiguous()).
    const bool contiguous = t.is_contiguous();
    for (size_t d = 0; d < t.sizes.size(); ++d) {
      const int64_t size = t.sizes[d];
      const bool changed = seen[d] == -1;
      p[d].dynamic = options_.dynamic != false && size >= 2 && contiguous &&
                     (all_dynamic || (automatic && !options_.dynamic.has_value() && changed));
    }
    if (marks[a] && options_.dynamic != false) {
      for (const DimMark& m : *marks[a]) {
        KILN_CHECK(m.dim >= 0 && m.dim < t.rank(), "mark_dynamic/mark_static on ", "input ", a, ": dim ", m.dim,
                   " out of range for rank ", t.rank());
        DimPlan& dp = p[static_cast<size_t>(m.dim)];
        dp.dynamic = m.dynamic;
        dp.user_dynamic = m.dynamic;
        dp.min = m.min;
        dp.max = m.max;
      }
    }
  }
  if (profile_changed) {
    for (size_t a = 0; a < seen_sizes_.size(); ++a)
      for (size_t d = 0; d < seen_sizes_[a].size(); ++d)
        if (seen_sizes_[a][d] == -1) {
          const ProfileDim pd{a, seen_sizes_[a].size(), d};
          if (std::find(profile_.begin(), profile_.end(), pd) == profile_.end()) profile_.push_back(pd);
        }
    config::CompileScope scope(options_.mode, options_.options);
    save_dynamic_profile(name_, profile_);
  }
  return plan;
}

namespace {
struct CompileContext {
  const std::string* name = nullptr;
  std::map<std::string, CompileStats::CacheLayer> cache;
};
thread_local CompileContext* t_compiling = nullptr;
}  // namespace

void note_cache_lookup(std::string_view layer, bool hit) {
  if (!t_compiling) return;
  CompileStats::CacheLayer& l = t_compiling->cache[std::string(layer)];
  (hit ? l.hits : l.misses) += 1;
}

const std::string& compiling_function() {
  static const std::string none;
  return t_compiling && t_compiling->name ? *t_compiling->name : none;
}

Executable FunctionCache::compile_graph(const Graph& graph, std::span<const TensorMeta> inputs) {
  config::CompileScope scope(options_.mode, options_.options);
  CompileContext context{&name_, {}};
  CompileContext* outer = t_compiling;
  t_compiling = &context;
  struct Restore {
    CompileContext* outer;
    CompileContext& context;
    FunctionCache& self;
    ~Restore() {
      t_compiling = outer;
      std::lock_guard lock(self.mutex_);
      for (const auto& [layer, c] : context.cache) {
        self.stats_.cache[layer].hits += c.hits;
        self.stats_.cache[layer].misses += c.misses;
      }
    }
  } restore{outer, context, *this};
  KILN_LOG(graph, "graph of ", name_, ":\n", graph.str());
  try {
    return BackendRegistry::get(options_.backend)(graph, inputs);
  } catch (const Error& e) {
    if (!config::get<bool>("suppress_errors")) throw;
    logs::warn("backend '" + options_.backend + "' failed on " + name_ + " (" + e.what() +
              "); running the graph with the eager backend because suppress_errors is set");
    return BackendRegistry::get("eager")(graph, inputs);
  }
}

std::shared_ptr<const CompiledEntry> FunctionCache::add(std::shared_ptr<const Graph> graph,
                                                        std::span<const ArgView> args,
                                                        std::vector<int32_t> tensor_arg_of_input,
                                                        std::vector<std::string> arg_names,
                                                        std::shared_ptr<const void> result_structure,
                                                        bool compile_now) {
  // Per-compile options are fixed for this function, so the guard hashes only the global layers.
  const uint64_t config_hash = config::codegen_hash();
  auto entry = std::make_shared<CompiledEntry>();
  entry->guards = GuardSet::build(*graph, args, tensor_arg_of_input, std::move(arg_names), config_hash);
  KILN_LOG(guards, "guards of ", name_, ":\n", entry->guards.str());
  std::vector<TensorMeta> metas;
  for (NodeId i : graph->inputs()) metas.push_back(graph->node(i).meta);
  if (compile_now) {
    entry->executable = compile_graph(*graph, metas);
  } else {
    // The entry lives in this cache, so `this` outlives the executable's runs through it.
    auto once = std::make_shared<std::once_flag>();
    auto compiled = std::make_shared<Executable>();
    entry->executable = [this, once, compiled, graph, metas](std::span<const TensorData* const> inputs) {
      std::call_once(*once, [&] { *compiled = compile_graph(*graph, metas); });
      return (*compiled)(inputs);
    };
  }
  entry->graph = std::move(graph);
  entry->tensor_arg_of_input = std::move(tensor_arg_of_input);
  entry->result_structure = std::move(result_structure);
  std::lock_guard lock(mutex_);
  if (!entries_.empty()) ++stats_.recompiles;
  ++stats_.compiles;
  ++g_accumulated;
  // Newest first: after a recompile the new shapes are the likely ones.
  entries_.insert(entries_.begin(), entry);
  return entry;
}

void FunctionCache::set_segmented() {
  std::lock_guard lock(mutex_);
  segmented_ = true;
  entries_.clear();
}

Executable FunctionCache::segment(const Graph& graph, std::span<const TensorMeta> inputs, size_t index,
                                  bool& compiled) {
  Graph key = graph.canonical();
  const uint64_t h = key.structural_hash();
  const uint64_t config_hash = config::codegen_hash();
  compiled = false;
  int64_t existing = 0;
  {
    std::lock_guard lock(mutex_);
    for (const Segment& s : segments_[h])
      if (s.config_hash == config_hash && s.graph == key) {
        ++stats_.cache_hits;
        return s.executable;
      }
    if (segment_variants_.size() <= index) segment_variants_.resize(index + 1, 0);
    existing = segment_variants_[index];
    if (existing > 0) {
      const std::string reason = "segment " + std::to_string(index) +
                                 " is a graph not compiled before (other shapes or dtypes, other values read at "
                                 "a graph break, or other codegen config)";
      KILN_LOG(recompiles, "recompiling ", name_, ": ", reason);
      if (miss_policy(existing, reason) == MissAction::run_eager) return BackendRegistry::get("eager")(graph, inputs);
    }
  }
  Executable exe = compile_graph(graph, inputs);
  std::lock_guard lock(mutex_);
  segments_[h].push_back({std::move(key), config_hash, exe});
  if (segment_variants_.size() <= index) segment_variants_.resize(index + 1, 0);
  ++segment_variants_[index];
  if (existing > 0) ++stats_.recompiles;
  ++stats_.compiles;
  ++g_accumulated;
  compiled = true;
  return exe;
}

void FunctionCache::count_graph_breaks(int64_t n) {
  std::lock_guard lock(mutex_);
  stats_.graph_breaks += n;
}

void FunctionCache::count_eager_call() {
  std::lock_guard lock(mutex_);
  ++stats_.eager_calls;
}

std::string CompileStats::str() const {
  std::ostringstream out;
  out << "compiles " << compiles << " (" << recompiles << " recompile" << (recompiles == 1 ? "" : "s")
      << "), cache hits " << cache_hits << ", guard failures " << guard_failures << ", graph breaks " << graph_breaks
      << ", eager calls " << eager_calls << "\n";
  for (size_t i = 0; i < recompile_reasons.size(); ++i)
    out << "  recompile " << i + 1 << ": " << recompile_reasons[i] << "\n";
  for (const auto& [layer, c] : cache)
    out << "  compile cache " << layer << ": " << c.hits << " hits, " << c.misses << " misses\n";
  return out.str();
}

std::ostream& operator<<(std::ostream& out, const CompileStats& s) { return out << s.str(); }

CompileStats FunctionCache::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace kiln
