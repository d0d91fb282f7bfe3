// The "kiln" backend's CPU path: schedule the optimised graph, generate LLVM IR, JIT the plan.
#include "cpu_backend.h"
#include "backend_cache.h"
#include "kiln/caches.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <exception>
#include <functional>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "kiln/cache/cache.h"
#include "kiln/capture/capture.h"
#include "kiln/config/config.h"
#include "kiln/reference/reference.h"
#include "kiln/config/log.h"
#include "kiln/graph/error.h"
#include "kiln/passes/passes.h"
#include "kiln/format/graph_json.h"
#include "kiln/plan/plan_json.h"
#include <nlohmann/json.hpp>

#if KILN_HAVE_CPU_TARGET
#include "kiln/cpu/codegen.h"
#include "kiln/cpu/executable.h"
#include "kiln/cpu/jit.h"
#include "kiln/schedule/schedule.h"
#endif

namespace kiln::detail {

std::string& debug_dump_dir() {
  thread_local std::string dir;
  return dir;
}

bool cpu_target_available() { return KILN_HAVE_CPU_TARGET != 0; }

#if KILN_HAVE_CPU_TARGET
namespace {
// The CPU target's one-time set-up on another core, started before the first trace: first what
// a cache hit checks (the host's identity, libmvec), then, once the process's first cpu lookup
// is over (a hit linked, or a compile about to begin), what compiles need (LLVM's target and a
// TargetMachine, ~2 ms of CPU), so that a first hit does not share the machine with it (a
// first hit measured 0.07-0.1 ms faster so on the 2-core VM). Joined at exit, before LLVM's own
// statics go; a process that exits before its first lookup skips the second part.
struct JitSetup {
  std::mutex mu;
  std::condition_variable cv;
  bool looked_up = false, exiting = false;
  std::thread thread;
  void first_lookup_over() {
    {
      std::lock_guard lock(mu);
      if (looked_up) return;
      looked_up = true;
    }
    cv.notify_all();
  }
  bool wait_for_first_lookup() {  // false: the process is exiting
    std::unique_lock lock(mu);
    cv.wait(lock, [this] { return looked_up || exiting; });
    return !exiting;
  }
  ~JitSetup() {
    {
      std::lock_guard lock(mu);
      exiting = true;
    }
    cv.notify_all();
    if (thread.joinable()) thread.join();
  }
};
JitSetup& jit_setup() {
  static JitSetup s;
  return s;
}
}  // namespace
#endif

void prepare_before_first_trace() {
  install_remote_cache();
  // Profile-guided dynamic shapes keep their profiles as records of the compile caches (same
  // layers, signing and bundles as the plans; device-independent).
  static std::once_flag profiles;
  std::call_once(profiles, [] {
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
  });
#if KILN_HAVE_CPU_TARGET
  static std::once_flag jit;
  std::call_once(jit, [] {
    JitSetup& s = jit_setup();
    s.thread = std::thread([&s] {
      try {
        cpu::prepare_for_cache_hits();
        if (s.wait_for_first_lookup()) cpu::prepare_for_compiles();
      } catch (const std::exception&) {
        // The compile that needs the target reports the same failure itself.
      }
    });
  });
#endif
}

bool cpu_target_applies(const Graph& g) {
  if (!cpu_target_available()) return false;
  for (const Node& n : g.nodes()) {
    if (n.meta.device.type != DeviceType::cpu) return false;
    for (const SymInt& s : n.meta.sizes)
      if (s == 0) return false;  // empty tensors stay on the reference target
  }
  return true;
}

#if KILN_HAVE_CPU_TARGET
namespace {

// What a cpu binary depends on beyond the graph and the codegen options (docs/cache.md), as a
// key holds it: the host's fingerprint (five cpuid leaves), so that a hit's key waits for
// neither LLVM's identity of the host (~30 cpuid) nor a target machine. Entries carry that
// identity (kIdentityBlob, host_identity_text()), which a hit checks before its code runs.
const std::string& cpu_device() {
  static const std::string d = "cpu " + cache::hash_hex(cpu::host_fingerprint());
  return d;
}
constexpr const char* kIdentityBlob = "host.identity";
const std::string& host_identity_text() {
  static const std::string text = cpu::identity_text(cpu::host_identity());
  return text;
}

std::string cpu_toolchain(const cpu::ExecutableOptions& o) {
  static const std::string llvm = "llvm " + cpu::llvm_version() + " " + cpu::target_triple() + " O";
  return llvm + std::to_string(o.opt_level);
}

// The cache layers below the in-process executables (the process's artifacts, then the disk):
// an executable linked from a cached entry's objects, or a fresh compile stored there.
std::shared_ptr<cpu::PlanExecutable> cached_plan(const Graph& canonical, std::string_view pipeline,
                                                 const std::function<plan::KernelPlan()>& make_plan,
                                                 const cpu::ExecutableOptions& o) {
  install_remote_cache();
  const cache::Enabled on = cache::enabled_layers();
  if (!on.memory && !on.disk && !on.remote) {
    jit_setup().first_lookup_over();
    check_may_compile(canonical, pipeline, "");
    return cpu::PlanExecutable::load(make_plan(), o);
  }
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const cache::KeyInputs in = cache::graph_key_inputs(canonical, format::to_json(canonical, -1), std::string(pipeline),
                                                      "cpu", cpu_device(), cpu_toolchain(o));
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
    KILN_LOG(cache, "cpu plan ", key, ": not looked up, debug_dir is set (compiling to write the dumps)");
  }
  bool store = true;
  if (e) {
    try {
      plan::KernelPlan p = take_plan(*e);
      std::vector<std::string> objects;
      std::string made_for;
      for (auto& [name, bytes] : e->blobs) {
        if (name == kIdentityBlob) made_for = std::move(bytes);
        else objects.push_back(std::move(bytes));
      }
      // Linked before the identity is checked (linking runs none of the code), so that the
      // set-up thread has time to finish it.
      std::shared_ptr<cpu::PlanExecutable> exe;
      std::exception_ptr link_error;
      try {
        exe = cpu::PlanExecutable::load_compiled(std::move(p), objects, o);
      } catch (const Error&) {
        link_error = std::current_exception();
      }
      const std::string& here = host_identity_text();
      if (made_for != here) {
        // Another host with the same fingerprint: its code may use instructions this one lacks.
        // The entry stays for the hosts it was made for; this process compiles its own.
        KILN_LOG(cache, "cpu plan ", key, ": made for another CPU (", made_for.empty() ? "not recorded" : made_for,
                 ") than this one (", here, "); compiling it here, not storing it over that entry");
        store = false;
      } else {
        if (link_error) std::rethrow_exception(link_error);
        jit_setup().first_lookup_over();
        KILN_LOG(cache, "cpu plan ", key, ": cache hit in ", ms_since(t0), " ms (key ", key_ms, " ms, linking ",
                 objects.size(), " object", objects.size() == 1 ? "" : "s", " ", exe->compile_seconds() * 1e3,
                 " ms; ", e->description, ")");
        return exe;
      }
    } catch (const Error& err) {
      cache::discard(key, std::string("cannot load it: ") + err.what() + "; compiling again");
    }
  }
  jit_setup().first_lookup_over();
  check_may_compile(canonical, pipeline, key);
  const auto t_compile = Clock::now();
  plan::KernelPlan p = make_plan();
  cache::Entry entry;
  entry.key = key;
  entry.guards = guards;
  entry.created_unix = static_cast<int64_t>(std::time(nullptr));
  const size_t kernels = p.kernels.size();
  put_plan(entry, p);
  auto exe = cpu::PlanExecutable::load(std::move(p), o);
  const std::vector<std::string> objects = exe->objects();
  for (size_t i = 0; i < objects.size(); ++i) entry.blobs.emplace_back("module" + std::to_string(i) + ".o", objects[i]);
  entry.blobs.emplace_back(kIdentityBlob, host_identity_text());
  entry.description = std::string(pipeline) + ": " + std::to_string(canonical.op_count()) + " ops, " +
                      std::to_string(kernels) + " kernels, " + std::to_string(objects.size()) + " objects";
  KILN_LOG(cache, "cpu plan ", key, ": compiled in ", ms_since(t_compile), " ms (JIT ", exe->compile_seconds() * 1e3,
           " ms; ", entry.description, ")");
  if (store) {
    cache::CacheStats puts;
    cache::store(entry, &puts);
  }
  return exe;
}

// max-autotune's choices go through sdk/cache's autotune cache (docs/cache.md): a kernel timed
// once on this device is not timed again, in this process or another that shares the caches.
void use_autotune_cache(cpu::ExecutableOptions& o) {
  o.recall = [](const std::string& signature) -> std::optional<cpu::ExecutableOptions::TuneChoice> {
    const std::optional<std::string> v = cache::autotune_lookup("cpu", cpu_device(), signature, "");
    if (!v) return std::nullopt;
    const nlohmann::json j = nlohmann::json::parse(*v, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("function") || !j["function"].is_string() ||
        !j.contains("chunk") || !j["chunk"].is_number_integer()) {
      KILN_LOG(cache, "autotune cache: ignoring a choice that is not {\"function\": string, \"chunk\": integer}: ", *v);
      return std::nullopt;
    }
    return cpu::ExecutableOptions::TuneChoice{j["function"].get<std::string>(), j["chunk"].get<int64_t>()};
  };
  o.remember = [](const std::string& signature, const std::string& kernel, const cpu::ExecutableOptions::TuneChoice& c) {
    const nlohmann::json j = {{"function", c.function}, {"chunk", c.chunk}};
    cache::autotune_store("cpu", cpu_device(), signature, "", j.dump(),
                          kernel + ": " + c.function + ", chunks of " + std::to_string(c.chunk));
  };
}

}  // namespace
#endif

