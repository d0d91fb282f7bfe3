// kiln::nn: the layers of real models as plain structs of parameters (torch.nn's names and
// defaults), for models written in C++. Each module
//   - is a pytree (compile.h): passed to a compiled function, its tensors are graph inputs and
//     its hyperparameters (eps, strides, groups, heads) are guarded scalars;
//   - is made with torch's initial values from a seeded generator (make(..., Init&)), or read
//     from a state dict under a prefix with torch's parameter names (load(state, "encoder.0.",
//     ...): every shape checked, a missing or mis-shaped tensor named), and writes its
//     parameters back (save(state, prefix)), so weights move through .safetensors files
//     (state_dict.h) in the layout torch's state_dict() gives;
//   - computes with the op API (operator()), so eager calls and traced ones are the same code.
// Dropout is the identity (Dropout::train drops) and BatchNorm's operator() uses its running statistics, as torch's
// modules do after eval(); BatchNorm2d::train is its training mode (the batch's statistics).
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <utility>

#include "kiln/compile.h"
#include "kiln/ops.h"
#include "kiln/state_dict.h"
#include "kiln/tensor.h"

namespace kiln::nn {

// Where initial parameters come from: a 64-bit Mersenne Twister (std::mt19937_64, the same
// sequence on every platform) and the dtype and device they are made in. Each make() draws
// from it in turn, so one Init gives a whole model distinct values.
class Init {
 public:
  explicit Init(uint64_t seed = 0, DType dtype = DType::f32, Device device = Device::cpu());
  // torch's defaults: U(-bound, bound) (Linear and Conv, bound = 1/sqrt(fan_in)) and N(0, 1)
  // (Embedding).
  Tensor uniform(const Dims& sizes, double bound);
  Tensor normal(const Dims& sizes);
  Tensor filled(const Dims& sizes, double value) const;

