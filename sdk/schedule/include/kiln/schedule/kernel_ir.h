// The kernel IR: what one fused kernel computes, in a form every target prints.
//
// A Kernel is one loop nest over an iteration domain: `domain` extents (SymInts), the first
// `num_outer` of them independent ("outer": targets split them over threads), the rest reduced
// ("inner"; none for a pointwise kernel). Its body is a list of scalar SSA instructions:
// loads whose index is affine in the loop variables (views never become kernels: lowering folds
// reshape/permute/expand/slice/squeeze into load indices), constants, symbolic sizes, pointwise
// ops of the op table, and reductions over all inner dims. Stores write values back, affinely.
// A load may also be masked (pad, cat: where a bool value is false it reads nothing and yields
// 0) and gathered (index_select, gather: an i64 value adds an element offset to its affine index).
// Targets choose tiling, threads and vector width; they never change what is computed.
//
// Four kinds of kernels do more than the loop nest: a matmul kernel first multiplies its
// operands (GEMM) into a buffer that its body then reads as an epilogue, row block by row block;
// an attention kernel computes softmax(q k^T * scale) v whole, for targets that print a fused
// kernel for it (Target::fused_attention); a convolution kernel convolves whole, for targets
// that run a library's convolutions (Target::convolution); a reference kernel runs one op on
// the reference interpreter (ops no codegen handles yet).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/graph/graph.h"

