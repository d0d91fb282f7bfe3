// The op table: every op Kiln knows is declared once here (its id) and once in
// src/op_table.cpp (name, arity, attributes, dtype and shape rule, decomposition when it
// is a composite). Nothing else in the pipeline lists ops by hand, except the reference
// kernels (sdk/eval) and the codegen expression printers of later targets.
//
// Conventions for every op:
// - A node has exactly one output tensor.
// - Attributes are positional, in the order of OpDef::attrs; dims stored in attributes are
//   already normalised to 0 <= d < rank by the caller (the frontend or the graph parser
//   via normalize_attrs).
// - Pointwise ops broadcast numpy-style and promote types like torch (see result_type).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kiln/graph/meta.h"
#include "kiln/graph/shape_env.h"

namespace kiln {

// clang-format off
enum class OpId : uint16_t {
  // Sources (no tensor inputs).
  input,        // attrs: index:int                         a graph argument (tensor or 0-d scalar)
  constant,     // attrs: value:tensor                      a tensor captured by value
  full,         // attrs: shape:symints, value:float, dtype:dtype
  arange,       // attrs: start:float, end:float, step:float, dtype:dtype   size ceil((end-start)/step)
  iota,         // attrs: shape:symints, dim:int, dtype:dtype   each element's position along dim (JAX's
                //        broadcasted_iota): arange, masks and one-hot codes over symbolic sizes
  randn,        // attrs: shape:symints, seed:int, dtype:dtype; inputs ([key]: an optional 0-d integer added to
                //        the seed, so a run-time value picks new numbers without a recompile) -> normal(0, 1):
                //        element i depends only on (seed + key, i): a Box-Muller draw from the words of
                //        philox(seed + key, i) (sdk/eval/include/kiln/eval/random.h has the exact scheme).
                //        Decomposes into philox, so every target generates it in its kernels
  rand,         // attrs and inputs as randn's -> uniform in [0, 1): philox word 0 times 2^-24, in f32 and then
                //        cast to dtype (torch.rand; dropout's masks)
  // Unary pointwise (1 input). Float-only ops (exp, log, sqrt, rsqrt, reciprocal, sin, cos,
  // tanh, sigmoid, gelu, silu, erf) promote integer/bool inputs to f32.
  neg, abs, exp, log, sqrt, rsqrt, reciprocal, sin, cos, tanh, sigmoid, relu,
  gelu,         // attrs: approximate:string ("none" | "tanh")
  silu, erf, floor, ceil, round /* half to even */, sign,
  logical_not,  // -> bool
  isnan,        // -> bool
  cast,         // attrs: dtype:dtype
  // Binary pointwise (2 inputs). Comparisons and logical ops give bool; div of integers gives f32
  // (true division); pow follows promotion.
  add, sub, mul, div, pow, maximum, minimum, eq, ne, lt, le, gt, ge, logical_and, logical_or,
  philox,       // attrs: word:int (0-3), seed:int; inputs (key, counter: integers) -> i64 in [0, 2^24): the top 24
                //        bits of word `word` of Philox4x32-10 keyed by seed + key, counter (counter, 0)
                //        (random.h): the one random primitive; rand and randn decompose into it
  // Ternary: where(cond:bool, a, b) -> promote(a, b).
  where,
  // Reductions (1 input). attrs: dims:ints (sorted, unique; empty = all dims), keepdim:bool.
  // mean/var/logsumexp of integers give f32; sum/prod of bool/i32 give i64; argmax/argmin give i64
  // and take at most one dim (empty = over the flattened tensor). var has one more attr,
  // correction:int (1 = unbiased).
  sum, mean, max, min, prod, argmax, argmin, var, logsumexp,
  // Layout (views of their input in eager mode; index arithmetic in graphs).
  reshape,      // attrs: shape:symints (fully resolved, no -1)
  permute,      // attrs: dims:ints (a permutation)
  transpose,    // attrs: dim0:int, dim1:int              composite -> permute
  expand,       // attrs: shape:symints (fully resolved; new leading dims allowed)
  squeeze,      // attrs: dims:ints (each of size 1)
  unsqueeze,    // attrs: dim:int (0 <= dim <= rank)
  slice,        // attrs: dim:int, start:int, end:int, step:int (python semantics: negatives
                //        count from the end, out of range clamps; step >= 1)
  unfold,       // attrs: dim:int, size:int, step:int (size, step >= 1; dim static, >= size) -> the windows
                //        of dim: it becomes (S - size) / step + 1 windows and a last dim of `size` is
                //        appended, y[.., i, .., k] = x[.., i * step + k, ..] (torch.Tensor.unfold): a view,
                //        whose windows overlap where step < size (convolutions' im2col)
  cat,          // attrs: dim:int; 1 or more inputs, same rank, promoted dtype
  pad,          // attrs: pads:ints (pairs, last dim first, as torch.nn.functional.pad; may be
                //        negative to crop), value:float (constant mode)
  index_select, // attrs: dim:int; inputs (x, index: 1-D i32/i64)
  gather,       // attrs: dim:int; inputs (x, index: i32/i64 of x's rank, no dim but `dim` larger than
                //        x's) -> y of index's shape, y[i] = x[i with i[dim] = index[i]] (torch.gather,
                //        ONNX GatherElements; indices outside x's dim are an error)
  scatter_add,  // attrs: dim:int; inputs (x, index: i32/i64 of x's rank, src of index's shape and x's dtype; no
                //        dim but `dim` larger than x's) -> y of x's shape: x, then y[i with i[dim] = index[i]] +=
                //        src[i] for every position i of index (torch.scatter_add, index_add with the index
                //        expanded, embedding gradients; indices outside x's dim are an error). Kernels add
                //        atomically: repeated indices sum in an unspecified order
  scatter,      // attrs: dim:int; inputs as scatter_add's -> x, then y[i with i[dim] = index[i]] = src[i]
                //        (torch.scatter, ONNX ScatterElements; where two positions write one element, which
                //        one lands is unspecified, as in torch)
  scatter_reduce, // attrs: dim:int, reduce:string ("amax", "amin" or "prod"); inputs as scatter_add's -> x,
                //        then y[i with i[dim] = index[i]] = reduce(y[..], src[i]) for every position i of
                //        index (torch.scatter_reduce with include_self; amax and amin propagate NaN as
                //        maximum and minimum do; integer products wrap). Kernels combine atomically, in
                //        an unspecified order (a product of floats may round differently per run)
  flatten,      // attrs: start_dim:int, end_dim:int       composite -> reshape
  // Composites, each with a decomposition into the primitives above.
  softmax,      // attrs: dim:int
  log_softmax,  // attrs: dim:int
  layer_norm,   // attrs: normalized_ndim:int, eps:float; inputs (x[, weight[, bias]]) over the last
                //        normalized_ndim dims; weight/bias have those dims' shape
  rms_norm,     // attrs: normalized_ndim:int, eps:float; inputs (x[, weight])
  linear,       // inputs (x[..., in], w[out, in][, b[out]]) -> x @ w^T + b
  scaled_dot_product_attention,  // attrs: scale:float; inputs (q[..., Lq, D], k[..., Lk, D],
                //        v[..., Lk, Dv][, mask]), equal batch dims -> softmax(q @ k^T * scale, -1) @ v;
                //        a mask broadcast to [..., Lq, Lk]: bool keeps where true, a float one is added
                //        to the scores (torch's attn_mask); with a mask, a row whose softmax is NaN
                //        (every key masked out) has weights 0, as torch's
  convolution,  // attrs: strides:ints, pads:ints (n begins then n ends), dilations:ints, groups:int;
                //        inputs (x[N, C, *S], w[M, C/groups, *K][, bias[M]]) over n = rank - 2 static
                //        spatial dims (N may be symbolic) -> y[N, M, *O], O = (S + pads - span) / stride + 1
                //        (cross-correlation, as torch's conv1d/2d/3d and ONNX Conv); decomposes into
                //        the windows of x (pad, unfold, permute) and one matmul per group, or
                //        where each group reads one channel (depthwise) into a sum of tap * weight
                //        (f16/bf16 taps and bias added in f32, rounded once)
  convolution_channels_last,  // attrs: as convolution; inputs (x[N, *S, C], w[M, *K, C/groups][, bias[M]])
                //        -> y[N, *O, M]: the same convolution over channels-last operands (torch's
                //        channels_last memory format, cuDNN's NHWC/KRSC); decomposes into a linear
                //        over C (1x1, unit stride), a sum of taps (depthwise), else the convolution
                //        between permutes. passes::to_channels_last puts it where a target asks.
  convolution_input_grad,  // attrs: strides, pads, dilations, groups as convolution's, then input_sizes:ints
                //        (x's spatial sizes), channels_last:bool; inputs (gy[N, M, *O], w[M, C/groups, *K])
                //        -> gx[N, C, *S]: the gradient of convolution(x, w) with respect to x given gy, the
                //        gradient of its output (a transposed convolution; channels_last: gy[N, *O, M],
                //        w[M, *K, C/groups] -> gx[N, *S, C]). Decomposes into a convolution of gy spaced
                //        out by the strides and padded, with w's kernel flipped and its channels swapped;
                //        targets with a convolution library run it there (cuDNN's backward data)
  convolution_weight_grad,  // attrs: strides, pads, dilations, groups as convolution's, then kernel:ints (w's
                //        kernel sizes), channels_last:bool; inputs (x[N, C, *S], gy[N, M, *O]) -> gw[M, C/groups,
                //        *K]: the gradient of convolution(x, w) with respect to w (channels_last: x[N, *S, C],
                //        gy[N, *O, M] -> gw[M, *K, C/groups]). Decomposes into x's windows times gy, summed
                //        over the batch and the output positions (cuDNN's backward filter where it runs)
  max_pool,     // attrs: kernel:ints, strides:ints, pads:ints (n begins then n ends), dilations:ints,
                //        ceil_mode:bool; inputs (x[N, C, *S]) over n = rank - 2 static spatial dims -> the
                //        max of each window (pads never win); as torch's max_pool1d/2d/3d and ONNX MaxPool
  avg_pool,     // attrs: as max_pool, then count_include_pad:bool -> the mean of each window, over the
                //        elements inside x (or inside x and its explicit pads with count_include_pad;
                //        never over what ceil_mode adds); torch's avg_pool1d/2d/3d and ONNX AveragePool
  batch_norm,   // attrs: eps:float; inputs (x[N, C, *], mean[C], var[C][, weight[C][, bias[C]]]) ->
                //        (x - mean) / sqrt(var + eps) * weight + bias per channel (inference: the
                //        running statistics are inputs)
  cumsum,       // attrs: dim:int, exclusive:bool, reverse:bool -> running sums along dim (torch.cumsum;
                //        ONNX CumSum's exclusive and reverse); integers and bool sum to i64. Decomposes into
                //        sums over blocks of 64 masked by a triangle made from iotas, then the blocks' running
                //        totals (O(n * 64) along dim; a symbolic dim is one block, O(n^2))
  cumprod,      // attrs: dim:int, exclusive:bool, reverse:bool -> running products along dim (torch.cumprod;
                //        exclusive and reverse as cumsum's); integers and bool multiply in i64. Decomposes as
                //        cumsum's, with products
  sort,         // attrs: dim:int, descending:bool -> x's values along dim in order (torch.sort, stable: equal
                //        values keep their order; NaN above every number). Decomposes into a bitonic sorting
                //        network along a static dim (O(n log^2 n) compares, log^2 n kernels), a counting sort
                //        along a symbolic one (each element's rank counted: O(n^2) compares, two kernels)
  argsort,      // attrs: as sort's -> i64 positions along dim of sort's values (torch.argsort(stable=True))
  tril, triu,   // attrs: diagonal:int; inputs (x[..., R, C]) -> x where col - row <= diagonal (tril) or
                //        >= diagonal (triu), else 0 (torch.tril/triu, ONNX Trilu); R and C may be symbolic
  group_norm,   // attrs: groups:int, eps:float; inputs (x[N, C, *][, weight[C][, bias[C]]]): the C channels
                //        in `groups` groups, each normalised over its channels and the spatial dims
                //        (instance norm: groups = C)
  // Linear algebra.
  matmul,       // numpy matmul: 1-D operands promoted and squeezed, batch dims broadcast
  // User ops.
  custom,       // attrs: name:string, version:string, config:string; any inputs -> what the custom op
                //        registered under `name` (kiln/graph/custom_ops.h) gives: its shape rule and its
                //        host kernel, given `config`. Opaque to the compiler: every target runs it alone,
                //        on the host. A graph naming an op this process has not registered, or registered
                //        at another version, is an error where it is read or bound
};
// clang-format on
inline constexpr int kNumOps = static_cast<int>(OpId::custom) + 1;

// scatter: ops that write at positions a tensor gives (scatter_add): neither views nor pointwise.
// custom: a user's op, run by its own host kernel (custom_ops.h).
enum class OpCategory : uint8_t { source, unary, binary, ternary, reduction, layout, composite, matmul, scatter, custom };

// A tensor value stored in a `constant` node.
struct ConstantData {
  DType dtype = DType::f32;
  std::vector<int64_t> sizes;
  std::vector<std::byte> bytes;  // contiguous, little-endian
  bool operator==(const ConstantData&) const = default;
};

enum class AttrKind : uint8_t { int_, float_, bool_, ints, symints, dtype, string, tensor };
using AttrValue = std::variant<int64_t, double, bool, std::vector<int64_t>, std::vector<SymInt>, DType,
                               std::string, std::shared_ptr<const ConstantData>>;
std::string_view attr_kind_name(AttrKind k);
AttrKind attr_kind_of(const AttrValue& v);

// Attribute values in the order of the op's AttrSpecs; typed accessors throw on misuse.
struct Attrs {
  std::vector<AttrValue> values;

