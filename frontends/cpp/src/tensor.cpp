#include "kiln/tensor.h"

#include <filesystem>
#include <limits>

#include <ostream>
#include <sstream>

#include "kiln/capture/grad_mode.h"
#include "kiln/graph/error.h"
#include "kiln/ops.h"
#include "kiln/eval/interpreter.h"
#include "device_move.h"
#include "trace.h"

namespace kiln {

namespace {
// The data itself when it is on the host, else a host copy.
TensorData on_host(const TensorData& d) { return detail::move_data(d, Device::cpu()); }

const detail::TensorImpl& checked(const std::shared_ptr<detail::TensorImpl>& impl, std::string_view what) {
  KILN_CHECK(impl != nullptr, what, ": the tensor is undefined (default-constructed)");
  return *impl;
}
}  // namespace

Tensor Tensor::from_data(TensorData data) {
  auto impl = std::make_shared<detail::TensorImpl>();
  impl->meta = data.meta();
  impl->data = std::move(data);
  return Tensor(std::move(impl));
}

const Shape& Tensor::shape() const { return checked(impl_, "shape()").meta.sizes; }
int64_t Tensor::rank() const { return checked(impl_, "rank()").meta.rank(); }
SymInt Tensor::numel() const { return checked(impl_, "numel()").meta.numel(); }
DType Tensor::dtype() const { return checked(impl_, "dtype()").meta.dtype; }
Device Tensor::device() const { return checked(impl_, "device()").meta.device; }
const TensorMeta& Tensor::meta() const { return checked(impl_, "meta()").meta; }
bool Tensor::is_traced() const { return impl_ && impl_->trace_id != 0; }

int64_t Tensor::size(int64_t dim, std::source_location loc) const {
  const SymInt& s = shape()[static_cast<size_t>(normalize_dim(dim, rank(), "size()"))];
  if (s.is_static()) return s.hint();
  detail::Trace* t = detail::current_trace();
  KILN_CHECK(t && impl_->trace_id == t->id, "size(): this tensor belongs to a trace that has ended");
  return t->graph.shapes().specialize(s, "size() at " + std::filesystem::path(loc.file_name()).filename().string() +
                                             ":" + std::to_string(loc.line()));
}

Tensor Tensor::to(Device device) const {
  checked(impl_, "to()");
  if (device == this->device()) return *this;
  KILN_CHECK(!impl_->requires_grad || !grad_enabled(), "to(", device.str(), "): moving a tensor that requires ",
             "gradients between devices is not recorded by autograd yet; move it first, then call requires_grad_() ",
             "(or move it under kiln::NoGrad)");
  return from_data(detail::move_data(data("to()"), device));
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == this->dtype()) return *this;
  return cast(*this, dtype);
}

Tensor Tensor::contiguous() const {
  checked(impl_, "contiguous()");
  if (is_traced() || impl_->data->is_contiguous()) return *this;
  // A copy autograd records (a reshape of a strided view copies it).
  if (impl_->requires_grad && grad_enabled()) return kiln::reshape(*this, shape());
  return from_data(detail::move_data(eval::contiguous(on_host(*impl_->data)), device()));
}

const TensorData& Tensor::data(std::string_view why, std::source_location loc) const {
  const auto& impl = checked(impl_, why);
  if (impl.trace_id != 0) {
    detail::Trace* t = detail::current_trace();
    KILN_CHECK(t && t->id == impl.trace_id, why, ": this tensor belongs to a trace that has ended; a traced ",
               "tensor escaped its compiled function");
    detail::break_graph(*t, why, loc);
  }
  return *impl_->data;
}

std::vector<double> Tensor::values_as_double(std::string_view why, std::source_location loc) const {
  const TensorData c = eval::convert(eval::contiguous(on_host(data(why, loc))), DType::f64);
  const double* p = c.data_as<double>();
  return std::vector<double>(p, p + c.numel());
}