Executable cpu_executable(const Graph& g) {
#if KILN_HAVE_CPU_TARGET
  // In-memory cache of executables: the same optimised graph under the same codegen options (a
  // second compiled function, a recompile back to known shapes) reuses the compiled plan. Below
  // it, the artifacts and disk layers of sdk/cache (docs/cache.md).
  struct Cached {
    Graph graph;
    uint64_t config = 0;
    Executable exe;
  };
  static std::mutex cache_mu;
  static std::map<uint64_t, std::vector<Cached>> cache;
  if (!cache::enabled_layers().memory) return cpu_compile(g);
  const Graph canonical = g.canonical();
  const uint64_t key = canonical.structural_hash(), config_hash = config::codegen_hash();
  {
    std::lock_guard lock(cache_mu);
    for (const Cached& c : cache[key])
      if (c.config == config_hash && c.graph == canonical) {
        KILN_LOG(cache, "cpu plan: in-memory hit for a graph of ", g.op_count(), " ops");
        ::kiln::note_cache_lookup("memory", true);
        return c.exe;
      }
  }
  ::kiln::note_cache_lookup("memory", false);
  Executable made = cpu_compile(g);
  std::lock_guard lock(cache_mu);
  cache[key].push_back(Cached{canonical, config_hash, made});
  return made;
#else
  (void)g;
  fail("this build of Kiln has no CPU target (KILN_WITH_LLVM=OFF)");
#endif
}