namespace kiln::schedule {

// offset + sum_k coeffs[k] * i_k over the kernel's loop variables (one coefficient per
// domain dim; zero where the index does not depend on that variable).
struct Affine {
  SymInt offset = 0;
  std::vector<SymInt> coeffs;
  bool operator==(const Affine&) const = default;
  bool depends_on(size_t var) const { return !(coeffs[var] == 0); }
  std::string str() const;  // "s0*i0 + i1 + 3"
};

enum class InstrKind : uint8_t {
  load,      // buffer, index: the element of `buffer` at `index`, as `dtype`; args: the mask
             // (if `masked`) then the gather offset (if `gathered`), see Instr::mask()
  constant,  // value (dtype says how to read it)
  size,      // size: a symbolic size's value (i64)
  index,     // index: the affine expression's value (i64), e.g. arange's position
  pointwise, // op, args, attrs: one pointwise op of the op table (unary, binary, where, cast)
  reduce,    // reduce, args[0]: folds args[0] over every inner dim; one value per outer point
};

enum class ReduceKind : uint8_t { sum, prod, max, min, argmax, argmin };
std::string_view reduce_kind_name(ReduceKind k);

struct Instr {
  InstrKind kind = InstrKind::constant;
  DType dtype = DType::f32;  // the value's dtype, as the graph says
  OpId op = OpId::input;     // pointwise
  std::vector<int32_t> args;
  Attrs attrs;               // pointwise (cast's dtype, gelu's approximate)
  int32_t buffer = -1;       // load
  Affine index;              // load, index
  double value = 0.0;        // constant
  SymInt size = 0;           // size
  ReduceKind reduce = ReduceKind::sum;
  // Loads: `masked` makes args[0] a bool value; where it is false the load touches no memory
  // and yields 0. `gathered` makes args.back() an i64 value added to the affine index (the
  // lowering guarantees it is in bounds wherever the mask holds).
  bool masked = false, gathered = false;
  int32_t mask() const { return masked ? args.front() : -1; }
  int32_t gather_offset() const { return gathered ? args.back() : -1; }
  // A load whose address is its affine index alone (what vector loads and in-place rules need).
  bool plain_load() const { return kind == InstrKind::load && !masked && !gathered; }
  // Filled by finish_kernel(): whether the value varies over inner dims, and the pass (loop
  // over the inner dims) where it is computed: 0 unless it depends on a reduction's result.
  bool inner = false;
  int32_t pass = 0;
};

// What a scatter's store does with the element it reaches: overwrites it, or combines its value
// with the element's, atomically (add: scatter_add; max, min, mul: scatter_reduce's amax, amin and
// prod, with the maximum/minimum/mul ops' own semantics: NaN kept, integer products wrapped).
enum class Combine : uint8_t { none, add, max, min, mul };
// The binary op a combine applies (maximum, minimum, mul, add); none has none.
OpId combine_op(Combine c);

struct Store {
  int32_t buffer = -1;
  Affine index;
  int32_t value = -1;  // instruction
  // A scatter's store (scatter, scatter_add, scatter_reduce): `offset`, an i64 value, is added to
  // the affine index (the lowering keeps it inside the buffer), and with a `combine` the value is
  // combined with what the element holds, atomically (several points of the domain may reach one
  // element; the buffer holds its initial value from an earlier kernel). Only in pointwise
  // kernels; targets store such values one at a time, never as vectors.
  int32_t offset = -1;
  Combine combine = Combine::none;
  bool plain() const { return offset < 0 && combine == Combine::none; }
};

// C[b] = A[b] @ B[b] for every batch index b, row-major operand views given by strides.
struct Gemm {
  int32_t a = -1, b = -1, c = -1;   // buffers, all of `dtype`
  DType dtype = DType::f32;         // f32 or f64
  SymInt m = 0, n = 0, k = 0;
  SymShape batch;                   // batch extents (the output's leading dims)
  SymShape a_batch_strides, b_batch_strides;  // element strides per batch dim (0: broadcast)
  SymInt a_offset = 0, b_offset = 0;
  SymInt a_row_stride = 0, a_col_stride = 0;  // over (m, k)
  SymInt b_row_stride = 0, b_col_stride = 0;  // over (k, n)
  // The last batch dim is more rows of the same product: B broadcasts over it and A's rows run
  // on along it (row-major A, batch stride = m x row stride); C is contiguous, so [.., b, m, n]
  // is [.., b * m, n]. fold_last_batch() makes it so. A batch of small gemms sharing weights (a
  // linear layer over [batch, seq, d]) runs at a fraction of one big gemm's speed.
  bool last_batch_is_rows() const;
  void fold_last_batch();
  // Batch dims of size 1 go, and adjacent batch dims both operands step through at one stride
  // become one batch dim (C is contiguous), so a library's strided batch covers them in one call.
  void merge_batch_dims();
};

// out[b] = softmax(q[b] @ k[b]^T * scale, -1) @ v[b] for every batch index b. q, k and v are
// strided views of buffers with a unit stride along the head dim (given by an element offset,
// one stride per batch dim and a row stride); out is contiguous [batch..., lq, dv]. The kernel
// accumulates in f32 and never stores the [lq, lk] scores.
struct Attention {
  int32_t q = -1, k = -1, v = -1, out = -1;  // buffers, all of `dtype`
  DType dtype = DType::bf16;                 // f16 or bf16
  SymShape batch;
  SymInt lq = 0, lk = 0;                     // query and key rows
  int64_t d = 0, dv = 0;                     // head dims of q/k and of v (static)
  double scale = 1.0;
  struct Operand {
    SymInt offset = 0;
    SymShape batch_strides;
    SymInt row_stride = 0;
    bool operator==(const Operand&) const = default;
  };
  Operand q_view, k_view, v_view;
  // The optional mask (torch's attn_mask), broadcast to [batch..., lq, lk]: a bool one keeps the
  // scores where true, one of `dtype` is added to the scaled scores; a row whose softmax is NaN
  // (every key masked out) is written as zeros. mask_view's batch and row strides are 0 along the
  // dims it is broadcast over, as is mask_key_stride.
  int32_t mask = -1;
  DType mask_dtype = DType::bool_;
  Operand mask_view;
  SymInt mask_key_stride = 0;
  // The mask hides every key after its query's row (a decoder's causal mask, found so by
  // evaluating it: detail::causal_mask), so a kernel may skip the keys after a block's last query
  // row. Masked additive entries are -inf or the dtype's lowest value and each row keeps a key
  // above it: skipping them gives the same softmax unless a row's scores span more than that
  // value's magnitude.
  bool causal = false;
};

// y = conv(x, w) (the op table's convolution without a bias) over n spatial dims, or one of its
// gradients (`computes`: x's from y's and w, w's from x and y's, the buffers then holding the
// gradients), for targets
// that run it through a library of their own (Target::convolution): x [N, C, *S] and w
// [M, C/groups, *K] are whole contiguous buffers, y a contiguous [N, M, *O] (or all three
// channels last: [N, *S, C], [M, *K, C/groups], [N, *O, M]). Only the batch may be
// symbolic. The scheduler gives such a target symmetric pads (an asymmetric pad is a pad op
// before it) and the bias as an add after it.
struct Convolution {
  int32_t x = -1, w = -1, y = -1;  // buffers, all of `dtype`
  DType dtype = DType::f32;        // f32, f16 or bf16
  SymShape x_sizes;                // [N, C, *S] (channels last: [N, *S, C])
  std::vector<int64_t> w_sizes;    // [M, C/groups, *K] (channels last: [M, *K, C/groups])
  std::vector<int64_t> strides, pads, dilations;  // per spatial dim; pads: n begins, then n ends
  int64_t groups = 1;
  bool channels_last = false;      // convolution_channels_last: x, w and y channels last
  ConvolutionComputes computes = ConvolutionComputes::y;  // the buffer written; the other two are read
  // The buffers read and the one written.
  std::array<int32_t, 2> operands() const;
  int32_t result() const;
  bool operator==(const Convolution&) const = default;
};

// A reference kernel: one graph op run by the reference interpreter on whole buffers.
struct ReferenceOp {
  OpId op = OpId::input;
  Attrs attrs;
  std::vector<int32_t> inputs;  // buffers
  int32_t output = -1;
};

enum class KernelKind : uint8_t { pointwise, reduction, matmul, attention, convolution, reference };
std::string_view kernel_kind_name(KernelKind k);

struct Kernel {
  std::string name;
  KernelKind kind = KernelKind::pointwise;
  SymShape domain;
  int32_t num_outer = 0;
  std::vector<Instr> instrs;
  std::vector<Store> stores;
  std::optional<Gemm> gemm;            // matmul kernels: runs before the body, per row block
  std::optional<Attention> attention;   // attention kernels: the whole kernel (no body)
  std::optional<Convolution> convolution;  // convolution kernels: the whole kernel (no body)
  std::optional<ReferenceOp> reference;
  std::vector<NodeId> provenance;      // graph nodes this kernel computes (sorted)

