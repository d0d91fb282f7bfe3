// Internal to sdk/schedule: what lowering (lower.cpp) and fusion (fuse.cpp) share.
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kiln/schedule/schedule.h"

namespace kiln::schedule::detail {

// One affine index per dim of a node: where, in the kernel's loop variables, its element is.
using Map = std::vector<Affine>;

// Lowering cannot express something the fusion asked for; fusion turns it into a refusal.
struct Refusal : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The iteration domain of a kernel, seen from the graph: the shape of the nodes it computes
// in full (`full`, in their dim order) and which loop variable walks each of its dims.
struct Domain {
  SymShape full;
  std::vector<int32_t> var_of_dim;
  std::vector<bool> reduced;  // per full dim
  SymShape extents;           // per loop variable: outer ones first
  int32_t num_outer = 0;
  NodeId gemm = -1;           // matmul kernels: the matmul node

  static Domain pointwise(const SymShape& shape);
  // The domain of a reduction over `dims` (empty: every dim) of a tensor of shape `input`.
  static Domain reduction(const SymShape& input, const std::vector<int64_t>& dims);
  bool has_reduction() const { return static_cast<size_t>(num_outer) < extents.size(); }
  bool operator==(const Domain& o) const {
    return full == o.full && reduced == o.reduced && gemm == o.gemm;
  }
  // Where a node of `shape` computed in this domain sits: the full shape, or (reduction
  // domains) the outer shape with or without the reduced dims kept as 1. nullopt otherwise.
  std::optional<Map> natural_map(const SymShape& shape) const;
};

Affine unit(size_t rank, int32_t var);
Affine zero(size_t rank);
// sum_d strides[d] * map[d] + offset
Affine compose(const Map& map, const SymShape& strides, const SymInt& offset, size_t rank);

// A strided view of a buffer: where a node's elements live when it is a view of a buffer node.
struct Layout {
  NodeId base = -1;  // the node owning the buffer
  SymInt offset = 0;
  SymShape strides;
};

// The strides `new_sizes` get when viewing a tensor of `sizes`/`strides` (torch's rule), or
// nullopt when no strides express that reshape.
std::optional<SymShape> reshape_strides(const SymShape& sizes, const SymShape& strides, const SymShape& new_sizes,
                                        const ShapeEnv& env);
// True when a reshape only inserts or removes dims of size 1.
bool reshape_is_unsqueeze(const SymShape& from, const SymShape& to);

// What every kernel of one schedule sees.
struct Context {
  const Graph& g;
  std::vector<bool> source;         // input and constant nodes (their own buffers)
  std::vector<bool> realized;       // nodes stored to a buffer by some kernel (sources included)
  std::vector<int32_t> buffer_of;   // buffer of each source or realized node
  std::vector<Buffer> buffers;

  // The node's elements as a strided view of a source or realized node outside `members`,
  // through view ops; nullopt when some node on the way is computed.
  std::optional<Layout> layout(NodeId n, const std::vector<bool>* members) const;
};

// Builds one kernel: the members (realized nodes computed here) over a domain; stores the
// ones asked for; everything else is loaded from buffers or computed inline.
class KernelBuilder {
 public:
  KernelBuilder(const Context& ctx, Domain domain, const std::vector<NodeId>& members, std::string name);
  // Computes member `n` at its natural place in the domain and stores it into `buffer`.
  void store(NodeId n, int32_t buffer);
  // The gemm of a matmul domain, writing into `c`.
  void set_gemm(int32_t c);
  // scatter_add (scatter) `n` over a domain of its src's shape: adds (writes) each src value into
  // `buffer`, which holds x by then, at the position its index gives.
  void scatter(NodeId n, int32_t buffer);
  Kernel finish();

 private:
  const Context& ctx_;
  Domain dom_;
  std::vector<bool> member_;
  Kernel k_;
  std::map<NodeId, std::vector<std::pair<Map, int32_t>>> memo_;
  std::map<NodeId, int32_t> reductions_;

