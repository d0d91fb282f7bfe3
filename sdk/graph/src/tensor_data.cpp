#include "kiln/graph/tensor_data.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kiln/graph/error.h"
#include "kiln/graph/memory_budget.h"

namespace kiln {

std::shared_ptr<Storage> Storage::allocate_host(size_t nbytes) {
  constexpr size_t kAlign = 64;
  const size_t rounded = (nbytes + kAlign - 1) / kAlign * kAlign;
  void* p = rounded < nbytes ? nullptr : std::aligned_alloc(kAlign, rounded == 0 ? kAlign : rounded);
  // A kiln::Error, not std::bad_alloc: what was asked for is said, and callers may recover.
  if (!p) fail("out of host memory: could not allocate ", nbytes, " bytes");
  std::memset(p, 0, rounded == 0 ? kAlign : rounded);
  return std::make_shared<Storage>(Device::cpu(), p, nbytes, [](void* q) { std::free(q); });
}

Storage::Storage(Device device, void* data, size_t nbytes, std::function<void(void*)> release)
    : device_(device), data_(data), nbytes_(nbytes), release_(std::move(release)) {}

Storage::~Storage() {
  if (release_) release_(data_);
}

TensorData TensorData::empty_host(DType dtype, std::vector<int64_t> sizes) {
  // The most bytes one tensor may have (256 TiB, as plan::kMaxBufferBytes): more is a size that
  // wrapped or an edited file, not a tensor; counted with overflow checks so that no product
  // wraps to a small allocation that later writes run past.
  constexpr int64_t kMaxTensorBytes = int64_t{1} << 48;
  TensorData t;
  t.dtype = dtype;
  t.sizes = std::move(sizes);
  for (int64_t s : t.sizes) KILN_CHECK(s >= 0, "cannot allocate a tensor with negative size ", s);
  // Multiplied from the last dim, as contiguous_strides does: each partial product is a stride,
  // and a zero-size dim does not keep the strides of the dims after it small ([0, 2^32, 2^32, 4]
  // has no element and a stride of 2^66).
  int64_t n = 1;
  bool wrapped = false;
  for (size_t i = t.sizes.size(); i-- > 0;) wrapped = wrapped || __builtin_mul_overflow(n, t.sizes[i], &n);
  int64_t bytes = 0;
  wrapped = wrapped || __builtin_mul_overflow(n, dtype_size(dtype), &bytes);
  auto shape = [&] { return shape_str(static_shape(t.sizes)); };
  KILN_CHECK(!wrapped, "cannot allocate a ", dtype_name(dtype), " tensor of shape ", shape(),
             ": its size in bytes or one of its strides overflows 64-bit integers");
  KILN_CHECK(bytes <= kMaxTensorBytes, "cannot allocate a ", dtype_name(dtype), " tensor of shape ", shape(), ": it needs ", bytes,
             " bytes, more than a tensor may have (2^48)");
  // Checked before allocating: the allocation is zero-filled, and a size past the host's memory
  // would end in an out-of-memory kill rather than a failed allocation.
  KILN_CHECK(bytes <= memory_budget_bytes(), "cannot allocate a ", dtype_name(dtype), " tensor of shape ", shape(), ": it needs ",
             bytes_str(bytes), ", more than ", memory_budget_str());
  t.strides = contiguous_strides(std::span<const int64_t>(t.sizes));
  t.storage = Storage::allocate_host(static_cast<size_t>(bytes));
  return t;
}

int64_t TensorData::numel() const {
  // A zero anywhere first: [2^31, 2^31, 2^31, 0] has no element, and its leading product would
  // overflow (empty_host allocates such a tensor: its strides fit).
  if (std::find(sizes.begin(), sizes.end(), int64_t{0}) != sizes.end()) return 0;
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
