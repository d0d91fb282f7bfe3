#include "kiln/graph/tensor_data.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "kiln/graph/error.h"

namespace kiln {

std::shared_ptr<Storage> Storage::allocate_host(size_t nbytes) {
  constexpr size_t kAlign = 64;
  const size_t rounded = (nbytes + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded == 0 ? kAlign : rounded);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, rounded == 0 ? kAlign : rounded);
  return std::make_shared<Storage>(Device::cpu(), p, nbytes, [](void* q) { std::free(q); });
}

Storage::Storage(Device device, void* data, size_t nbytes, std::function<void(void*)> release)
    : device_(device), data_(data), nbytes_(nbytes), release_(std::move(release)) {}

Storage::~Storage() {
  if (release_) release_(data_);
}

TensorData TensorData::empty_host(DType dtype, std::vector<int64_t> sizes) {
  TensorData t;
  t.dtype = dtype;
  t.sizes = std::move(sizes);
  int64_t n = 1;
  for (int64_t s : t.sizes) {
    KILN_CHECK(s >= 0, "cannot allocate a tensor with negative size ", s);
    n *= s;
  }
  t.strides = contiguous_strides(std::span<const int64_t>(t.sizes));
  t.storage = Storage::allocate_host(static_cast<size_t>(n * dtype_size(dtype)));
  return t;
}

int64_t TensorData::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

bool TensorData::is_contiguous() const {
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] != 1 && strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

TensorMeta TensorData::meta() const {
  TensorMeta m;
  m.dtype = dtype;
  m.device = device();
  m.sizes = static_shape(sizes);
  if (!is_contiguous()) m.strides = static_shape(strides);
  return m;
}

}  // namespace kiln
