// One opened Vulkan device: its queue, pipeline cache, the memory pool and the staging copies
// between the host and device-only memory (internal to the runtime; runtime.h is the public face).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "kiln/vulkan/runtime.h"
#include "vk_api.h"

namespace kiln::vulkan {

// A range of a pool block: bound as (buffer, offset, size). `address` is what tensors on the
// device hold as their data pointer: the mapped host address where pool memory is host-visible,
// else an address in a range reserved for the block (PROT_NONE: never read on the host) that
// Device::locate maps back to (buffer, offset). `mapped` is null for device-only memory.
struct Buffer {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceSize offset = 0, size = 0;
  void* mapped = nullptr;
  char* address = nullptr;
};

// Where a pool address lies: its block's buffer, the offset there, the bytes left in the block
// after it, and its host address when the block is mapped.
struct Location {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceSize offset = 0, left = 0;
  char* mapped = nullptr;
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
  // Whether pool memory is mapped (host-visible: lavapipe, integrated GPUs) or device-only
  // (device-local memory of a discrete GPU, reached through staging copies).
  bool host_visible() const { return host_visible_; }
  // The size of the largest device-local heap (where the buffer pool's memory comes from), or
  // of the largest heap where none is device-local.
  int64_t device_memory() const;
  VkDeviceSize offset_alignment() const { return storage_alignment_; }
  // The pool range holding `address` (a Buffer's address plus an offset); kiln::Error if none.
  Location locate(const void* address) const;
  // Host <-> pool copies: memcpy where the memory is mapped, else through a staging buffer
  // (vkCmdCopyBuffer, waited for). `address` as for locate.
  void upload(const void* address, const void* src, size_t bytes);
  void download(void* dst, const void* address, size_t bytes);
  // A device-side copy between pool ranges (waited for).
  void copy(const Location& src, const Location& dst, VkDeviceSize bytes);
  // Device-to-device copy bandwidth (bytes read plus written per second) of `bytes`-byte
  // vkCmdCopyBuffer copies timed with timestamps: the median of `reps`.
  double copy_gbps(size_t bytes, int reps);

 private:
  Device() = default;
  void open(int index, VkPhysicalDevice pd);
  uint32_t memory_type(uint32_t bits, bool device_only) const;
  void staging_ready(VkDeviceSize bytes);
  // Records `fill` into the transfer command buffer, submits it and waits.
  template <class F> void submit_transfer(F&& fill);
  std::shared_ptr<Buffer> make_buffer(size_t block, VkDeviceSize offset, VkDeviceSize size);
  void release(size_t block, VkDeviceSize offset, VkDeviceSize size);

  struct Block {
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceMemory memory = VK_NULL_HANDLE;
    VkDeviceSize size = 0;
    void* mapped = nullptr;
    char* address = nullptr;  // mapped, or the reserved range
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
  VkDeviceSize storage_alignment_ = 16;  // minStorageBufferOffsetAlignment
  bool host_visible_ = true;
  std::mutex queue_mu_;
  mutable std::mutex pool_mu_;
  std::vector<Block> blocks_;
  std::map<const char*, size_t> by_address_;  // block address -> block index
  // Staging (host-visible, host-cached where offered) and the transfer command buffer.
  std::mutex transfer_mu_;
  VkBuffer staging_ = VK_NULL_HANDLE;
  VkDeviceMemory staging_memory_ = VK_NULL_HANDLE;
  VkDeviceSize staging_size_ = 0;
  char* staging_mapped_ = nullptr;
  VkCommandBuffer transfer_cb_ = VK_NULL_HANDLE;
  VkFence transfer_fence_ = VK_NULL_HANDLE;
};

// The median of `reps` timings by `once` (ms), after warm-up batches of `batch` timings that run
// until a batch's median is no faster than the one before (within 2%) and at least
// KILN_VULKAN_WARM_S seconds (default 2) have passed, 5 s at most: GPU drivers raise the clocks
// only after a while under load (median_gpu_ms in runtime.h says what was seen).
double median_after_warm_up(const std::function<double()>& once, int reps, int batch);

}  // namespace kiln::vulkan
