// The CUDA device as Kiln uses it (native only). The driver API is loaded at run time with
// dlopen("libcuda.so.1"), so a build with the CUDA target runs on machines without a GPU or
// driver: there available() is false and says why, and Context::get throws a kiln::Error
// beginning "no CUDA device". Every driver call is checked; a failure names the call, the
// driver's error name and message, and what it was doing (e.g. the kernel being launched).
//
// A Context is one device's primary context with one stream (every copy and launch Kiln makes on
// that device is ordered on it), a caching allocator (blocks kept by size after free and reused;
// cudaMalloc-style calls only on a miss), pinned host staging buffers for transfers, and lazily
// a cuBLASLt handle and workspace (gemm.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/graph/tensor_data.h"

namespace kiln::cuda {

// Whether a CUDA device can be used; when not and `why` is given, a sentence saying why
// ("no CUDA device: libcuda.so.1 could not be loaded (...)").
bool available(std::string* why = nullptr);
int device_count();  // 0 when !available()

struct DeviceInfo {
  int ordinal = 0;
  std::string name;              // "NVIDIA H100 80GB HBM3"
  int major = 0, minor = 0;      // compute capability
  int sm_count = 0;
  int64_t total_memory = 0;
  int max_threads_per_block = 0;
  int64_t shared_per_block_optin = 0;
  int64_t l2_bytes = 0;
  int driver_version = 0;        // 13000 = 13.0
  int arch() const { return major * 10 + minor; }
  std::string str() const;       // "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB), driver 13.0"
};

using DevicePtr = unsigned long long;  // CUdeviceptr

class Context {
 public:
  // The context of device `ordinal` (created on first use, lives for the process).
  static Context& get(int ordinal = 0);
  ~Context();

  const DeviceInfo& info() const;
  void make_current() const;  // on the calling thread
  void* stream() const;       // CUstream

  // Device memory of at least `bytes` (256-byte aligned), from the cache when a freed block of
  // the same size class is there. free() returns it to the cache.
  DevicePtr alloc(size_t bytes);
  void free(DevicePtr p, size_t bytes);
  // A Storage on this device whose memory returns to the cache when the last user goes.
  std::shared_ptr<Storage> allocate(size_t bytes);
  // Frees every cached block (the driver's memory goes back).
  void empty_cache();
  int64_t cached_bytes() const;
  int64_t allocated_bytes() const;  // in use (not cached)

  // Copies through pinned staging; both return when the copy is done (and so is everything
  // queued before it on the stream).
  void copy_to_device(DevicePtr dst, const void* src, size_t bytes);
  void copy_to_host(void* dst, DevicePtr src, size_t bytes);
  void copy_device(DevicePtr dst, DevicePtr src, size_t bytes);  // queued on the stream
  void memset(DevicePtr dst, unsigned char value, size_t bytes);  // queued on the stream
  void synchronize();

  // A loaded module (cubin or PTX image) and its functions.
  struct Module;
  std::shared_ptr<Module> load_module(const std::string& image, const std::string& name);
  // CUfunction; throws naming both. dynamic_shared: the bytes of dynamic shared memory its
  // launches pass (above 48 KiB the kernel is allowed them first, as the driver requires).
  void* function(const Module& m, const std::string& entry, int64_t dynamic_shared = 0);
  // Launches f on the stream (or on `stream`, a CUstream of this context): grid x blocks of
  // `block` threads, `args` as cuLaunchKernel takes them.
  void launch(void* f, int64_t grid, int64_t block, int64_t shared_bytes, void** args, const std::string& kernel,
              void* stream = nullptr);

  // Device events for timing (milliseconds between two recorded points on the stream).
  struct Timer;
  std::unique_ptr<Timer> timer();
  // Events recorded on the stream between launches (the profile log).
  struct Timeline;
  std::unique_ptr<Timeline> timeline();

  struct Impl;
  Impl& impl() const { return *impl_; }

 private:
  explicit Context(int ordinal);
  std::unique_ptr<Impl> impl_;
};

struct Context::Timer {
  virtual ~Timer() = default;
  virtual void start() = 0;
  virtual double stop_ms() = 0;  // records the end, waits for it, returns the elapsed time
};

struct Context::Timeline {
  virtual ~Timeline() = default;
  virtual void mark() = 0;  // records an event now (in stream order)
  // Waits for the last mark; the ms between each two consecutive marks since the last call
  // (n marks give n - 1 intervals), and starts over.
  virtual std::vector<double> intervals_ms() = 0;
};

// A host tensor copied to a new contiguous tensor on device `ordinal` (any strides in).
TensorData to_device(const TensorData& host, int ordinal = 0);
// A device tensor (any strides) copied to a new contiguous host tensor.
TensorData to_host(const TensorData& device);

}  // namespace kiln::cuda
