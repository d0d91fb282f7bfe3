// The Vulkan target's portable half: targets/vulkan/codegen behind target::Codegen. The request
// carries the device's caps and what the runtime decided for it, one key each (to_request /
// from_request); an empty request generates for the default caps (lavapipe's), as the browser does.
#include "kiln/target/target.h"
#include "kiln/vulkan/codegen.h"

namespace kiln::vulkan {

// The request for codegen options `o` (the runtime's codegen_options_for a device).
target::CodegenRequest to_request(const CodegenOptions& o) {
  target::CodegenRequest r;
  r.set("storage16", o.caps.storage16);
  r.set("storage8", o.caps.storage8);
  r.set("float64", o.caps.float64);
  r.set("int64", o.caps.int64);
  r.set("subgroup", o.caps.subgroup);
  r.set("denorm_preserve", o.caps.denorm_preserve);
  r.set("nan_preserve", o.caps.nan_preserve);
  r.set("max_workgroup", o.caps.max_workgroup);
  r.set("max_storage_buffers", o.caps.max_storage_buffers);
  r.set("gpu", o.gpu);
  r.set("vector_accesses", o.vector_accesses);
  r.set("cache_rows", o.cache_rows);
  r.set("gemm_vector_loads", o.gemm_vector_loads);
  r.set("fuse_gemm_epilogue", o.fuse_gemm_epilogue);
  r.set("gemm_blocking", o.gemm_blocking);
  return r;
}

// sdk/config's options with what the request says about the device.
CodegenOptions from_request(const target::CodegenRequest& r) {
  CodegenOptions o = CodegenOptions::from_config();
  DeviceCaps& c = o.caps;
  c.storage16 = r.flag("storage16", c.storage16);
  c.storage8 = r.flag("storage8", c.storage8);
  c.float64 = r.flag("float64", c.float64);
  c.int64 = r.flag("int64", c.int64);
  c.subgroup = r.flag("subgroup", c.subgroup);
  c.denorm_preserve = r.flag("denorm_preserve", c.denorm_preserve);
  c.nan_preserve = r.flag("nan_preserve", c.nan_preserve);
  c.max_workgroup = r.integer("max_workgroup", c.max_workgroup);
  c.max_storage_buffers = r.integer("max_storage_buffers", c.max_storage_buffers);
  o.gpu = r.flag("gpu", o.gpu);
  o.vector_accesses = r.flag("vector_accesses", o.vector_accesses);
  o.cache_rows = r.flag("cache_rows", o.cache_rows);
  o.gemm_vector_loads = r.flag("gemm_vector_loads", o.gemm_vector_loads);
  o.fuse_gemm_epilogue = r.flag("fuse_gemm_epilogue", o.fuse_gemm_epilogue);
  o.gemm_blocking = r.text("gemm_blocking", o.gemm_blocking);
  return o;
}

namespace {

class VulkanCodegen final : public target::Codegen {
 public:
  std::string name() const override { return "vulkan"; }
  std::string source_extension() const override { return "comp"; }
  schedule::Target capabilities(const target::CodegenRequest& r) const override { return schedule_target(from_request(r)); }
  target::Generated generate(const schedule::Schedule& s, const target::CodegenRequest& r) const override {
    return {vulkan::generate(s, from_request(r)), {}};
  }
};

}  // namespace
}  // namespace kiln::vulkan

void kiln_register_vulkan_codegen() { kiln::target::register_codegen(std::make_shared<kiln::vulkan::VulkanCodegen>()); }