 private:
  double next_unit();  // [0, 1) from 53 random bits
  std::mt19937_64 rng_;
  DType dtype_;
  Device device_;
};

// y = x @ weight^T + bias; weight [out, in], bias [out].
struct Linear {
  Tensor weight;
  std::optional<Tensor> bias;
  static Linear make(int64_t in_features, int64_t out_features, Init& init, bool bias = true);
  static Linear load(const StateDict& state, const std::string& prefix, int64_t in_features, int64_t out_features,
                     bool bias = true);
  void save(StateDict& state, const std::string& prefix) const;
  Tensor operator()(const Tensor& x) const;
};

// Rows of weight [num_embeddings, dim] picked by integer ids of any shape: [*ids, dim].
struct Embedding {
  Tensor weight;
  static Embedding make(int64_t num_embeddings, int64_t dim, Init& init);
  static Embedding load(const StateDict& state, const std::string& prefix, int64_t num_embeddings, int64_t dim);
  void save(StateDict& state, const std::string& prefix) const;
  Tensor operator()(const Tensor& ids) const;
};

// Normalised over the last dims (normalized_shape), then scaled and shifted (when affine).
struct LayerNorm {
  Dims normalized_shape;
  std::optional<Tensor> weight, bias;
  double eps = 1e-5;
  static LayerNorm make(const Dims& normalized_shape, Init& init, double eps = 1e-5, bool affine = true);
  static LayerNorm load(const StateDict& state, const std::string& prefix, const Dims& normalized_shape,
                        double eps = 1e-5, bool affine = true);
  void save(StateDict& state, const std::string& prefix) const;
  Tensor operator()(const Tensor& x) const;
};

// x / sqrt(mean(x^2) + eps) * weight over the last dims (Llama's norm).
struct RMSNorm {
  Dims normalized_shape;
  std::optional<Tensor> weight;
  double eps = 1e-6;
  static RMSNorm make(const Dims& normalized_shape, Init& init, double eps = 1e-6, bool affine = true);
  static RMSNorm load(const StateDict& state, const std::string& prefix, const Dims& normalized_shape,
                      double eps = 1e-6, bool affine = true);
  void save(StateDict& state, const std::string& prefix) const;
  Tensor operator()(const Tensor& x) const;
};

// Convolutions over x[N, C, *spatial] (1 or 2 spatial dims): weight [out, in / groups, *kernel].
struct Conv {
  Tensor weight;
  std::optional<Tensor> bias;
  Dims stride{1}, padding{0}, dilation{1};
  int64_t groups = 1;
  Tensor operator()(const Tensor& x) const;
  void save(StateDict& state, const std::string& prefix) const;
};
struct ConvOptions {
  Dims stride{1}, padding{0}, dilation{1};
  int64_t groups = 1;
  bool bias = true;
};
struct Conv1d : Conv {
  static Conv1d make(int64_t in_channels, int64_t out_channels, int64_t kernel_size, Init& init,
                     const ConvOptions& o = {});
  static Conv1d load(const StateDict& state, const std::string& prefix, int64_t in_channels, int64_t out_channels,
                     int64_t kernel_size, const ConvOptions& o = {});
};
struct Conv2d : Conv {
  static Conv2d make(int64_t in_channels, int64_t out_channels, const Dims& kernel_size, Init& init,
                     const ConvOptions& o = {});
  static Conv2d load(const StateDict& state, const std::string& prefix, int64_t in_channels, int64_t out_channels,
                     const Dims& kernel_size, const ConvOptions& o = {});
};

// Transposed 2-D convolution: weight [in, out / groups, kh, kw] (torch's layout).
struct ConvTransposeOptions {
  Dims stride{1}, padding{0}, output_padding{0};
  int64_t groups = 1;
  Dims dilation{1};
  bool bias = true;
};
struct ConvTranspose2d {
  Tensor weight;
  std::optional<Tensor> bias;
  Dims stride{1}, padding{0}, output_padding{0};
  int64_t groups = 1;
  Dims dilation{1};
  static ConvTranspose2d make(int64_t in_channels, int64_t out_channels, const Dims& kernel_size, Init& init,
                              const ConvTransposeOptions& o = {});
  static ConvTranspose2d load(const StateDict& state, const std::string& prefix, int64_t in_channels,
                              int64_t out_channels, const Dims& kernel_size, const ConvTransposeOptions& o = {});
  void save(StateDict& state, const std::string& prefix) const;
  Tensor operator()(const Tensor& x) const;
};

// Inference batch norm over channels (dim 1) with the running statistics.
struct BatchNorm2d {
  Tensor running_mean, running_var;
  std::optional<Tensor> weight, bias;
  double eps = 1e-5;
  static BatchNorm2d make(int64_t channels, Init& init, double eps = 1e-5, bool affine = true);
  // Reads running_mean, running_var (and weight, bias); torch's num_batches_tracked is ignored
  // and save() does not write it (torch's strict load_state_dict would miss it).
  static BatchNorm2d load(const StateDict& state, const std::string& prefix, int64_t channels, double eps = 1e-5,
                          bool affine = true);
  void save(StateDict& state, const std::string& prefix) const;
  Tensor operator()(const Tensor& x) const;  // inference: the running statistics
  // Training mode (torch's module.train()): normalises with the batch's statistics and returns
  // the module with its running statistics moved towards them by `momentum` (a new module, so a
  // compiled training step returns it; nothing here is differentiated through them).
  std::pair<Tensor, BatchNorm2d> train(const Tensor& x, double momentum = 0.1) const;
};

struct GroupNorm {
  int64_t num_groups = 1;
  std::optional<Tensor> weight, bias;
  double eps = 1e-5;
  static GroupNorm make(int64_t num_groups, int64_t channels, Init& init, double eps = 1e-5, bool affine = true);
  static GroupNorm load(const StateDict& state, const std::string& prefix, int64_t num_groups, int64_t channels,
                        double eps = 1e-5, bool affine = true);
  void save(StateDict& state, const std::string& prefix) const;
  Tensor operator()(const Tensor& x) const;
};

// torch.nn.MultiheadAttention with batch_first=True: q [N, Lq, E], k and v [N, Lk, E], one
// packed input projection (in_proj_weight [3E, E], in_proj_bias [3E]) and out_proj; heads of
// E / num_heads. The mask and is_causal are scaled_dot_product_attention's (AttentionOptions;
// its scale and enable_gqa are not used). Returns the attention output (torch's first result).
struct MultiheadAttention {
  Tensor in_proj_weight;
  std::optional<Tensor> in_proj_bias;
  Linear out_proj;
  int64_t num_heads = 1;
  static MultiheadAttention make(int64_t embed_dim, int64_t num_heads, Init& init, bool bias = true);
  static MultiheadAttention load(const StateDict& state, const std::string& prefix, int64_t embed_dim,
                                 int64_t num_heads, bool bias = true);
  void save(StateDict& state, const std::string& prefix) const;
  Tensor operator()(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options = {}) const;
};

// Activations and dropout as modules, for Sequential.
struct ReLU {
  Tensor operator()(const Tensor& x) const { return relu(x); }
};
struct GELU {
  bool tanh_approximation = false;
  Tensor operator()(const Tensor& x) const { return gelu(x, tanh_approximation ? "tanh" : "none"); }
};
struct SiLU {
  Tensor operator()(const Tensor& x) const { return silu(x); }
};
struct Dropout {  // inference: the identity (torch's Dropout after eval())
  double p = 0.5;
  Tensor operator()(const Tensor& x) const { return x; }
  // Training mode: kiln::dropout(x, p, key); pass a new 0-d integer key each step.
  Tensor train(const Tensor& x, const Tensor& key, uint64_t seed = 0) const { return dropout(x, p, key, seed); }
};

// Modules applied in order; their parameters are named "<i>." as torch.nn.Sequential's.
template <class... M>
struct Sequential {
  std::tuple<M...> layers;
  // Each layer runs in a kiln::scope of its index, as torch's Sequential names its children.
  Tensor operator()(const Tensor& x) const {
    Tensor y = x;
    size_t i = 0;
    std::apply([&](const auto&... m) { ((y = in_scope(m, y, i++)), ...); }, layers);
    return y;
  }
  void save(StateDict& state, const std::string& prefix) const {
    size_t i = 0;
    std::apply([&](const auto&... m) { (save_one(m, state, prefix + std::to_string(i++) + "."), ...); }, layers);
  }

