// kiln::nn: torch.nn's layers as structs of parameters (nn.h says what each is).
#include "kiln/nn.h"

#include <cmath>
#include <numeric>

#include "kiln/autograd.h"
#include "kiln/graph/error.h"

namespace kiln::nn {

namespace {

Shape shape_of(const Dims& dims) {
  Shape s;
  for (int64_t d : dims) s.push_back(SymInt(d));
  return s;
}

int64_t product(const Dims& dims) { return std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<>()); }

void positive(int64_t v, const char* module, const char* what) {
  KILN_CHECK(v > 0, "nn::", module, ": ", what, " is ", v, ", not positive");
}

Dims concat(Dims a, const Dims& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::optional<Tensor> take_optional(const StateDict& state, const std::string& name, const Dims& sizes, bool present) {
  if (!present) return std::nullopt;
  return take(state, name, sizes);
}

void put(StateDict& state, const std::string& name, const std::optional<Tensor>& t) {
  if (t) state[name] = *t;
}

// The channel counts, groups and kernel of a (transposed) convolution, checked.
void check_conv(const char* module, int64_t in, int64_t out, const Dims& kernel, int64_t groups) {
  positive(in, module, "in_channels");
  positive(out, module, "out_channels");
  positive(groups, module, "groups");
  for (int64_t k : kernel) positive(k, module, "kernel_size");
  KILN_CHECK(in % groups == 0 && out % groups == 0, "nn::", module, ": in_channels ", in, " and out_channels ", out,
             " must both be multiples of groups ", groups);
}

// Convolution weights [out, in / groups, *kernel].
Dims conv_weight_sizes(const char* module, int64_t in, int64_t out, const Dims& kernel, const ConvOptions& o) {
  check_conv(module, in, out, kernel, o.groups);
  return concat({out, in / o.groups}, kernel);
}

// A convolution module with the options' hyperparameters and no parameters yet.
template <class C>
C conv_with(const ConvOptions& o) {
  C c;
  c.stride = o.stride;
  c.padding = o.padding;
  c.dilation = o.dilation;
  c.groups = o.groups;
  return c;
}

template <class C>
C make_conv(const char* module, int64_t in, int64_t out, const Dims& kernel, Init& init, const ConvOptions& o) {
  const Dims w = conv_weight_sizes(module, in, out, kernel, o);
  const double bound = 1.0 / std::sqrt(static_cast<double>(product(w) / out));
  C c = conv_with<C>(o);
  c.weight = init.uniform(w, bound);
  if (o.bias) c.bias = init.uniform({out}, bound);
  return c;
}

template <class C>
C load_conv(const char* module, const StateDict& state, const std::string& prefix, int64_t in, int64_t out,
            const Dims& kernel, const ConvOptions& o) {
  C c = conv_with<C>(o);
  c.weight = take(state, prefix + "weight", conv_weight_sizes(module, in, out, kernel, o));
  c.bias = take_optional(state, prefix + "bias", {out}, o.bias);
  return c;
}

}  // namespace

// ---- Init ----------------------------------------------------------------------------------

Init::Init(uint64_t seed, DType dtype, Device device) : rng_(seed), dtype_(dtype), device_(device) {}

double Init::next_unit() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

Tensor Init::uniform(const Dims& sizes, double bound) {
  std::vector<double> v(static_cast<size_t>(product(sizes)));
  for (double& x : v) x = (2.0 * next_unit() - 1.0) * bound;
  return from_vector(v, shape_of(sizes)).to(dtype_).to(device_);
}

Tensor Init::normal(const Dims& sizes) {
  // Box-Muller on (0, 1] x [0, 1): the same values on every platform (std::normal_distribution's
  // algorithm is the library's choice).
  std::vector<double> v(static_cast<size_t>(product(sizes)));
  for (double& x : v) {
    const double u1 = 1.0 - next_unit(), u2 = next_unit();
    x = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }
  return from_vector(v, shape_of(sizes)).to(dtype_).to(device_);
}

Tensor Init::filled(const Dims& sizes, double value) const { return full(shape_of(sizes), value, dtype_, device_); }

// ---- Linear, Embedding ----------------------------------------------------------------------

Linear Linear::make(int64_t in, int64_t out, Init& init, bool bias) {
  positive(in, "Linear", "in_features");
  positive(out, "Linear", "out_features");
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  Linear l;
  l.weight = init.uniform({out, in}, bound);
  if (bias) l.bias = init.uniform({out}, bound);
  return l;
}

Linear Linear::load(const StateDict& state, const std::string& prefix, int64_t in, int64_t out, bool bias) {
  return Linear{take(state, prefix + "weight", {out, in}), take_optional(state, prefix + "bias", {out}, bias)};
}

void Linear::save(StateDict& state, const std::string& prefix) const {
  state[prefix + "weight"] = weight;
  put(state, prefix + "bias", bias);
}

Tensor Linear::operator()(const Tensor& x) const { return linear(x, weight, bias ? *bias : Tensor()); }

Embedding Embedding::make(int64_t num, int64_t dim, Init& init) {
  positive(num, "Embedding", "num_embeddings");
  positive(dim, "Embedding", "embedding_dim");
  return Embedding{init.normal({num, dim})};
}

Embedding Embedding::load(const StateDict& state, const std::string& prefix, int64_t num, int64_t dim) {
  return Embedding{take(state, prefix + "weight", {num, dim})};
}

void Embedding::save(StateDict& state, const std::string& prefix) const { state[prefix + "weight"] = weight; }

Tensor Embedding::operator()(const Tensor& ids) const {
  Shape out = ids.shape();
  out.push_back(weight.shape().at(1));
  return reshape(index_select(weight, 0, flatten(ids)), out);
}

// ---- norms ----------------------------------------------------------------------------------

LayerNorm LayerNorm::make(const Dims& shape, Init& init, double eps, bool affine) {
  for (int64_t d : shape) positive(d, "LayerNorm", "a normalized_shape size");
  LayerNorm n{shape, std::nullopt, std::nullopt, eps};
  if (affine) {
    n.weight = init.filled(shape, 1.0);
    n.bias = init.filled(shape, 0.0);
  }
  return n;
}

LayerNorm LayerNorm::load(const StateDict& state, const std::string& prefix, const Dims& shape, double eps,
                          bool affine) {
  return LayerNorm{shape, take_optional(state, prefix + "weight", shape, affine),
                   take_optional(state, prefix + "bias", shape, affine), eps};
}

void LayerNorm::save(StateDict& state, const std::string& prefix) const {
  put(state, prefix + "weight", weight);
  put(state, prefix + "bias", bias);
}

Tensor LayerNorm::operator()(const Tensor& x) const {
  return layer_norm(x, shape_of(normalized_shape), weight ? *weight : Tensor(), bias ? *bias : Tensor(), eps);
}

RMSNorm RMSNorm::make(const Dims& shape, Init& init, double eps, bool affine) {
  for (int64_t d : shape) positive(d, "RMSNorm", "a normalized_shape size");
  RMSNorm n{shape, std::nullopt, eps};
  if (affine) n.weight = init.filled(shape, 1.0);
  return n;
}

RMSNorm RMSNorm::load(const StateDict& state, const std::string& prefix, const Dims& shape, double eps, bool affine) {
  return RMSNorm{shape, take_optional(state, prefix + "weight", shape, affine), eps};
}

void RMSNorm::save(StateDict& state, const std::string& prefix) const { put(state, prefix + "weight", weight); }

Tensor RMSNorm::operator()(const Tensor& x) const {
  return rms_norm(x, shape_of(normalized_shape), weight ? *weight : Tensor(), eps);
}

BatchNorm2d BatchNorm2d::make(int64_t channels, Init& init, double eps, bool affine) {
  positive(channels, "BatchNorm2d", "num_features");
  BatchNorm2d n{init.filled({channels}, 0.0), init.filled({channels}, 1.0), std::nullopt, std::nullopt, eps};
  if (affine) {
    n.weight = init.filled({channels}, 1.0);
    n.bias = init.filled({channels}, 0.0);
  }
  return n;
}

BatchNorm2d BatchNorm2d::load(const StateDict& state, const std::string& prefix, int64_t channels, double eps,
                              bool affine) {
  return BatchNorm2d{take(state, prefix + "running_mean", {channels}), take(state, prefix + "running_var", {channels}),
                     take_optional(state, prefix + "weight", {channels}, affine),
                     take_optional(state, prefix + "bias", {channels}, affine), eps};
}

void BatchNorm2d::save(StateDict& state, const std::string& prefix) const {
  put(state, prefix + "weight", weight);
  put(state, prefix + "bias", bias);
  state[prefix + "running_mean"] = running_mean;
  state[prefix + "running_var"] = running_var;
}

Tensor BatchNorm2d::operator()(const Tensor& x) const {
  KILN_CHECK(x.rank() == 4, "nn::BatchNorm2d: expects x of rank 4 [N, C, H, W], got rank ", x.rank());
  return batch_norm(x, running_mean, running_var, weight ? *weight : Tensor(), bias ? *bias : Tensor(), eps);
}

std::pair<Tensor, BatchNorm2d> BatchNorm2d::train(const Tensor& x, double momentum) const {
  KILN_CHECK(x.rank() == 4, "nn::BatchNorm2d: expects x of rank 4 [N, C, H, W], got rank ", x.rank());
  KILN_CHECK(momentum >= 0 && momentum <= 1, "nn::BatchNorm2d: momentum must be in [0, 1], got ", momentum);
  const BatchNormTraining r = batch_norm_training(x, weight ? *weight : Tensor(), bias ? *bias : Tensor(), eps);
  NoGrad off;
  BatchNorm2d next = *this;
  next.running_mean = running_mean * (1.0 - momentum) + r.mean.detach().to(running_mean.dtype()) * momentum;
  next.running_var = running_var * (1.0 - momentum) + r.var.detach().to(running_var.dtype()) * momentum;
  return {r.y, std::move(next)};
}

GroupNorm GroupNorm::make(int64_t groups, int64_t channels, Init& init, double eps, bool affine) {
  positive(groups, "GroupNorm", "num_groups");
  positive(channels, "GroupNorm", "num_channels");
  KILN_CHECK(channels % groups == 0, "nn::GroupNorm: num_channels ", channels, " is not a multiple of num_groups ",
             groups);
  GroupNorm n{groups, std::nullopt, std::nullopt, eps};
  if (affine) {
    n.weight = init.filled({channels}, 1.0);
    n.bias = init.filled({channels}, 0.0);
  }
  return n;
}

GroupNorm GroupNorm::load(const StateDict& state, const std::string& prefix, int64_t groups, int64_t channels,
                          double eps, bool affine) {
  KILN_CHECK(groups > 0 && channels % groups == 0, "nn::GroupNorm: num_channels ", channels,
             " is not a multiple of num_groups ", groups);
  return GroupNorm{groups, take_optional(state, prefix + "weight", {channels}, affine),
                   take_optional(state, prefix + "bias", {channels}, affine), eps};
}

void GroupNorm::save(StateDict& state, const std::string& prefix) const {
  put(state, prefix + "weight", weight);
  put(state, prefix + "bias", bias);
}

Tensor GroupNorm::operator()(const Tensor& x) const {
  return group_norm(x, num_groups, weight ? *weight : Tensor(), bias ? *bias : Tensor(), eps);
}

// ---- convolutions ---------------------------------------------------------------------------

Tensor Conv::operator()(const Tensor& x) const {
  const Tensor b = bias ? *bias : Tensor();
  switch (weight.rank()) {
    case 3: return conv1d(x, weight, b, stride, padding, dilation, groups);
    case 4: return conv2d(x, weight, b, stride, padding, dilation, groups);
    default: fail("nn::Conv: weight of rank ", weight.rank(), " (3 for Conv1d, 4 for Conv2d)");
  }
}

void Conv::save(StateDict& state, const std::string& prefix) const {
  state[prefix + "weight"] = weight;
  put(state, prefix + "bias", bias);
}

Conv1d Conv1d::make(int64_t in, int64_t out, int64_t kernel, Init& init, const ConvOptions& o) {
  return make_conv<Conv1d>("Conv1d", in, out, {kernel}, init, o);
}
Conv1d Conv1d::load(const StateDict& state, const std::string& prefix, int64_t in, int64_t out, int64_t kernel,
                    const ConvOptions& o) {
  return load_conv<Conv1d>("Conv1d", state, prefix, in, out, {kernel}, o);
}
Conv2d Conv2d::make(int64_t in, int64_t out, const Dims& kernel, Init& init, const ConvOptions& o) {
  KILN_CHECK(kernel.size() == 2, "nn::Conv2d: kernel_size has ", kernel.size(), " sizes, expected 2");
  return make_conv<Conv2d>("Conv2d", in, out, kernel, init, o);
}
Conv2d Conv2d::load(const StateDict& state, const std::string& prefix, int64_t in, int64_t out, const Dims& kernel,
                    const ConvOptions& o) {
  KILN_CHECK(kernel.size() == 2, "nn::Conv2d: kernel_size has ", kernel.size(), " sizes, expected 2");
  return load_conv<Conv2d>("Conv2d", state, prefix, in, out, kernel, o);
}

namespace {
// Transposed convolution weights [in, out / groups, kh, kw].
Dims transposed_weight_sizes(int64_t in, int64_t out, const Dims& kernel, int64_t groups) {
  KILN_CHECK(kernel.size() == 2, "nn::ConvTranspose2d: kernel_size has ", kernel.size(), " sizes, expected 2");
  check_conv("ConvTranspose2d", in, out, kernel, groups);
  return concat({in, out / groups}, kernel);
}
ConvTranspose2d transposed_with(const ConvTransposeOptions& o) {
  ConvTranspose2d c;
  c.stride = o.stride;
  c.padding = o.padding;
  c.output_padding = o.output_padding;
  c.groups = o.groups;
  c.dilation = o.dilation;
  return c;
}
}  // namespace

ConvTranspose2d ConvTranspose2d::make(int64_t in, int64_t out, const Dims& kernel, Init& init,
                                      const ConvTransposeOptions& o) {
  const Dims w = transposed_weight_sizes(in, out, kernel, o.groups);
  // torch computes the fan-in from weight.size(1) * kernel: out / groups * kh * kw.
  const double bound = 1.0 / std::sqrt(static_cast<double>(w[1] * kernel[0] * kernel[1]));
  ConvTranspose2d c = transposed_with(o);
  c.weight = init.uniform(w, bound);
  if (o.bias) c.bias = init.uniform({out}, bound);
  return c;
}

ConvTranspose2d ConvTranspose2d::load(const StateDict& state, const std::string& prefix, int64_t in, int64_t out,
                                      const Dims& kernel, const ConvTransposeOptions& o) {
  ConvTranspose2d c = transposed_with(o);
  c.weight = take(state, prefix + "weight", transposed_weight_sizes(in, out, kernel, o.groups));
  c.bias = take_optional(state, prefix + "bias", {out}, o.bias);
  return c;
}

void ConvTranspose2d::save(StateDict& state, const std::string& prefix) const {
  state[prefix + "weight"] = weight;
  put(state, prefix + "bias", bias);
}

Tensor ConvTranspose2d::operator()(const Tensor& x) const {
  return conv_transpose2d(x, weight, bias ? *bias : Tensor(), stride, padding, output_padding, groups, dilation);
}

// ---- attention ------------------------------------------------------------------------------

namespace {
void check_heads(int64_t embed_dim, int64_t heads) {
  positive(embed_dim, "MultiheadAttention", "embed_dim");
  positive(heads, "MultiheadAttention", "num_heads");
  KILN_CHECK(embed_dim % heads == 0, "nn::MultiheadAttention: embed_dim ", embed_dim, " is not a multiple of num_heads ",
             heads);
}
}  // namespace

MultiheadAttention MultiheadAttention::make(int64_t e, int64_t heads, Init& init, bool bias) {
  check_heads(e, heads);
  MultiheadAttention m;
  // torch: xavier_uniform_ on the packed [3E, E] weight, zero biases; out_proj as a Linear with a
  // zero bias.
  m.in_proj_weight = init.uniform({3 * e, e}, std::sqrt(6.0 / static_cast<double>(4 * e)));
  if (bias) m.in_proj_bias = init.filled({3 * e}, 0.0);
  m.out_proj = Linear::make(e, e, init, bias);
  if (bias) m.out_proj.bias = init.filled({e}, 0.0);
  m.num_heads = heads;
  return m;
}

MultiheadAttention MultiheadAttention::load(const StateDict& state, const std::string& prefix, int64_t e,
                                            int64_t heads, bool bias) {
  check_heads(e, heads);
  MultiheadAttention m;
  m.in_proj_weight = take(state, prefix + "in_proj_weight", {3 * e, e});
  m.in_proj_bias = take_optional(state, prefix + "in_proj_bias", {3 * e}, bias);
  m.out_proj = Linear::load(state, prefix + "out_proj.", e, e, bias);
  m.num_heads = heads;
  return m;
}

void MultiheadAttention::save(StateDict& state, const std::string& prefix) const {
  state[prefix + "in_proj_weight"] = in_proj_weight;
  put(state, prefix + "in_proj_bias", in_proj_bias);
  out_proj.save(state, prefix + "out_proj.");
}

Tensor MultiheadAttention::operator()(const Tensor& q, const Tensor& k, const Tensor& v,
                                      const AttentionOptions& options) const {
  KILN_CHECK(q.rank() == 3 && k.rank() == 3 && v.rank() == 3,
             "nn::MultiheadAttention: expects q, k, v of rank 3 [N, L, E] (batch first), got ranks ", q.rank(), ", ",
             k.rank(), ", ", v.rank());
  const int64_t e = in_proj_weight.size(1);
  const int64_t d = e / num_heads;
  // Each projection uses its third of the packed weight and bias.
  auto project = [&](const Tensor& x, int64_t part) {
    const Tensor w = slice(in_proj_weight, 0, part * e, (part + 1) * e);
    const Tensor b = in_proj_bias ? slice(*in_proj_bias, 0, part * e, (part + 1) * e) : Tensor();
    // [N, L, E] -> [N, heads, L, d]
    Shape split = x.shape();
    split.pop_back();
    split.push_back(SymInt(num_heads));
    split.push_back(SymInt(d));
    return transpose(reshape(linear(x, w, b), split), 1, 2);
  };
  AttentionOptions o;
  o.mask = options.mask;
  o.is_causal = options.is_causal;
  const Tensor heads = scaled_dot_product_attention(project(q, 0), project(k, 1), project(v, 2), o);
  // [N, heads, Lq, d] -> [N, Lq, E]
  Shape merged = q.shape();
  return out_proj(reshape(transpose(heads, 1, 2), merged));
}

}  // namespace kiln::nn
