// PlanExecutable for Vulkan: pipelines at load; per set of sizes an arena (buffers, descriptor
// sets, command buffers recorded once); per run: copy in, submit, reference kernels on the host
// between segments, copy out. See runtime.h.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "device.h"
#include "kiln/config/log.h"
#include "kiln/graph/error.h"
#include "kiln/graph/memory_budget.h"
#include "kiln/plan/bind.h"
#include "kiln/plan/profile.h"
#include "kiln/eval/interpreter.h"

namespace kiln::vulkan {

namespace {

std::vector<int64_t> eval(const SymShape& s, const std::vector<int64_t>& syms) {
  std::vector<int64_t> v;
  for (const SymInt& x : s) v.push_back(x.evaluate(syms));
  return v;
}

// Elements [lo, hi] a strided view reaches relative to its element 0 (size-1 dims ignored).
std::pair<int64_t, int64_t> span_of(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  int64_t lo = 0, hi = 0;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] <= 1) continue;
    const int64_t ext = (sizes[d] - 1) * strides[d];
    (ext < 0 ? lo : hi) += ext;
  }
  return {lo, hi};
}

int64_t numel(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

}  // namespace

struct PlanExecutable::Impl {
  plan::KernelPlan plan;
  ExecutableOptions options;
  Device* dev = nullptr;
  VkDevice vd = VK_NULL_HANDLE;
  struct Pipe {
    VkShaderModule module = VK_NULL_HANDLE;
    VkDescriptorSetLayout dsl = VK_NULL_HANDLE;
    VkPipelineLayout layout = VK_NULL_HANDLE;
    VkPipeline pipeline = VK_NULL_HANDLE;
    std::vector<int32_t> bindings;
  };
  std::vector<Pipe> pipes;  // per kernel (empty for reference kernels); kernels of one shader share handles
  std::vector<Pipe> owned;  // the distinct pipelines, each destroyed once
  std::vector<std::string> spirv;  // per kernel, bytes
  VkPipelineCache pipeline_cache = VK_NULL_HANDLE;
  std::vector<int32_t> offset_buffers;
  uint32_t push_bytes = 0;
  std::vector<std::shared_ptr<Buffer>> constants;  // by buffer id
  std::unique_ptr<plan::Binder> binder;  // of `plan`
  std::vector<int32_t> input_buffer;  // buffer of graph input k
  double compile_seconds = 0;
  VkCommandPool pool = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  VkQueryPool queries = VK_NULL_HANDLE;

  // The arena for one set of sizes.
  struct Segment {
    VkCommandBuffer cb = VK_NULL_HANDLE;
    size_t first = 0, last = 0;  // kernels [first, last) dispatched in it
    bool empty = true;
  };
  // What a buffer is bound as in the descriptor sets.
  struct Binding {
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceSize offset = 0, range = 0;
    bool operator==(const Binding&) const = default;
  };
  bool arena_valid = false;
  std::vector<int64_t> arena_syms;
  std::vector<int64_t> arena_extents;          // per kernel, at arena_syms
  std::vector<std::shared_ptr<Buffer>> bufs;    // by buffer id (inputs, outputs, intermediates' slots)
  std::vector<std::shared_ptr<Buffer>> slots;
  std::vector<int64_t> input_lo;                // by input: element 0's offset in its buffer
  VkDescriptorPool dpool = VK_NULL_HANDLE;
  std::vector<VkDescriptorSet> sets;            // per kernel
  std::vector<Binding> recorded;                // by buffer id, as the command buffers were recorded
  std::vector<Segment> segments;
  std::vector<bool> dispatched;                 // per kernel: has timestamps in the last run
  int64_t recordings = 0;
  std::vector<double> kernel_ms;
  double run_ms = -1;
  // KILN_LOGS=profile or set_profiling: the kernels' timestamps over calls
  std::atomic<bool> profiling{false};
  std::unique_ptr<plan::KernelProfile> profile;
  mutable std::mutex mu;

  ~Impl();
  void free_arena();
  void build_arena(const plan::Binding& sizes, const std::vector<int64_t>& lo);
  void bind_and_record(const std::vector<Binding>& binding);
  std::vector<TensorData> run(std::span<const TensorData> inputs, bool device_outputs);
};

namespace {
thread_local double t_device_ms = 0;  // thread_device_ms
}

PlanExecutable::Impl::~Impl() {
  if (!vd) return;
  vk::vkDeviceWaitIdle(vd);
  free_arena();
  for (Pipe& p : owned) {
    if (p.pipeline) vk::vkDestroyPipeline(vd, p.pipeline, nullptr);
    if (p.layout) vk::vkDestroyPipelineLayout(vd, p.layout, nullptr);
    if (p.dsl) vk::vkDestroyDescriptorSetLayout(vd, p.dsl, nullptr);
    if (p.module) vk::vkDestroyShaderModule(vd, p.module, nullptr);
  }
  if (pipeline_cache) vk::vkDestroyPipelineCache(vd, pipeline_cache, nullptr);
  if (queries) vk::vkDestroyQueryPool(vd, queries, nullptr);
  if (fence) vk::vkDestroyFence(vd, fence, nullptr);
  if (pool) vk::vkDestroyCommandPool(vd, pool, nullptr);
}

