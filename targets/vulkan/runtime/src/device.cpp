// Loader (dlopen), instance with optional validation, device list and selection, the memory
// pool, shaderc. See runtime.h.
#include "device.h"

#include <dlfcn.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>

#include <shaderc/shaderc.hpp>

#include "kiln/graph/error.h"

namespace kiln::vulkan {

namespace vk {
#define KILN_VK_DEFINE(name) PFN_##name name = nullptr;
KILN_VK_GLOBAL_FNS(KILN_VK_DEFINE)
KILN_VK_INSTANCE_FNS(KILN_VK_DEFINE)
KILN_VK_DEVICE_FNS(KILN_VK_DEFINE)
#undef KILN_VK_DEFINE
PFN_vkCreateDebugUtilsMessengerEXT vkCreateDebugUtilsMessengerEXT = nullptr;
PFN_vkDestroyDebugUtilsMessengerEXT vkDestroyDebugUtilsMessengerEXT = nullptr;

const char* result_name(VkResult r) {
  switch (r) {
#define KILN_CASE(x) case x: return #x;
    KILN_CASE(VK_SUCCESS) KILN_CASE(VK_NOT_READY) KILN_CASE(VK_TIMEOUT) KILN_CASE(VK_INCOMPLETE)
    KILN_CASE(VK_ERROR_OUT_OF_HOST_MEMORY) KILN_CASE(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    KILN_CASE(VK_ERROR_INITIALIZATION_FAILED) KILN_CASE(VK_ERROR_DEVICE_LOST) KILN_CASE(VK_ERROR_MEMORY_MAP_FAILED)
    KILN_CASE(VK_ERROR_LAYER_NOT_PRESENT) KILN_CASE(VK_ERROR_EXTENSION_NOT_PRESENT)
    KILN_CASE(VK_ERROR_FEATURE_NOT_PRESENT) KILN_CASE(VK_ERROR_INCOMPATIBLE_DRIVER)
    KILN_CASE(VK_ERROR_TOO_MANY_OBJECTS) KILN_CASE(VK_ERROR_FORMAT_NOT_SUPPORTED)
    KILN_CASE(VK_ERROR_FRAGMENTED_POOL) KILN_CASE(VK_ERROR_OUT_OF_POOL_MEMORY)
#undef KILN_CASE
    default: return "VkResult (unknown)";
  }
}
}  // namespace vk

namespace {

std::mutex g_mu;
bool g_validation = [] {
  const char* e = std::getenv("KILN_VULKAN_VALIDATION");
  return e && *e && std::string(e) != "0";
}();
std::mutex g_msg_mu;
std::vector<std::string> g_messages;

VKAPI_ATTR VkBool32 VKAPI_CALL debug_callback(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                              VkDebugUtilsMessageTypeFlagsEXT, const VkDebugUtilsMessengerCallbackDataEXT* data,
                                              void*) {
  if (severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
    std::lock_guard<std::mutex> lock(g_msg_mu);
    g_messages.push_back(std::string(severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? "error: " : "warning: ") +
                         (data && data->pMessage ? data->pMessage : "(no message)"));
  }
  return VK_FALSE;
}

struct Instance {
  void* lib = nullptr;
  VkInstance instance = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
  std::string error;  // why there is none
  bool validation = false;
  std::vector<VkPhysicalDevice> physical;
};

bool has_layer(const char* name) {
  uint32_t n = 0;
  vk::vkEnumerateInstanceLayerProperties(&n, nullptr);
  std::vector<VkLayerProperties> layers(n);
  vk::vkEnumerateInstanceLayerProperties(&n, layers.data());
  for (const VkLayerProperties& l : layers)
    if (std::strcmp(l.layerName, name) == 0) return true;
  return false;
}

// The process's instance, created on first use (never destroyed: drivers may run code at exit).
Instance& instance() {
  static Instance inst = [] {
    Instance in;
    in.lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!in.lib) {
      in.error = "no Vulkan device: the Vulkan loader (libvulkan.so.1) is not installed (Debian: libvulkan1 and a driver such as mesa-vulkan-drivers)";
      return in;
    }
    auto gipa = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(in.lib, "vkGetInstanceProcAddr"));
    if (!gipa) {
      in.error = "no Vulkan device: libvulkan.so.1 has no vkGetInstanceProcAddr";
      return in;
    }
#define KILN_VK_LOAD_GLOBAL(name) vk::name = reinterpret_cast<PFN_##name>(gipa(VK_NULL_HANDLE, #name));
    KILN_VK_GLOBAL_FNS(KILN_VK_LOAD_GLOBAL)
#undef KILN_VK_LOAD_GLOBAL
    std::vector<const char*> layers, exts;
    in.validation = g_validation;
    if (in.validation) {
      if (!has_layer("VK_LAYER_KHRONOS_validation")) {
        in.error = "vulkan: validation was asked for (KILN_VULKAN_VALIDATION), but VK_LAYER_KHRONOS_validation is not installed (Debian: vulkan-validationlayers)";
        return in;
      }
      layers.push_back("VK_LAYER_KHRONOS_validation");
      exts.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    }
    VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "kiln";
    app.pEngineName = "kiln";
    app.apiVersion = VK_API_VERSION_1_2;
    VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ci.pApplicationInfo = &app;
    ci.enabledLayerCount = static_cast<uint32_t>(layers.size());
    ci.ppEnabledLayerNames = layers.data();
    ci.enabledExtensionCount = static_cast<uint32_t>(exts.size());
    ci.ppEnabledExtensionNames = exts.data();
    VkDebugUtilsMessengerCreateInfoEXT dci{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    dci.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    dci.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                      VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    dci.pfnUserCallback = debug_callback;
    if (in.validation) ci.pNext = &dci;
    const VkResult r = vk::vkCreateInstance(&ci, nullptr, &in.instance);
    if (r != VK_SUCCESS) {
      in.error = r == VK_ERROR_INCOMPATIBLE_DRIVER
                     ? "no Vulkan device: the Vulkan loader found no driver (vkCreateInstance: VK_ERROR_INCOMPATIBLE_DRIVER; Debian's mesa-vulkan-drivers gives lavapipe)"
                     : std::string("no Vulkan device: vkCreateInstance failed (") + vk::result_name(r) + ")";
      in.instance = VK_NULL_HANDLE;
      return in;
    }
#define KILN_VK_LOAD(name) vk::name = reinterpret_cast<PFN_##name>(gipa(in.instance, #name));
    KILN_VK_INSTANCE_FNS(KILN_VK_LOAD)
    KILN_VK_DEVICE_FNS(KILN_VK_LOAD)
#undef KILN_VK_LOAD
    if (in.validation) {
      vk::vkCreateDebugUtilsMessengerEXT =
          reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(gipa(in.instance, "vkCreateDebugUtilsMessengerEXT"));
      vk::vkDestroyDebugUtilsMessengerEXT =
          reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(gipa(in.instance, "vkDestroyDebugUtilsMessengerEXT"));
      if (vk::vkCreateDebugUtilsMessengerEXT) vk::vkCreateDebugUtilsMessengerEXT(in.instance, &dci, nullptr, &in.messenger);
    }
    uint32_t n = 0;
    vk::vkEnumeratePhysicalDevices(in.instance, &n, nullptr);
    in.physical.resize(n);
    if (n) vk::vkEnumeratePhysicalDevices(in.instance, &n, in.physical.data());
    if (n == 0) in.error = "no Vulkan device: the Vulkan loader reports no physical device (no driver installed: Debian's mesa-vulkan-drivers gives lavapipe)";
    return in;
  }();
  return inst;
}

std::string version_str(uint32_t v) {
  return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) + "." +
         std::to_string(VK_API_VERSION_PATCH(v));
}

const char* type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete-gpu";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated-gpu";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual-gpu";
    default: return "other";
  }
}

