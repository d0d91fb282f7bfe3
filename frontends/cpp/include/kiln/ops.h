// The op API over kiln::Tensor: one function per op of the op table (sdk/graph/ops.h),
// plus C++ operators. Each call runs eagerly on concrete tensors or records a node while
// tracing; both paths share the op table's dtype and shape rules. Dims may be negative.
#pragma once

#include <limits>
#include <optional>
#include <type_traits>
#include <string>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

// Unary.
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x, const std::string& approximate = "none");  // "none" (erf) or "tanh"
Tensor silu(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor logical_not(const Tensor& x);
Tensor isnan(const Tensor& x);
Tensor cast(const Tensor& x, DType dtype);

// A C++ number next to a tensor: it takes the tensor's dtype unless it is of a higher
// category (int tensor * 0.5 is f32; f16 tensor + 1 stays f16), as in torch.
class Scalar {
 public:
  template <class T>
    requires std::is_arithmetic_v<T>
  Scalar(T v)  // NOLINT: implicit so that x + 1 and x * 0.5 read naturally
      : kind_(std::is_same_v<T, bool> ? ScalarKind::boolean
              : std::is_integral_v<T> ? ScalarKind::integer
                                      : ScalarKind::floating),
        value_(static_cast<double>(v)) {}
  ScalarKind kind() const { return kind_; }
  double value() const { return value_; }

 private:
  ScalarKind kind_;
  double value_;
};

// Binary and ternary.
#define KILN_BINARY(name)                            \
  Tensor name(const Tensor& a, const Tensor& b);     \
  Tensor name(const Tensor& a, Scalar b);            \
  Tensor name(Scalar a, const Tensor& b);
KILN_BINARY(add)
KILN_BINARY(sub)
KILN_BINARY(mul)
KILN_BINARY(div)
KILN_BINARY(pow)
KILN_BINARY(maximum)
KILN_BINARY(minimum)
KILN_BINARY(eq)
KILN_BINARY(ne)
KILN_BINARY(lt)
KILN_BINARY(le)
KILN_BINARY(gt)
KILN_BINARY(ge)
KILN_BINARY(logical_and)
KILN_BINARY(logical_or)
#undef KILN_BINARY
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, Scalar b);
Tensor where(const Tensor& cond, Scalar a, const Tensor& b);
Tensor where(const Tensor& cond, Scalar a, Scalar b);  // f32 if either is floating, else i64 (or bool)

