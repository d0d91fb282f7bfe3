#include "kiln/cuda/device.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>

#include "driver_api.h"
#include "kiln/cuda/gemm.h"
#include "kiln/cuda/llvm_ptx.h"
#include "kiln/cuda/nvrtc.h"
#include "kiln/graph/error.h"

namespace kiln::cuda {

namespace detail {
namespace {

struct Loaded {
  DriverApi api;
  std::string error;  // empty when usable
  int count = 0;
};

const Loaded& loaded() {
  static const Loaded l = [] {
    Loaded l;
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = dlerror();
      l.error = std::string("no CUDA device: the CUDA driver (libcuda.so.1) could not be loaded (") + (e ? e : "?") + ")";
      return l;
    }
    bool missing = false;
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
      if (!fn && !missing) {
        missing = true;
        l.error = std::string("no CUDA device: the CUDA driver (libcuda.so.1) lacks ") + name + " (driver too old?)";
      }
    };
    DriverApi& a = l.api;
    sym(a.cuGetErrorName, "cuGetErrorName");
    sym(a.cuGetErrorString, "cuGetErrorString");
    sym(a.cuInit, "cuInit");
    sym(a.cuDriverGetVersion, "cuDriverGetVersion");
    sym(a.cuDeviceGetCount, "cuDeviceGetCount");
    sym(a.cuDeviceGet, "cuDeviceGet");
    sym(a.cuDeviceGetName, "cuDeviceGetName");
    sym(a.cuDeviceGetAttribute, "cuDeviceGetAttribute");
    sym(a.cuDeviceTotalMem, "cuDeviceTotalMem_v2");
    sym(a.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    sym(a.cuCtxSetCurrent, "cuCtxSetCurrent");
    sym(a.cuStreamCreate, "cuStreamCreate");
    sym(a.cuStreamSynchronize, "cuStreamSynchronize");
    sym(a.cuMemAlloc, "cuMemAlloc_v2");
    sym(a.cuMemFree, "cuMemFree_v2");
    sym(a.cuMemHostAlloc, "cuMemHostAlloc");
    sym(a.cuMemFreeHost, "cuMemFreeHost");
    sym(a.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
    sym(a.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
    sym(a.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
    sym(a.cuMemsetD8Async, "cuMemsetD8Async");
    sym(a.cuModuleLoadData, "cuModuleLoadData");
    sym(a.cuModuleUnload, "cuModuleUnload");
    sym(a.cuModuleGetFunction, "cuModuleGetFunction");
    sym(a.cuFuncSetAttribute, "cuFuncSetAttribute");
    sym(a.cuLaunchKernel, "cuLaunchKernel");
    sym(a.cuEventCreate, "cuEventCreate");
    sym(a.cuEventDestroy, "cuEventDestroy_v2");
    sym(a.cuEventRecord, "cuEventRecord");
    sym(a.cuEventSynchronize, "cuEventSynchronize");
    sym(a.cuEventElapsedTime, "cuEventElapsedTime_v2");
    sym(a.cuStreamDestroy, "cuStreamDestroy_v2");
    sym(a.cuStreamBeginCapture, "cuStreamBeginCapture_v2");
    sym(a.cuStreamEndCapture, "cuStreamEndCapture");
    sym(a.cuGraphCreate, "cuGraphCreate");
    sym(a.cuGraphDestroy, "cuGraphDestroy");
    sym(a.cuGraphAddKernelNode, "cuGraphAddKernelNode_v2");
    sym(a.cuGraphAddChildGraphNode, "cuGraphAddChildGraphNode");
    sym(a.cuGraphInstantiate, "cuGraphInstantiateWithFlags");
    sym(a.cuGraphExecDestroy, "cuGraphExecDestroy");
    sym(a.cuGraphLaunch, "cuGraphLaunch");
    sym(a.cuGraphExecKernelNodeSetParams, "cuGraphExecKernelNodeSetParams_v2");
    sym(a.cuGraphExecChildGraphNodeSetParams, "cuGraphExecChildGraphNodeSetParams");
    if (missing) return l;
    const CUresult r = a.cuInit(0);
    if (r != CUDA_SUCCESS) {
      const char* name = nullptr;
      const char* msg = nullptr;
      a.cuGetErrorName(r, &name);
      a.cuGetErrorString(r, &msg);
      l.error = std::string("no CUDA device: cuInit failed with ") + (name ? name : "?") + " (" + (msg ? msg : "?") + ")";
      return l;
    }
    if (a.cuDeviceGetCount(&l.count) != CUDA_SUCCESS || l.count == 0) {
      l.count = 0;
      l.error = "no CUDA device: the driver is loaded but reports no device";
    }
    return l;
  }();
  return l;
}

}  // namespace

const DriverApi& driver() {
  const Loaded& l = loaded();
  if (!l.error.empty()) fail(l.error);
  return l.api;
}

void check(CUresult r, const char* call, const std::string& context) {
  if (r == CUDA_SUCCESS) return;
  const DriverApi& a = loaded().api;
  const char* name = nullptr;
  const char* msg = nullptr;
  if (a.cuGetErrorName) a.cuGetErrorName(r, &name);
  if (a.cuGetErrorString) a.cuGetErrorString(r, &msg);
  fail("CUDA: ", call, " failed: ", name ? name : "error " + std::to_string(static_cast<int>(r)), " (",
       msg ? msg : "?", ")", context.empty() ? "" : " ", context);
}

}  // namespace detail

using detail::check;
using detail::driver;

bool available(std::string* why) {
  const auto& l = detail::loaded();
  if (why) *why = l.error;
  return l.error.empty();
}

int device_count() { return available() ? detail::loaded().count : 0; }

std::string DeviceInfo::str() const {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s (sm_%d, %d SMs, %.1f GiB), driver %d.%d", name.c_str(), arch(), sm_count,
                static_cast<double>(total_memory) / (1024.0 * 1024 * 1024), driver_version / 1000,
                (driver_version % 1000) / 10);
  return buf;
}

struct Context::Module {
  CUmodule m = nullptr;
  std::string name;
  ~Module() {
    if (m) driver().cuModuleUnload(m);
  }
};

struct Context::Impl {
  DeviceInfo info;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  CUstream stream = nullptr;
  std::mutex mu;  // allocator cache, staging buffer
  std::multimap<size_t, CUdeviceptr> cache;  // freed blocks by rounded size
  int64_t cached = 0, in_use = 0;
  void* staging = nullptr;  // pinned host memory
  size_t staging_bytes = 0;
  std::mutex copy_mu;
};

namespace {

// Size classes: multiples of 512 bytes up to 1 MiB, then multiples of 2 MiB.
size_t round_size(size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (bytes <= (size_t{1} << 20)) return (bytes + 511) & ~size_t{511};
  const size_t step = size_t{2} << 20;
  return (bytes + step - 1) / step * step;
}

}  // namespace

Context::Context(int ordinal) : impl_(std::make_unique<Impl>()) {
  const detail::DriverApi& a = driver();
  const int n = device_count();
  KILN_CHECK(ordinal >= 0 && ordinal < n, "no CUDA device cuda:", ordinal, " (this machine has ", n, " CUDA device",
             n == 1 ? "" : "s", ")");
  Impl& im = *impl_;
  check(a.cuDeviceGet(&im.dev, ordinal), "cuDeviceGet", "for cuda:" + std::to_string(ordinal));
  check(a.cuDevicePrimaryCtxRetain(&im.ctx, im.dev), "cuDevicePrimaryCtxRetain", "for cuda:" + std::to_string(ordinal));
  check(a.cuCtxSetCurrent(im.ctx), "cuCtxSetCurrent");
  check(a.cuStreamCreate(&im.stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  DeviceInfo& d = im.info;
  d.ordinal = ordinal;
  char name[256] = {};
  check(a.cuDeviceGetName(name, sizeof name, im.dev), "cuDeviceGetName");
  d.name = name;
  auto attr = [&](CUdevice_attribute at, const char* what) {
    int v = 0;
    check(a.cuDeviceGetAttribute(&v, at, im.dev), "cuDeviceGetAttribute", what);
    return v;
  };
  d.major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "(compute capability major)");
  d.minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "(compute capability minor)");
  d.sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "(multiprocessor count)");
  d.max_threads_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "(max threads per block)");
  d.shared_per_block_optin = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "(shared memory per block)");
  d.l2_bytes = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "(L2 cache size)");
  size_t total = 0;
  check(a.cuDeviceTotalMem(&total, im.dev), "cuDeviceTotalMem");
  d.total_memory = static_cast<int64_t>(total);
  check(a.cuDriverGetVersion(&d.driver_version), "cuDriverGetVersion");
  // The first plan of the process would otherwise also pay NVRTC's and LLVM's start-up.
  nvrtc_prewarm(d.arch());
  llvm_ptx_prewarm(d.arch());
}