  int32_t num_passes() const;          // loops over the inner dims (0 for pointwise)
  // A store made inside the loops over the inner dims (in pass value.pass): its value or its
  // index varies over them (a per-row value broadcast back along the row is stored there too).
  bool store_is_inner(const Store& s) const;
  SymInt outer_extent() const;         // product of the outer extents
  std::vector<int32_t> reads() const;  // buffers loaded (gemm operands, accumulated into), sorted, unique
  std::vector<int32_t> writes() const; // buffers stored (and the gemm's c), sorted, unique
  std::string str() const;             // readable listing
};

// Computes Instr::inner and Instr::pass, and checks the kernel is well formed (argument ids
// precede their users, loads and stores stay within the domain's variables, reductions are
// not nested inside one pass); throws kiln::Error naming the kernel otherwise.
void finish_kernel(Kernel& k);

// What recomputing one op costs, in the units of the fusion rule: 1 per op, 4 for exp, log,
// sin, cos, tanh, erf, pow, sigmoid, gelu and silu. The scheduler decides with it which values
// to store rather than recompute in each kernel; targets decide with it which values to keep
// between passes of one kernel.
int recompute_cost(OpId op);

// Inner values that one pass computes and a later pass reads again (softmax's exp(x - max):
// summed in pass 1, divided by the sum in pass 2) whose recomputation from the loads costs at
// least `min_cost`, in instruction order. A target may keep them from the pass that computes
// them (the CPU in a row scratch, a GPU in registers) instead of computing them again; values
// below the cost are recomputed, and whatever they need from earlier passes is looked at in
// turn. Needs finish_kernel().
std::vector<int32_t> values_reused_across_passes(const Kernel& k, int min_cost);

// Merges adjacent outer dims (and adjacent inner dims) whenever every affine index of the
// kernel sees them as one (coeff[d] == coeff[d+1] * extent[d+1]), so a contiguous [M, N]
// pointwise kernel becomes one loop of M*N. Never changes what is computed.
void collapse_dims(Kernel& k);

// Orders a pointwise kernel's dims so that its first store walks memory in order (the dim the
// store steps through at the smallest stride last), then collapses them: a GPU gives adjacent
// threads adjacent points, so they write adjacent elements. A kernel whose domain came from
// another's loop order (a reduction's [channels | rows] over a channels-last tensor) would
// otherwise write one element per memory transaction. Static strides only; never changes what
// is computed.
void order_dims_for_stores(Kernel& k);

}  // namespace kiln::schedule
