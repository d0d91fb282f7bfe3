// The driver between the frontend and sdk/target's targets (target_driver.h): one path for
// every target, from the graph's devices to a cached, loaded plan.
#include "target_driver.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <set>

#include "backend_cache.h"
#include "device_move.h"
#include "kiln/cache/cache.h"
#include "kiln/caches.h"
#include "kiln/capture/capture.h"
#include "kiln/config/config.h"
#include "kiln/config/log.h"
#include "kiln/format/graph_json.h"
#include "kiln/plan/plan_json.h"
#include "kiln/graph/custom_ops.h"
#include "kiln/graph/error.h"
#include "kiln/passes/passes.h"
#include "kiln/eval/interpreter.h"
#include "kiln/tensor.h"

namespace kiln::detail {

std::string& debug_dump_dir() {
  thread_local std::string dir;
  return dir;
}

void prepare_before_first_trace() {
  install_remote_cache();
  target::ensure_builtin_targets();
  // Profile-guided dynamic shapes keep their profiles as records of the compile caches (same
  // layers, signing and bundles as the plans; device-independent).
  static std::once_flag once;
  std::call_once(once, [] {
    auto key = [](const std::string& function, const std::string& job) {
      return cache::RecordKey{"dynamic_profile", function, "job " + job, "", ""};
    };
    set_dynamic_profile_store(ProfileStore{
        [key](const std::string& function, const std::string& job) { return cache::get_record(key(function, job)); },
        [key](const std::string& function, const std::string& job, const std::string& profile) {
          const size_t dims = static_cast<size_t>(std::count(profile.begin(), profile.end(), '\n'));
          cache::put_record(key(function, job), profile,
                            "dynamic-shape profile of " + function + " (job " + job + "): " + std::to_string(dims) + " dims");
        }});
    for (const std::string& name : target::runtime_names()) target::runtime(name).prepare();
  });
}

target::Runtime* target_of(const Graph& g, Device* device) {
  target::ensure_builtin_targets();
  std::optional<Device> d;
  for (NodeId id : g.inputs()) {
    const Device in = g.node(id).meta.device;
    if (d && in != *d) return nullptr;
    d = in;
  }
  if (!d) d = Device::cpu();
  for (const Node& n : g.nodes()) {
    const DeviceType t = n.meta.device.type;
    if (t != d->type && !(t == DeviceType::cpu && d->type != DeviceType::cpu)) return nullptr;
    for (const SymInt& s : n.meta.sizes)
      if (s == 0) return nullptr;  // empty tensors stay on the reference interpreter
  }
  target::Runtime* rt = target::find_runtime(d->type);
  if (rt && device) *device = *d;
  return rt;
}

namespace {

using Clock = std::chrono::steady_clock;

// Schedule + codegen of `g` for the request, with debug_dir's dumps: the plan (JSON and readable),
// the generated module and the fusion decisions, beside the graph they came from.
target::Generated generate(const target::Codegen& cg, const Graph& g, const target::CodegenRequest& request) {
  target::Compiled c = target::compile_graph(cg, g, request);
  if (const std::string& dir = debug_dump_dir(); !dir.empty()) {
    const std::filesystem::path path(dir);
    const plan::KernelPlan& p = c.generated.plan;
    plan::KernelPlan saved = p;  // with what made it, so that `kiln run` can check it (docs/plan-trust.md)
    saved.origin = target::plan_origin(format::to_json(g, -1), request);
    std::ofstream(path / "plan.json") << plan::plan_to_json(saved);
    std::ofstream(path / "plan.txt") << p.str();
    std::ofstream(path / ("kernels." + cg.source_extension())) << p.module_source();
    std::ofstream decisions(path / "schedule.txt");
    for (const std::string& d : c.schedule.decisions) decisions << d << "\n";
    decisions << "\n" << c.schedule.str();
  }
  return std::move(c.generated);
}

// max-autotune's choices go through sdk/cache's autotune cache (docs/cache.md): a kernel timed
// once on this device is not timed again, in this process or another that shares the caches.
target::AutotuneStore autotune_store(target::Runtime& rt, Device device) {
  target::AutotuneStore s;
  s.recall = [&rt, device](const std::string& signature, const std::string& problem) {
    return cache::autotune_lookup(rt.name(), rt.device_identity(device), signature, problem);
  };
  s.remember = [&rt, device](const std::string& signature, const std::string& problem, const std::string& value,
                             const std::string& description) {
    cache::autotune_store(rt.name(), rt.device_identity(device), signature, problem, value, description);
  };
  return s;
}

// max-autotune's alternative plans travel in a cache entry as whole plans beside the plan.
constexpr std::string_view kAlternative = "alternative";
void put_alternatives(cache::Entry& e, const std::vector<plan::KernelPlan>& alternatives) {
  for (size_t i = 0; i < alternatives.size(); ++i)
    e.blobs.emplace_back(std::string(kAlternative) + std::to_string(i) + ".json", plan::plan_to_json(alternatives[i]));
}
std::vector<plan::KernelPlan> take_alternatives(cache::Entry& e) {
  std::vector<plan::KernelPlan> alternatives;
  std::erase_if(e.blobs, [&](const std::pair<std::string, std::string>& b) {
    if (b.first.rfind(kAlternative, 0) != 0) return false;
    alternatives.push_back(plan::plan_from_json(b.second, "cache entry " + e.key + ": " + b.first));
    return true;
  });
  return alternatives;
}

// The cache layers below the in-process executables (the process's artifacts, the disk, the
// remote store): a plan loaded from a cached entry's plan and artifacts, or a fresh compile
// stored there. `g` is what the codegen compiles, `canonical` what keys it.
std::shared_ptr<target::LoadedPlan> cached_plan(target::Runtime& rt, Device device, const Graph& g, const Graph& canonical,
                                                bool eager) {
  install_remote_cache();
  const target::Codegen& cg = target::codegen(rt.name());
  const std::string pipeline = rt.name() + (eager ? ".eager" : ".graph");
  target::LoadOptions lo;
  lo.device = device;
  lo.eager = eager;
  lo.autotune = autotune_store(rt, device);
  const cache::Enabled on = cache::enabled_layers();
  if (!on.memory && !on.disk && !on.remote) {
    rt.before_compile();
    check_may_compile(canonical, pipeline, "");
    return rt.load(generate(cg, g, rt.codegen_request(device)), nullptr, lo, nullptr);
  }
  const auto t0 = Clock::now();
  const cache::KeyInputs in = cache::graph_key_inputs(canonical, format::key_json(canonical, cache::hash_hex_of), pipeline, rt.name(),
                                                      rt.device_identity(device), rt.toolchain(device));
  const std::string key = cache::make_key(in).hex;
  const double key_ms = ms_since(t0);
  const std::vector<cache::Guard> guards = cache::guards_for(in);
  // With debug_dir set the plan is compiled (and stored), so that its dumps are written.
  std::optional<cache::Entry> e;
  if (debug_dump_dir().empty()) {
    cache::CacheStats counts;
    e = cache::lookup(key, guards, &counts);
    note_cache_stats(counts);
  } else {
    KILN_LOG(cache, pipeline, " plan ", key, ": not looked up, debug_dir is set (compiling to write the dumps)");
  }
  bool store = true;
  if (e) {
    try {
      target::Generated plans;
      plans.plan = take_plan(*e);
      plans.alternatives = take_alternatives(*e);
      std::string refused;
      if (auto loaded = rt.load(std::move(plans), &e->blobs, lo, &refused)) {
        KILN_LOG(cache, pipeline, " plan ", key, ": cache hit in ", ms_since(t0), " ms (key ", key_ms, " ms, ",
                 loaded->compile_report(), "; ", e->description, ")");
        return loaded;
      }
      // The entry stays for the devices it was made for; this process compiles its own.
      KILN_LOG(cache, pipeline, " plan ", key, ": ", refused, "; compiling it here, not storing it over that entry");
      store = false;
    } catch (const InternalError&) {
      throw;  // a bug in Kiln, not a bad entry: never hidden by a recompile
    } catch (const std::exception& err) {
      // A bad entry (kiln::Error, or a library's exception on its corrupt bytes) is dropped.
      cache::discard(key, std::string("cannot load it: ") + err.what() + "; compiling again");
    }
  }
  rt.before_compile();
  check_may_compile(canonical, pipeline, key);
  const auto t_compile = Clock::now();
  target::Generated plans = generate(cg, g, rt.codegen_request(device));
  const double generate_ms = ms_since(t_compile);  // scheduling and code generation
  cache::Entry entry;
  entry.key = key;
  entry.guards = guards;
  entry.created_unix = static_cast<int64_t>(std::time(nullptr));
  const size_t kernels = plans.plan.kernels.size();
  put_plan(entry, plans.plan);
  put_alternatives(entry, plans.alternatives);
  auto loaded = rt.load(std::move(plans), nullptr, lo, nullptr);
  target::Artifacts artifacts = loaded->artifacts();
  entry.description = pipeline + ": " + std::to_string(canonical.op_count()) + " ops, " + std::to_string(kernels) +
                      " kernels, " + std::to_string(artifacts.size()) + " artifacts";
  entry.blobs.insert(entry.blobs.end(), std::make_move_iterator(artifacts.begin()), std::make_move_iterator(artifacts.end()));
  KILN_LOG(cache, pipeline, " plan ", key, ": compiled in ", ms_since(t_compile), " ms (key ", key_ms, " ms, schedule and codegen ",
           generate_ms, " ms, ", loaded->compile_report(), "; ", entry.description, ")");
  if (store) cache::store(entry);
  return loaded;
}

// The in-memory cache of loaded plans: the same canonical graph under the same codegen options
// on the same device (a second compiled function, a recompile back to known shapes, an eager op
// seen before) reuses the loaded plan. Below it, sdk/cache's layers (cached_plan).
std::shared_ptr<target::LoadedPlan> loaded_plan(target::Runtime& rt, Device device, const Graph& g, bool eager) {
  struct Cached {
    Graph graph;
    uint64_t config = 0;
    Device device;
    bool eager = false;
    std::string target;
    std::shared_ptr<target::LoadedPlan> plan;
  };
  static std::mutex mu;
  // Never destroyed: a loaded plan holds device memory whose device (a static of its runtime) may
  // be gone by the time statics are destroyed at exit (a Vulkan plan freed its buffers into a
  // destroyed device's free lists). The process's end reclaims both.
  static auto& cache = *new std::map<uint64_t, std::vector<Cached>>();
  const Graph canonical = g.canonical();
  if (!cache::enabled_layers().memory) return cached_plan(rt, device, g, canonical, eager);
  const uint64_t key = canonical.structural_hash(), config_hash = config::codegen_hash();
  const std::string target = rt.name();
  {
    std::lock_guard lock(mu);
    for (const Cached& c : cache[key])
      if (c.config == config_hash && c.device == device && c.eager == eager && c.target == target && c.graph == canonical) {
        if (!eager) {
          KILN_LOG(cache, target, " plan: in-memory hit for a graph of ", g.op_count(), " ops");
          ::kiln::note_cache_lookup("memory", true);
        }
        return c.plan;
      }
  }
  if (!eager) ::kiln::note_cache_lookup("memory", false);
  auto made = cached_plan(rt, device, g, canonical, eager);
  std::lock_guard lock(mu);
  cache[key].push_back(Cached{canonical, config_hash, device, eager, target, made});
  return made;
}

// The composite each node of `scheduled` (the scheduler's graph for `g`) comes from; empty when
// the replayed decomposition does not line up with it node for node (the scheduler's prepare
// added casts around a matmul, say), so nothing is named rather than something wrong.
std::vector<std::string_view> composite_origins(const Graph& g, const Graph& scheduled) {
  std::vector<std::string_view> origin;
  const Graph out = passes::decompose_with_origins(g, origin);
  if (out.size() != scheduled.size()) return {};
  for (NodeId id = 0; id < static_cast<NodeId>(out.size()); ++id)
    if (out.node(id).op != scheduled.node(id).op || out.node(id).inputs != scheduled.node(id).inputs) return {};
  return origin;
}

}  // namespace

Executable target_executable(target::Runtime& rt, Device device, const Graph& g) {
  std::shared_ptr<target::LoadedPlan> p = loaded_plan(rt, device, g, false);
  if (!config::get<bool>("max_autotune")) return [p](std::span<const TensorData* const> inputs) { return p->run(inputs); };
  auto logged = std::make_shared<std::once_flag>();
  return [p, logged](std::span<const TensorData* const> inputs) {
    std::vector<TensorData> r = p->run(inputs);
    std::call_once(*logged, [&] { KILN_LOG(perf_hints, "max-autotune chose:\n", p->tuning_report()); });
    return r;
  };
}

}  // namespace kiln::detail