void PlanExecutable::Impl::free_arena() {
  for (Segment& s : segments)
    if (s.cb) vk::vkFreeCommandBuffers(vd, pool, 1, &s.cb);
  segments.clear();
  if (dpool) vk::vkDestroyDescriptorPool(vd, dpool, nullptr);
  dpool = VK_NULL_HANDLE;
  sets.clear();
  recorded.clear();
  bufs.clear();
  slots.clear();
  arena_valid = false;
}

PlanExecutable::PlanExecutable() = default;
PlanExecutable::~PlanExecutable() = default;

std::shared_ptr<PlanExecutable> PlanExecutable::load(plan::KernelPlan p, const ExecutableOptions& options) {
  KILN_CHECK(p.target == "vulkan", "vulkan runtime: the plan is for target '", p.target, "', not vulkan");
  plan::validate(p, "vulkan runtime");
  Device& dev = Device::get(options.device);
  auto exe = std::shared_ptr<PlanExecutable>(new PlanExecutable);
  exe->impl_ = std::make_unique<Impl>();
  Impl& im = *exe->impl_;
  im.plan = std::move(p);
  im.options = options;
  im.dev = &dev;
  im.vd = dev.device();
  const DeviceCaps& caps = dev.info().caps;
  for (const plan::PlanKernel& k : im.plan.kernels) {
    if (k.source.empty()) continue;
    auto needs = [&](const char* ext) { return k.source.find(ext) != std::string::npos; };
    KILN_CHECK(!needs("GL_EXT_shader_16bit_storage") || caps.storage16, "vulkan runtime: kernel ", k.name,
               " uses 16-bit storage, which device ", dev.info().name, " lacks (generate the plan with its caps: codegen_options_for)");
    KILN_CHECK(!needs("GL_EXT_shader_8bit_storage") || caps.storage8, "vulkan runtime: kernel ", k.name,
               " uses 8-bit storage, which device ", dev.info().name, " lacks (generate the plan with its caps: codegen_options_for)");
    KILN_CHECK(!needs("GL_KHR_shader_subgroup_arithmetic") || caps.subgroup, "vulkan runtime: kernel ", k.name,
               " uses subgroup arithmetic, which device ", dev.info().name,
               " lacks (generate the plan with its caps: codegen_options_for)");
    KILN_CHECK(!needs("4459, 32)") || caps.denorm_preserve, "vulkan runtime: kernel ", k.name,
               " asks to keep f32 denormals, which device ", dev.info().name, " cannot (generate the plan with its caps)");
    KILN_CHECK(!needs("4461, 32)") || caps.nan_preserve, "vulkan runtime: kernel ", k.name,
               " asks to keep f32 NaN/inf/signed zeros, which device ", dev.info().name, " cannot (generate the plan with its caps)");
    KILN_CHECK(!needs("double") || caps.float64, "vulkan runtime: kernel ", k.name, " uses f64, which device ",
               dev.info().name, " lacks (no shaderFloat64)");
    const size_t bindings = kernel_bindings(k).size();
    KILN_CHECK(static_cast<int64_t>(bindings) <= caps.max_storage_buffers, "vulkan runtime: kernel ", k.name, " binds ",
               bindings, " storage buffers, more than device ", dev.info().name, " allows one shader (",
               caps.max_storage_buffers, ": maxPerStageDescriptorStorageBuffers; generate the plan with its caps)");
  }
  // A call needing more than the device's memory fails before it allocates, naming what is largest.
  const plan::MemoryLimit device_memory{dev.device_memory(), "the " + bytes_str(dev.device_memory()) +
                                                                 " of device-local memory of vulkan:" +
                                                                 std::to_string(options.device) + " (" + dev.info().name + ")"};
  im.binder = std::make_unique<plan::Binder>(im.plan, "vulkan runtime", [device_memory] { return device_memory; });
  im.input_buffer = im.binder->input_buffers();
  im.offset_buffers = offset_buffers(im.plan);
  im.push_bytes = static_cast<uint32_t>(8 * (im.plan.symbols.size() + im.offset_buffers.size() + 1));

  VkCommandPoolCreateInfo cpi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  cpi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  cpi.queueFamilyIndex = dev.queue_family();
  KILN_VK(vk::vkCreateCommandPool(im.vd, &cpi, nullptr, &im.pool));
  VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  KILN_VK(vk::vkCreateFence(im.vd, &fci, nullptr, &im.fence));
  if (dev.info().timestamp_period_ns > 0 && !im.plan.kernels.empty()) {
    VkQueryPoolCreateInfo qci{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    qci.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qci.queryCount = static_cast<uint32_t>(2 * im.plan.kernels.size());
    KILN_VK(vk::vkCreateQueryPool(im.vd, &qci, nullptr, &im.queries));
  }

  const auto t0 = std::chrono::steady_clock::now();
  KILN_CHECK(options.spirv.empty() || options.spirv.size() == im.plan.kernels.size(), "vulkan runtime: ",
             options.spirv.size(), " SPIR-V modules were given for a plan of ", im.plan.kernels.size(), " kernels");
  // This plan's own pipeline cache, seeded from a cache entry where there is one, so that its
  // data can be stored with the plan.
  VkPipelineCacheCreateInfo pcci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  pcci.initialDataSize = options.pipeline_cache.size();
  pcci.pInitialData = options.pipeline_cache.data();
  KILN_VK(vk::vkCreatePipelineCache(im.vd, &pcci, nullptr, &im.pipeline_cache));
  im.spirv.assign(im.plan.kernels.size(), "");
  im.pipes.resize(im.plan.kernels.size());
  // One pipeline per distinct shader (its GLSL or given SPIR-V, workgroup size and bindings: a
  // model's repeated layers give identical shaders), built in parallel: shaderc and the driver's
  // compiler take most of a cold start.
  std::map<std::string, size_t> distinct;  // shader key -> index into `owned`
  std::vector<size_t> first_kernel;         // per distinct pipeline: a kernel that uses it
  std::vector<size_t> pipe_of(im.plan.kernels.size(), SIZE_MAX);
  for (size_t ki = 0; ki < im.plan.kernels.size(); ++ki) {
    const plan::PlanKernel& k = im.plan.kernels[ki];
    if (k.source.empty()) continue;
    // (a gemm shader's dispatch is sized by its tile: checked here, before anything is built)
    KILN_CHECK(!k.gemm || (k.gemm->tile[0] > 0 && k.gemm->tile[1] > 0), "vulkan runtime: kernel ", k.name,
               ": a gemm shader without its tile (plan field gemm.tile)");
    const bool given = !options.spirv.empty() && !options.spirv[ki].empty();
    const std::string key = std::string(given ? "spirv:" : "glsl:") + (given ? options.spirv[ki] : k.source) + "|block " +
                            std::to_string(k.launch.block) + "|bindings " + std::to_string(kernel_bindings(k).size());
    const auto [it, fresh] = distinct.emplace(key, first_kernel.size());
    if (fresh) first_kernel.push_back(ki);
    pipe_of[ki] = it->second;
  }
  im.owned.resize(first_kernel.size());
  std::vector<std::string> owned_spirv(first_kernel.size());
  auto build = [&](size_t pi) {
    const size_t ki = first_kernel[pi];
    const plan::PlanKernel& k = im.plan.kernels[ki];
    Impl::Pipe& pp = im.owned[pi];
    pp.bindings = kernel_bindings(k);
    std::vector<uint32_t> spv;
    if (!options.spirv.empty() && !options.spirv[ki].empty()) {
      const std::string& b = options.spirv[ki];
      KILN_CHECK(b.size() % 4 == 0 && b.size() >= 20, "vulkan runtime: the SPIR-V given for kernel ", k.name, " is not a module (",
                 b.size(), " bytes)");
      spv.resize(b.size() / 4);
      std::memcpy(spv.data(), b.data(), b.size());
      KILN_CHECK(spv[0] == 0x07230203u, "vulkan runtime: the SPIR-V given for kernel ", k.name, " has no SPIR-V magic number");
    } else {
      spv = compile_glsl(k.source, k.name);
    }
    owned_spirv[pi].assign(reinterpret_cast<const char*>(spv.data()), spv.size() * 4);
    VkShaderModuleCreateInfo smi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    smi.codeSize = spv.size() * 4;
    smi.pCode = spv.data();
    KILN_VK(vk::vkCreateShaderModule(im.vd, &smi, nullptr, &pp.module));
    std::vector<VkDescriptorSetLayoutBinding> lb(pp.bindings.size());
    for (size_t i = 0; i < lb.size(); ++i) {
      lb[i].binding = static_cast<uint32_t>(i);
      lb[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      lb[i].descriptorCount = 1;
      lb[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    }
    VkDescriptorSetLayoutCreateInfo dli{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    dli.bindingCount = static_cast<uint32_t>(lb.size());
    dli.pBindings = lb.data();
    KILN_VK(vk::vkCreateDescriptorSetLayout(im.vd, &dli, nullptr, &pp.dsl));
    VkPushConstantRange pcr{VK_SHADER_STAGE_COMPUTE_BIT, 0, im.push_bytes};
    VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    pli.setLayoutCount = 1;
    pli.pSetLayouts = &pp.dsl;
    pli.pushConstantRangeCount = im.push_bytes ? 1 : 0;
    pli.pPushConstantRanges = &pcr;
    KILN_VK(vk::vkCreatePipelineLayout(im.vd, &pli, nullptr, &pp.layout));
    const uint32_t block = static_cast<uint32_t>(k.launch.block);
    VkSpecializationMapEntry me{0, 0, sizeof(uint32_t)};
    VkSpecializationInfo si{1, &me, sizeof(uint32_t), &block};
    VkComputePipelineCreateInfo cpci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    cpci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    cpci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    cpci.stage.module = pp.module;
    cpci.stage.pName = "main";
    cpci.stage.pSpecializationInfo = &si;
    cpci.layout = pp.layout;
    KILN_VK(vk::vkCreateComputePipelines(im.vd, im.pipeline_cache, 1, &cpci, nullptr, &pp.pipeline));
  };
  // Workers take the next pipeline until none is left; the first failure is rethrown here (what
  // was created is destroyed with the executable).
  {
    std::atomic<size_t> next{0};
    std::vector<std::exception_ptr> errors(first_kernel.size());
    auto work = [&] {
      for (size_t pi = next++; pi < first_kernel.size(); pi = next++) {
        try {
          build(pi);
        } catch (...) {
          errors[pi] = std::current_exception();
        }
      }
    };
    const size_t workers = std::min<size_t>(first_kernel.size(), std::max(1u, std::thread::hardware_concurrency()));
    std::vector<std::thread> threads;
    for (size_t t = 1; t < workers; ++t) threads.emplace_back(work);
    work();
    for (std::thread& t : threads) t.join();
    for (const std::exception_ptr& e : errors)
      if (e) std::rethrow_exception(e);
  }
  for (size_t ki = 0; ki < im.plan.kernels.size(); ++ki) {
    if (pipe_of[ki] == SIZE_MAX) continue;
    im.pipes[ki] = im.owned[pipe_of[ki]];
    im.pipes[ki].bindings = kernel_bindings(im.plan.kernels[ki]);  // this kernel's buffers, in binding order
    im.spirv[ki] = owned_spirv[pipe_of[ki]];
  }
  im.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  im.constants.resize(im.plan.buffers.size());
  for (const plan::PlanBuffer& b : im.plan.buffers) {
    if (b.kind != "constant") continue;
    const size_t n = b.data->bytes.size();
    im.constants[static_cast<size_t>(b.id)] = dev.allocate(n);
    dev.upload(im.constants[static_cast<size_t>(b.id)]->address, b.data->bytes.data(), n);
  }
  return exe;
}

const plan::KernelPlan& PlanExecutable::plan() const { return impl_->plan; }
double PlanExecutable::compile_seconds() const { return impl_->compile_seconds; }
std::vector<std::string> PlanExecutable::spirv() const { return impl_->spirv; }
std::string PlanExecutable::pipeline_cache_data() const {
  size_t n = 0;
  KILN_VK(vk::vkGetPipelineCacheData(impl_->vd, impl_->pipeline_cache, &n, nullptr));
  std::string data(n, '\0');
  if (n) KILN_VK(vk::vkGetPipelineCacheData(impl_->vd, impl_->pipeline_cache, &n, data.data()));
  data.resize(n);
  return data;
}
std::vector<double> PlanExecutable::last_kernel_ms() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->kernel_ms;
}
void PlanExecutable::set_profiling(bool on) { impl_->profiling.store(on, std::memory_order_relaxed); }
std::optional<plan::KernelProfile> PlanExecutable::profile() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->profile) return std::nullopt;
  return *impl_->profile;
}
int64_t PlanExecutable::command_buffer_recordings() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->recordings;
}
double PlanExecutable::last_run_ms() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->run_ms;
}
double thread_device_ms() { return t_device_ms; }

