// The Vulkan target in the C++ frontend: device moves and the "kiln" backend's Vulkan path
// (schedule the optimised graph, generate GLSL for the device's caps, run it with
// targets/vulkan/runtime). Inputs are bound where they lie on the device and outputs come back
// as tensors on the same Vulkan device. Plans go through sdk/cache's layers like the CPU
// target's: an entry holds the plan, each kernel's SPIR-V and the executable's VkPipelineCache
// data, so a hit in another process skips shaderc and the driver's compile. Eager ops on Vulkan
// tensors are not routed here yet (dispatch.cpp).
#include "vulkan_backend.h"
#include "backend_cache.h"

#include <map>
#include <mutex>

#include "kiln/config/config.h"
#include "kiln/config/log.h"
#include "kiln/graph/error.h"

#if KILN_HAVE_VULKAN_TARGET
#include <chrono>
#include <ctime>

#include "kiln/cache/cache.h"
#include "kiln/format/graph_json.h"
#include "kiln/plan/plan_json.h"
#include "kiln/schedule/schedule.h"
#include "kiln/vulkan/codegen.h"
#include "kiln/vulkan/runtime.h"
#endif

namespace kiln::detail {

#if KILN_HAVE_VULKAN_TARGET

TensorData vulkan_move(const TensorData& t, Device to) {
  const Device from = t.device();
  if (from == to) return t;
  std::string why;
  if (!vulkan::available(&why)) fail("to(", to.str(), "): ", why);
  if (to.type == DeviceType::cpu) {
    KILN_CHECK(from.type == DeviceType::vulkan, "to(cpu): cannot move a tensor from ", from.str());
    return vulkan::to_host(t);
  }
  KILN_CHECK(to.type == DeviceType::vulkan, "to(", to.str(), "): the Vulkan target cannot move a tensor there");
  if (from.type == DeviceType::vulkan) return vulkan::to_device(vulkan::to_host(t), to.index);
  KILN_CHECK(from.type == DeviceType::cpu, "to(", to.str(), "): cannot move a tensor from ", from.str());
  return vulkan::to_device(t, to.index);
}

bool vulkan_target_applies(const Graph& g) {
  int device = -1;
  for (NodeId id : g.inputs()) {
    const Device d = g.node(id).meta.device;
    if (d.type != DeviceType::vulkan) return false;
    if (device >= 0 && d.index != device) return false;
    device = d.index;
  }
  if (device < 0) return false;
  for (const Node& n : g.nodes()) {
    if (n.meta.device.type == DeviceType::cuda) return false;
    for (const SymInt& s : n.meta.sizes)
      if (s == 0) return false;
  }
  return true;
}

namespace {

// What a plan cache key says about the device: the driver compiles the pipelines for it, and the
// plan's shaders are generated for its caps.
std::string vulkan_device_key(int device) {
  std::string why;
  const std::vector<vulkan::DeviceInfo> ds = vulkan::list_devices(&why);
  KILN_CHECK(device >= 0 && static_cast<size_t>(device) < ds.size(), "no Vulkan device vulkan:", device, " (", why, ")");
  const vulkan::DeviceInfo& d = ds[static_cast<size_t>(device)];
  return d.name + " " + std::to_string(d.vendor_id) + ":" + std::to_string(d.device_id) + " Vulkan " + d.api_version + " " +
         d.driver + " " + vulkan::codegen_options_for(device).caps.str();
}

// The cache layers below the in-process executables (as cpu_backend's cached_plan): an
// executable loaded from an entry's plan, SPIR-V and pipeline cache, or a fresh compile stored.
std::shared_ptr<vulkan::PlanExecutable> cached_vulkan_plan(const Graph& g, const Graph& canonical, int device) {
  vulkan::ExecutableOptions o;
  o.device = device;
  auto make_plan = [&] {
    const vulkan::CodegenOptions options = vulkan::codegen_options_for(device);
    const schedule::Schedule s = schedule::schedule_graph(g, vulkan::schedule_target(options));
    KILN_LOG(schedule, "schedule (", s.kernels.size(), " kernel", s.kernels.size() == 1 ? "" : "s", "):\n", s.str());
    plan::KernelPlan p = vulkan::generate(s, options);
    KILN_LOG(output_code, "kernel plan:\n", p.str(), "module:\n", p.module_source());
    return p;
  };
  const cache::Enabled on = cache::enabled_layers();
  if (!on.memory && !on.disk && !on.remote) {
    check_may_compile(canonical, "vulkan.graph", "");
    return vulkan::PlanExecutable::load(make_plan(), o);
  }
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const cache::KeyInputs in = cache::graph_key_inputs(canonical, format::to_json(canonical, -1), "vulkan.graph", "vulkan",
                                                      vulkan_device_key(device), "shaderc glsl450 vulkan1.2");
  const std::string key = cache::make_key(in).hex;
  const std::vector<cache::Guard> guards = cache::guards_for(in);
  cache::CacheStats counts;
  std::optional<cache::Entry> e = cache::lookup(key, guards, &counts);
  note_cache_stats(counts);
  if (e) {
    try {
      plan::KernelPlan p = take_plan(*e);
      vulkan::ExecutableOptions ho = o;
      ho.spirv.assign(p.kernels.size(), "");
      for (auto& [name, bytes] : e->blobs) {
        if (name == "pipeline_cache") {
          ho.pipeline_cache = std::move(bytes);
        } else {
          KILN_CHECK(name.rfind("spirv", 0) == 0, "cache entry ", key, ": unknown blob '", name, "'");
          const size_t ki = static_cast<size_t>(std::stoul(name.substr(5)));
          KILN_CHECK(ki < ho.spirv.size(), "cache entry ", key, ": blob '", name, "' names no kernel of the plan");
          ho.spirv[ki] = std::move(bytes);
        }
      }
      auto exe = vulkan::PlanExecutable::load(std::move(p), ho);
      KILN_LOG(cache, "vulkan plan ", key, ": cache hit in ", ms_since(t0), " ms (pipelines ", exe->compile_seconds() * 1e3,
               " ms; ", e->description, ")");
      return exe;
    } catch (const std::exception& err) {
      cache::discard(key, std::string("cannot load it: ") + err.what() + "; compiling again");
    }
  }
  check_may_compile(canonical, "vulkan.graph", key);
  plan::KernelPlan p = make_plan();
  cache::Entry entry;
  entry.key = key;
  put_plan(entry, p);
  entry.guards = guards;
  entry.created_unix = static_cast<int64_t>(std::time(nullptr));
  const size_t kernels = p.kernels.size();
  auto exe = vulkan::PlanExecutable::load(std::move(p), o);
  const std::vector<std::string> spirv = exe->spirv();
  for (size_t i = 0; i < spirv.size(); ++i)
    if (!spirv[i].empty()) entry.blobs.emplace_back("spirv" + std::to_string(i), spirv[i]);
  entry.blobs.emplace_back("pipeline_cache", exe->pipeline_cache_data());
  entry.description = "vulkan.graph: " + std::to_string(canonical.op_count()) + " ops, " + std::to_string(kernels) + " kernels";
  KILN_LOG(cache, "vulkan plan ", key, ": compiled in ", ms_since(t0), " ms (shaderc and pipelines ", exe->compile_seconds() * 1e3,
           " ms; ", entry.description, ")");
  cache::store(entry);
  return exe;
}

}  // namespace

Executable vulkan_executable(const Graph& g) {
  int device = 0;
  for (NodeId id : g.inputs()) device = g.node(id).meta.device.index;
  struct Cached {
    Graph graph;
    uint64_t config = 0;
    int device = 0;
    std::shared_ptr<vulkan::PlanExecutable> exe;
  };
  static std::mutex mu;
  static std::map<uint64_t, std::vector<Cached>> cache;
  std::shared_ptr<vulkan::PlanExecutable> exe;
  const bool use_cache = !config::get<bool>("force_disable_caches");
  const Graph canonical = g.canonical();
  const uint64_t key = canonical.structural_hash(), config_hash = config::codegen_hash();
  if (use_cache) {
    std::lock_guard lock(mu);
    for (const Cached& c : cache[key])
      if (c.config == config_hash && c.device == device && c.graph == canonical) exe = c.exe;
  }
  if (!exe) {
    exe = cached_vulkan_plan(g, canonical, device);
    if (use_cache) {
      std::lock_guard lock(mu);
      cache[key].push_back(Cached{canonical, config_hash, device, exe});
    }
  }
  return [exe](std::span<const TensorData* const> inputs) {
    std::vector<TensorData> in;
    in.reserve(inputs.size());
    for (const TensorData* t : inputs) in.push_back(*t);
    // Inputs bound where they lie on the device; outputs stay there.
    return exe->run_device(in);
  };
}

#else

TensorData vulkan_move(const TensorData&, Device to) {
  fail("to(", to.str(), "): no Vulkan device: this build of Kiln has no Vulkan runtime (KILN_WITH_VULKAN=OFF)");
}
bool vulkan_target_applies(const Graph&) { return false; }
Executable vulkan_executable(const Graph&) { fail("this build of Kiln has no Vulkan target (KILN_WITH_VULKAN=OFF)"); }

#endif

}  // namespace kiln::detail
