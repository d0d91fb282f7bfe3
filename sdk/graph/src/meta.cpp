#include "kiln/graph/meta.h"

#include "kiln/graph/error.h"

namespace kiln {

std::string TensorMeta::str() const {
  std::string s = std::string(dtype_name(dtype)) + shape_str(sizes);
  if (!strides.empty()) s += " strides " + shape_str(strides);
  if (device.type != DeviceType::cpu) s += " @" + device.str();
  return s;
}

SymShape contiguous_strides(std::span<const SymInt> sizes) {
  SymShape strides(sizes.size());
  SymInt running = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = running;
    running = running * sizes[i];
  }
  return strides;
}

std::vector<int64_t> contiguous_strides(std::span<const int64_t> sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t running = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = running;
    running *= sizes[i];
  }
  return strides;
}

int64_t normalize_dim(int64_t dim, int64_t rank, std::string_view what) {
  const int64_t d = dim < 0 ? dim + rank : dim;
  KILN_CHECK(d >= 0 && d < rank, what, ": dim ", dim, " out of range for rank ", rank);
  return d;
}

}  // namespace kiln
