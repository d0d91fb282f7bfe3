// The target test_cpu_target tests: passes -> schedule -> LLVM IR (targets/cpu/codegen) -> ORC
// JIT (targets/cpu/runtime), run by cpu::PlanExecutable.
#include <optional>

#include "harness.h"
#include "kiln/config/config.h"
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
  co.autotune_gemm = co.autotune_gemm || o.autotune;
  c.plan = cpu::generate(schedule::schedule_graph(c.optimized), co);
  cpu::ExecutableOptions eo;
  eo.keep_buffers = o.keep_buffers;
  eo.autotune = o.autotune;
  eo.opt_level = static_cast<int>(config::get<int64_t>("cpu.opt_level"));
  if (!o.variant.empty()) {
    // Autotune's recall hook names the pinned variant of each kernel that has one. Its argument
    // starts with the kernel's source, whose first function is the kernel's entry, and holds
    // "grain=<n>", the launch chunk to keep.
    eo.recall = [variant = o.variant](const std::string& signature) -> std::optional<cpu::ExecutableOptions::TuneChoice> {
      const std::string define = "define void @";
      const size_t at = signature.find(define);
      if (at == std::string::npos) return std::nullopt;
      const size_t name_at = at + define.size();
      const std::string chosen = signature.substr(name_at, signature.find('(', name_at) - name_at) + variant;
      const size_t grain_at = signature.find(" grain=");
      if (signature.find(define + chosen + "(") == std::string::npos || grain_at == std::string::npos) return std::nullopt;
      ++pinned_variants();
      return cpu::ExecutableOptions::TuneChoice{chosen, std::stoll(signature.substr(grain_at + 7))};
    };
  }
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
