// TensorMeta: what the compiler knows about a tensor without its data: dtype, device,
// sizes (ints or symbols) and strides. Graph nodes produce contiguous tensors, so their
// strides are left empty; graph inputs record their strides when they are not contiguous.
#pragma once

#include <cstdint>
#include <string>

#include "kiln/graph/device.h"
#include "kiln/graph/dtype.h"
#include "kiln/graph/symint.h"

namespace kiln {

struct TensorMeta {
  DType dtype = DType::f32;
  Device device = Device::cpu();
  SymShape sizes;
  SymShape strides;  // empty: contiguous row-major

  int64_t rank() const { return static_cast<int64_t>(sizes.size()); }
  SymInt numel() const { return shape_numel(sizes); }
  bool is_contiguous() const { return strides.empty(); }
  bool operator==(const TensorMeta&) const = default;
  std::string str() const;  // "f32[s0, 4096]", with "@cuda:0" off the cpu and strides when set
};

SymShape contiguous_strides(std::span<const SymInt> sizes);
std::vector<int64_t> contiguous_strides(std::span<const int64_t> sizes);

// Normalises a possibly negative dimension index against a rank; throws naming `what`.
int64_t normalize_dim(int64_t dim, int64_t rank, std::string_view what);

}  // namespace kiln
