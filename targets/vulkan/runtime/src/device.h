// One opened Vulkan device: its queue, pipeline cache and the memory pool (internal to the
// runtime; runtime.h is the public face).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "kiln/vulkan/runtime.h"
#include "vk_api.h"

namespace kiln::vulkan {

// A range of a pool block: bound as (buffer, offset, size); `mapped` is its host address.
struct Buffer {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceSize offset = 0, size = 0;
  void* mapped = nullptr;
};

class Device {
 public:
  // Opens vulkan:<index> on first use (kept for the process).
  static Device& get(int index);

  const DeviceInfo& info() const { return info_; }
  VkDevice device() const { return device_; }
  VkQueue queue() const { return queue_; }
  std::mutex& queue_mutex() { return queue_mu_; }
  uint32_t queue_family() const { return static_cast<uint32_t>(family_); }
  VkPipelineCache pipeline_cache() const { return pipeline_cache_; }

  // Pool sub-allocation (16-byte multiples, aligned for storage-buffer offsets); returned to
  // the pool when the last reference goes.
  std::shared_ptr<Buffer> allocate(size_t bytes);
  int64_t pool_bytes() const;

 private:
  Device() = default;
  void open(int index, VkPhysicalDevice pd);
  uint32_t memory_type(uint32_t bits) const;
  std::shared_ptr<Buffer> make_buffer(size_t block, VkDeviceSize offset, VkDeviceSize size);
  void release(size_t block, VkDeviceSize offset, VkDeviceSize size);

  struct Block {
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceMemory memory = VK_NULL_HANDLE;
    VkDeviceSize size = 0;
    void* mapped = nullptr;
    std::map<VkDeviceSize, VkDeviceSize> free;  // offset -> size
  };

  DeviceInfo info_;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  int family_ = -1;
  VkPipelineCache pipeline_cache_ = VK_NULL_HANDLE;
  VkCommandPool command_pool_ = VK_NULL_HANDLE;
  VkPhysicalDeviceMemoryProperties memory_props_{};
  VkDeviceSize alignment_ = 256;
  std::mutex queue_mu_;
  mutable std::mutex pool_mu_;
  std::vector<Block> blocks_;
};

}  // namespace kiln::vulkan