#if KILN_HAVE_CPU_TARGET
plan::KernelPlan cpu_plan(const Graph& g) {
  const schedule::Schedule s = schedule::schedule_graph(g);
  KILN_LOG(schedule, "schedule (", s.kernels.size(), " kernel", s.kernels.size() == 1 ? "" : "s", "):\n", s.str());
  plan::KernelPlan p = cpu::generate(s);
  KILN_LOG(output_code, "kernel plan:\n", p.str(), "module:\n", p.module_source());
  // debug_dir: the plan (JSON and readable), the generated module and the fusion decisions,
  // beside the graph they came from.
  if (const std::string& dir = debug_dump_dir(); !dir.empty()) {
    const std::filesystem::path path(dir);
    std::ofstream(path / "plan.json") << plan::plan_to_json(p);
    std::ofstream(path / "plan.txt") << p.str();
    std::ofstream(path / "kernels.ll") << p.module_source();
    std::ofstream decisions(path / "schedule.txt");
    for (const std::string& d : s.decisions) decisions << d << "\n";
    decisions << "\n" << s.str();
  }
  return p;
}

Executable cpu_compile(const Graph& g) {
  cpu::ExecutableOptions o;
  o.keep_buffers = config::get<bool>("cpu.keep_buffers");
  o.threads = static_cast<int>(config::get<int64_t>("cpu.threads"));
  o.autotune = config::get<bool>("max_autotune");
  if (o.autotune) use_autotune_cache(o);
  auto exe = cached_plan(g.canonical(), "cpu.graph", [&] { return cpu_plan(g); }, o);
  if (!o.autotune) return [exe](std::span<const TensorData* const> inputs) { return exe->run(inputs); };
  auto logged = std::make_shared<std::once_flag>();
  return [exe, logged](std::span<const TensorData* const> inputs) {
    std::vector<TensorData> r = exe->run(inputs);
    std::call_once(*logged, [&] { KILN_LOG(perf_hints, "max-autotune chose:\n", exe->tuning_report()); });
    return r;
  };
}
#endif

