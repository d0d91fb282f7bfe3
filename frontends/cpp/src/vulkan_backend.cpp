// The Vulkan target in the C++ frontend: device moves and the "kiln" backend's Vulkan path
// (schedule the optimised graph, generate GLSL for the device's caps, run it with
// targets/vulkan/runtime). Outputs come back as tensors on the same Vulkan device. Eager ops on
// Vulkan tensors are not routed here yet (dispatch.cpp).
#include "vulkan_backend.h"

#include <map>
#include <mutex>

#include "kiln/config/config.h"
#include "kiln/config/log.h"
#include "kiln/graph/error.h"

#if KILN_HAVE_VULKAN_TARGET
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
    const schedule::Schedule s = schedule::schedule_graph(g);
    KILN_LOG(schedule, "schedule (", s.kernels.size(), " kernel", s.kernels.size() == 1 ? "" : "s", "):\n", s.str());
    plan::KernelPlan p = vulkan::generate(s, vulkan::codegen_options_for(device));
    KILN_LOG(output_code, "kernel plan:\n", p.str(), "module:\n", p.module_source());
    vulkan::ExecutableOptions o;
    o.device = device;
    exe = vulkan::PlanExecutable::load(std::move(p), o);
    if (use_cache) {
      std::lock_guard lock(mu);
      cache[key].push_back(Cached{canonical, config_hash, device, exe});
    }
  }
  return [exe, device](std::span<const TensorData* const> inputs) {
    std::vector<TensorData> in;
    in.reserve(inputs.size());
    for (const TensorData* t : inputs) in.push_back(*t);
    std::vector<TensorData> outs = exe->run_host(in);
    for (TensorData& t : outs) t = vulkan::to_device(t, device);
    return outs;
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