Context::~Context() = default;  // lives for the process: the driver tears contexts down at exit

Context& Context::get(int ordinal) {
  // Never destroyed: device storage held by other statics (plan caches) returns its blocks to
  // the context at exit, whatever the order statics are destroyed in.
  static std::mutex& mu = *new std::mutex;
  static std::map<int, Context*>& contexts = *new std::map<int, Context*>;
  std::lock_guard<std::mutex> lock(mu);
  auto it = contexts.find(ordinal);
  if (it == contexts.end()) it = contexts.emplace(ordinal, new Context(ordinal)).first;
  it->second->make_current();
  return *it->second;
}

const DeviceInfo& Context::info() const { return impl_->info; }

void Context::make_current() const { check(driver().cuCtxSetCurrent(impl_->ctx), "cuCtxSetCurrent"); }

void* Context::stream() const { return impl_->stream; }

DevicePtr Context::alloc(size_t bytes) {
  Impl& im = *impl_;
  const size_t n = round_size(bytes);
  {
    std::lock_guard<std::mutex> lock(im.mu);
    // The block of this class freed last (equal keys keep their insertion order): the one most
    // likely still in L2.
    const auto [first, end] = im.cache.equal_range(n);
    if (first != end) {
      const auto it = std::prev(end);
      const CUdeviceptr p = it->second;
      im.cache.erase(it);
      im.cached -= static_cast<int64_t>(n);
      im.in_use += static_cast<int64_t>(n);
      return p;
    }
  }
  make_current();
  CUdeviceptr p = 0;
  CUresult r = driver().cuMemAlloc(&p, n);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {  // give the cache back and try once more
    empty_cache();
    r = driver().cuMemAlloc(&p, n);
  }
  check(r, "cuMemAlloc", "of " + std::to_string(n) + " bytes on cuda:" + std::to_string(im.info.ordinal));
  std::lock_guard<std::mutex> lock(im.mu);
  im.in_use += static_cast<int64_t>(n);
  return p;
}

