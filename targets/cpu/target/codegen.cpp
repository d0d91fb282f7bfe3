// The CPU target's portable half: targets/cpu/codegen (LLVM IR text) behind target::Codegen.
// The CPU needs nothing from a device: the request is ignored, and max-autotune's variants are
// part of the plan's kernels (cpu::CodegenOptions::autotune_variants).
#include "kiln/cpu/codegen.h"
#include "kiln/target/target.h"

namespace kiln::cpu {
namespace {

class CpuCodegen final : public target::Codegen {
 public:
  std::string name() const override { return "cpu"; }
  std::string source_extension() const override { return "ll"; }
  schedule::Target capabilities(const target::CodegenRequest&) const override { return schedule::Target::cpu(); }
  target::Generated generate(const schedule::Schedule& s, const target::CodegenRequest&) const override {
    return {cpu::generate(s), {}};
  }
};

}  // namespace
}  // namespace kiln::cpu

void kiln_register_cpu_codegen() { kiln::target::register_codegen(std::make_shared<kiln::cpu::CpuCodegen>()); }
