// The Vulkan target's native half: targets/vulkan/runtime behind target::Runtime. Cache entries
// keep each kernel's SPIR-V (blobs spirv<i>) and the executable's VkPipelineCache data (blob
// pipeline_cache), so a hit in another process skips shaderc and the driver's compile. Inputs are
// bound where they lie on the device and outputs stay there. Eager ops on Vulkan tensors run as
// single-op plans made for a shape pattern (EagerPolicy::symbolic_sizes: sizes are push
// constants, so a new batch size reuses the pipelines instead of waiting for shaderc and the
// driver again).
#include "kiln/graph/error.h"
#include "kiln/target/target.h"
#include "kiln/vulkan/runtime.h"

void kiln_register_vulkan_codegen();

namespace kiln::vulkan {

target::CodegenRequest to_request(const CodegenOptions& o);  // codegen.cpp

namespace {

class VulkanLoaded final : public target::LoadedPlan {
 public:
  explicit VulkanLoaded(std::shared_ptr<PlanExecutable> exe) : exe_(std::move(exe)) {}
  std::vector<TensorData> run(std::span<const TensorData* const> inputs) const override {
    std::vector<TensorData> in;
    in.reserve(inputs.size());
    for (const TensorData* t : inputs) in.push_back(*t);
    return exe_->run_device(in);  // inputs bound where they lie on the device; outputs stay there
  }
  const plan::KernelPlan& plan() const override { return exe_->plan(); }
  target::Artifacts artifacts() const override {
    target::Artifacts a;
    const std::vector<std::string> spirv = exe_->spirv();
    for (size_t i = 0; i < spirv.size(); ++i)
      if (!spirv[i].empty()) a.emplace_back("spirv" + std::to_string(i), spirv[i]);
    a.emplace_back("pipeline_cache", exe_->pipeline_cache_data());
    return a;
  }
  std::string compile_report() const override {
    return "shaderc and pipelines " + std::to_string(exe_->compile_seconds() * 1e3) + " ms";
  }
  double compile_seconds() const override { return exe_->compile_seconds(); }
  void set_profiling(bool on) override { exe_->set_profiling(on); }
  std::optional<plan::KernelProfile> profile() const override { return exe_->profile(); }
  std::vector<double> last_kernel_ms() const override { return exe_->last_kernel_ms(); }

 private:
  std::shared_ptr<PlanExecutable> exe_;
};

class VulkanRuntime final : public target::Runtime {
 public:
  std::string name() const override { return "vulkan"; }
  DeviceType device_type() const override { return DeviceType::vulkan; }
  bool available(std::string* why) const override { return vulkan::available(why); }
  std::vector<std::string> device_lines() const override {
    std::string why;
    const std::vector<DeviceInfo> devices = list_devices(&why);
    std::vector<std::string> lines;
    for (const DeviceInfo& d : devices) lines.push_back(d.str());
    if (devices.empty()) lines.push_back("vulkan: " + why);
    return lines;
  }
  target::CodegenRequest codegen_request(Device d) const override { return to_request(codegen_options_for(d.index)); }
  // The driver compiles the pipelines for the device, and the plan's shaders are generated for its
  // caps and what the runtime decided for it (the codegen request: the schedule, vector accesses,
  // row caching, which KILN_VULKAN_* variables may override), so a plan made under other
  // decisions is not reused.
  std::string device_identity(Device d) const override {
    std::string why;
    const std::vector<DeviceInfo> ds = list_devices(&why);
    KILN_CHECK(d.index >= 0 && static_cast<size_t>(d.index) < ds.size(), "no Vulkan device vulkan:", d.index, " (", why, ")");
    const DeviceInfo& info = ds[static_cast<size_t>(d.index)];
    return info.name + " " + std::to_string(info.vendor_id) + ":" + std::to_string(info.device_id) + " Vulkan " +
           info.api_version + " " + info.driver + " " + to_request(codegen_options_for(d.index)).str();
  }
  std::string toolchain(Device) const override { return "shaderc glsl450 vulkan1.2"; }
  std::shared_ptr<target::LoadedPlan> load(target::Generated plans, const target::Artifacts* cached,
                                           const target::LoadOptions& lo, std::string*) override {
    ExecutableOptions o;
    o.device = lo.device.index;
    if (cached) {
      o.spirv.assign(plans.plan.kernels.size(), "");
      for (const auto& [name, bytes] : *cached) {
        if (name == "pipeline_cache") {
          o.pipeline_cache = bytes;
          continue;
        }
        size_t ki = 0;
        const bool numbered = name.rfind("spirv", 0) == 0 && name.size() > 5 &&
                              name.find_first_not_of("0123456789", 5) == std::string::npos;
        KILN_CHECK(numbered, "vulkan cache entry: unknown blob '", name, "'");
        ki = static_cast<size_t>(std::stoul(name.substr(5)));
        KILN_CHECK(ki < o.spirv.size(), "vulkan cache entry: blob '", name, "' names no kernel of the plan");
        o.spirv[ki] = bytes;
      }
    }
    return std::make_shared<VulkanLoaded>(PlanExecutable::load(std::move(plans.plan), o));
  }
  TensorData move(const TensorData& t, Device to) override {
    return move_through(t, to, [](const TensorData& h) { return to_host(h); },
                        [](const TensorData& h, int index) { return to_device(h, index); });
  }
  target::EagerPolicy eager_policy() const override {
    target::EagerPolicy p;
    p.symbolic_sizes = true;
    return p;
  }
  std::optional<double> median_device_ms(Device, const std::function<void()>& call, int reps) override {
    const double ms = median_gpu_ms(call, std::max(reps, 1));
    return ms < 0 ? std::nullopt : std::optional<double>(ms);
  }
  std::optional<target::Bandwidth> copy_gbps(Device d) override {
    std::string why;
    const std::vector<DeviceInfo> ds = list_devices(&why);
    const bool cpu = d.index >= 0 && static_cast<size_t>(d.index) < ds.size() && ds[static_cast<size_t>(d.index)].type == "cpu";
    return target::Bandwidth{vulkan::copy_gbps(d.index, cpu ? size_t{64} << 20 : size_t{1} << 30, 30), "vkCmdCopyBuffer"};
  }
};

}  // namespace
}  // namespace kiln::vulkan

void kiln_register_vulkan_target() {
  kiln_register_vulkan_codegen();
  kiln::target::register_runtime(std::make_shared<kiln::vulkan::VulkanRuntime>());
}