namespace kiln {
std::shared_ptr<target::LoadedPlan> cached_target_plan(const Graph& optimised, Device device) {
  detail::prepare_before_first_trace();
  target::Runtime* rt = target::find_runtime(device.type);
  KILN_CHECK(rt != nullptr, "cached_target_plan: this build of Kiln has no target for ", device.str());
  return detail::loaded_plan(*rt, device, optimised, false);
}

std::shared_ptr<void> start_device_setup(const Graph& g, Device device) {
  // The runtimes' one-time set-up first (the CPU's opens LLVM's module, which every process
  // that compiles needs): dlopen holds the loader's lock, so a library loading on the new thread
  // would otherwise take turns with it.
  detail::prepare_before_first_trace();
  target::Runtime* rt = target::find_runtime(device.type);
  if (!rt || !config::get<bool>("early_library_start")) return nullptr;
  try {
    return rt->start_device_setup(device, g);
  } catch (const std::exception&) {
    return nullptr;  // the compile that needs the device reports the same failure itself
  }
}
}  // namespace kiln

namespace kiln::detail {

std::vector<std::string> kernel_list(const Graph& traced) {
  const Graph g = passes::run_default_pipeline(traced);
  Device device;
  target::Runtime* rt = target_of(g, &device);
  if (!rt) return {};
  const schedule::Schedule s =
      schedule::schedule_graph(g, target::codegen(rt->name()).capabilities(rt->codegen_request(device)));
  const Graph& sg = s.graph;
  const std::vector<std::string_view> origin = composite_origins(g, sg);
  std::vector<bool> realized(sg.size(), false);
  for (const schedule::Kernel& k : s.kernels)
    for (NodeId p : k.provenance) realized[static_cast<size_t>(p)] = true;
  std::vector<std::string> lines;
  for (const schedule::Kernel& k : s.kernels) {
    // What the kernel computes: the nodes it realizes and the inline values they read
    // (recomputed in this kernel), leaving out views, inputs and constants.
    std::set<NodeId> nodes(k.provenance.begin(), k.provenance.end());
    std::vector<NodeId> stack(k.provenance.begin(), k.provenance.end());
    std::set<NodeId> seen;
    while (!stack.empty()) {
      const NodeId id = stack.back();
      stack.pop_back();
      for (NodeId i : sg.node(id).inputs) {
        const Node& n = sg.node(i);
        if (realized[static_cast<size_t>(i)] || n.op == OpId::input || n.op == OpId::constant || n.op == OpId::full ||
            !seen.insert(i).second)
          continue;
        if (op_def(n.op).category != OpCategory::layout) nodes.insert(i);
        stack.push_back(i);
      }
    }
    // Long lists (a fused chain of thousands of ops) are cut after kMaxListed names.
    constexpr size_t kMaxListed = 32;
    std::string ops, composites;
    std::vector<std::string_view> named;
    size_t listed = 0;
    for (NodeId id : nodes) {
      if (listed++ < kMaxListed) ops += (ops.empty() ? "" : ", ") + std::string(op_name(sg.node(id).op));
      else if (listed == kMaxListed + 1) ops += ", ... (" + std::to_string(nodes.size()) + " ops)";
      const std::string_view from = origin.empty() ? std::string_view() : origin[static_cast<size_t>(id)];
      if (!from.empty() && std::find(named.begin(), named.end(), from) == named.end()) {
        named.push_back(from);
        composites += (composites.empty() ? "" : ", ") + std::string(from);
      }
    }
    std::string line = k.name + " " + std::string(schedule::kernel_kind_name(k.kind)) + ": " + ops;
    if (!composites.empty()) line += " (" + composites + ")";
    lines.push_back(std::move(line));
  }
  return lines;
}

namespace {

// The single-op graph of an eager op and the key of its kernel (what the kernel depends on).
// Symbolic: every size other than 1 becomes a symbol, equal sizes the same symbol (so
// broadcasting needs no shape facts), for contiguous inputs; else the inputs' own metas.
Graph eager_graph(OpId op, std::span<const TensorData> inputs, const Attrs& attrs, bool symbolic, std::string& key) {
  Graph g;
  std::map<int64_t, SymInt> symbol_of;
  key = std::to_string(static_cast<int>(op)) + "|" + std::to_string(attrs.hash());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorData& t = inputs[i];
    TensorMeta m = t.meta();
    if (symbolic) {
      key += "|" + std::string(dtype_name(t.dtype)) + "[";
      m.sizes.clear();
      for (int64_t s : t.sizes) {
        if (s == 1) {
          m.sizes.push_back(s);
          key += "1,";
          continue;
        }
        auto it = symbol_of.find(s);
        if (it == symbol_of.end())
          it = symbol_of.emplace(s, g.shapes().create_symbol(s, 2, std::numeric_limits<int64_t>::max(),
                                                             "input " + std::to_string(i), false)).first;
        m.sizes.push_back(it->second);
        key += "s" + std::to_string(it->second.expr().terms()[0].symbols[0]) + ",";
      }
      key += "]@" + t.device().str();
    } else {
      key += "|" + m.str() + "@" + t.device().str();
    }
    g.add_input(m);
  }
  std::vector<NodeId> ids(inputs.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<NodeId>(i);
  g.set_outputs({g.add(op, ids, attrs)});
  return g;
}

struct EagerEntry {
  Attrs attrs;
  std::shared_ptr<target::LoadedPlan> plan;
};

}  // namespace

std::optional<TensorData> eager(OpId op, std::span<const TensorData> inputs, const Attrs& attrs, const TensorMeta& out) {
  target::ensure_builtin_targets();
  Device dev = Device::cpu();
  for (const TensorData& t : inputs) {
    const Device d = t.device();
    if (d.type == DeviceType::cpu) continue;
    KILN_CHECK(dev.type == DeviceType::cpu || d == dev, op_name(op), ": the inputs are on different devices (", dev.str(),
               " and ", d.str(), ")");
    dev = d;
  }
  if (dev.type != DeviceType::cpu)
    for (const TensorData& t : inputs)  // 0-d host scalars are fine
      KILN_CHECK(t.device().type != DeviceType::cpu || t.rank() == 0, op_name(op),
                 ": the inputs are on different devices (cpu and ", dev.str(), ")");
  target::Runtime* rt = target::find_runtime(dev.type);
  if (!rt) {
    KILN_CHECK(dev.type == DeviceType::cpu, op_name(op), ": this build of Kiln has no target for ", dev.str());
    return std::nullopt;
  }
  const target::EagerPolicy policy = rt->eager_policy();
  KILN_CHECK(policy.enabled, op_name(op), ": eager ops do not run on ", dev.str(), " tensors (compile the function, or ",
             "move them with to())");
  // The reference interpreter: on the host as it is; for a device through host copies.
  auto on_reference = [&]() -> std::optional<TensorData> {
    if (dev.type == DeviceType::cpu) return std::nullopt;
    std::vector<TensorData> host;
    for (const TensorData& t : inputs) host.push_back(move_data(t, Device::cpu()));
    return rt->move(eval::eval_op(op, host, attrs), dev);
  };
  const OpCategory cat = op_def(op).category;
  // Sources, views that need a copy on the host, and custom ops without a kernel for this device's
  // target (kiln/graph/custom_ops.h: theirs is the host's) are the reference's; a custom op with
  // one runs as a single-op plan of that kernel, like any other op here.
  const bool device_custom = cat == OpCategory::custom && dev.type != DeviceType::cpu &&
                             find_custom_op(attrs.s(0), attrs.s(1))->device_kernels.count(rt->name()) > 0;
  if (cat == OpCategory::source || (cat == OpCategory::custom && !device_custom) ||
      (cat == OpCategory::layout && dev.type == DeviceType::cpu))
    return on_reference();
  if (op_def(op).decompose) {
    // A composite runs as its decomposition, one kernel per primitive (eager fuses nothing).
    Graph g;
    std::vector<NodeId> ids;
    for (const TensorData& t : inputs) ids.push_back(g.add_input(t.meta()));
    const NodeId result = op_def(op).decompose(g, ids, attrs);
    std::vector<TensorData> values(g.size());
    for (size_t i = 0; i < inputs.size(); ++i) values[static_cast<size_t>(ids[i])] = inputs[i];
    for (NodeId id = 0; id <= result; ++id) {
      const Node& n = g.node(id);
      if (n.op == OpId::input) continue;
      std::vector<TensorData> args;
      for (NodeId i : n.inputs) args.push_back(values[static_cast<size_t>(i)]);
      std::optional<TensorData> r = eager(n.op, args, n.attrs, n.meta);
      values[static_cast<size_t>(id)] = r ? std::move(*r) : eval::eval_op(n.op, args, n.attrs);
    }
    return values[static_cast<size_t>(result)];
  }
  if (policy.min_elements < 0) return on_reference();
  int64_t n = 1;  // the work: the largest of the output and the inputs
  for (const SymInt& s : out.sizes) n *= s.hint();
  bool empty = n == 0;
  for (const TensorData& t : inputs) {
    empty = empty || t.numel() == 0;
    n = std::max(n, t.numel());
  }
  if (empty || n < policy.min_elements) return on_reference();
  std::vector<TensorData> in;
  for (const TensorData& t0 : inputs) {
    TensorData t = t0.device() == dev ? t0 : rt->move(t0, dev);
    // Kernels of a shape pattern are made for contiguous inputs.
    if (policy.symbolic_sizes && !t.is_contiguous())
      t = dev.type == DeviceType::cpu ? eval::contiguous(t)
                                      : rt->move(eval::contiguous(move_data(t, Device::cpu())), dev);
    in.push_back(std::move(t));
  }
  static std::mutex mu;
  static auto& kernels = *new std::map<std::string, std::vector<EagerEntry>>();  // never destroyed, as loaded_plan's
  std::string key;
  Graph g = eager_graph(op, in, attrs, policy.symbolic_sizes, key);
  if (policy.symbolic_sizes && !g.shapes().facts().empty())
    g = eager_graph(op, in, attrs, false, key);  // the shape rule needed exact sizes
  std::shared_ptr<target::LoadedPlan> plan;
  {
    std::lock_guard lock(mu);
    for (const EagerEntry& e : kernels[key])
      if (e.attrs == attrs) plan = e.plan;
  }
  if (!plan) {
    plan = cached_plan(*rt, dev, g, g.canonical(), true);
    std::lock_guard lock(mu);
    kernels[key].push_back(EagerEntry{attrs, plan});
  }
  std::vector<const TensorData*> ptrs;
  for (const TensorData& t : in) ptrs.push_back(&t);
  return std::move(plan->run(ptrs)[0]);
}

TensorData move_data(const TensorData& t, Device to) {
  const Device from = t.device();
  if (from == to) return t;
  if (from.type != DeviceType::cpu && to.type != DeviceType::cpu && from.type != to.type)
    return move_data(move_data(t, Device::cpu()), to);  // between kinds of device: through the host
  const DeviceType type = from.type == DeviceType::cpu ? to.type : from.type;
  target::ensure_builtin_targets();
  target::Runtime* rt = target::find_runtime(type);
  const char* kind = type == DeviceType::cuda ? "CUDA" : type == DeviceType::vulkan ? "Vulkan" : "CPU";
  KILN_CHECK(rt != nullptr, "to(", to.str(), "): no ", kind, " device: this build of Kiln has no ", kind,
             " target to move a tensor from ", from.str());
  return rt->move(t, to);
}

}  // namespace kiln::detail