void Context::free(DevicePtr p, size_t bytes) {
  if (!p) return;
  Impl& im = *impl_;
  const size_t n = round_size(bytes);
  std::lock_guard<std::mutex> lock(im.mu);
  im.cache.emplace(n, p);
  im.cached += static_cast<int64_t>(n);
  im.in_use -= static_cast<int64_t>(n);
}

void Context::empty_cache() {
  Impl& im = *impl_;
  synchronize();
  std::lock_guard<std::mutex> lock(im.mu);
  for (auto& [n, p] : im.cache) check(driver().cuMemFree(p), "cuMemFree");
  im.cache.clear();
  im.cached = 0;
}

int64_t Context::cached_bytes() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->cached;
}
int64_t Context::allocated_bytes() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->in_use;
}

std::shared_ptr<Storage> Context::allocate(size_t bytes) {
  const DevicePtr p = alloc(bytes);
  // Blocks go back to the cache only after the work queued so far is done with them: the
  // stream orders every use, so a block reused by a later launch on the same stream is safe.
  return std::make_shared<Storage>(Device::cuda(impl_->info.ordinal), reinterpret_cast<void*>(p), bytes,
                                   [this, bytes](void* q) { free(reinterpret_cast<DevicePtr>(q), bytes); });
}

namespace {
constexpr size_t kStagingChunk = size_t{8} << 20;  // pinned staging buffer: 8 MiB
}

void Context::copy_to_device(DevicePtr dst, const void* src, size_t bytes) {
  Impl& im = *impl_;
  make_current();
  std::lock_guard<std::mutex> lock(im.copy_mu);
  if (!im.staging) {
    check(driver().cuMemHostAlloc(&im.staging, kStagingChunk, 0), "cuMemHostAlloc", "(pinned staging buffer)");
    im.staging_bytes = kStagingChunk;
  }
  for (size_t done = 0; done < bytes;) {
    const size_t n = std::min(bytes - done, im.staging_bytes);
    // The previous chunk's copy must be finished before the staging buffer is refilled.
    check(driver().cuStreamSynchronize(im.stream), "cuStreamSynchronize", "(before a host-to-device copy)");
    std::memcpy(im.staging, static_cast<const char*>(src) + done, n);
    check(driver().cuMemcpyHtoDAsync(dst + done, im.staging, n, im.stream), "cuMemcpyHtoDAsync",
          "(" + std::to_string(n) + " bytes)");
    done += n;
  }
  check(driver().cuStreamSynchronize(im.stream), "cuStreamSynchronize", "(after a host-to-device copy)");
}

