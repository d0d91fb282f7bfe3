// The target test_vulkan_target tests: passes -> schedule -> GLSL (targets/vulkan/codegen, with
// the caps of vulkan:0) -> shaderc -> vulkan::PlanExecutable. Every run checks that the
// validation layers reported nothing (KILN_VULKAN_VALIDATION=1, set by CTest): a message fails the
// case that caused it, with the message.
#include <cstdio>
#include <cstdlib>

#include "harness.h"
#include "kiln/graph/error.h"
#include "kiln/schedule/schedule.h"
#include "kiln/vulkan/codegen.h"
#include "kiln/vulkan/runtime.h"

namespace cpu_test {
namespace {

void check_validation(const std::string& when) {
  const std::vector<std::string> msgs = vulkan::take_validation_messages();
  if (msgs.empty()) return;
  std::string all;
  for (const std::string& m : msgs) all += "\n  " + m;
  fail("vulkan validation layers reported ", msgs.size(), " message(s) ", when, ":", all);
}

struct VulkanRunner final : Runner {
  std::shared_ptr<vulkan::PlanExecutable> exe;
  std::vector<TensorData> run(std::span<const TensorData> inputs) override {
    std::vector<TensorData> out = exe->run_host(inputs);
    check_validation("while running plan kernels");
    return out;
  }
};

void compile_for_vulkan(Compiled& c, const CompileOptions& o) {
  static const bool announced = [] {
    std::string why;
    if (!vulkan::available(&why)) fail(why);
    std::fprintf(stderr, "vulkan target: running on %s; validation layers %s\n",
                 vulkan::list_devices()[0].str().c_str(), vulkan::validation_enabled() ? "on" : "OFF");
    return true;
  }();
  (void)announced;
  vulkan::CodegenOptions co = vulkan::codegen_options_for(0);
  co.emulate_precision_casts = co.emulate_precision_casts || o.emulate_precision_casts;
  c.plan = vulkan::generate(schedule::schedule_graph(c.optimized, vulkan::schedule_target(co)), co);
  auto r = std::make_shared<VulkanRunner>();
  r->exe = vulkan::PlanExecutable::load(c.plan);
  check_validation("while creating pipelines");
  compile_stats().jit_seconds += r->exe->compile_seconds();
  c.exe = std::move(r);
}

struct SetTarget {
  SetTarget() { target() = Target{"vulkan", compile_for_vulkan}; }
} const set_target;

}  // namespace
}  // namespace cpu_test