  int32_t emit(NodeId n, const Map& map);
  int32_t emit_node(NodeId n, const Map& map);
  int32_t emit_reduction(NodeId n, const Map& map);
  int32_t add(Instr in);
  int32_t load(NodeId base, const Layout& layout, const Map& map, DType dtype);
  // A load through `layout` that reads only where `mask` (a bool value, -1: everywhere) holds,
  // at `map` plus the element offset `offset` (an i64 value, -1: none).
  int32_t load_where(const Layout& layout, const Map& map, DType dtype, int32_t mask, int32_t offset);
  // The layout an op reading its input at other positions (pad, cat, index_select, gather) loads through.
  Layout layout_of_input(NodeId reader, NodeId input) const;
  int32_t index_value(const Affine& a);
  int32_t size_value(const SymInt& s);
  int32_t emit_pad(NodeId n, const Map& map);
  int32_t emit_cat(NodeId n, const Map& map);
  int32_t emit_gathering(NodeId n, const Map& map);
  // An index read for a gathering or scattering op `node` at `map`, as an i64 element offset
  // along its dim of a buffer whose stride there is `stride`: clamped into the dim unless the
  // index is a constant inside it.
  int32_t index_offset(const Node& node, NodeId n, const Map& map, const SymInt& stride);
  int32_t constant(double v, DType t);
  int32_t pointwise(OpId op, DType t, std::vector<int32_t> args, Attrs attrs = {});
  size_t rank() const { return dom_.extents.size(); }
};

// Graph preparation before scheduling: composites decomposed, matmul operands and results in f32
// (f16/bf16 ones kept in their dtype when the target multiplies them so).
// `checks` receives one message per check output prepare() appends (Schedule::checks).
Graph prepare(const Graph& g, const Target& target, std::vector<std::string>& checks);

// Whether attention mask `mask` (a node of g) hides every key after its query's row for queries
// [0, lq) and keys [0, lk): computed from no graph input, static, evaluated and checked
// (causal.cpp).
bool causal_mask(const Graph& g, NodeId mask, const SymInt& lq, const SymInt& lk);

// index_select and gather read x at positions an index tensor gives along one dim.
inline bool gathers(OpId op) { return op == OpId::index_select || op == OpId::gather; }
// Whether node `id` is one value everywhere: a `full`, or views and casts of one (the zeros a
// slice's gradient is concatenated with). A cat computes such an input in place, at no cost,
// instead of reading it from a buffer filled by a kernel of its own.
inline bool fills(const Graph& g, NodeId id) {
  for (;;) {
    const Node& n = g.node(id);
    if (n.op == OpId::full) return true;
    const bool view = op_def(n.op).category == OpCategory::layout && n.op != OpId::cat && n.op != OpId::pad && !gathers(n.op);
    if (!(view || n.op == OpId::cast) || n.inputs.size() != 1) return false;
    id = n.inputs[0];
  }
}
// Ops whose second input is an index into their first input's dim `dim` (attribute 0).
inline bool indexes(OpId op) { return gathers(op) || op_def(op).category == OpCategory::scatter; }
// Either convolution op (channels first or last): a kernel of its own where the target runs it.
inline bool convolves(OpId op) {
  return op == OpId::convolution || op == OpId::convolution_channels_last || op == OpId::convolution_input_grad ||
         op == OpId::convolution_weight_grad;
}
// Whether a convolving op is laid out channels last.
inline bool convolves_channels_last(const Node& n) {
  return n.op == OpId::convolution_channels_last ||
         ((n.op == OpId::convolution_input_grad || n.op == OpId::convolution_weight_grad) && n.attrs.b(5));
}
// A forward convolution, either layout, whose windows tile its input (a patch embedding:
// convolution_tiles_input over its channels-first sizes).
bool forward_convolution_tiles_input(const Graph& g, const Node& n);
// A gathering (or scattering) op whose index lies inside the selected dim for every size the plan
// serves, as far as its graph shows (a constant, or arithmetic over iotas and fulls clamped into
// range, as max pooling's gradient computes its windows): a plain gathering load (store). Any other index with a static selected dim is read at run
// time, clamped into the dim, and counted by a check when it lies outside (prepare.cpp); a
// symbolic selected dim leaves the op to the reference kernel.
bool index_in_range(const Graph& g, const Node& n);
bool index_checked_at_run_time(const Graph& g, const Node& n);

// A view that reads its whole base buffer in order: offset 0, row-major strides (size-1 dims
// may have any). What a convolution kernel's operands must be (prepare.cpp, fuse.cpp).
bool contiguous_from_start(const TensorMeta& m, const Layout& l);

// Large full reductions -> two kernels (partials in parallel, then the fold and the epilogue).
void split_reductions(Schedule& s, const Target& target);

// Buffer planning: keeps the buffers kernels use, marks outputs, assigns intermediates to slots.
void plan_buffers(Schedule& s);

}  // namespace kiln::schedule::detail