double median_gpu_ms(const std::function<void()>& call, int reps) {
  KILN_CHECK(reps > 0, "vulkan: median_gpu_ms needs a positive repetition count");
  const double m = median_after_warm_up([&] {
    const double before = t_device_ms;
    call();
    return t_device_ms - before;
  }, reps, 10);
  return m > 0 ? m : -1;
}

void PlanExecutable::Impl::build_arena(const plan::Binding& sizes, const std::vector<int64_t>& lo) {
  free_arena();
  const plan::KernelPlan& pl = plan;
  bufs.assign(pl.buffers.size(), nullptr);
  for (int64_t bytes : sizes.slot_bytes()) slots.push_back(dev->allocate(static_cast<size_t>(bytes)));
  for (const plan::PlanBuffer& b : pl.buffers) {
    const size_t id = static_cast<size_t>(b.id);
    if (b.kind == "constant")
      bufs[id] = constants[id];
    else if (b.kind == "intermediate")
      bufs[id] = slots[static_cast<size_t>(b.slot)];
    else  // outputs: their elements; inputs: their extent (a copy with the plan's strides)
      bufs[id] = dev->allocate(static_cast<size_t>(sizes.buffer_bytes()[id]));
  }
  input_lo = lo;
  // Descriptor sets: one per generated kernel (written by bind_and_record).
  uint32_t nsets = 0, descriptors = 0;
  for (const Pipe& p : pipes)
    if (p.pipeline) {
      nsets += 1;
      descriptors += static_cast<uint32_t>(std::max<size_t>(1, p.bindings.size()));
    }
  sets.assign(pipes.size(), VK_NULL_HANDLE);
  if (nsets) {
    VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptors};
    VkDescriptorPoolCreateInfo dpi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    dpi.maxSets = nsets;
    dpi.poolSizeCount = 1;
    dpi.pPoolSizes = &ps;
    KILN_VK(vk::vkCreateDescriptorPool(vd, &dpi, nullptr, &dpool));
    for (size_t ki = 0; ki < pipes.size(); ++ki) {
      if (!pipes[ki].pipeline) continue;
      VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
      ai.descriptorPool = dpool;
      ai.descriptorSetCount = 1;
      ai.pSetLayouts = &pipes[ki].dsl;
      KILN_VK(vk::vkAllocateDescriptorSets(vd, &ai, &sets[ki]));
    }
  }
  // Segments: runs of generated kernels between reference kernels.
  Segment cur;
  cur.first = 0;
  for (size_t ki = 0; ki <= pl.kernels.size(); ++ki) {
    const bool boundary = ki == pl.kernels.size() || pl.kernels[ki].kind == "reference";
    if (!boundary) continue;
    cur.last = ki;
    segments.push_back(cur);
    cur = Segment{};
    cur.first = ki + 1;
  }
  for (Segment& seg : segments) {
    VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    cai.commandPool = pool;
    cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    cai.commandBufferCount = 1;
    KILN_VK(vk::vkAllocateCommandBuffers(vd, &cai, &seg.cb));
  }
  arena_syms = sizes.symbols();
  arena_extents = sizes.extents();
  arena_valid = true;
}