 private:
  template <class T>
  static Tensor in_scope(const T& m, const Tensor& x, size_t i) {
    auto s = scope(std::to_string(i));
    return m(x);
  }
  template <class T>
  static void save_one(const T& m, StateDict& state, const std::string& prefix) {
    if constexpr (requires { m.save(state, prefix); }) m.save(state, prefix);
  }
};
template <class... M>
Sequential<M...> sequential(M... layers) {
  return Sequential<M...>{std::tuple<M...>{std::move(layers)...}};
}

// Every parameter and buffer of a module by torch's names (what save() writes).
template <class M>
StateDict state_dict(const M& module, const std::string& prefix = "") {
  StateDict state;
  module.save(state, prefix);
  return state;
}

}  // namespace kiln::nn

// The modules as pytrees: every tensor and every hyperparameter their forward reads.
namespace kiln {
#define KILN_NN_PYTREE(Type, ...)                                   \
  template <>                                                       \
  struct Pytree<nn::Type> {                                         \
    using T = nn::Type;                                             \
    static constexpr auto members = std::make_tuple(__VA_ARGS__);   \
  }
KILN_NN_PYTREE(Linear, &T::weight, &T::bias);
KILN_NN_PYTREE(Embedding, &T::weight);
KILN_NN_PYTREE(LayerNorm, &T::normalized_shape, &T::weight, &T::bias, &T::eps);
KILN_NN_PYTREE(RMSNorm, &T::normalized_shape, &T::weight, &T::eps);
KILN_NN_PYTREE(Conv1d, &T::weight, &T::bias, &T::stride, &T::padding, &T::dilation, &T::groups);
KILN_NN_PYTREE(Conv2d, &T::weight, &T::bias, &T::stride, &T::padding, &T::dilation, &T::groups);
KILN_NN_PYTREE(ConvTranspose2d, &T::weight, &T::bias, &T::stride, &T::padding, &T::output_padding, &T::groups,
               &T::dilation);
KILN_NN_PYTREE(BatchNorm2d, &T::running_mean, &T::running_var, &T::weight, &T::bias, &T::eps);
KILN_NN_PYTREE(GroupNorm, &T::num_groups, &T::weight, &T::bias, &T::eps);
KILN_NN_PYTREE(MultiheadAttention, &T::in_proj_weight, &T::in_proj_bias, &T::out_proj, &T::num_heads);
KILN_NN_PYTREE(GELU, &T::tanh_approximation);
KILN_NN_PYTREE(Dropout, &T::p);
#undef KILN_NN_PYTREE
template <>
struct Pytree<nn::ReLU> {
  static constexpr auto members = std::make_tuple();
};
template <>
struct Pytree<nn::SiLU> {
  static constexpr auto members = std::make_tuple();
};
template <class... M>
struct Pytree<nn::Sequential<M...>> {
  static constexpr auto members = std::make_tuple(&nn::Sequential<M...>::layers);
};
}  // namespace kiln