int compute_queue_family(VkPhysicalDevice pd, uint32_t* timestamp_bits) {
  uint32_t n = 0;
  vk::vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, nullptr);
  std::vector<VkQueueFamilyProperties> fams(n);
  vk::vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, fams.data());
  int best = -1;
  for (uint32_t i = 0; i < n; ++i) {
    if (!(fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
    // Prefer a compute-only family (async compute) when there is one.
    if (best < 0 || !(fams[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) best = static_cast<int>(i);
  }
  if (best >= 0 && timestamp_bits) *timestamp_bits = fams[static_cast<size_t>(best)].timestampValidBits;
  return best;
}

struct Features {
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  VkPhysicalDeviceVulkan11Features v11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features v12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  void chain() {
    f2.pNext = &v11;
    v11.pNext = &v12;
    v12.pNext = nullptr;
  }
};

DeviceInfo describe(int index, VkPhysicalDevice pd) {
  DeviceInfo d;
  d.index = index;
  VkPhysicalDeviceProperties props{};
  vk::vkGetPhysicalDeviceProperties(pd, &props);
  d.name = props.deviceName;
  d.type = type_name(props.deviceType);
  d.api_version = version_str(props.apiVersion);
  d.vendor_id = props.vendorID;
  d.device_id = props.deviceID;
  d.max_workgroup_invocations = props.limits.maxComputeWorkGroupInvocations;
  d.max_storage_buffer_range = props.limits.maxStorageBufferRange;
  uint32_t ts_bits = 0;
  compute_queue_family(pd, &ts_bits);
  d.timestamp_period_ns = ts_bits ? props.limits.timestampPeriod : 0.0;
  if (props.apiVersion >= VK_API_VERSION_1_2) {
    VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    VkPhysicalDeviceVulkan11Properties p11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES};
    VkPhysicalDeviceDriverProperties drv{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceFloatControlsProperties fc{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES};
    p2.pNext = &p11;
    p11.pNext = &drv;
    drv.pNext = &fc;
    vk::vkGetPhysicalDeviceProperties2(pd, &p2);
    d.caps.denorm_preserve = fc.shaderDenormPreserveFloat32;
    d.caps.nan_preserve = fc.shaderSignedZeroInfNanPreserveFloat32;
    d.subgroup_size = p11.subgroupSize;
    d.driver = std::string(drv.driverName) + " " + drv.driverInfo;
    Features f;
    f.chain();
    vk::vkGetPhysicalDeviceFeatures2(pd, &f.f2);
    d.caps.storage16 = f.v11.storageBuffer16BitAccess;
    d.caps.storage8 = f.v12.storageBuffer8BitAccess;
    d.caps.float64 = f.f2.features.shaderFloat64;
    d.caps.int64 = f.f2.features.shaderInt64;
    const VkSubgroupFeatureFlags need = VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_VOTE_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT;
    d.caps.subgroup = (p11.subgroupSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT) && (p11.subgroupSupportedOperations & need) == need;
    // KILN_VULKAN_SUBGROUP=0: the shared-memory combine alone (comparisons, driver problems).
    if (const char* e = std::getenv("KILN_VULKAN_SUBGROUP"); e && std::string(e) == "0") d.caps.subgroup = false;
  } else {
    VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    vk::vkGetPhysicalDeviceFeatures2(pd, &f2);
    d.caps.storage16 = false;
    d.caps.storage8 = false;
    d.caps.float64 = f2.features.shaderFloat64;
    d.caps.int64 = f2.features.shaderInt64;
  }
  // (1-D workgroups: also within the x dimension's limit, which may be below the invocations')
  d.caps.max_workgroup = std::min<int64_t>({1024, d.max_workgroup_invocations, props.limits.maxComputeWorkGroupSize[0]});
  // (Capped: a kernel never needs more, and the cap keeps cache keys alike across big limits.)
  d.caps.max_storage_buffers = std::min<int64_t>(1024, props.limits.maxPerStageDescriptorStorageBuffers);
  return d;
}

}  // namespace

std::string DeviceInfo::str() const {
  std::ostringstream o;
  o << "vulkan:" << index << "  " << name << " (" << type << ", Vulkan " << api_version;
  if (!driver.empty()) o << ", " << driver;
  o << ")  " << caps.str() << ", subgroup " << subgroup_size << ", timestamps " << (timestamp_period_ns > 0 ? "yes" : "no");
  return o.str();
}

bool available(std::string* why) {
  std::lock_guard<std::mutex> lock(g_mu);
  Instance& in = instance();
  if (!in.error.empty() || in.physical.empty()) {
    if (why) *why = in.error;
    return false;
  }
  return true;
}

std::vector<DeviceInfo> list_devices(std::string* why) {
  std::lock_guard<std::mutex> lock(g_mu);
  Instance& in = instance();
  std::vector<DeviceInfo> out;
  if (why) *why = in.error;
  for (size_t i = 0; i < in.physical.size(); ++i) out.push_back(describe(static_cast<int>(i), in.physical[i]));
  return out;
}

void enable_validation() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_validation = true;
}

bool validation_enabled() { return g_validation; }

std::vector<std::string> take_validation_messages() {
  std::lock_guard<std::mutex> lock(g_msg_mu);
  std::vector<std::string> m;
  m.swap(g_messages);
  return m;
}

CodegenOptions codegen_options_for(int index) {
  CodegenOptions o = CodegenOptions::from_config();
  const DeviceInfo& info = Device::get(index).info();
  o.caps = info.caps;
  o.gpu = info.type != "cpu" && info.type != "other";
  // For comparisons and driver problems: KILN_VULKAN_SCHEDULE=cpu|gpu, KILN_VULKAN_VECTORS=0,
  // KILN_VULKAN_GEMM_VECTORS=1, KILN_VULKAN_CACHE_ROWS=0 (KILN_VULKAN_SUBGROUP=0 is read with the caps).
  auto env = [](const char* name) { const char* e = std::getenv(name); return std::string(e ? e : ""); };
  if (env("KILN_VULKAN_SCHEDULE") == "cpu") o.gpu = false;
  if (env("KILN_VULKAN_SCHEDULE") == "gpu") o.gpu = true;
  if (env("KILN_VULKAN_VECTORS") == "0") o.vector_accesses = false;
  if (env("KILN_VULKAN_GEMM_VECTORS") == "1") o.gemm_vector_loads = true;
  if (env("KILN_VULKAN_CACHE_ROWS") == "0") o.cache_rows = false;
  return o;
}

// ---- Device ----

Device& Device::get(int index) {
  static std::mutex mu;
  static std::map<int, std::unique_ptr<Device>> devices;
  std::lock_guard<std::mutex> lock(mu);
  auto it = devices.find(index);
  if (it != devices.end()) return *it->second;
  std::string why;
  Instance* in = nullptr;
  {
    std::lock_guard<std::mutex> glock(g_mu);
    in = &instance();
  }
  KILN_CHECK(in->error.empty() && !in->physical.empty(), in->error);
  KILN_CHECK(index >= 0 && static_cast<size_t>(index) < in->physical.size(), "no Vulkan device vulkan:", index, " (there are ",
             in->physical.size(), "; `kiln list-devices` lists them)");
  auto d = std::unique_ptr<Device>(new Device);
  d->open(index, in->physical[static_cast<size_t>(index)]);
  Device& ref = *d;
  devices.emplace(index, std::move(d));
  return ref;
}

void Device::open(int index, VkPhysicalDevice pd) {
  physical_ = pd;
  info_ = describe(index, pd);
  KILN_CHECK(info_.caps.int64, "vulkan: device vulkan:", index, " (", info_.name,
             ") has no shaderInt64, which Kiln's shaders need for sizes and integer values");
  uint32_t ts_bits = 0;
  family_ = compute_queue_family(pd, &ts_bits);
  KILN_CHECK(family_ >= 0, "vulkan: device vulkan:", index, " (", info_.name, ") has no compute queue");
  const float prio = 1.0f;
  VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qci.queueFamilyIndex = static_cast<uint32_t>(family_);
  qci.queueCount = 1;
  qci.pQueuePriorities = &prio;
  VkDeviceCreateInfo ci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  ci.queueCreateInfoCount = 1;
  ci.pQueueCreateInfos = &qci;
  Features f;
  VkPhysicalDeviceFeatures2 plain{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  if (info_.caps.storage16 || info_.caps.storage8) {
    f.chain();
    f.f2.features.shaderFloat64 = info_.caps.float64;
    f.f2.features.shaderInt64 = VK_TRUE;
    f.v11.storageBuffer16BitAccess = info_.caps.storage16;
    f.v12.storageBuffer8BitAccess = info_.caps.storage8;
    ci.pNext = &f.f2;
  } else {
    plain.features.shaderFloat64 = info_.caps.float64;
    plain.features.shaderInt64 = VK_TRUE;
    ci.pNext = &plain;
  }
  KILN_VK(vk::vkCreateDevice(pd, &ci, nullptr, &device_));
  vk::vkGetDeviceQueue(device_, static_cast<uint32_t>(family_), 0, &queue_);
  VkPipelineCacheCreateInfo pci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  KILN_VK(vk::vkCreatePipelineCache(device_, &pci, nullptr, &pipeline_cache_));
  VkCommandPoolCreateInfo cpi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  cpi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  cpi.queueFamilyIndex = static_cast<uint32_t>(family_);
  KILN_VK(vk::vkCreateCommandPool(device_, &cpi, nullptr, &command_pool_));
  VkPhysicalDeviceMemoryProperties mp{};
  vk::vkGetPhysicalDeviceMemoryProperties(pd, &mp);
  memory_props_ = mp;
  VkPhysicalDeviceProperties props{};
  vk::vkGetPhysicalDeviceProperties(pd, &props);
  alignment_ = std::max<VkDeviceSize>(256, props.limits.minStorageBufferOffsetAlignment);
  // 16 at least: the shaders read and write f32/i32 buffers as vec4/ivec4 where they can.
  storage_alignment_ = std::max<VkDeviceSize>(16, props.limits.minStorageBufferOffsetAlignment);
  // A discrete GPU reads device-local memory at its full bandwidth and host-visible memory over
  // PCIe: pool memory is device-only there, filled and read through staging copies. CPU drivers
  // and integrated GPUs share the host's memory: mapped, no copies. KILN_VULKAN_STAGING=1 (or 0)
  // forces the device-only (mapped) path, so the staging copies are tested on lavapipe too.
  host_visible_ = props.deviceType != VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
  if (const char* e = std::getenv("KILN_VULKAN_STAGING"); e && *e) host_visible_ = std::string(e) == "0";
}

int64_t Device::device_memory() const {
  VkDeviceSize largest = 0, any = 0;
  for (uint32_t i = 0; i < memory_props_.memoryHeapCount; ++i) {
    const VkMemoryHeap& h = memory_props_.memoryHeaps[i];
    any = std::max(any, h.size);
    if (h.flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) largest = std::max(largest, h.size);
  }
  return static_cast<int64_t>(largest > 0 ? largest : any);  // (a device without a device-local heap: its largest)
}

uint32_t Device::memory_type(uint32_t bits, bool device_only) const {
  if (device_only) {
    // Device-local and not host-visible first (on NVIDIA the host-visible device-local type is
    // the small BAR heap), then any device-local type, then any.
    int best = -1, rank = -1;
    for (uint32_t i = 0; i < memory_props_.memoryTypeCount; ++i) {
      if (!(bits & (1u << i))) continue;
      const VkMemoryPropertyFlags f = memory_props_.memoryTypes[i].propertyFlags;
      const int r = (f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) ? ((f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) ? 1 : 2) : 0;
      if (r > rank) best = static_cast<int>(i), rank = r;
    }
    KILN_CHECK(best >= 0, "vulkan: device ", info_.name, " has no memory type for storage buffers");
    return static_cast<uint32_t>(best);
  }
  const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  int best = -1;
  for (uint32_t i = 0; i < memory_props_.memoryTypeCount; ++i) {
    if (!(bits & (1u << i))) continue;
    const VkMemoryPropertyFlags f = memory_props_.memoryTypes[i].propertyFlags;
    if ((f & want) != want) continue;
    if (best < 0 || (f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)) {
      best = static_cast<int>(i);
      if (f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) break;
    }
  }
  KILN_CHECK(best >= 0, "vulkan: device ", info_.name, " has no host-visible coherent memory type for storage buffers");
  return static_cast<uint32_t>(best);
}

std::shared_ptr<Buffer> Device::allocate(size_t bytes) {
  const VkDeviceSize size = std::max<VkDeviceSize>(16, (bytes + 15) / 16 * 16);
  KILN_CHECK(static_cast<int64_t>(size) <= info_.max_storage_buffer_range, "vulkan: a buffer of ", bytes,
             " bytes is larger than device ", info_.name, "'s maxStorageBufferRange (", info_.max_storage_buffer_range, " bytes)");
  std::lock_guard<std::mutex> lock(pool_mu_);
  // First fit in an existing block.
  for (size_t bi = 0; bi < blocks_.size(); ++bi) {
    Block& b = blocks_[bi];
    for (auto it = b.free.begin(); it != b.free.end(); ++it) {
      const VkDeviceSize start = (it->first + alignment_ - 1) / alignment_ * alignment_;
      const VkDeviceSize end = it->first + it->second;
      if (start + size > end) continue;
      const VkDeviceSize fstart = it->first;
      b.free.erase(it);
      if (start > fstart) b.free[fstart] = start - fstart;
      if (end > start + size) b.free[start + size] = end - (start + size);
      return make_buffer(bi, start, size);
    }
  }
  // A new block: 64 MiB, or the request when larger.
  Block b;
  b.size = std::max<VkDeviceSize>(size, VkDeviceSize{64} << 20);
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = b.size;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  KILN_VK(vk::vkCreateBuffer(device_, &bci, nullptr, &b.buffer));
  VkMemoryRequirements req{};
  vk::vkGetBufferMemoryRequirements(device_, b.buffer, &req);
  VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = memory_type(req.memoryTypeBits, !host_visible_);
  const VkResult r = vk::vkAllocateMemory(device_, &ai, nullptr, &b.memory);
  if (r != VK_SUCCESS) {
    vk::vkDestroyBuffer(device_, b.buffer, nullptr);
    fail("vulkan: cannot allocate ", req.size, " bytes on ", info_.name, ": ", vk::result_name(r));
  }
  KILN_VK(vk::vkBindBufferMemory(device_, b.buffer, b.memory, 0));
  if (host_visible_) {
    KILN_VK(vk::vkMapMemory(device_, b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped));
    b.address = static_cast<char*>(b.mapped);
  } else {
    // Addresses for the tensors in this block: reserved, never backed (a host read faults).
    void* p = mmap(nullptr, b.size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    KILN_CHECK(p != MAP_FAILED, "vulkan: cannot reserve ", b.size, " bytes of address space for a device memory block");
    b.address = static_cast<char*>(p);
  }
  if (b.size > size) b.free[size] = b.size - size;
  by_address_[b.address] = blocks_.size();
  blocks_.push_back(std::move(b));
  return make_buffer(blocks_.size() - 1, 0, size);
}

std::shared_ptr<Buffer> Device::make_buffer(size_t block, VkDeviceSize offset, VkDeviceSize size) {
  auto buf = std::shared_ptr<Buffer>(new Buffer, [this, block](Buffer* p) {
    release(block, p->offset, p->size);
    delete p;
  });
  buf->buffer = blocks_[block].buffer;
  buf->offset = offset;
  buf->size = size;
  buf->mapped = blocks_[block].mapped ? static_cast<char*>(blocks_[block].mapped) + offset : nullptr;
  buf->address = blocks_[block].address + offset;
  return buf;
}

Location Device::locate(const void* address) const {
  const char* p = static_cast<const char*>(address);
  std::lock_guard<std::mutex> lock(pool_mu_);
  auto it = by_address_.upper_bound(p);
  KILN_CHECK(it != by_address_.begin(), "vulkan: address ", address, " is not in the memory pool of ", info_.name);
  --it;
  const Block& b = blocks_[it->second];
  const VkDeviceSize off = static_cast<VkDeviceSize>(p - b.address);
  KILN_CHECK(off < b.size || (off == b.size && b.size > 0), "vulkan: address ", address, " is not in the memory pool of ",
             info_.name);
  Location l;
  l.buffer = b.buffer;
  l.offset = off;
  l.left = b.size - off;
  l.mapped = b.mapped ? static_cast<char*>(b.mapped) + off : nullptr;
  return l;
}

void Device::staging_ready(VkDeviceSize bytes) {
  if (staging_size_ >= bytes) return;
  if (staging_) {
    vk::vkDestroyBuffer(device_, staging_, nullptr);
    vk::vkFreeMemory(device_, staging_memory_, nullptr);
    staging_ = VK_NULL_HANDLE;
    staging_memory_ = VK_NULL_HANDLE;
    staging_size_ = 0;
  }
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = bytes;
  bci.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  KILN_VK(vk::vkCreateBuffer(device_, &bci, nullptr, &staging_));
  VkMemoryRequirements req{};
  vk::vkGetBufferMemoryRequirements(device_, staging_, &req);
  // Host-visible and coherent; host-cached where offered (reads back at memcpy speed).
  const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  int best = -1;
  for (uint32_t i = 0; i < memory_props_.memoryTypeCount; ++i) {
    if (!(req.memoryTypeBits & (1u << i))) continue;
    const VkMemoryPropertyFlags f = memory_props_.memoryTypes[i].propertyFlags;
    if ((f & want) != want) continue;
    const bool cached = f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT, local = f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    if (best < 0 || (cached && !local)) best = static_cast<int>(i);
  }
  KILN_CHECK(best >= 0, "vulkan: device ", info_.name, " has no host-visible coherent memory for staging copies");
  VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = static_cast<uint32_t>(best);
  KILN_VK(vk::vkAllocateMemory(device_, &ai, nullptr, &staging_memory_));
  KILN_VK(vk::vkBindBufferMemory(device_, staging_, staging_memory_, 0));
  void* m = nullptr;
  KILN_VK(vk::vkMapMemory(device_, staging_memory_, 0, VK_WHOLE_SIZE, 0, &m));
  staging_mapped_ = static_cast<char*>(m);
  staging_size_ = bytes;
}

template <class F>
void Device::submit_transfer(F&& fill) {
  if (!transfer_cb_) {
    VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    cai.commandPool = command_pool_;
    cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    cai.commandBufferCount = 1;
    KILN_VK(vk::vkAllocateCommandBuffers(device_, &cai, &transfer_cb_));
    VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    KILN_VK(vk::vkCreateFence(device_, &fci, nullptr, &transfer_fence_));
  }
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  KILN_VK(vk::vkBeginCommandBuffer(transfer_cb_, &bi));
  // Earlier dispatches, copies and host writes before the copy; the copy before later
  // dispatches, copies and host reads.
  VkMemoryBarrier before{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  before.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT;
  before.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  vk::vkCmdPipelineBarrier(transfer_cb_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT,
                           VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &before, 0, nullptr, 0, nullptr);
  fill(transfer_cb_);
  VkMemoryBarrier after{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  after.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  after.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_HOST_READ_BIT |
                        VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  vk::vkCmdPipelineBarrier(transfer_cb_, VK_PIPELINE_STAGE_TRANSFER_BIT,
                           VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                           &after, 0, nullptr, 0, nullptr);
  KILN_VK(vk::vkEndCommandBuffer(transfer_cb_));
  VkSubmitInfo sub{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  sub.commandBufferCount = 1;
  sub.pCommandBuffers = &transfer_cb_;
  {
    std::lock_guard<std::mutex> qlock(queue_mu_);
    KILN_VK(vk::vkQueueSubmit(queue_, 1, &sub, transfer_fence_));
  }
  KILN_VK(vk::vkWaitForFences(device_, 1, &transfer_fence_, VK_TRUE, UINT64_MAX));
  KILN_VK(vk::vkResetFences(device_, 1, &transfer_fence_));
}

namespace {
constexpr VkDeviceSize kStagingChunk = VkDeviceSize{64} << 20;
}

void Device::upload(const void* address, const void* src, size_t bytes) {
  if (bytes == 0) return;
  const Location l = locate(address);
  KILN_CHECK(bytes <= l.left, "vulkan: a copy of ", bytes, " bytes runs past the end of its device memory block");
  if (l.mapped) {
    std::memcpy(l.mapped, src, bytes);
    return;
  }
  std::lock_guard<std::mutex> lock(transfer_mu_);
  staging_ready(std::min<VkDeviceSize>(bytes, kStagingChunk));
  for (VkDeviceSize done = 0; done < bytes;) {
    const VkDeviceSize n = std::min<VkDeviceSize>(bytes - done, staging_size_);
    std::memcpy(staging_mapped_, static_cast<const char*>(src) + done, n);
    submit_transfer([&](VkCommandBuffer cb) {
      VkBufferCopy region{0, l.offset + done, n};
      vk::vkCmdCopyBuffer(cb, staging_, l.buffer, 1, &region);
    });
    done += n;
  }
}

void Device::download(void* dst, const void* address, size_t bytes) {
  if (bytes == 0) return;
  const Location l = locate(address);
  KILN_CHECK(bytes <= l.left, "vulkan: a copy of ", bytes, " bytes runs past the end of its device memory block");
  if (l.mapped) {
    std::memcpy(dst, l.mapped, bytes);
    return;
  }
  std::lock_guard<std::mutex> lock(transfer_mu_);
  staging_ready(std::min<VkDeviceSize>(bytes, kStagingChunk));
  for (VkDeviceSize done = 0; done < bytes;) {
    const VkDeviceSize n = std::min<VkDeviceSize>(bytes - done, staging_size_);
    submit_transfer([&](VkCommandBuffer cb) {
      VkBufferCopy region{l.offset + done, 0, n};
      vk::vkCmdCopyBuffer(cb, l.buffer, staging_, 1, &region);
    });
    std::memcpy(static_cast<char*>(dst) + done, staging_mapped_, n);
    done += n;
  }
}

void Device::copy(const Location& src, const Location& dst, VkDeviceSize bytes) {
  if (bytes == 0) return;
  KILN_CHECK(bytes <= src.left && bytes <= dst.left, "vulkan: a device copy of ", bytes, " bytes runs past a memory block");
  std::lock_guard<std::mutex> lock(transfer_mu_);
  submit_transfer([&](VkCommandBuffer cb) {
    VkBufferCopy region{src.offset, dst.offset, bytes};
    vk::vkCmdCopyBuffer(cb, src.buffer, dst.buffer, 1, &region);
  });
}

double Device::copy_gbps(size_t bytes, int reps) {
  KILN_CHECK(info_.timestamp_period_ns > 0, "vulkan: device ", info_.name, " has no timestamps to time a copy with");
  const std::shared_ptr<Buffer> a = allocate(bytes), b = allocate(bytes);
  std::vector<unsigned char> pattern(std::min<size_t>(bytes, kStagingChunk));
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<unsigned char>(i * 131 + 7);
  for (size_t done = 0; done < bytes; done += pattern.size())
    upload(a->address + done, pattern.data(), std::min(pattern.size(), bytes - done));
  VkQueryPool qp = VK_NULL_HANDLE;
  VkQueryPoolCreateInfo qci{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  qci.queryType = VK_QUERY_TYPE_TIMESTAMP;
  qci.queryCount = 2;
  KILN_VK(vk::vkCreateQueryPool(device_, &qci, nullptr, &qp));
  double med = 0;
  {
    std::lock_guard<std::mutex> lock(transfer_mu_);
    auto copy_ms = [&] {
      submit_transfer([&](VkCommandBuffer cb) {
        vk::vkCmdResetQueryPool(cb, qp, 0, 2);
        vk::vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, qp, 0);
        VkBufferCopy region{a->offset, b->offset, bytes};
        vk::vkCmdCopyBuffer(cb, a->buffer, b->buffer, 1, &region);
        vk::vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qp, 1);
      });
      uint64_t ts[2] = {0, 0};
      KILN_VK(vk::vkGetQueryPoolResults(device_, qp, 0, 2, sizeof(ts), ts, sizeof(uint64_t), VK_QUERY_RESULT_64_BIT));
      return static_cast<double>(ts[1] - ts[0]) * info_.timestamp_period_ns * 1e-6;
    };
    med = median_after_warm_up(copy_ms, reps, 5);
  }
  vk::vkDestroyQueryPool(device_, qp, nullptr);
  return 2.0 * static_cast<double>(bytes) / (med * 1e-3) / 1e9;
}

double median_after_warm_up(const std::function<double()>& once, int reps, int batch) {
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const char* e = std::getenv("KILN_VULKAN_WARM_S");
  const double min_warm_s = e && *e ? std::atof(e) : 2.0;
  const auto warm = std::chrono::steady_clock::now();
  auto since = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - warm).count(); };
  double last = 0;
  for (;;) {
    std::vector<double> b;
    for (int i = 0; i < batch; ++i) b.push_back(once());
    const double med = median(b);
    const bool settled = last > 0 && med >= 0.98 * last;
    last = last > 0 ? std::min(last, med) : med;
    if ((settled && since() >= min_warm_s) || since() >= 5.0) break;
  }
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) ms.push_back(once());
  return median(ms);
}

void Device::release(size_t block, VkDeviceSize offset, VkDeviceSize size) {
  std::lock_guard<std::mutex> lock(pool_mu_);
  auto& fr = blocks_[block].free;
  auto it = fr.emplace(offset, size).first;
  // Coalesce with the neighbours.
  if (auto next = std::next(it); next != fr.end() && it->first + it->second == next->first) {
    it->second += next->second;
    fr.erase(next);
  }
  if (it != fr.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      fr.erase(it);
    }
  }
}

int64_t Device::pool_bytes() const {
  std::lock_guard<std::mutex> lock(pool_mu_);
  int64_t n = 0;
  for (const Block& b : blocks_) n += static_cast<int64_t>(b.size);
  return n;
}

double copy_gbps(int device, size_t bytes, int reps) {
  KILN_CHECK(reps > 0 && bytes > 0, "vulkan: copy_gbps needs a positive size and repetition count");
  return Device::get(device).copy_gbps(bytes, reps);
}

// ---- shaderc ----

std::vector<uint32_t> compile_glsl(const std::string& source, const std::string& name, double* seconds) {
  static std::mutex mu;
  static std::map<std::string, std::vector<uint32_t>> cache;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(source);
    if (it != cache.end()) {
      if (seconds) *seconds = 0;
      return it->second;
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  // One compiler per thread for the whole process: creating and releasing one finalises glslang,
  // which throws away its built-in symbol tables, and parsing those again took most of the
  // compile time (perf on the op cases).
  static thread_local shaderc::Compiler compiler;
  shaderc::CompileOptions options;
  options.SetTargetEnvironment(shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_2);
  // No SPIR-V optimisation: the driver optimises the shader again (lavapipe: LLVM at -O2), and
  // spirv-opt took about as long as that (measured on the op cases).
  options.SetOptimizationLevel(shaderc_optimization_level_zero);
  const shaderc::SpvCompilationResult r = compiler.CompileGlslToSpv(source, shaderc_compute_shader, name.c_str(), options);
  if (r.GetCompilationStatus() != shaderc_compilation_status_success) {
    std::ostringstream numbered;
    std::istringstream in(source);
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) numbered << n << ": " << line << "\n";
    fail("vulkan: shaderc cannot compile the GLSL of kernel ", name, ":\n", r.GetErrorMessage(), "\n", numbered.str());
  }
  std::vector<uint32_t> spv(r.cbegin(), r.cend());
  if (seconds) *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> lock(mu);
  cache.emplace(source, spv);
  return spv;
}

}  // namespace kiln::vulkan