// Reductions over a set of dims (empty = all dims).
Tensor sum(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
Tensor max(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
Tensor min(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
Tensor prod(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
Tensor var(const Tensor& x, const Dims& dims = {}, int64_t correction = 1, bool keepdim = false);
Tensor logsumexp(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
// Index of the first extreme along `dim`, or over the flattened tensor when dim is nullopt.
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);

// Layout. These are views (no copy) in eager mode when the layout allows.
Tensor reshape(const Tensor& x, const Shape& shape);  // one size may be -1
Tensor permute(const Tensor& x, const Dims& dims);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor expand(const Tensor& x, const Shape& shape);   // -1 keeps a size
Tensor squeeze(const Tensor& x);                      // every size-1 dim
Tensor squeeze(const Tensor& x, int64_t dim);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end = std::numeric_limits<int64_t>::max(),
             int64_t step = 1);
// torch.Tensor.unfold: dim's windows of `size`, `step` apart, as a new last dim (a view; windows
// overlap where step < size): [.., S, ..] -> [.., (S - size) / step + 1, .., size].
Tensor unfold(const Tensor& x, int64_t dim, int64_t size, int64_t step);
Tensor cat(const std::vector<Tensor>& xs, int64_t dim = 0);
Tensor pad(const Tensor& x, const Dims& pads, double value = 0.0);  // pairs, last dim first
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// torch.gather: y[i] = x[i with i[dim] = index[i]], y of index's shape (same rank as x, no
// larger than x in the other dims); take_along_dim first broadcasts x and index against each
// other in every dim but `dim`.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
Tensor take_along_dim(const Tensor& x, const Tensor& index, int64_t dim);
// torch.scatter_add: x with src[i] added at i with i[dim] = index[i], for every position i of
// index (same rank as x; no larger than x in the other dims, nor than src in any: src is read
// where index has elements). Repeated indices add up (in an unspecified order on devices);
// src is cast to x's dtype. Differentiable in x and src.
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// torch.scatter: as scatter_add, but src[i] replaces the element; where several positions write
// one element, which one lands is unspecified (as in torch).
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// torch.scatter_reduce: as scatter_add, but reduce ("sum", "prod", "mean", "amax" or "amin")
// combines the src values reaching an element with it (include_self) or with each other alone;
// an element nothing reaches stays x's. amax and amin propagate NaN (as maximum does), integer
// products wrap, an integer mean rounds down. Kernels combine atomically in an unspecified order.
// Differentiable in x and src (amax/amin share a gradient among ties, as torch does).
Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce,
                      bool include_self = true);
// torch.index_reduce: scatter_reduce of source's slices j along dim into x's slices index[j]
// (index 1-D; reduce "prod", "mean", "amax" or "amin").
Tensor index_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, const std::string& reduce,
                    bool include_self = true);
// torch.index_put (x[indices] = values, or += with accumulate): indices index x's leading dims
// (i32/i64, broadcast together, negative ones counting from the end), values broadcast to the
// indices' shape followed by x's remaining dims. One scatter over x's leading dims flattened;
// an index outside its dim makes the run a kiln::Error (the plan's index check).
Tensor index_put(const Tensor& x, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate = false);
// torch.index_add: x with alpha * source's slice j along dim added at x's slice index[j] (index
// 1-D, source x's shape but `dim`, which is index's length). Embedding gradients are this.
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, double alpha = 1.0);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);

// Composites (decomposed by the compiler; one kernel each after fusion).
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {}, double eps = 1e-6);
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});
// softmax(q @ k^T * scale, -1) @ v over q[..., Lq, D], k[..., Lk, D], v[..., Lk, Dv] (batch dims
// equal); scale defaults to 1/sqrt(D), as torch's scaled_dot_product_attention. The hand-written
// form compiles the same (the compiler recognises it); on CUDA, f16/bf16 with a head dim that is
// a multiple of 16 up to 128 runs as one fused flash-attention kernel.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    std::optional<double> scale = std::nullopt);
// torch's other arguments: a mask broadcast to the scores [..., Lq, Lk] (bool: attend where
// true; floating: added to the scores), or is_causal (query i attends to keys j <= i, the
// top-left aligned triangle, built from sizes that may be symbolic); enable_gqa lets k and v
// have fewer heads (dim -3) than q, each serving q's heads in groups (Hq a multiple of Hkv).
// With a mask, a query row whose every key is masked out gets zeros, as in torch (its weights'
// softmax is NaN there). A masked attention runs decomposed (three kernels) on every target.
struct AttentionOptions {
  Tensor mask;
  bool is_causal = false;
  std::optional<double> scale;
  bool enable_gqa = false;
};
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options);

// torch.nn.functional.interpolate over x[N, C, *spatial] (static spatial sizes): `size` or
// `scale_factor` (one value for every spatial dim, or one each); modes nearest and nearest-exact
// (any dtype), linear / bilinear / trilinear (1 / 2 / 3 spatial dims) and bicubic (2; torch's
// a = -0.75, edge-clamped taps), with align_corners for the last four. With a scale_factor the
// coordinates use it as given, as torch does (recompute_scale_factor unset). A composite: per
// spatial dim, index_select of each tap times its weights.
struct InterpolateOptions {
  Dims size;
  std::vector<double> scale_factor;
  std::string mode = "nearest";
  bool align_corners = false;
};
Tensor interpolate(const Tensor& x, const InterpolateOptions& options);