std::vector<int64_t> Tensor::values_as_int(std::string_view why, std::source_location loc) const {
  const TensorData c = eval::convert(eval::contiguous(on_host(data(why, loc))), DType::i64);
  const int64_t* p = c.data_as<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

Tensor::operator bool() const {
  // A conversion operator cannot take its caller's location; an empty one says "unknown"
  // (the message still names the compiled function).
  const auto v = values_as_double("converting a tensor to bool", std::source_location{});
  KILN_CHECK(v.size() == 1, "converting a tensor of ", v.size(), " elements to bool is ambiguous");
  return v[0] != 0.0;
}

std::string Tensor::str() const {
  if (!impl_) return "Tensor(undefined)";
  std::ostringstream out;
  out << "Tensor(" << impl_->meta.str();
  if (!is_traced() && impl_->data->numel() <= 16) {
    const TensorData c = eval::convert(eval::contiguous(on_host(*impl_->data)), DType::f64);
    out << ", [";
    for (int64_t i = 0; i < c.numel(); ++i) out << (i ? ", " : "") << c.data_as<double>()[i];
    out << "]";
  } else if (is_traced()) {
    out << ", traced";
  }
  out << ")";
  return out.str();
}

std::ostream& operator<<(std::ostream& out, const Tensor& t) { return out << t.str(); }

namespace {
// A traced source stays in the graph when the graph runs on `device` (an input lives there): a
// generated value takes the device of the inputs it meets (graph.h), where to() would break the
// graph. Otherwise to() puts it there, through a graph break.
Tensor on_device(Tensor t, Device device) {
  if (device.type == DeviceType::cpu) return t;
  if (const detail::Trace* trace = t.is_traced() ? detail::current_trace() : nullptr)
    for (NodeId i : trace->graph.inputs())
      if (trace->graph.node(i).meta.device == device) return t;
  return t.to(device);
}
}  // namespace

Tensor full(const Shape& shape, double value, DType dtype, Device device) {
  return on_device(detail::dispatch(OpId::full, {}, Attrs{shape, value, dtype}), device);
}
Tensor zeros(const Shape& shape, DType dtype, Device device) { return full(shape, 0.0, dtype, device); }
Tensor ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1.0, dtype, device); }
Tensor arange(double end, DType dtype, Device device) { return arange(0, end, 1, dtype, device); }
Tensor arange(double start, double end, double step, DType dtype, Device device) {
  return on_device(detail::dispatch(OpId::arange, {}, Attrs{start, end, step, dtype}), device);
}
Tensor arange(const SymInt& n, DType dtype, Device device) {
  if (n.is_static()) return arange(0, static_cast<double>(n.hint()), 1, dtype, device);
  return iota({n}, 0, dtype, device);
}
Tensor iota(const Shape& shape, int64_t dim, DType dtype, Device device) {
  const int64_t d = normalize_dim(dim, static_cast<int64_t>(shape.size()), "iota");
  return on_device(detail::dispatch(OpId::iota, {}, Attrs{shape, d, dtype}), device);
}
Tensor randn(const Shape& shape, DType dtype, Device device, uint64_t seed) {
  return on_device(detail::dispatch(OpId::randn, {}, Attrs{shape, static_cast<int64_t>(seed), dtype}), device);
}
Tensor rand(const Shape& shape, DType dtype, Device device, uint64_t seed) {
  return on_device(detail::dispatch(OpId::rand, {}, Attrs{shape, static_cast<int64_t>(seed), dtype}), device);
}
Tensor randn(const Shape& shape, const Tensor& key, DType dtype, uint64_t seed) {
  return detail::dispatch(OpId::randn, {&key}, Attrs{shape, static_cast<int64_t>(seed), dtype});
}
Tensor rand(const Shape& shape, const Tensor& key, DType dtype, uint64_t seed) {
  return detail::dispatch(OpId::rand, {&key}, Attrs{shape, static_cast<int64_t>(seed), dtype});
}

// Two philox words of each element's flat position (random.h's scheme, words 2 and 3, so that a
// rand or randn of the same key and seed draws from other words) give 48 bits, u = v * 2^-48 in
// f64 (exact), and low + floor(u * range): every integer of [low, high) is drawn by 2^48 / range
// of the 2^48 values of v, within one (a bias of at most range / 2^48).
Tensor randint(int64_t low, int64_t high, const Shape& shape, const Tensor& key, DType dtype, uint64_t seed) {
  constexpr int64_t kMaxRange = int64_t{1} << 48, kExact = int64_t{1} << 53;
  KILN_CHECK(low < high, "randint: low (", low, ") must be less than high (", high, ")");
  KILN_CHECK(low >= -kExact && high <= kExact && high - low <= kMaxRange, "randint: high - low must be at most 2^48 ",
             "and both within 2^53 of 0, got [", low, ", ", high, ")");
  // The integer dtypes hold every value drawn (a cast would wrap them silently).
  KILN_CHECK(dtype != DType::bool_ || (low >= 0 && high <= 2), "randint: bool draws from [0, 2), got [", low, ", ", high, ")");
  KILN_CHECK(dtype != DType::i32 || (low >= std::numeric_limits<int32_t>::min() && high - 1 <= std::numeric_limits<int32_t>::max()),
             "randint: i32 cannot hold [", low, ", ", high, ")");
  KILN_CHECK(key.defined() && is_integral(key.dtype()) && key.rank() == 0,
             "randint: the key must be a 0-d integer tensor",
             key.defined() ? ", got " + std::string(dtype_name(key.dtype())) + shape_str(key.shape()) : std::string());
  const Tensor counter = reshape(iota(Shape{shape_numel(shape)}, 0, DType::i64, key.device()), shape);
  const Tensor k = cast(key, DType::i64);
  auto word = [&](int64_t w) {
    return cast(detail::dispatch(OpId::philox, {&k, &counter}, Attrs{w, static_cast<int64_t>(seed)}), DType::f64);
  };
  const Tensor u = add(mul(word(2), 0x1p-24), mul(word(3), 0x1p-48));
  const double range = static_cast<double>(high - low);
  const Tensor offset = cast(minimum(floor(mul(u, range)), range - 1), DType::i64);
  return cast(add(offset, Scalar(low)), dtype);
}
Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype, Device device, uint64_t seed) {
  return on_device(randint(low, high, shape, full({}, 0.0, DType::i64), dtype, seed), device);
}
Tensor scalar_tensor(double value, DType dtype) { return full({}, value, dtype); }
Tensor zeros_like(const Tensor& x) { return full(x.shape(), 0.0, x.dtype(), x.device()); }
Tensor ones_like(const Tensor& x) { return full(x.shape(), 1.0, x.dtype(), x.device()); }

}  // namespace kiln
