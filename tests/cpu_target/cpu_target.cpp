// The target test_cpu_target tests: passes -> schedule -> LLVM IR (targets/cpu/codegen) -> ORC
// JIT (targets/cpu/runtime), run by cpu::PlanExecutable.
#include "harness.h"
#include "kiln/cpu/codegen.h"
#include "kiln/cpu/executable.h"
#include "kiln/schedule/schedule.h"

namespace cpu_test {
namespace {

struct CpuRunner final : Runner {
  std::shared_ptr<cpu::PlanExecutable> exe;
  std::vector<TensorData> run(std::span<const TensorData> inputs) override { return exe->run(inputs); }
};

void compile_for_cpu(Compiled& c, const CompileOptions& o) {
  cpu::CodegenOptions co = cpu::CodegenOptions::from_config();
  co.emulate_precision_casts = co.emulate_precision_casts || o.emulate_precision_casts;
  if (o.small_grains) co.pointwise_grain = co.reduction_grain = 1;
  co.autotune_variants = co.autotune_variants || o.autotune;
  c.plan = cpu::generate(schedule::schedule_graph(c.optimized), co);
  cpu::ExecutableOptions eo;
  eo.keep_buffers = o.keep_buffers;
  eo.autotune = o.autotune;
  auto r = std::make_shared<CpuRunner>();
  r->exe = cpu::PlanExecutable::load(c.plan, eo);
  compile_stats().jit_seconds += r->exe->compile_seconds();
  c.exe = std::move(r);
}

struct SetTarget {
  SetTarget() { target() = Target{"cpu", compile_for_cpu}; }
} const set_target;

}  // namespace
}  // namespace cpu_test