// torch.einsum: "bij,bjk->bik" names each operand's dims by letters; letters shared by
// operands and absent from the output are summed over, a letter repeated in one operand takes
// its diagonal, "..." stands for the dims not named (broadcast across operands, right-aligned);
// without "->" the output is the ellipsis, then the letters used once, alphabetically. A
// composite: diagonals, sums, permutes, reshapes and one matmul per pair of operands, folded
// left to right.
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);

// Running sums (torch.cumsum) and products (torch.cumprod) along dim; integers and bool give i64.
Tensor cumsum(const Tensor& x, int64_t dim);
Tensor cumprod(const Tensor& x, int64_t dim);
// Sorting along dim (its size static), stable: equal values keep their order, NaN sorts above
// every number (torch.sort(stable=True), argsort, topk). Values and i64 positions; a sorting
// network on the device, one kernel per stage (log2(n) (log2(n) + 1) / 2 stages); the values'
// gradient goes back through the same permutation. topk: the k largest (smallest), in order.
std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false);
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false);
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true);
// The lower (tril) or upper (triu) triangle of the last two dims, the rest 0: kept where
// col - row <= diagonal (tril) or >= diagonal (triu), as torch.tril/triu.
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);
// [..., num_classes] of i64, 1 at each value's class (torch.nn.functional.one_hot). Values
// outside [0, num_classes) are an error in eager mode; in a compiled function their row is 0.
Tensor one_hot(const Tensor& x, int64_t num_classes);

// Convolutions and pooling over x[N, C, *spatial] with 1, 2 or 3 spatial dims, as torch's
// conv1d/2d/3d and max/avg_pool1d/2d/3d: stride, padding and dilation give one value per
// spatial dim or one for all (padding is on both sides; an empty pooling stride is the kernel
// size). The batch and channels may be dynamic; spatial sizes are static.
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, const Dims& stride = {1},
              const Dims& padding = {0}, const Dims& dilation = {1}, int64_t groups = 1);
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, const Dims& stride = {1},
              const Dims& padding = {0}, const Dims& dilation = {1}, int64_t groups = 1);
Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, const Dims& stride = {1},
              const Dims& padding = {0}, const Dims& dilation = {1}, int64_t groups = 1);
// torch's conv_transpose1d/2d/3d: weight [C_in, C_out / groups, *kernel]; output size per
// spatial dim (in - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1
// (output_padding below the stride or the dilation). The op convolution_input_grad: the gradient
// of a convolution by `weight` with respect to its input, x as its output's gradient.
Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, const Dims& stride = {1},
                        const Dims& padding = {0}, const Dims& output_padding = {0}, int64_t groups = 1,
                        const Dims& dilation = {1});
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, const Dims& stride = {1},
                        const Dims& padding = {0}, const Dims& output_padding = {0}, int64_t groups = 1,
                        const Dims& dilation = {1});
Tensor conv_transpose3d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, const Dims& stride = {1},
                        const Dims& padding = {0}, const Dims& output_padding = {0}, int64_t groups = 1,
                        const Dims& dilation = {1});
Tensor max_pool1d(const Tensor& x, const Dims& kernel_size, const Dims& stride = {}, const Dims& padding = {0},
                  const Dims& dilation = {1}, bool ceil_mode = false);
Tensor max_pool2d(const Tensor& x, const Dims& kernel_size, const Dims& stride = {}, const Dims& padding = {0},
                  const Dims& dilation = {1}, bool ceil_mode = false);
Tensor max_pool3d(const Tensor& x, const Dims& kernel_size, const Dims& stride = {}, const Dims& padding = {0},
                  const Dims& dilation = {1}, bool ceil_mode = false);
Tensor avg_pool1d(const Tensor& x, const Dims& kernel_size, const Dims& stride = {}, const Dims& padding = {0},
                  bool ceil_mode = false, bool count_include_pad = true);
Tensor avg_pool2d(const Tensor& x, const Dims& kernel_size, const Dims& stride = {}, const Dims& padding = {0},
                  bool ceil_mode = false, bool count_include_pad = true);
