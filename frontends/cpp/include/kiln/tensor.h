// kiln::Tensor: the C++ tensor the user programs against. Outside kiln::compile a Tensor
// holds data and every op runs at once on the reference target (views share storage).
// While a compiled function is being traced, the same calls record graph nodes instead:
// a traced Tensor knows only its TensorMeta until a graph break or the end of the trace.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <source_location>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/capture/capture.h"
#include "kiln/graph/graph.h"
#include "kiln/graph/tensor_data.h"

namespace kiln {

using Shape = SymShape;
using Dims = std::vector<int64_t>;

namespace detail {
struct TensorImpl;
// A kiln::compile'd call made from outside on tensors that require gradients: its backward, a
// compiled graph too, gives the gradients of the call's differentiable inputs (one per input of
// its records, undefined where none) from those of its outputs (one per output, undefined
// where no gradient reached it).
struct CompiledCall {
  size_t outputs = 0;
  std::function<std::vector<std::shared_ptr<TensorImpl>>(const std::vector<std::shared_ptr<TensorImpl>>& grad_outputs)>
      backward;
};
// The op that computed a tensor that requires gradients, kept for autograd (kiln/autograd.h):
// its inputs stay alive as long as the tensors computed from them (torch's saved tensors). An
// output of a compiled call has `call` set instead of an op: it is that call's output `output`.
struct GradRecord {
  OpId op;
  Attrs attrs;
  std::vector<std::shared_ptr<TensorImpl>> inputs;
  std::shared_ptr<const CompiledCall> call;
  int32_t output = -1;
};
struct TensorImpl {
  TensorMeta meta;                 // sizes may be symbolic while traced
  std::optional<TensorData> data;  // set when concrete
  uint64_t trace_id = 0;           // the trace this value belongs to; 0 when concrete
  NodeId node = -1;
  bool from_break = false;         // materialised at a graph break: a segment input, not a constant
  std::vector<DimMark> marks;      // mark_dynamic / mark_static
  // Autograd: a leaf the user marked, or a value computed from one (then grad_fn is set).
  bool requires_grad = false;
  std::shared_ptr<const GradRecord> grad_fn;
  std::shared_ptr<TensorImpl> grad;  // a leaf's accumulated gradient
};
}  // namespace detail

template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::f32;
  else if constexpr (std::is_same_v<T, double>) return DType::f64;
  else if constexpr (std::is_same_v<T, int32_t>) return DType::i32;
  else if constexpr (std::is_same_v<T, int64_t>) return DType::i64;
  else if constexpr (std::is_same_v<T, bool>) return DType::bool_;
  else static_assert(sizeof(T) == 0, "supported element types: float, double, int32_t, int64_t, bool");
}

class Tensor {
 public:
  Tensor() = default;  // undefined: most uses throw
  explicit Tensor(std::shared_ptr<detail::TensorImpl> impl) : impl_(std::move(impl)) {}
  static Tensor from_data(TensorData data);

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  // Size of one dim as a plain integer; while tracing a dynamic dim this specialises it.
  // While tracing, the size of a dynamic dim specialises it (a guard pins it): the recompile
  // reason that guard gives names this call's file:line.
  int64_t size(int64_t dim, std::source_location loc = std::source_location::current()) const;
  int64_t rank() const;
  SymInt numel() const;
  DType dtype() const;
  Device device() const;
  const TensorMeta& meta() const;

  Tensor to(Device device) const;
  Tensor to(DType dtype) const;
  Tensor contiguous() const;

  // Concrete values. While tracing these are graph breaks (errors under fullgraph).
  template <class T>
  std::vector<T> to_vector(std::source_location loc = std::source_location::current()) const;
  template <class T>
  T item(std::source_location loc = std::source_location::current()) const;
  explicit operator bool() const;

  // The concrete data (graph break while tracing).
  const TensorData& data(std::string_view why = "data()",
                         std::source_location loc = std::source_location::current()) const;
  bool is_traced() const;
  std::string str() const;  // meta, and values when concrete and small