// Writes the descriptor sets for `binding` (by buffer id) and records every segment's command
// buffer: once per set of sizes, and again only when a buffer's binding changes (a call with
// other input tensors on the device, or an output still held by the caller).
void PlanExecutable::Impl::bind_and_record(const std::vector<Binding>& binding) {
  const plan::KernelPlan& pl = plan;
  const std::vector<int64_t>& syms = arena_syms;
  for (size_t ki = 0; ki < pipes.size(); ++ki) {
    const Pipe& p = pipes[ki];
    if (!p.pipeline) continue;
    std::vector<VkDescriptorBufferInfo> infos(p.bindings.size());
    std::vector<VkWriteDescriptorSet> writes(p.bindings.size());
    for (size_t i = 0; i < p.bindings.size(); ++i) {
      const Binding& b = binding[static_cast<size_t>(p.bindings[i])];
      infos[i] = {b.buffer, b.offset, b.range};
      writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
      writes[i].dstSet = sets[ki];
      writes[i].dstBinding = static_cast<uint32_t>(i);
      writes[i].descriptorCount = 1;
      writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[i].pBufferInfo = &infos[i];
    }
    vk::vkUpdateDescriptorSets(vd, static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);
  }
  // Push constants: the symbols, then the offset buffers' element-0 offsets.
  std::vector<int64_t> push(syms.begin(), syms.end());
  for (int32_t b : offset_buffers) push.push_back(-input_lo[static_cast<size_t>(pl.buffers[static_cast<size_t>(b)].index)]);
  push.push_back(0);  // pc.kz: the shaders' integer zero
  dispatched.assign(pl.kernels.size(), false);
  for (Segment& seg : segments) {
    seg.empty = true;
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    KILN_VK(vk::vkBeginCommandBuffer(seg.cb, &bi));
    if (queries && seg.last > seg.first)
      vk::vkCmdResetQueryPool(seg.cb, queries, static_cast<uint32_t>(2 * seg.first), static_cast<uint32_t>(2 * (seg.last - seg.first)));
    // Host writes, staging copies and earlier dispatches before the first dispatch.
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    vk::vkCmdPipelineBarrier(seg.cb, VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                             VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
    for (size_t ki = seg.first; ki < seg.last; ++ki) {
      const plan::PlanKernel& k = pl.kernels[ki];
      const Pipe& p = pipes[ki];
      if (!p.pipeline) continue;
      uint32_t gx = 1;
      const int64_t cap = std::max<int64_t>(1, std::min<int64_t>(k.launch.max_blocks > 0 ? k.launch.max_blocks : 65535, 65535));
      if (k.gemm) {
        const int64_t m = k.gemm->m.evaluate(syms), n = k.gemm->n.evaluate(syms);
        const int64_t batches = numel(eval(k.gemm->batch, syms));
        if (m * n * batches == 0) continue;
        // One workgroup per tile of C and batch element (the shader grid-strides past the cap).
        const auto& [tr, tc] = k.gemm->tile;  // (> 0: checked at load)
        gx = static_cast<uint32_t>(std::min(cap, ((m + tr - 1) / tr) * ((n + tc - 1) / tc) * batches));
      } else {
        const int64_t extent = arena_extents[ki];
        if (extent == 0) continue;
        const int64_t per = std::max<int64_t>(1, k.launch.items_per_block);
        gx = static_cast<uint32_t>(std::clamp<int64_t>((extent + per - 1) / per, 1, cap));
      }
      if (queries) vk::vkCmdWriteTimestamp(seg.cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries, static_cast<uint32_t>(2 * ki));
      vk::vkCmdBindPipeline(seg.cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
      vk::vkCmdBindDescriptorSets(seg.cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &sets[ki], 0, nullptr);
      if (push_bytes) vk::vkCmdPushConstants(seg.cb, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes, push.data());
      vk::vkCmdDispatch(seg.cb, gx, 1, 1);
      VkMemoryBarrier kb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
      kb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
      kb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT;
      vk::vkCmdPipelineBarrier(seg.cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                               VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0,
                               1, &kb, 0, nullptr, 0, nullptr);
      if (queries) vk::vkCmdWriteTimestamp(seg.cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries, static_cast<uint32_t>(2 * ki + 1));
      dispatched[ki] = true;
      seg.empty = false;
    }
    KILN_VK(vk::vkEndCommandBuffer(seg.cb));
  }
  recorded = binding;
  recordings += 1;
}

std::vector<TensorData> PlanExecutable::run_host(std::span<const TensorData> inputs) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->run(inputs, false);
}

std::vector<TensorData> PlanExecutable::run_device(std::span<const TensorData> inputs) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->run(inputs, true);
}