Tensor avg_pool3d(const Tensor& x, const Dims& kernel_size, const Dims& stride = {}, const Dims& padding = {0},
                  bool ceil_mode = false, bool count_include_pad = true);
// Adaptive pooling to output_size (one per spatial dim, or one for all): output i of a dim of
// size S pools [floor(i * S / O), ceil((i + 1) * S / O)), as torch does.
Tensor adaptive_avg_pool1d(const Tensor& x, const Dims& output_size);
Tensor adaptive_avg_pool2d(const Tensor& x, const Dims& output_size);
Tensor adaptive_avg_pool3d(const Tensor& x, const Dims& output_size);
Tensor adaptive_max_pool1d(const Tensor& x, const Dims& output_size);
Tensor adaptive_max_pool2d(const Tensor& x, const Dims& output_size);
Tensor adaptive_max_pool3d(const Tensor& x, const Dims& output_size);

// Normalisation over channels of x[N, C, *]: batch_norm with running statistics (inference),
// group_norm over num_groups groups of channels, instance_norm (one channel per group).
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);
Tensor instance_norm(const Tensor& x, const Tensor& weight = {}, const Tensor& bias = {}, double eps = 1e-5);
// Batch normalisation with the batch's own statistics (torch's training mode): per channel of
// x[N, C, *], normalised by the mean and biased variance over N and the spatial dims (through
// batch_norm, so gradients flow through the statistics too). Also gives those statistics, the
// variance unbiased, as torch folds them into its running averages.
struct BatchNormTraining {
  Tensor y, mean, var;
};
BatchNormTraining batch_norm_training(const Tensor& x, const Tensor& weight = {}, const Tensor& bias = {},
                                      double eps = 1e-5);

// Conveniences built from the ops above.
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max);  // either may be undefined
Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value);  // where(mask, value, x)
// torch.nn.functional.dropout in training: each element zeroed with probability p (rand(x's shape,
// key, f32, seed) < p), the others scaled by 1 / (1 - p); the key as rand's (a new one per step).
// p = 0 is x; p = 1 zeros; the gradient is the same mask and scale.
Tensor dropout(const Tensor& x, double p, const Tensor& key, uint64_t seed = 0);
Tensor stack(const std::vector<Tensor>& xs, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);  // the last may be smaller
std::vector<Tensor> split(const Tensor& x, const Dims& sizes, int64_t dim = 0);   // sizes sum to the dim
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);       // torch's sizes
std::vector<Tensor> unbind(const Tensor& x, int64_t dim = 0);
// torch.nn.functional.cross_entropy with class indices: the mean over targets [...] (i32/i64 in
// [0, C)) of -log_softmax(logits [..., C])[target], computed as logsumexp minus the target's
// logit. A target outside [0, C) makes the loss NaN (torch raises).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets);

// Linear algebra.
Tensor matmul(const Tensor& a, const Tensor& b);

// Operators.
Tensor operator-(const Tensor& x);
Tensor operator!(const Tensor& x);
#define KILN_OPERATOR(op, fn)                                                      \
  inline Tensor operator op(const Tensor& a, const Tensor& b) { return fn(a, b); } \
  inline Tensor operator op(const Tensor& a, Scalar b) { return fn(a, b); }        \
  inline Tensor operator op(Scalar a, const Tensor& b) { return fn(a, b); }
KILN_OPERATOR(+, add)
KILN_OPERATOR(-, sub)
KILN_OPERATOR(*, mul)
KILN_OPERATOR(/, div)
KILN_OPERATOR(<, lt)
KILN_OPERATOR(<=, le)
KILN_OPERATOR(>, gt)
KILN_OPERATOR(>=, ge)
KILN_OPERATOR(==, eq)
KILN_OPERATOR(!=, ne)
KILN_OPERATOR(&, logical_and)
KILN_OPERATOR(|, logical_or)
#undef KILN_OPERATOR

}  // namespace kiln