void Context::copy_to_host(void* dst, DevicePtr src, size_t bytes) {
  Impl& im = *impl_;
  make_current();
  std::lock_guard<std::mutex> lock(im.copy_mu);
  if (!im.staging) {
    check(driver().cuMemHostAlloc(&im.staging, kStagingChunk, 0), "cuMemHostAlloc", "(pinned staging buffer)");
    im.staging_bytes = kStagingChunk;
  }
  for (size_t done = 0; done < bytes;) {
    const size_t n = std::min(bytes - done, im.staging_bytes);
    check(driver().cuMemcpyDtoHAsync(im.staging, src + done, n, im.stream), "cuMemcpyDtoHAsync",
          "(" + std::to_string(n) + " bytes)");
    check(driver().cuStreamSynchronize(im.stream), "cuStreamSynchronize",
          "(a device-to-host copy; an earlier kernel may have failed)");
    std::memcpy(static_cast<char*>(dst) + done, im.staging, n);
    done += n;
  }
}

void Context::copy_device(DevicePtr dst, DevicePtr src, size_t bytes) {
  if (bytes == 0) return;
  make_current();
  check(driver().cuMemcpyDtoDAsync(dst, src, bytes, impl_->stream), "cuMemcpyDtoDAsync");
}

void Context::memset(DevicePtr dst, unsigned char value, size_t bytes) {
  if (bytes == 0) return;
  make_current();
  check(driver().cuMemsetD8Async(dst, value, bytes, impl_->stream), "cuMemsetD8Async");
}

void Context::synchronize() {
  make_current();
  check(driver().cuStreamSynchronize(impl_->stream), "cuStreamSynchronize");
}

std::shared_ptr<Context::Module> Context::load_module(const std::string& image, const std::string& name) {
  make_current();
  auto m = std::make_shared<Module>();
  m->name = name;
  check(driver().cuModuleLoadData(&m->m, image.data()), "cuModuleLoadData", "(module '" + name + "')");
  return m;
}

void* Context::function(const Module& m, const std::string& entry, int64_t dynamic_shared) {
  CUfunction f = nullptr;
  check(driver().cuModuleGetFunction(&f, m.m, entry.c_str()), "cuModuleGetFunction",
        "(kernel '" + entry + "' in module '" + m.name + "')");
  if (dynamic_shared > 48 * 1024)
    check(driver().cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(dynamic_shared)),
          "cuFuncSetAttribute", "(kernel '" + entry + "': " + std::to_string(dynamic_shared) + " bytes of dynamic shared memory)");
  return f;
}

void Context::launch(void* f, int64_t grid, int64_t block, int64_t shared_bytes, void** args, const std::string& kernel,
                     void* stream) {
  KILN_CHECK(grid >= 1 && grid <= 0x7fffffff && block >= 1 && block <= 1024, "CUDA: kernel ", kernel,
             ": launch of ", grid, " blocks of ", block, " threads is out of range");
  check(driver().cuLaunchKernel(static_cast<CUfunction>(f), static_cast<unsigned>(grid), 1, 1, static_cast<unsigned>(block),
                                1, 1, static_cast<unsigned>(shared_bytes),
                                stream ? static_cast<CUstream>(stream) : impl_->stream, args, nullptr),
        "cuLaunchKernel", "(kernel " + kernel + ", " + std::to_string(grid) + " blocks of " + std::to_string(block) + ")");
}