namespace kiln {

void synchronize(Device device) {
  if (device.type == DeviceType::cpu) return;
  target::ensure_builtin_targets();
  target::Runtime* rt = target::find_runtime(device.type);
  KILN_CHECK(rt != nullptr, "synchronize(", device.str(), "): this build of Kiln has no target for it");
  rt->synchronize(device);
}

namespace {
// The host's identity in cache bundles (that of the runtime of the host; "none" without one).
std::string host_identity() {
  target::ensure_builtin_targets();
  target::Runtime* rt = target::find_runtime(DeviceType::cpu);
  return rt ? rt->device_identity(Device::cpu()) : "none";
}
}  // namespace

std::string cache_device() {
  const std::string id = host_identity();
  return id == "none" ? id : "cpu " + id;
}

std::string save_cache_artifacts() {
  detail::install_remote_cache();  // the signer of KILN_CACHE_SECRET
  return cache::save_cache_artifacts(host_identity());
}

CacheLoadResult load_cache_artifacts(std::string_view bytes) {
  detail::install_remote_cache();
  const cache::LoadResult r = cache::load_cache_artifacts(bytes, host_identity());
  return CacheLoadResult{r.loaded, r.reason};
}

std::vector<CacheEntryCheck> verify_disk_cache(bool remove_failed) {
  detail::install_remote_cache();
  target::ensure_builtin_targets();
  cache::DiskStore disk = cache::disk_store();
  std::vector<CacheEntryCheck> out;
  for (const cache::StoredInfo& info : disk.list()) {
    CacheEntryCheck c;
    c.key = info.key;
    auto verdict = [&](CacheEntryCheck::Verdict v, std::string detail) {
      if (v == CacheEntryCheck::removed && remove_failed) disk.remove(info.key);
      c.verdict = v;
      c.detail = std::move(detail);
      out.push_back(c);
    };
    std::optional<std::string> bytes;
    try {
      bytes = disk.get(info.key);  // with a secret, only what it signed (the rest is removed)
    } catch (const Error& err) {
      verdict(CacheEntryCheck::removed, err.what());
      continue;
    }
    if (!bytes) {
      verdict(CacheEntryCheck::removed, cache::signer() ? "not a regular file, or not signed with " + cache::signer()->name
                                                        : "not a regular file (or removed meanwhile)");
      continue;
    }
    cache::Entry e;
    try {
      e = cache::decode_entry(*bytes, disk.path_of(info.key));
    } catch (const Error& err) {
      verdict(CacheEntryCheck::removed, err.what());
      continue;
    }
    c.description = e.description;
    if (e.key != info.key) {
      verdict(CacheEntryCheck::removed, "it holds the entry of key " + e.key + ", not its own");
      continue;
    }
    auto guard = [&](std::string_view name) {
      for (const cache::Guard& g : e.guards)
        if (g.name == name) return g.value;
      return std::string();
    };
    const std::string pipeline = guard("pipeline");
    if (pipeline.rfind("record.", 0) == 0) {
      verdict(CacheEntryCheck::ok, "a record (a value, no code)");
      continue;
    }
    if (guard("kiln_version") != cache::kiln_version()) {
      verdict(CacheEntryCheck::skipped, "made by Kiln " + guard("kiln_version") + ": this Kiln never loads it");
      continue;
    }
    target::Runtime* rt = target::find_runtime(guard("target"));
    std::string why;
    if (!rt) {
      verdict(CacheEntryCheck::skipped, "its target '" + guard("target") + "' is not in this build");
      continue;
    }
    if (!rt->available(&why)) {
      verdict(CacheEntryCheck::skipped, "its target '" + rt->name() + "' cannot run here: " + why);
      continue;
    }
    const Device device{rt->device_type(), 0};
    if (guard("device") != rt->device_identity(device) || guard("toolchain") != rt->toolchain(device)) {
      verdict(CacheEntryCheck::skipped, "made for " + guard("device") + " (" + guard("toolchain") + "), not this " +
                                            rt->device_identity(device) + " (" + rt->toolchain(device) + ")");
      continue;
    }
    // Loaded as a hit loads it: the plan validated, the artifacts linked or loaded, nothing run.
    try {
      target::Generated plans;
      plans.plan = detail::take_plan(e);
      plans.alternatives = detail::take_alternatives(e);
      target::LoadOptions lo;
      lo.device = device;
      lo.eager = pipeline.ends_with(".eager");
      std::string refused;
      if (rt->load(std::move(plans), &e.blobs, lo, &refused)) verdict(CacheEntryCheck::ok, "loads");
      else verdict(CacheEntryCheck::skipped, refused);
    } catch (const InternalError&) {
      throw;
    } catch (const std::exception& err) {
      verdict(CacheEntryCheck::removed, err.what());
    }
  }
  return out;
}

}  // namespace kiln