  Attrs() = default;
  Attrs(std::initializer_list<AttrValue> v) : values(v) {}
  size_t size() const { return values.size(); }
  int64_t i(size_t k) const;
  double f(size_t k) const;
  bool b(size_t k) const;
  const std::vector<int64_t>& ints(size_t k) const;
  const std::vector<SymInt>& symints(size_t k) const;
  DType dtype(size_t k) const;
  const std::string& s(size_t k) const;
  const ConstantData& tensor(size_t k) const;
  // Doubles compare bit for bit (0.0 and -0.0 differ: x + -0.0 keeps -0.0), except that
  // every NaN equals every NaN, so a graph holding one still equals itself.
  bool operator==(const Attrs& o) const;
  uint64_t hash() const;  // equal Attrs hash alike
};

struct AttrSpec {
  std::string_view name;
  AttrKind kind;
};

class Graph;
using NodeId = int32_t;

// What a shape rule sees.
struct InferContext {
  OpId op;
  std::span<const TensorMeta* const> inputs;
  const Attrs& attrs;
  ShapeEnv& shapes;
};
using InferFn = TensorMeta (*)(const InferContext&);
// Appends primitives computing the composite to `g`; returns the node holding the result.
using DecomposeFn = NodeId (*)(Graph& g, std::span<const NodeId> inputs, const Attrs& attrs);

// What a derivative rule sees: the node's inputs and output (ids in the graph the rule appends
// to) and `grad`, the gradient of the differentiated value with respect to the output.
struct GradContext {
  OpId op;
  std::span<const NodeId> inputs;
  NodeId output;
  NodeId grad;
  const Attrs& attrs;
};
// Appends nodes computing the gradient with respect to each input (a vector-Jacobian product,
// as torch's derivatives.yaml and JAX's transpose rules): one id per input, -1 where the input
// gets none (an index, a condition) or its gradient is zero (floor, sign). A gradient may keep
// the shape the input was broadcast to and any floating dtype: sdk/autodiff sums it to the
// input's shape and casts it to the input's dtype.
using GradFn = std::vector<NodeId> (*)(Graph& g, const GradContext& c);

struct OpDef {
  OpId id;
  std::string_view name;
  OpCategory category;
  int min_inputs;
  int max_inputs;  // -1: any number (cat)
  std::vector<AttrSpec> attrs;
  InferFn infer;
  DecomposeFn decompose = nullptr;  // set for composites
  // The derivative rule (src/derivatives.cpp). A composite without one is differentiated
  // through its decomposition; ops of integer or bool outputs have none.
  GradFn grad = nullptr;
};


const OpDef& op_def(OpId op);
std::string_view op_name(OpId op);
std::optional<OpId> find_op(std::string_view name);
std::span<const OpDef> all_ops();

// Whether a convolution of weight w[M, C/groups, *K] decomposes into a sum over its taps (each
// group reads one input channel, at most 49 taps) rather than im2col and a matmul: a target
// with a convolution library of its own leaves these to the fused kernel.
bool convolution_folds_taps(std::span<const SymInt> w_sizes);

// Whether a convolution's windows tile its input: every kernel dim equals its stride, some is
// over 1, no pads, no dilation, one group, static spatial sizes (the patch embeddings of ViT,
// Swin and ConvNeXt, ConvNeXt's downsampling). Such a convolution is one gemm over x's patches,
// which a reshape and a permute of x give (the rows past the last whole window cropped): one
// copy of x, then the gemm and its epilogues (a target with a convolution library leaves it
// these where its own kernels do worse: schedule::Target::runs_convolution). x_spatial and
// w_sizes in channels-first order (w[M, C/groups, *K]).
bool convolution_tiles_input(const Attrs& a, std::span<const SymInt> x_spatial, std::span<const SymInt> w_sizes);

// Which operand a convolution kernel computes from the other two (plan::PlanConvolution,
// schedule::Convolution): y = conv(x, w) (the forward), x's gradient from y's and w
// (convolution_input_grad: the buffer x holds gx, y holds gy) or w's from x and y's
// (convolution_weight_grad).
enum class ConvolutionComputes { y, x, w };
std::string_view convolution_computes_name(ConvolutionComputes c);  // "y", "x", "w"

// How scatter_reduce combines a src value into the element it reaches, from its `reduce` attribute
// ("amax", "amin", "prod"); std::nullopt for any other string (op_table's check reports it).
enum class ScatterReduction { amax, amin, prod };
std::optional<ScatterReduction> parse_scatter_reduction(std::string_view reduce);

// A channels-last shape [N, *S, C] (a weight [M, *K, C/groups]) in channels-first order
// [N, C, *S], and back.
SymShape channels_first(const SymShape& s);
SymShape channels_last(const SymShape& s);

// The dtype pointwise ops compute in, torch-style: dimensioned operands dominate 0-d ones
// unless a 0-d operand is of a higher category.
DType result_type(std::span<const TensorMeta* const> operands);
// Numpy broadcasting of two shapes; symbolic sizes are compared through `shapes`.
SymShape broadcast_shapes(std::span<const SymInt> a, std::span<const SymInt> b, ShapeEnv& shapes,
                          std::string_view op);

}  // namespace kiln