std::vector<TensorData> PlanExecutable::Impl::run(std::span<const TensorData> inputs, bool device_outputs) {
  Impl& im = *this;
  const plan::KernelPlan& pl = im.plan;
  const kiln::Device here = kiln::Device::vulkan(im.options.device);
  // Sizes, checked inputs, slots and extents (bind.h); what is left is memory, copies, dispatches.
  const plan::Binding sizes = im.binder->bind(inputs);
  const std::vector<int64_t>& syms = sizes.symbols();
  const size_t num_inputs = inputs.size();
  // Decide how each input reaches the kernels: bound where it lies (a tensor on this
  // device with the plan's strides at an aligned offset: no copy), copied on the device into the
  // plan's buffer (the same, unaligned), or copied in from the host (a host tensor, or one made
  // contiguous first).
  std::vector<int64_t> lo(num_inputs, 0);
  std::vector<TensorData> src(num_inputs);       // what is copied from the host
  std::vector<Binding> bound(num_inputs);        // bound in place (buffer set) ...
  std::vector<Location> device_src(num_inputs);  // ... or copied on the device (buffer set)
  for (size_t k = 0; k < num_inputs; ++k) {
    const plan::PlanBuffer& b = pl.buffers[static_cast<size_t>(im.input_buffer[k])];
    const TensorData& t = inputs[k];
    const bool on_device = t.device().type != DeviceType::cpu;
    KILN_CHECK(!on_device || t.device() == here, "vulkan runtime: input ", k, " is on ", t.device().str(),
               "; the plan runs on vulkan:", im.options.device);
    if (!sizes.copy_input[k]) {
      lo[k] = span_of(t.sizes, eval(b.strides, syms)).first;
      if (on_device && t.numel() > 0) {
        const auto [l, h] = span_of(t.sizes, t.strides);
        const int64_t es = dtype_size(t.dtype);
        const Location at = im.dev->locate(static_cast<const char*>(t.data()) + l * es);
        const VkDeviceSize bytes = static_cast<VkDeviceSize>((h - l + 1) * es);
        KILN_CHECK(bytes <= at.left, "vulkan runtime: input ", k, " reaches past the end of its device memory");
        if (at.offset % im.dev->offset_alignment() == 0)
          // The range rounded up to 16 bytes (shaders reading packed 16/8-bit storage read whole
          // words), within the pool allocation (16-byte multiples).
          bound[k] = {at.buffer, at.offset, std::min<VkDeviceSize>((bytes + 15) / 16 * 16, at.left)};
        else
          device_src[k] = at;
      } else {
        src[k] = t;
      }
    } else {  // the plan wants it contiguous
      src[k] = eval::contiguous(on_device ? to_host(t) : t);
    }
  }
  if (!im.arena_valid || im.arena_syms != syms || im.input_lo != lo) im.build_arena(sizes, lo);
  // Outputs still held by the caller (returned by an earlier run_device) get new buffers.
  if (device_outputs)
    for (const plan::PlanBuffer& b : pl.buffers)
      if (b.kind == "output" && im.bufs[static_cast<size_t>(b.id)].use_count() > 1)
        im.bufs[static_cast<size_t>(b.id)] = im.dev->allocate(static_cast<size_t>(im.bufs[static_cast<size_t>(b.id)]->size));
  std::vector<Binding> binding(pl.buffers.size());
  for (const plan::PlanBuffer& b : pl.buffers) {
    const size_t id = static_cast<size_t>(b.id);
    if (b.kind == "input" && bound[static_cast<size_t>(b.index)].buffer)
      binding[id] = bound[static_cast<size_t>(b.index)];
    else if (im.bufs[id])
      binding[id] = {im.bufs[id]->buffer, im.bufs[id]->offset, im.bufs[id]->size};
  }
  if (binding != im.recorded) im.bind_and_record(binding);
  // Copy in.
  for (size_t k = 0; k < num_inputs; ++k) {
    Buffer& dst = *im.bufs[static_cast<size_t>(im.input_buffer[k])];
    if (bound[k].buffer) continue;
    if (device_src[k].buffer) {
      const auto [l, h] = span_of(inputs[k].sizes, inputs[k].strides);
      Location to{dst.buffer, dst.offset, dst.size, nullptr};
      im.dev->copy(device_src[k], to, static_cast<VkDeviceSize>((h - l + 1) * dtype_size(inputs[k].dtype)));
      continue;
    }
    const TensorData& t = src[k];
    if (t.numel() == 0) continue;
    const int64_t es = dtype_size(t.dtype);
    const auto [l, h] = span_of(t.sizes, t.strides);
    im.dev->upload(dst.address, static_cast<const char*>(t.data()) + l * es, static_cast<size_t>((h - l + 1) * es));
  }
  // A host view of a plan buffer for the reference kernels: the input itself (on the host), the
  // mapped memory, or a copy of the buffer.
  auto host_view = [&](int32_t id) {
    const plan::PlanBuffer& b = pl.buffers[static_cast<size_t>(id)];
    if (b.kind == "input") {
      const TensorData& t = inputs[static_cast<size_t>(b.index)];
      return t.device().type == DeviceType::cpu ? t : to_host(t);
    }
    TensorData t;
    t.dtype = b.dtype;
    t.sizes = eval(b.sizes, syms);
    t.strides = eval(b.strides, syms);
    const Buffer& buf = *im.bufs[static_cast<size_t>(id)];
    if (buf.mapped) {
      t.storage = std::make_shared<Storage>(kiln::Device::cpu(), buf.mapped, static_cast<size_t>(buf.size), nullptr);
    } else {
      t.storage = Storage::allocate_host(static_cast<size_t>(buf.size));
      im.dev->download(t.storage->data(), buf.address, static_cast<size_t>(buf.size));
    }
    return t;
  };
  // Submit segment by segment; reference kernels on the host in between.
  for (size_t si = 0; si < im.segments.size(); ++si) {
    const Impl::Segment& seg = im.segments[si];
    if (!seg.empty) {
      VkSubmitInfo sub{VK_STRUCTURE_TYPE_SUBMIT_INFO};
      sub.commandBufferCount = 1;
      sub.pCommandBuffers = &seg.cb;
      {
        std::lock_guard<std::mutex> qlock(im.dev->queue_mutex());
        KILN_VK(vk::vkQueueSubmit(im.dev->queue(), 1, &sub, im.fence));
      }
      KILN_VK(vk::vkWaitForFences(im.vd, 1, &im.fence, VK_TRUE, UINT64_MAX));
      KILN_VK(vk::vkResetFences(im.vd, 1, &im.fence));
    }
    if (seg.last < pl.kernels.size()) {  // the reference kernel after it
      const plan::PlanKernel& k = pl.kernels[seg.last];
      std::vector<TensorData> args;
      for (int32_t b : k.inputs) args.push_back(host_view(b));
      const plan::PlanBuffer& ob = pl.buffers[static_cast<size_t>(k.output)];
      const TensorData r = eval::run_op(k.op, args, k.attrs, ob.dtype, eval(ob.sizes, syms));
      const TensorData rc = r.is_contiguous() ? r : eval::contiguous(r);
      const size_t bytes = static_cast<size_t>(rc.numel() * dtype_size(rc.dtype));
      im.dev->upload(im.bufs[static_cast<size_t>(k.output)]->address, rc.data(), bytes);
    }
  }
  // Kernel times, and the run's: per segment, from its first dispatch's start to its last's end.
  im.kernel_ms.clear();
  im.run_ms = -1;
  if (im.queries) {
    std::vector<uint64_t> ts(2 * pl.kernels.size(), 0);
    std::vector<bool> ok(pl.kernels.size(), false);
    im.kernel_ms.assign(pl.kernels.size(), 0.0);
    const double period = im.dev->info().timestamp_period_ns;
    for (size_t ki = 0; ki < pl.kernels.size(); ++ki) {
      if (!im.dispatched[ki]) continue;
      const VkResult r = vk::vkGetQueryPoolResults(im.vd, im.queries, static_cast<uint32_t>(2 * ki), 2, 2 * sizeof(uint64_t),
                                                   &ts[2 * ki], sizeof(uint64_t), VK_QUERY_RESULT_64_BIT);
      ok[ki] = r == VK_SUCCESS;
      if (ok[ki]) im.kernel_ms[ki] = static_cast<double>(ts[2 * ki + 1] - ts[2 * ki]) * period * 1e-6;
    }
    im.run_ms = 0;
    for (const Segment& seg : im.segments) {
      uint64_t first = UINT64_MAX, last = 0;
      for (size_t ki = seg.first; ki < seg.last; ++ki)
        if (ok[ki]) first = std::min(first, ts[2 * ki]), last = std::max(last, ts[2 * ki + 1]);
      if (last > first) im.run_ms += static_cast<double>(last - first) * period * 1e-6;
    }
  }
  if (im.run_ms > 0) t_device_ms += im.run_ms;
  if (!im.kernel_ms.empty() && (im.profiling.load(std::memory_order_relaxed) || logs::enabled(logs::Category::profile))) {
    if (!im.profile)
      im.profile = std::make_unique<plan::KernelProfile>(
          pl.kernels.size(), "vulkan:" + std::to_string(im.dev->info().index) + " (" + im.dev->info().name + ")");
    im.profile->add_call(im.kernel_ms);
    if (im.profile->report_due()) KILN_LOG(profile, im.profile->report(pl));
  }
  // Outputs: on the host (copied out), or on this device (the plan's buffer itself, handed over).
  std::vector<TensorData> outs(pl.outputs.size());
  for (size_t o = 0; o < pl.outputs.size(); ++o) {
    const int32_t id = pl.outputs[o];
    const plan::PlanBuffer& b = pl.buffers[static_cast<size_t>(id)];
    if (b.kind == "input") {
      const TensorData& t = inputs[static_cast<size_t>(b.index)];
      const bool on_device = t.device().type != DeviceType::cpu;
      outs[o] = on_device == device_outputs ? t : device_outputs ? to_device(t, im.options.device) : to_host(t);
    } else if (b.kind == "constant") {
      TensorData h;
      h.dtype = b.dtype;
      h.sizes = eval(b.sizes, syms);
      h.strides = eval(b.strides, syms);
      h.storage = std::make_shared<Storage>(kiln::Device::cpu(), const_cast<std::byte*>(b.data->bytes.data()), b.data->bytes.size(),
                                            nullptr);
      outs[o] = eval::contiguous(h);
      if (device_outputs) outs[o] = to_device(outs[o], im.options.device);
    } else {
      KILN_CHECK(b.kind == "output", "vulkan runtime: output ", o, " is buffer b", id, ", which is not an output buffer");
      const std::vector<int64_t> sizes = eval(b.sizes, syms);
      if (device_outputs) {
        std::shared_ptr<Buffer> buf = im.bufs[static_cast<size_t>(id)];
        TensorData t;
        t.dtype = b.dtype;
        t.sizes = sizes;
        t.strides = contiguous_strides(std::span<const int64_t>(sizes));
        t.storage = std::make_shared<Storage>(here, buf->address, static_cast<size_t>(buf->size), [buf](void*) mutable { buf.reset(); });
        outs[o] = std::move(t);
      } else {
        TensorData t = TensorData::empty_host(b.dtype, sizes);
        const size_t bytes = static_cast<size_t>(t.numel() * dtype_size(b.dtype));
        im.dev->download(t.data(), im.bufs[static_cast<size_t>(id)]->address, bytes);
        outs[o] = std::move(t);
      }
    }
  }
  plan::finish_outputs(pl, outs, [](const TensorData& t) { return t.device().type == DeviceType::cpu ? t : to_host(t); },
                       "vulkan runtime");
  return outs;
}

