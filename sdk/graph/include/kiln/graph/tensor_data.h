// TensorData: a concrete tensor as the runtimes see it: a reference-counted storage on a
// device plus a strided layout over it. Views share storage. This is what backends take
// and return; the C++ frontend's Tensor wraps it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "kiln/graph/device.h"
#include "kiln/graph/dtype.h"
#include "kiln/graph/meta.h"

namespace kiln {

class Storage {
 public:
  // Host memory, 64-byte aligned, zero-filled.
  static std::shared_ptr<Storage> allocate_host(size_t nbytes);
  // Memory owned elsewhere (a device allocator); `release` runs when the last user goes.
  Storage(Device device, void* data, size_t nbytes, std::function<void(void*)> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  Device device() const { return device_; }
  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }

 private:
  Device device_;
  void* data_;
  size_t nbytes_;
  std::function<void(void*)> release_;
};

struct TensorData {
  std::shared_ptr<Storage> storage;
  DType dtype = DType::f32;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;  // in elements, always filled
  int64_t offset = 0;            // in elements

  // A new contiguous zero-filled host tensor.
  static TensorData empty_host(DType dtype, std::vector<int64_t> sizes);

  Device device() const { return storage ? storage->device() : Device::cpu(); }
  int64_t rank() const { return static_cast<int64_t>(sizes.size()); }
  int64_t numel() const;
  bool is_contiguous() const;
  // Address of element 0 of this view (host storage only).
  void* data() const {
    return static_cast<std::byte*>(storage->data()) + offset * dtype_size(dtype);
  }
  template <class T>
  T* data_as() const { return static_cast<T*>(data()); }
  // Static metadata of this tensor (strides kept only when not contiguous).
  TensorMeta meta() const;
};

}  // namespace kiln
