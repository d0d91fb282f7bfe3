// targets/vulkan/runtime (native): runs a KernelPlan of target "vulkan".
//
// The Vulkan loader (libvulkan.so.1) is opened with dlopen on first use, so the same binary runs
// where there is none: available() then says why ("no Vulkan device: ..."). Devices are picked by
// index among those the loader reports (list_devices(), `kiln list-devices`). GLSL is compiled to
// SPIR-V with shaderc (linked statically, Debian's libshaderc-dev); SPIR-V is cached per process
// by source, pipelines per device in a VkPipelineCache. Buffer memory comes from a small pool
// sub-allocator (blocks of 64 MiB, first fit): device-local memory that only the device reads on
// a discrete GPU, filled and read back through staging copies; host-visible (mapped) memory on
// CPU drivers and integrated GPUs. KILN_VULKAN_STAGING=1 forces the staging path (tests). Validation layers: KILN_VULKAN_VALIDATION=1 (or enable_validation()
// before the first device is opened) turns on VK_LAYER_KHRONOS_validation and collects every
// warning and error it reports; take_validation_messages() returns them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kiln/graph/tensor_data.h"
#include "kiln/plan/plan.h"
#include "kiln/plan/profile.h"
#include "kiln/vulkan/codegen.h"

namespace kiln::vulkan {

struct DeviceInfo {
  int index = 0;
  std::string name;          // "llvmpipe (LLVM 15.0.6, 256 bits)"
  std::string type;          // "cpu", "discrete-gpu", "integrated-gpu", "virtual-gpu", "other"
  std::string api_version;   // "1.3.230"
  std::string driver;        // driver name and info where the device reports them
  uint32_t vendor_id = 0, device_id = 0;
  DeviceCaps caps;
  int64_t subgroup_size = 0;
  int64_t max_workgroup_invocations = 0;
  int64_t max_storage_buffer_range = 0;
  double timestamp_period_ns = 0;  // 0: no timestamps on the compute queue
  std::string str() const;         // one readable line
};

// Whether a Vulkan device can be used here; `why` gets the reason when not.
bool available(std::string* why = nullptr);
// Every device the loader reports (empty without loader or driver; `why` says which).
std::vector<DeviceInfo> list_devices(std::string* why = nullptr);

// Turns on validation layers for devices opened afterwards (also KILN_VULKAN_VALIDATION=1);
// throws kiln::Error when VK_LAYER_KHRONOS_validation is not installed.
void enable_validation();
bool validation_enabled();
// Validation warnings and errors reported since the last call (and clears them).
std::vector<std::string> take_validation_messages();

// Codegen options for device `index` (its caps and workgroup limits).
CodegenOptions codegen_options_for(int index = 0);

// GLSL -> SPIR-V (shaderc, cached per process by source). kiln::Error with shaderc's log and
// the numbered source when it does not compile.
std::vector<uint32_t> compile_glsl(const std::string& source, const std::string& name, double* seconds = nullptr);

// Tensors on vulkan:<i>: contiguous copies in the device's pool memory. The storage's data() is
// the mapped address where pool memory is host-visible, else an address the host must not read
// (a reserved range the runtime maps back to the device buffer): read them with to_host, which
// copies back to a new contiguous host tensor.
TensorData to_device(const TensorData& host, int device = 0);
TensorData to_host(const TensorData& t);

// Device-to-device copy bandwidth of vulkan:<device> (bytes read plus written per second):
// vkCmdCopyBuffer of `bytes` timed with timestamps, median of `reps` after warm-ups that last
// until the copies stop getting faster (the clocks are up).
double copy_gbps(int device = 0, size_t bytes = size_t{1} << 30, int reps = 30);
// GPU time of every run made on this thread so far (any executable), ms: per command buffer
// submitted, from its first dispatch's start to its last's end (timestamps); a difference of two
// readings times the runs in between, as device events around them would. Stays 0 without
// timestamps.
double thread_device_ms();
// GPU time (thread_device_ms) of `call`, which runs plans on this thread, ms: the median of `reps`
// calls after warm-up batches of 10 calls that run until a batch's median is no faster than the
// one before (within 2%) and at least 2 s have passed (KILN_VULKAN_WARM_S), 5 s at most.
// NVIDIA's driver lets the SM clock of a Vulkan process fall to idle (345 MHz) within a fraction
// of a second of light load and takes a while to raise it again: with 0.3 s of warm-up softmax
// took 0.41 ms over 30 timed calls and 0.196 over 300 in one process (H100); with 0.5 s three
// processes gave col_sum 0.068, 0.128 and 0.150 ms (H200), with 2 s 0.068 each time. -1 without
// timestamps.
double median_gpu_ms(const std::function<void()>& call, int reps);

struct ExecutableOptions {
  int device = 0;
  // From a cache entry (PlanExecutable::spirv / pipeline_cache_data of an earlier load): the
  // SPIR-V of each kernel of the plan (empty strings for reference kernels; shaderc is skipped)
  // and the VkPipelineCache's data to start from (the driver skips compiling what it holds, and
  // ignores data of another device or driver version).
  std::vector<std::string> spirv;
  std::string pipeline_cache;
};

// A loaded plan: one compute pipeline per generated kernel; a run binds the size symbols from
// the inputs, checks them against the plan's buffers, binds inputs on this device where they lie
// (the plan's strides at an aligned offset; else copies them on the device) and copies host
// inputs into device buffers, runs every kernel in one command buffer (recorded once per set of
// sizes and resubmitted while the sizes and the bound buffers stay the same; split where a
// reference kernel runs on the host between dispatches), and returns the outputs: copied back to
// new contiguous host tensors (run_host) or as tensors on the device (run_device: the plan's
// output buffers themselves; a later run that finds one still held writes to a new buffer).
// Calls are serialised per executable.
class PlanExecutable {
 public:
  // Throws kiln::Error: "no Vulkan device: ..." without one; shaderc's log when a shader does
  // not compile; a sentence naming the feature when the plan needs one the device lacks.
  static std::shared_ptr<PlanExecutable> load(plan::KernelPlan plan, const ExecutableOptions& options = {});
  ~PlanExecutable();

  // Inputs on the host or on this device (vulkan:<i>); outputs on the host.
  std::vector<TensorData> run_host(std::span<const TensorData> inputs) const;
  // Inputs on the host or on this device; outputs on this device.
  std::vector<TensorData> run_device(std::span<const TensorData> inputs) const;

  const plan::KernelPlan& plan() const;
  double compile_seconds() const;  // shaderc + pipeline creation at load
  // What a plan cache entry keeps with the plan: each kernel's SPIR-V (bytes; empty for
  // reference kernels) and the data of this executable's VkPipelineCache (vkGetPipelineCacheData).
  std::vector<std::string> spirv() const;
  std::string pipeline_cache_data() const;
  // Per kernel of the plan, GPU time of its dispatch in the last run (timestamp queries), ms;
  // empty when the device has no timestamps.
  std::vector<double> last_kernel_ms() const;
  // Those times over calls (plan::KernelProfile), kept while profiling is on (set_profiling(true),
  // or KILN_LOGS=profile); profile(): a copy, nullopt before a timed call or without timestamps.
  void set_profiling(bool on);
  std::optional<plan::KernelProfile> profile() const;
  int64_t command_buffer_recordings() const;  // how many times the command buffers were recorded
  double last_run_ms() const;  // GPU time of the last run (see thread_device_ms), -1 without timestamps

  struct Impl;

 private:
  PlanExecutable();
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::vulkan