  // Member forms of the ops of kiln/ops.h (x.sum(-1) is kiln::sum(x, {-1})), as torch spells them.
  Tensor sum(const Dims& dims = {}, bool keepdim = false) const;
  Tensor mean(const Dims& dims = {}, bool keepdim = false) const;
  Tensor max(const Dims& dims = {}, bool keepdim = false) const;
  Tensor min(const Dims& dims = {}, bool keepdim = false) const;
  Tensor prod(const Dims& dims = {}, bool keepdim = false) const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor reshape(const Shape& shape) const;
  Tensor view(const Shape& shape) const;  // reshape: Kiln's views copy only when they must
  Tensor permute(const Dims& dims) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor expand(const Shape& shape) const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor matmul(const Tensor& other) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor scatter(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor scatter_reduce(int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce,
                        bool include_self = true) const;
  Tensor index_reduce(int64_t dim, const Tensor& index, const Tensor& source, const std::string& reduce,
                      bool include_self = true) const;
  Tensor index_put(const std::vector<Tensor>& indices, const Tensor& values, bool accumulate = false) const;
  Tensor index_add(int64_t dim, const Tensor& index, const Tensor& source, double alpha = 1.0) const;
  Tensor softmax(int64_t dim) const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor abs() const;
  Tensor relu() const;
  Tensor sigmoid() const;
  Tensor tanh() const;

  // Autograd (kiln/autograd.h). requires_grad_ marks a floating tensor as a leaf whose
  // gradient backward() accumulates into grad(); ops over it record what they did.
  const Tensor& requires_grad_(bool on = true) const;
  bool requires_grad() const;
  bool is_leaf() const;  // not computed by a recorded op
  Tensor grad() const;   // undefined until a backward() reaches this leaf
  void set_grad(const Tensor& grad) const;  // undefined clears it (torch's x.grad = None)
  // Accumulates d(this)/d(leaf) into each leaf's grad(); `gradient` is d(loss)/d(this), needed
  // unless this has one element. With create_graph the gradients record their own ops, so
  // they can be differentiated again.
  void backward(const Tensor& gradient = {}, bool create_graph = false) const;
  // The same values, cut from autograd: requires no gradient, records nothing.
  Tensor detach() const;

  const std::shared_ptr<detail::TensorImpl>& impl() const { return impl_; }

 private:
  std::shared_ptr<detail::TensorImpl> impl_;
  std::vector<double> values_as_double(std::string_view why, std::source_location loc) const;
  std::vector<int64_t> values_as_int(std::string_view why, std::source_location loc) const;
};

std::ostream& operator<<(std::ostream& out, const Tensor& t);

// Creation. Shapes are lists of sizes; dtype f32 and the CPU unless said otherwise.
Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
Tensor ones(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
Tensor full(const Shape& shape, double value, DType dtype = DType::f32, Device device = Device::cpu());
Tensor arange(double end, DType dtype = DType::i64, Device device = Device::cpu());
Tensor arange(double start, double end, double step = 1, DType dtype = DType::i64, Device device = Device::cpu());
// 0, 1, ..., n - 1 for a size that may be symbolic (arange(x.shape()[1]) keeps a dynamic dim
// dynamic while tracing; arange(x.size(1)) specialises it).
Tensor arange(const SymInt& n, DType dtype = DType::i64, Device device = Device::cpu());
// Each element's position along `dim` (JAX's broadcasted_iota): masks over symbolic sizes.
Tensor iota(const Shape& shape, int64_t dim, DType dtype = DType::i64, Device device = Device::cpu());
// Random numbers from a counter-based generator (Philox4x32-10): element i depends only on
// (seed, i), on every device, and is made inside the kernel that reads it. randn: normal(0, 1);
// rand: uniform in [0, 1).
Tensor randn(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu(), uint64_t seed = 0);
Tensor rand(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu(), uint64_t seed = 0);
// The same with a run-time key, a 0-d integer tensor added to the seed: element i depends on
// (seed + key, i). Pass the key into a compiled function (a new one each training step) and
// each call draws new numbers without a recompile; the result lives on the key's device.
Tensor randn(const Shape& shape, const Tensor& key, DType dtype = DType::f32, uint64_t seed = 0);
Tensor rand(const Shape& shape, const Tensor& key, DType dtype = DType::f32, uint64_t seed = 0);
// torch.randint: integers uniform in [low, high) (high - low at most 2^48), from the same
// generator (other words of it than rand's and randn's), with or without a run-time key.
Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype = DType::i64, Device device = Device::cpu(),
               uint64_t seed = 0);
Tensor randint(int64_t low, int64_t high, const Shape& shape, const Tensor& key, DType dtype = DType::i64,
               uint64_t seed = 0);
Tensor scalar_tensor(double value, DType dtype = DType::f32);
// Zeros (ones) of x's shape, dtype and device; x's sizes may be symbolic.
Tensor zeros_like(const Tensor& x);
Tensor ones_like(const Tensor& x);

// Copies `values` into a new tensor of `shape` (default: 1-D of values.size()).
template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape = {}, Device device = Device::cpu()) {
  std::vector<int64_t> sizes;
  if (shape.empty())
    sizes = {static_cast<int64_t>(values.size())};
  else
    for (const SymInt& s : shape) {
      KILN_CHECK(s.is_static(), "from_vector: shape must be static");
      sizes.push_back(s.hint());
    }
  TensorData d = TensorData::empty_host(dtype_of<T>(), sizes);
  KILN_CHECK(d.numel() == static_cast<int64_t>(values.size()), "from_vector: ", values.size(),
             " values do not fill shape ", shape_str(static_shape(sizes)), " (", d.numel(), " elements)");
  T* out = d.data_as<T>();
  for (size_t i = 0; i < values.size(); ++i) out[i] = values[i];
  return Tensor::from_data(std::move(d)).to(device);
}