namespace {
struct EventTimer final : Context::Timer {
  CUstream stream;
  CUevent a = nullptr, b = nullptr;
  explicit EventTimer(CUstream s) : stream(s) {
    check(driver().cuEventCreate(&a, CU_EVENT_DEFAULT), "cuEventCreate");
    check(driver().cuEventCreate(&b, CU_EVENT_DEFAULT), "cuEventCreate");
  }
  ~EventTimer() override {
    driver().cuEventDestroy(a);
    driver().cuEventDestroy(b);
  }
  void start() override { check(driver().cuEventRecord(a, stream), "cuEventRecord"); }
  double stop_ms() override {
    check(driver().cuEventRecord(b, stream), "cuEventRecord");
    check(driver().cuEventSynchronize(b), "cuEventSynchronize", "(timing; an earlier kernel may have failed)");
    float ms = 0;
    check(driver().cuEventElapsedTime(&ms, a, b), "cuEventElapsedTime");
    return ms;
  }
};
struct EventTimeline final : Context::Timeline {
  CUstream stream;
  std::vector<CUevent> events;  // kept for the next call
  size_t used = 0;
  explicit EventTimeline(CUstream s) : stream(s) {}
  ~EventTimeline() override {
    for (CUevent e : events) driver().cuEventDestroy(e);
  }
  void mark() override {
    if (used == events.size()) {
      CUevent e = nullptr;
      check(driver().cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
      events.push_back(e);
    }
    check(driver().cuEventRecord(events[used++], stream), "cuEventRecord");
  }
  std::vector<double> intervals_ms() override {
    std::vector<double> ms;
    if (used) check(driver().cuEventSynchronize(events[used - 1]), "cuEventSynchronize", "(profiling; an earlier kernel may have failed)");
    for (size_t i = 1; i < used; ++i) {
      float t = 0;
      check(driver().cuEventElapsedTime(&t, events[i - 1], events[i]), "cuEventElapsedTime");
      ms.push_back(t);
    }
    used = 0;
    return ms;
  }
};
}  // namespace

std::unique_ptr<Context::Timer> Context::timer() {
  make_current();
  return std::make_unique<EventTimer>(impl_->stream);
}

std::unique_ptr<Context::Timeline> Context::timeline() {
  make_current();
  return std::make_unique<EventTimeline>(impl_->stream);
}

TensorData to_device(const TensorData& host, int ordinal) {
  KILN_CHECK(host.device().type == DeviceType::cpu, "to_device: the tensor is on ", host.device().str(), ", not the cpu");
  Context& c = Context::get(ordinal);
  TensorData src = host.is_contiguous() ? host : TensorData{};
  if (!src.storage) {  // gather into a contiguous host copy
    src = TensorData::empty_host(host.dtype, host.sizes);
    const int64_t es = dtype_size(host.dtype), n = host.numel();
    std::vector<int64_t> idx(host.sizes.size(), 0);
    for (int64_t k = 0; k < n; ++k) {
      int64_t off = 0;
      for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * host.strides[d];
      std::memcpy(static_cast<char*>(src.data()) + k * es, static_cast<const char*>(host.data()) + off * es,
                  static_cast<size_t>(es));
      for (size_t d = idx.size(); d-- > 0;) {
        if (++idx[d] < host.sizes[d]) break;
        idx[d] = 0;
      }
    }
  }
  const size_t bytes = static_cast<size_t>(host.numel() * dtype_size(host.dtype));
  TensorData out;
  out.dtype = host.dtype;
  out.sizes = host.sizes;
  out.strides = contiguous_strides(std::span<const int64_t>(out.sizes));
  out.storage = c.allocate(bytes);
  if (bytes) c.copy_to_device(reinterpret_cast<DevicePtr>(out.storage->data()), src.data(), bytes);
  return out;
}

TensorData to_host(const TensorData& dev) {
  KILN_CHECK(dev.device().type == DeviceType::cuda, "to_host: the tensor is on ", dev.device().str(), ", not a CUDA device");
  Context& c = Context::get(dev.device().index);
  const int64_t es = dtype_size(dev.dtype);
  // The span of storage the view covers, copied whole, then gathered on the host.
  int64_t lo = 0, hi = 0;
  for (size_t d = 0; d < dev.sizes.size(); ++d) {
    if (dev.sizes[d] == 0) return TensorData::empty_host(dev.dtype, dev.sizes);
    const int64_t ext = (dev.sizes[d] - 1) * dev.strides[d];
    (ext < 0 ? lo : hi) += ext;
  }
  TensorData out = TensorData::empty_host(dev.dtype, dev.sizes);
  const int64_t span = hi - lo + 1;
  const DevicePtr base = reinterpret_cast<DevicePtr>(dev.storage->data()) + static_cast<DevicePtr>((dev.offset + lo) * es);
  if (dev.is_contiguous()) {
    c.copy_to_host(out.data(), base, static_cast<size_t>(span * es));
    return out;
  }
  std::vector<char> raw(static_cast<size_t>(span * es));
  c.copy_to_host(raw.data(), base, raw.size());
  const int64_t n = out.numel();
  std::vector<int64_t> idx(dev.sizes.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t off = -lo;
    for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * dev.strides[d];
    std::memcpy(static_cast<char*>(out.data()) + k * es, raw.data() + off * es, static_cast<size_t>(es));
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < dev.sizes[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

}  // namespace kiln::cuda