#if KILN_HAVE_CPU_TARGET
namespace {

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
#endif

std::vector<std::string> cpu_kernel_list(const Graph& traced) {
#if KILN_HAVE_CPU_TARGET
  const Graph g = passes::run_default_pipeline(traced);
  if (!cpu_target_applies(g)) return {};
  const schedule::Schedule s = schedule::schedule_graph(g);
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
#else
  (void)traced;
  return {};
#endif
}

#if KILN_HAVE_CPU_TARGET
namespace {

// Builds the single-op graph: every size other than 1 becomes a symbol, equal sizes the same
// symbol (so broadcasting needs no shape facts). `key` says what the kernel depends on.
Graph eager_graph(OpId op, std::span<const TensorData> inputs, const Attrs& attrs, bool symbolic, std::string& key) {
  Graph g;
  std::map<int64_t, SymInt> symbol_of;
  key = std::to_string(static_cast<int>(op)) + "|" + std::to_string(attrs.hash());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorData& t = inputs[i];
    TensorMeta m;
    m.dtype = t.dtype;
    key += "|" + std::string(dtype_name(t.dtype)) + "[";
    for (int64_t s : t.sizes) {
      if (s == 1 || !symbolic) {
        m.sizes.push_back(s);
        key += std::to_string(s) + ",";
        continue;
      }
      auto it = symbol_of.find(s);
      if (it == symbol_of.end())
        it = symbol_of.emplace(s, g.shapes().create_symbol(s, 2, std::numeric_limits<int64_t>::max(),
                                                           "input " + std::to_string(i), false)).first;
      m.sizes.push_back(it->second);
      key += "s" + std::to_string(it->second.expr().terms()[0].symbols[0]) + ",";
    }
    key += "]";
    g.add_input(m);
  }
  std::vector<NodeId> ids(inputs.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<NodeId>(i);
  g.set_outputs({g.add(op, ids, attrs)});
  return g;
}

struct EagerEntry {
  Attrs attrs;
  std::shared_ptr<cpu::PlanExecutable> exe;
};

}  // namespace
#endif

std::optional<TensorData> cpu_eager(OpId op, std::span<const TensorData> inputs, const Attrs& attrs,
                                    const TensorMeta& out) {
#if KILN_HAVE_CPU_TARGET
  const OpCategory cat = op_def(op).category;
  if (cat == OpCategory::layout || cat == OpCategory::source) return std::nullopt;
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
      std::optional<TensorData> r = cpu_eager(n.op, args, n.attrs, n.meta);
      values[static_cast<size_t>(id)] = r ? std::move(*r) : reference::eval_op(n.op, args, n.attrs);
    }
    return values[static_cast<size_t>(result)];
  }
  const int64_t threshold = config::get<int64_t>("cpu.eager_compile_threshold");
  if (threshold < 0) return std::nullopt;
  int64_t n = 1;  // the work: the largest of the output and the inputs
  for (const SymInt& s : out.sizes) n *= s.hint();
  if (n == 0) return std::nullopt;
  for (const TensorData& t : inputs) {
    if (t.numel() == 0) return std::nullopt;
    n = std::max(n, t.numel());
  }
  if (n < threshold) return std::nullopt;
  // Kernels are made for contiguous inputs.
  std::vector<TensorData> in(inputs.begin(), inputs.end());
  for (TensorData& t : in)
    if (!t.is_contiguous()) t = reference::contiguous(t);
  static std::mutex mu;
  static std::map<std::string, std::vector<EagerEntry>> cache;
  std::string key;
  Graph g = eager_graph(op, in, attrs, true, key);
  if (!g.shapes().facts().empty()) g = eager_graph(op, in, attrs, false, key);  // the rule needed exact sizes
  std::shared_ptr<cpu::PlanExecutable> exe;
  {
    std::lock_guard lock(mu);
    for (const EagerEntry& e : cache[key])
      if (e.attrs == attrs) exe = e.exe;
  }
  if (!exe) {
    exe = cached_plan(g.canonical(), "cpu.eager", [&] { return cpu::generate(schedule::schedule_graph(g)); }, {});
    std::lock_guard lock(mu);
    cache[key].push_back(EagerEntry{attrs, exe});
  }
  std::vector<TensorData> r = exe->run(std::span<const TensorData>(in));
  return std::move(r[0]);
#else
  (void)op, (void)inputs, (void)attrs, (void)out;
  return std::nullopt;
#endif
}

}  // namespace kiln::detail

namespace kiln {

std::string cache_device() {
#if KILN_HAVE_CPU_TARGET
  return "cpu " + detail::cpu_device();
#else
  return "none";
#endif
}

std::string save_cache_artifacts() {
#if KILN_HAVE_CPU_TARGET
  return cache::save_cache_artifacts(detail::cpu_device());
#else
  return cache::save_cache_artifacts("none");
#endif
}

CacheLoadResult load_cache_artifacts(std::string_view bytes) {
#if KILN_HAVE_CPU_TARGET
  const cache::LoadResult r = cache::load_cache_artifacts(bytes, detail::cpu_device());
#else
  const cache::LoadResult r = cache::load_cache_artifacts(bytes, "none");
#endif
  return CacheLoadResult{r.loaded, r.reason};
}

}  // namespace kiln