// Waits until the work queued on `device` is done (a CUDA device's kernels and copies are
// queued on its stream; CPU and Vulkan calls return when done, so for them this returns at
// once). For timing device work with a host clock.
void synchronize(Device device);

}  // namespace kiln

namespace kiln {
template <class T>
std::vector<T> Tensor::to_vector(std::source_location loc) const {
  if constexpr (std::is_floating_point_v<T>) {
    const auto v = values_as_double("to_vector()", loc);
    return std::vector<T>(v.begin(), v.end());
  } else if constexpr (std::is_same_v<T, bool>) {
    // Non-zero is true, as in a cast to bool (0.5 is true; truncating first would say false).
    const auto v = values_as_double("to_vector()", loc);
    std::vector<bool> out;
    out.reserve(v.size());
    for (double x : v) out.push_back(x != 0.0);
    return out;
  } else {
    const auto v = values_as_int("to_vector()", loc);
    std::vector<T> out;
    out.reserve(v.size());
    for (int64_t x : v) out.push_back(static_cast<T>(x));
    return out;
  }
}

template <class T>
T Tensor::item(std::source_location loc) const {
  if constexpr (std::is_floating_point_v<T>) {
    const auto v = values_as_double("item()", loc);
    KILN_CHECK(v.size() == 1, "item(): the tensor has ", v.size(), " elements, not 1");
    return static_cast<T>(v[0]);
  } else if constexpr (std::is_same_v<T, bool>) {
    const auto v = values_as_double("item()", loc);
    KILN_CHECK(v.size() == 1, "item(): the tensor has ", v.size(), " elements, not 1");
    return v[0] != 0.0;
  } else {
    const auto v = values_as_int("item()", loc);
    KILN_CHECK(v.size() == 1, "item(): the tensor has ", v.size(), " elements, not 1");
    return static_cast<T>(v[0]);
  }
}
}  // namespace kiln
