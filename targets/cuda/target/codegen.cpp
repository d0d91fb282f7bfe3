// The CUDA target's portable half: targets/cuda/codegen behind target::Codegen. The request's
// "arch" is the device's compute capability (0 or absent: any device); with max-autotune
// (max_autotune and max_autotune_pointwise) the plan comes with alternatives: the same schedule
// generated with other launch configurations, which the runtime compiles and times.
#include "kiln/config/config.h"
#include "kiln/cuda/codegen.h"
#include "kiln/target/target.h"

namespace kiln::cuda {
namespace {

// max-autotune: the same schedule generated with other launch configurations (threads per
// block and elements per thread of pointwise kernels, rows kept in registers or re-read); the
// runtime compiles them all and times each kernel's distinct versions on the first call.
std::vector<plan::KernelPlan> autotune_alternatives(const schedule::Schedule& s, const CodegenOptions& base) {
  std::vector<plan::KernelPlan> alts;
  for (int64_t block : {128, 256, 512, 1024})
    for (int64_t items : {1, 4, 8})
      for (bool rows : {true, false}) {
        CodegenOptions o = base;
        o.pointwise_block = block;
        o.pointwise_items_per_thread = items;
        o.cache_rows = rows;
        if (block == base.pointwise_block && items == base.pointwise_items_per_thread && rows == base.cache_rows) continue;
        alts.push_back(generate(s, o));
      }
  // Attention kernels: blocks of the other number of query rows (64 or 128) and, on sm_90, the
  // mma.sync kernel beside the wgmma one.
  for (const schedule::Kernel& k : s.kernels) {
    if (!k.attention) continue;
    CodegenOptions o = base;
    o.attention_warp_tiles = k.attention->d <= 64 && k.attention->dv <= 64 ? 1 : 2;
    o.attention_sm90 = false;
    alts.push_back(generate(s, o));
    if (base.arch == 90 && base.attention_sm90) {
      o.attention_warp_tiles = base.attention_warp_tiles;
      alts.push_back(generate(s, o));
    }
    break;
  }
  return alts;
}

class CudaCodegen final : public target::Codegen {
 public:
  std::string name() const override { return "cuda"; }
  std::string source_extension() const override { return "cu"; }
  schedule::Target capabilities(const target::CodegenRequest&) const override { return schedule_target(); }
  target::Generated generate(const schedule::Schedule& s, const target::CodegenRequest& request) const override {
    CodegenOptions o = CodegenOptions::from_config();
    o.arch = static_cast<int>(request.integer("arch", 0));  // kernels for this device (sm_90: wgmma attention)
    target::Generated g{cuda::generate(s, o), {}};
    if (config::get<bool>("max_autotune") && config::get<bool>("max_autotune_pointwise"))
      g.alternatives = autotune_alternatives(s, o);
    return g;
  }
};

}  // namespace
}  // namespace kiln::cuda

void kiln_register_cuda_codegen() { kiln::target::register_codegen(std::make_shared<kiln::cuda::CudaCodegen>()); }