TensorData to_device(const TensorData& host, int device) {
  KILN_CHECK(host.device().type == DeviceType::cpu, "vulkan: to_device takes a host tensor, not one on ", host.device().str());
  Device& dev = Device::get(device);
  const TensorData c = host.is_contiguous() ? host : eval::contiguous(host);
  const size_t bytes = static_cast<size_t>(c.numel() * dtype_size(c.dtype));
  std::shared_ptr<Buffer> buf = dev.allocate(bytes);
  dev.upload(buf->address, c.data(), bytes);
  TensorData t;
  t.dtype = c.dtype;
  t.sizes = c.sizes;
  t.strides = contiguous_strides(std::span<const int64_t>(c.sizes));
  t.storage = std::make_shared<Storage>(kiln::Device::vulkan(device), buf->address, bytes, [buf](void*) mutable { buf.reset(); });
  return t;
}

TensorData to_host(const TensorData& t) {
  if (t.device().type == DeviceType::cpu) return t;
  KILN_CHECK(t.device().type == DeviceType::vulkan, "vulkan: to_host: the tensor is on ", t.device().str());
  // Every run waits for its kernels, so the memory holds the values: copy out the span the view
  // reaches (mapped memory: memcpy; device-only: staging copies), then make it contiguous.
  Device& dev = Device::get(t.device().index);
  TensorData view = t;
  const int64_t es = dtype_size(t.dtype);
  if (t.numel() == 0) {
    view.storage = Storage::allocate_host(0);
    view.offset = 0;
    return eval::contiguous(view);
  }
  const auto [l, h] = span_of(t.sizes, t.strides);
  const size_t bytes = static_cast<size_t>((h - l + 1) * es);
  view.storage = Storage::allocate_host(bytes);
  dev.download(view.storage->data(), static_cast<const char*>(t.data()) + l * es, bytes);
  view.offset = -l;
  return eval::contiguous(view);
}

}  // namespace kiln::vulkan
