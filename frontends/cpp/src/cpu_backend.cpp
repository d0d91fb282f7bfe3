// The "kiln" backend's CPU path: schedule the optimised graph, generate LLVM IR, JIT the plan.
#include "cpu_backend.h"

#include "kiln/config/config.h"
#include "kiln/config/log.h"

#if KILN_HAVE_CPU_TARGET
#include "kiln/cpu/codegen.h"
#include "kiln/cpu/executable.h"
#include "kiln/schedule/schedule.h"
#endif

namespace kiln::detail {

bool cpu_target_available() { return KILN_HAVE_CPU_TARGET != 0; }

bool cpu_target_applies(const Graph& g) {
  if (!cpu_target_available()) return false;
  for (const Node& n : g.nodes()) {
    if (n.meta.device.type != DeviceType::cpu) return false;
    for (const SymInt& s : n.meta.sizes)
      if (s == 0) return false;  // empty tensors stay on the reference target
  }
  return true;
}

Executable cpu_executable(const Graph& g) {
#if KILN_HAVE_CPU_TARGET
  const schedule::Schedule s = schedule::schedule_graph(g);
  KILN_LOG(schedule, "schedule (", s.kernels.size(), " kernel", s.kernels.size() == 1 ? "" : "s", "):\n", s.str());
  plan::KernelPlan p = cpu::generate(s);
  KILN_LOG(output_code, "kernel plan:\n", p.str(), "module:\n", p.module_source());
  cpu::ExecutableOptions o;
  o.keep_buffers = config::get<bool>("cpu.keep_buffers");
  auto exe = cpu::PlanExecutable::load(std::move(p), o);
  return [exe](std::span<const TensorData* const> inputs) { return exe->run(inputs); };
#else
  (void)g;
  fail("this build of Kiln has no CPU target (KILN_WITH_LLVM=OFF)");
#endif
}

}  // namespace kiln::detail
