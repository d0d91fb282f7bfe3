// Fusion: which nodes are stored (realized), and which realized nodes share a kernel.
//
// 1. Realize: reductions, matmuls, graph outputs, ops only the reference runs (and their
//    inputs), operands a gemm cannot read as strided views, inputs of reshapes that no strides
//    express, inputs of pad, cat and gathers that no strides express (the value under their
//    views where the views one op reads cover at least half of it), and pointwise values used
//    more than once whose recomputation would cost more than storing them (inline cost >
//    recompute budget: 4 ops, 16 with aggressive_fusion; exp, log,
//    sin, cos, tanh, erf, pow, sigmoid, gelu and silu count 4; a view so used stores the value
//    under it). Everything else is inline.
// 2. Group realized nodes in topological order: each joins the latest kernel it reads from that
//    accepts it (same domain, or a reduction's outer/inner shape, or a matmul's output shape for
//    an epilogue; nothing it reads may come from a later kernel; the kernel stays under
//    max_fusion_size; lowering must succeed; a large value that is not an output does not
//    join a kernel ending more than 64 nodes earlier), else starts its own.
// 3. Horizontal: kernels over the same domain that read a common buffer merge when neither
//    depends on the other (and not across more than 64 nodes for such a value).
// Every decision and refusal is logged under KILN_LOGS=fusion.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include "internal.h"
#include "kiln/config/config.h"
#include "kiln/config/log.h"
#include "kiln/graph/error.h"

namespace kiln::schedule {

Options Options::from_config() {
  Options o;
  o.max_fusion_size = config::get<int64_t>("fusion.max_fusion_size");
  o.epilogue_fusion = config::get<bool>("fusion.epilogue_fusion");
  o.aggressive_fusion = config::get<bool>("fusion.aggressive_fusion");
  o.horizontal = config::get<bool>("fusion.horizontal");
  return o;
}

std::string_view buffer_kind_name(BufferKind k) {
  switch (k) {
    case BufferKind::input: return "input";
    case BufferKind::constant: return "constant";
    case BufferKind::output: return "output";
    case BufferKind::intermediate: return "intermediate";
  }
  return "?";
}

SymInt Buffer::bytes() const { return shape_numel(sizes) * SymInt(dtype_size(dtype)); }

std::string Schedule::str() const {
  std::ostringstream os;
  for (const Buffer& b : buffers) {
    os << "b" << b.id << ": " << buffer_kind_name(b.kind) << " " << dtype_name(b.dtype) << shape_str(b.sizes);
    if (b.node >= 0) os << " %" << b.node;
    if (b.slot >= 0) os << " slot " << b.slot;
    os << "\n";
  }
  for (const Kernel& k : kernels) os << k.str();
  for (size_t c = 0; c < checks.size(); ++c)
    os << "check b" << outputs[outputs.size() - checks.size() + c] << " == 0: " << checks[c] << "\n";
  os << "peak intermediate bytes: " << peak_intermediate_bytes << "\n";
  return os.str();
}

namespace detail {

namespace {

// The interval every element of node `id` lies in, where the graph says so: constants, fulls and
// iotas, through views, casts, floor, maximum, minimum and interval arithmetic (add, sub, mul,
// division by a positive number). nullopt for anything else (a value read from an input).
std::optional<std::pair<double, double>> value_range(const Graph& g, NodeId id, int depth = 0) {
  using Range = std::pair<double, double>;
  const Node& n = g.node(id);
  if (depth > 64) return std::nullopt;
  auto of = [&](size_t i) { return value_range(g, n.inputs[i], depth + 1); };
  switch (n.op) {
    case OpId::full: return Range{n.attrs.f(1), n.attrs.f(1)};
    case OpId::iota: {
      const SymInt& size = n.attrs.symints(0)[static_cast<size_t>(n.attrs.i(1))];
      if (!size.is_static() || size.hint() < 1) return std::nullopt;
      return Range{0.0, static_cast<double>(size.hint() - 1)};
    }
    case OpId::constant: {
      const ConstantData& c = n.attrs.tensor(0);
      const size_t count = c.bytes.size() / dtype_size(c.dtype);
      if (count == 0 || (c.dtype != DType::i64 && c.dtype != DType::i32)) return std::nullopt;
      Range r{std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()};
      for (size_t i = 0; i < count; ++i) {
        int64_t v = 0;
        if (c.dtype == DType::i64) {
          std::memcpy(&v, c.bytes.data() + 8 * i, 8);
        } else {
          int32_t w = 0;
          std::memcpy(&w, c.bytes.data() + 4 * i, 4);
          v = w;
        }
        r = {std::min(r.first, static_cast<double>(v)), std::max(r.second, static_cast<double>(v))};
      }
      return r;
    }
    case OpId::reshape: case OpId::expand: case OpId::permute: case OpId::squeeze: case OpId::unsqueeze:
    case OpId::slice: case OpId::floor: case OpId::cast: {
      // cast: to an integer truncates towards zero, which keeps an interval's order.
      const std::optional<Range> r = of(0);
      if (!r) return std::nullopt;
      if (n.op == OpId::floor) return Range{std::floor(r->first), std::floor(r->second)};
      if (n.op == OpId::cast && !is_floating(n.meta.dtype)) return Range{std::trunc(r->first), std::trunc(r->second)};
      return r;
    }
    case OpId::maximum: case OpId::minimum: case OpId::add: case OpId::sub: case OpId::mul: case OpId::div: {
      const std::optional<Range> a = of(0), b = of(1);
      if (!a || !b) return std::nullopt;
      Range r;
      switch (n.op) {
        case OpId::maximum: return Range{std::max(a->first, b->first), std::max(a->second, b->second)};
        case OpId::minimum: return Range{std::min(a->first, b->first), std::min(a->second, b->second)};
        case OpId::add: r = {a->first + b->first, a->second + b->second}; break;
        case OpId::sub: r = {a->first - b->second, a->second - b->first}; break;
        case OpId::mul: {
          const double c[] = {a->first * b->first, a->first * b->second, a->second * b->first, a->second * b->second};
          r = {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
          break;
        }
        default:  // div: by a positive interval only
          if (!(b->first > 0)) return std::nullopt;
          r = {std::min(a->first / b->first, a->first / b->second), std::max(a->second / b->first, a->second / b->second)};
      }
      // The op rounds in its own dtype: widen by its precision (a floor after it may step once).
      const double eps = n.meta.dtype == DType::f64 ? 0x1p-52 : n.meta.dtype == DType::f32 ? 0x1p-23
                         : n.meta.dtype == DType::f16 ? 0x1p-10 : n.meta.dtype == DType::bf16 ? 0x1p-7 : 0.0;
      return Range{r.first - eps * std::abs(r.first), r.second + eps * std::abs(r.second)};
    }
    default: return std::nullopt;
  }
}

}  // namespace

bool index_in_range(const Graph& g, const Node& n) {
  const SymInt& size = g.node(n.inputs[0]).meta.sizes[static_cast<size_t>(n.attrs.i(0))];
  if (!size.is_static()) return false;
  const std::optional<std::pair<double, double>> r = value_range(g, n.inputs[1]);
  return r && r->first >= 0 && r->second <= static_cast<double>(size.hint() - 1);
}

bool contiguous_from_start(const TensorMeta& m, const Layout& l) {
  if (!(l.offset == 0)) return false;
  SymInt expect = 1;
  for (size_t d = m.sizes.size(); d-- > 0;) {
    if (!(m.sizes[d] == 1) && !(l.strides[d] == expect)) return false;
    expect = expect * m.sizes[d];
  }
  return true;
}

bool index_checked_at_run_time(const Graph& g, const Node& n) {
  return indexes(n.op) && !index_in_range(g, n) &&
         g.node(n.inputs[0]).meta.sizes[static_cast<size_t>(n.attrs.i(0))].is_static();
}

namespace {

bool is_reference_op(const Graph& g, const Node& n, const Target& target) {
  switch (n.op) {
    case OpId::custom: return true;  // a user's host kernel (kiln/graph/custom_ops.h)
    // Only along a symbolic dim: there is no constant bound to clamp a run-time index to.
    case OpId::index_select:
    case OpId::gather: return !g.node(n.inputs[0]).meta.sizes[static_cast<size_t>(n.attrs.i(0))].is_static();
    case OpId::scatter:
    case OpId::scatter_add:  // (and where the target cannot combine 64-bit values atomically)
    case OpId::scatter_reduce:
      return !g.node(n.inputs[0]).meta.sizes[static_cast<size_t>(n.attrs.i(0))].is_static() ||
             (n.op != OpId::scatter && !target.atomic_64 && dtype_size(n.meta.dtype) == 8);
    case OpId::matmul: {  // the gemm is f32 or f64 (f16/bf16 where the target multiplies them);
                          // integer products stay exact on the reference
      const DType t = n.meta.dtype;
      const bool gemm_dtype = t == DType::f32 || t == DType::f64 ||
                              (target.low_precision_gemm && (t == DType::f16 || t == DType::bf16));
      return g.node(n.inputs[0]).meta.rank() < 2 || g.node(n.inputs[1]).meta.rank() < 2 || !gemm_dtype;
    }
    default: return false;
  }
}

// A gemm reads an operand in place when it is a strided view with a unit stride in one of its
// last two dims (the other being a leading dimension the BLAS accepts).
bool gemm_readable(const TensorMeta& m, const Layout& l) {
  const size_t r = m.sizes.size();
  const SymInt& rs = l.strides[r - 2];
  const SymInt& cs = l.strides[r - 1];
  return (cs == 1 && !(rs == 0)) || (rs == 1 && !(cs == 0));
}

struct Group {
  Domain dom;
  std::vector<NodeId> members;  // sorted
  bool reference = false;
  bool whole = false;  // an attention or a convolution kernel: one op, computed whole, alone
  bool scatter = false;  // scatter(_add): two kernels (its buffer set to x, then src written or added in), alone
  bool alive = true;
};

class Fuser {
 public:
  Fuser(Schedule& s, const Options& opt) : s_(s), opt_(opt), ctx_{s.graph, {}, {}, {}, {}} {}

  void run() {
    const Graph& g = s_.graph;
    const size_t n = g.size();
    ctx_.source.assign(n, false);
    ctx_.realized.assign(n, false);
    ctx_.buffer_of.assign(n, -1);
    is_output_.assign(n, false);
    for (NodeId o : g.outputs()) is_output_[static_cast<size_t>(o)] = true;
    realize();
    assign_buffers();
    frontiers();
    group();
    if (opt_.horizontal) horizontal();
    build();
  }

 private:
  Schedule& s_;
  const Options& opt_;
  Context ctx_;
  std::vector<bool> is_output_;
  std::vector<std::vector<NodeId>> frontier_;   // per realized node: realized/source nodes it reads
  std::vector<std::vector<NodeId>> consumers_;  // per realized/source node: realized nodes reading it
  std::vector<Group> groups_;
  std::vector<int32_t> group_of_;
  std::vector<int64_t> inline_depth_;  // per node: the longest chain of unrealized ops ending there
  std::vector<int64_t> kernel_depth_;  // per grouped node: ... of ops its kernel computes to reach it
  // Per attention mask (and lq, lk): whether it is causal (causal_mask evaluates it).
  mutable std::map<std::tuple<NodeId, int64_t, int64_t>, bool> causal_masks_;

  void log(std::string line) {
    KILN_LOG(fusion, line);
    s_.decisions.push_back(std::move(line));
  }
  std::string label(NodeId id) const {
    return "%" + std::to_string(id) + " (" + std::string(op_name(s_.graph.node(id).op)) + ")";
  }

  // Whether n's elements lie in memory in n's own row-major order: a stored value, a view of one
  // that keeps that order (a gemm's [N, 1, M, H*W] product read as [N, M, H, W]), or elementwise
  // ops over such values (that product plus a bias broadcast over the channels).
  bool stored_in_order(NodeId n, int depth = 0) const {
    const Graph& g = s_.graph;
    if (ctx_.realized[static_cast<size_t>(n)]) return true;
    const Node& node = g.node(n);
    if (const std::optional<Layout> l = ctx_.layout(n, nullptr)) return contiguous_from_start(node.meta, *l);
    const OpCategory cat = op_def(node.op).category;
    if (depth >= 8 || !(cat == OpCategory::unary || cat == OpCategory::binary || cat == OpCategory::ternary)) return false;
    bool full_size_input = false;
    for (NodeId i : node.inputs) {
      if (!(g.node(i).meta.sizes == node.meta.sizes)) continue;  // broadcast operands: read by index
      if (!stored_in_order(i, depth + 1)) return false;
      full_size_input = true;
    }
    return full_size_input;
  }

  // Whether a permute is of a small source (a weight) whose innermost dim it moves, read only by
  // elementwise ops and reductions that use each element they read many times (a channels-last depthwise
  // convolution reads its [C, 1, 7, 7] weight as [49, C] at every position): stored permuted,
  // each reader's loads along its fastest dim, the channels, are unit-stride (vectorised, a few
  // cache lines a warp) instead of 49 elements apart (one scalar load and one line per channel).
  // One small copy a call; gemm, attention and convolution operands read strides in place.
  bool permuted_small_source(NodeId id, const std::vector<std::vector<NodeId>>& users) const {
    const Graph& g = s_.graph;
    const Node& node = g.node(id);
    const std::optional<Layout> l = ctx_.layout(id, nullptr);
    if (node.op != OpId::permute || !l || !ctx_.source[static_cast<size_t>(l->base)]) return false;
    const SymInt numel = node.meta.numel();
    if (!numel.is_static() || numel.hint() > (int64_t{1} << 16)) return false;
    bool moved = false;  // the innermost dim of size > 1 is not the source's unit-stride one
    for (size_t d = node.meta.sizes.size(); d-- > 0;) {
      if (node.meta.sizes[d] == 1) continue;
      moved = !(l->strides[d] == 1);
      break;
    }
    if (!moved) return false;
    // Its readers, through views and elementwise ops of about its size (a cast of the weight).
    bool wide = false;
    std::vector<NodeId> todo{id};
    std::set<NodeId> seen;
    while (!todo.empty()) {
      const NodeId v = todo.back();
      todo.pop_back();
      for (NodeId u : users[static_cast<size_t>(v)]) {
        if (!seen.insert(u).second) continue;
        if (seen.size() > 4096) return false;
        const Node& r = g.node(u);
        const OpCategory cat = op_def(r.op).category;
        const bool view = cat == OpCategory::layout && r.op != OpId::cat && r.op != OpId::pad && !gathers(r.op);
        const bool elementwise = cat == OpCategory::unary || cat == OpCategory::binary || cat == OpCategory::ternary;
        if (!view && !elementwise && cat != OpCategory::reduction) return false;
        // An elementwise reader using each element of what it reads (a tap's weights) 16 times
        // or more; a reduction only reads it.
        if (elementwise && r.meta.numel().hint() >= 16 * g.node(v).meta.numel().hint()) {
          wide = true;
        } else if (view || elementwise) {
          todo.push_back(u);
        }
      }
    }
    return wide;
  }

  // Whether `base`, viewed by the chain of permutes and one-input ops from it up to `end`,
  // computes elementwise from a value of its sizes stored in its own order (stored_in_order)
  // read through a permute that the chain's permutes undo: then `end` holds the value in that
  // input's order. Only unstored elementwise nodes between base and that permute count (a
  // stored one is read as stored).
  bool reads_input_in_readers_order(NodeId base, NodeId end) const {
    const Graph& g = s_.graph;
    // The chain's permutation: end's dim i is base's dim chain[i].
    std::vector<int64_t> chain(static_cast<size_t>(g.node(base).meta.rank()));
    for (size_t i = 0; i < chain.size(); ++i) chain[i] = static_cast<int64_t>(i);
    std::vector<NodeId> path;
    for (NodeId n = end; n != base; n = g.node(n).inputs[0]) path.push_back(n);
    for (auto it = path.rbegin(); it != path.rend(); ++it) {
      const Node& n = g.node(*it);
      if (n.op == OpId::permute) {
        const std::vector<int64_t>& p = n.attrs.ints(0);
        std::vector<int64_t> next;
        for (int64_t d : p) next.push_back(chain[static_cast<size_t>(d)]);
        chain = std::move(next);
      } else if (op_def(n.op).category == OpCategory::layout || n.meta.rank() != static_cast<int64_t>(chain.size())) {
        return false;  // a reshape, expand or slice: not a reordering of the same elements
      }
    }
    bool identity = true;
    for (size_t i = 0; i < chain.size(); ++i) identity = identity && chain[i] == static_cast<int64_t>(i);
    if (identity) return false;
    const SymShape& sizes = g.node(base).meta.sizes;
    std::vector<NodeId> todo = {base};
    std::set<NodeId> seen;
    while (!todo.empty()) {
      const NodeId n = todo.back();
      todo.pop_back();
      if (!seen.insert(n).second || seen.size() > 64) continue;
      for (NodeId i : g.node(n).inputs) {
        const Node& in = g.node(i);
        if (in.op == OpId::permute && stored_in_order(in.inputs[0]) && in.meta.sizes == sizes) {
          // in's dim j is the stored value's dim p[j]; through the chain, end's dim i is the
          // stored value's dim p[chain[i]]: the stored order when that is the identity.
          const std::vector<int64_t>& p = in.attrs.ints(0);
          if (p.size() != chain.size()) continue;
          bool undone = true;
          for (size_t d = 0; d < chain.size(); ++d)
            undone = undone && p[static_cast<size_t>(chain[d])] == static_cast<int64_t>(d);
          if (undone) return true;
        } else if (!ctx_.realized[static_cast<size_t>(i)] && op_def(in.op).category != OpCategory::layout) {
          todo.push_back(i);  // elementwise ops keep the dims in place (broadcast operands are smaller)
        }
      }
    }
    return false;
  }

  void realize() {
    const Graph& g = s_.graph;
    std::vector<int> uses(g.size(), 0), cost(g.size(), 0);
    std::vector<int64_t>& depth = inline_depth_;  // the longest chain of unrealized ops ending at a node
    depth.assign(g.size(), 0);
    for (const Node& node : g.nodes())
      for (NodeId i : node.inputs) ++uses[static_cast<size_t>(i)];
    std::vector<std::vector<NodeId>> users(g.size());
    for (NodeId id = 0; id < static_cast<NodeId>(g.size()); ++id)
      for (NodeId i : g.node(id).inputs) users[static_cast<size_t>(i)].push_back(id);
    const int budget = opt_.aggressive_fusion ? 16 : 4;
    auto realize_node = [&](NodeId id, const std::string& why) {
      if (ctx_.source[static_cast<size_t>(id)] || ctx_.realized[static_cast<size_t>(id)]) return;
      ctx_.realized[static_cast<size_t>(id)] = true;
      log("realize " + label(id) + ": " + why);
    };
    // Layout ops that only view their input (cat, pad and gathers compute new positions).
    auto is_view = [&](const Node& n) {
      return op_def(n.op).category == OpCategory::layout && n.op != OpId::cat && n.op != OpId::pad && !gathers(n.op);
    };
    // The value a chain of views reads.
    auto under_views = [&](NodeId i) {
      while (is_view(g.node(i))) i = g.node(i).inputs[0];
      return i;
    };
    for (NodeId id = 0; id < static_cast<NodeId>(g.size()); ++id) {
      const Node& node = g.node(id);
      const size_t k = static_cast<size_t>(id);
      if (node.op == OpId::input || node.op == OpId::constant) {
        ctx_.source[k] = true;
        ctx_.realized[k] = true;
        continue;
      }
      // (every kind of node: a reduction or a matmul epilogue computes its inlined inputs too)
      int64_t d = 1;
      for (NodeId i : node.inputs)
        if (!ctx_.realized[static_cast<size_t>(i)]) d = std::max(d, depth[static_cast<size_t>(i)] + 1);
      depth[k] = d;
      if (d >= opt_.max_inline_depth) {
        // A view is no place to cut: what it views is stored instead (a reshape that merges dims
        // reads a stored value, never one its kernel computes), and the view reads it.
        const NodeId at = is_view(node) ? under_views(id) : id;
        realize_node(at, "ends a chain of " + std::to_string(d) + " ops computed without storing (max_inline_depth)");
        if (at != id) depth[k] = 1;
      }
      const OpCategory cat = op_def(node.op).category;
      if (is_reference_op(g, node, opt_.target)) {
        realize_node(id, "runs on the reference kernel");
        for (NodeId i : node.inputs) realize_node(i, "input of reference kernel " + label(id));
        continue;
      }
      if (cat == OpCategory::reduction) {
        realize_node(id, "reduction");
        continue;
      }
      if (cat == OpCategory::scatter) {  // x, index and src are computed in its kernels
        realize_node(id, "scatter (writes into its own buffer)");
        continue;
      }
      if (node.op == OpId::pad || node.op == OpId::cat || gathers(node.op)) {
        // They read their input at other positions than they write: from memory, through views.
        const size_t n_read = gathers(node.op) ? 1 : node.inputs.size();
        // Views of one computed value that together cover at least half of it (im2col's taps:
        // slices of one padded input) are read through the stored value: one buffer for all
        // of them, not one copy each (a target binds few buffers per kernel: Vulkan 32).
        std::vector<std::pair<NodeId, NodeId>> unviewed;  // (input no strides express, the value under it)
        std::map<NodeId, int64_t> seen;                   // per value under views: the elements its views here read
        for (size_t j = 0; j < n_read; ++j) {
          const NodeId in = node.inputs[j];
          if (ctx_.layout(in, nullptr) || (node.op == OpId::cat && fills(g, in))) continue;
          unviewed.emplace_back(in, under_views(in));
          if (unviewed.back().second != in) seen[unviewed.back().second] += g.node(in).meta.numel().hint();
        }
        for (const auto& [in, base] : unviewed) {
          if (ctx_.layout(in, nullptr)) continue;  // an earlier input's value is stored now
          if (base != in && 2 * seen[base] >= g.node(base).meta.numel().hint()) {
            realize_node(base, "read through views by " + label(id));
            if (ctx_.layout(in, nullptr)) continue;
          }
          realize_node(in, "read at other positions by " + label(id));
        }
      }
      // Matmul and attention operands are read from memory, through views where the kernel can.
      auto operand_layout = [&](NodeId i, const char* what) {
        std::optional<Layout> l = ctx_.layout(i, nullptr);
        if (!l) {
          // Store the computed value under the views (k in k^T), then read it through them.
          realize_node(under_views(i), std::string(what) + " operand (through views)");
          l = ctx_.layout(i, nullptr);
        }
        return l;
      };
      if (cat == OpCategory::matmul) {
        realize_node(id, "matmul");
        for (NodeId i : node.inputs) {
          const std::optional<Layout> l = operand_layout(i, "matmul");
          if (!l || !gemm_readable(g.node(i).meta, *l)) realize_node(i, "matmul operand the gemm cannot read in place");
        }
        continue;
      }
      if (node.op == OpId::scaled_dot_product_attention) {  // kept by prepare: the target fuses it
        realize_node(id, "attention");
        for (size_t j = 0; j < node.inputs.size(); ++j) {  // q, k, v[, mask: any strides]
          const NodeId i = node.inputs[j];
          const std::optional<Layout> l = operand_layout(i, "attention");
          if (!l || (j < 3 && !(l->strides.back() == 1)))
            realize_node(i, "attention operand without a unit stride along the head dim");
        }
        continue;
      }
      if (convolves(node.op)) {  // kept by prepare: the target runs it
        realize_node(id, "convolution");
        for (NodeId i : node.inputs) {
          const std::optional<Layout> l = operand_layout(i, "convolution");
          if (!l || !contiguous_from_start(g.node(i).meta, *l) || !(g.node(l->base).meta.sizes == g.node(i).meta.sizes))
            realize_node(i, "convolution operand not contiguous, or a view of other sizes");
        }
        continue;
      }
      if (permuted_small_source(id, users)) {
        realize_node(id, "a small source permuted for its readers, who read it at every position");
        continue;
      }
      if (node.op == OpId::reshape && !ctx_.layout(id, nullptr) &&
          !reshape_split_runs(g.node(node.inputs[0]).meta.sizes, node.meta.sizes, g.shapes())) {
        realize_node(node.inputs[0], "reshaped by " + label(id) + ", which neither strides nor a split of its dims express over it");
      }
      int c = (cat == OpCategory::layout) ? 0 : recompute_cost(node.op);
      for (NodeId i : node.inputs)
        if (!ctx_.realized[static_cast<size_t>(i)]) c += cost[static_cast<size_t>(i)];
      cost[k] = c;
      if (uses[k] >= 2 && cat != OpCategory::source && c > budget) {
        const std::string why = "used " + std::to_string(uses[k]) + " times; recomputing costs " + std::to_string(c) +
                                " ops each, over the budget of " + std::to_string(budget);
        // A costly value read through views and cheap one-input ops (a depthwise convolution's sum
        // read through a permute, and in bf16 a cast to f32, by a layer norm's passes): store the
        // value under them, in its own layout and dtype, and let each reader recompute the chain
        // (not through an op that narrows the dtype: the narrower value is cheaper to store).
        // (Storing the chain's end instead computed the sum in the readers' order: the reduction
        // over channels then read the taps 3136 elements apart.)
        NodeId base = id;
        int chain = 0;
        for (;;) {
          const Node& b = g.node(base);
          if (ctx_.realized[static_cast<size_t>(base)] || b.inputs.empty() || ctx_.realized[static_cast<size_t>(b.inputs[0])]) break;
          const bool widens = dtype_size(g.node(b.inputs[0]).meta.dtype) <= dtype_size(b.meta.dtype);
          const int step = is_view(b) ? 0 : op_def(b.op).category == OpCategory::unary && widens ? recompute_cost(b.op) : budget + 1;
          if (chain + step > budget) break;
          chain += step;
          base = b.inputs[0];
        }
        if (base != id && cost[static_cast<size_t>(base)] > budget && reads_input_in_readers_order(base, id)) {
          // The value is computed from an input read through a permute that the readers' views
          // undo (a channels-first net's layer norm: permute, normalise the channels, permute
          // back): stored in the readers' order, the input's own, the readers (a depthwise
          // convolution's 49 taps) read it with unit stride along their fastest dim.
          realize_node(id, why + " (stored in its readers' order, its input's)");
        } else if (base != id && cost[static_cast<size_t>(base)] > budget) {
          realize_node(base, why + " (through " + label(id) + ")");
          cost[k] = chain;
        } else if (cat != OpCategory::layout) {
          realize_node(id, why);
        }
      }
    }
    for (NodeId o : g.outputs()) realize_node(o, "graph output");
  }

  void assign_buffers() {
    const Graph& g = s_.graph;
    int32_t input_pos = 0;
    for (NodeId id = 0; id < static_cast<NodeId>(g.size()); ++id) {
      const size_t k = static_cast<size_t>(id);
      if (!ctx_.realized[k]) continue;
      const Node& node = g.node(id);
      Buffer b;
      b.id = static_cast<int32_t>(ctx_.buffers.size());
      b.dtype = node.meta.dtype;
      b.sizes = node.meta.sizes;
      b.strides = node.meta.strides.empty() ? contiguous_strides(node.meta.sizes) : node.meta.strides;
      b.node = id;
      if (node.op == OpId::input) {
        b.kind = BufferKind::input;
        b.index = input_pos++;
      } else if (node.op == OpId::constant) {
        b.kind = BufferKind::constant;
        b.data = std::make_shared<const ConstantData>(node.attrs.tensor(0));
      }
      ctx_.buffer_of[k] = b.id;
      ctx_.buffers.push_back(std::move(b));
    }
  }

  void frontiers() {
    const Graph& g = s_.graph;
    frontier_.assign(g.size(), {});
    consumers_.assign(g.size(), {});
    for (NodeId id = 0; id < static_cast<NodeId>(g.size()); ++id) {
      const size_t k = static_cast<size_t>(id);
      if (!ctx_.realized[k] || ctx_.source[k]) continue;
      // The realized nodes reached through unrealized ones (an explicit stack: a chain of
      // 100k unrealized ops is as deep).
      std::set<NodeId> found, seen;
      std::vector<NodeId> todo(g.node(id).inputs.begin(), g.node(id).inputs.end());
      while (!todo.empty()) {
        const NodeId x = todo.back();
        todo.pop_back();
        if (!seen.insert(x).second) continue;
        if (ctx_.realized[static_cast<size_t>(x)]) {
          found.insert(x);
          continue;
        }
        for (NodeId i : g.node(x).inputs) todo.push_back(i);
      }
      frontier_[k].assign(found.begin(), found.end());
      for (NodeId f : found) consumers_[static_cast<size_t>(f)].push_back(id);
    }
  }

  // Members of `members` that must be written to memory: outputs and values read elsewhere.
  std::vector<NodeId> stored(const std::vector<NodeId>& members) const {
    std::vector<NodeId> out;
    for (NodeId m : members) {
      bool st = is_output_[static_cast<size_t>(m)];
      for (NodeId c : consumers_[static_cast<size_t>(m)])
        if (!std::binary_search(members.begin(), members.end(), c)) st = true;
      if (st) out.push_back(m);
    }
    return out;
  }

  // A trial build (fusion deciding) allocates nothing.
  Kernel build_kernel(const Domain& dom, const std::vector<NodeId>& members, const std::string& name,
                      bool trial = true) {
    KernelBuilder kb(ctx_, dom, members, name);
    const std::vector<NodeId> st = stored(members);
    int32_t c = -1;
    if (dom.gemm >= 0) {
      const bool gemm_stored = std::binary_search(st.begin(), st.end(), dom.gemm);
      if (gemm_stored) {
        c = ctx_.buffer_of[static_cast<size_t>(dom.gemm)];
      } else if (st.size() == 1 && s_.graph.node(st[0]).meta.dtype == s_.graph.node(dom.gemm).meta.dtype &&
                 s_.graph.node(st[0]).meta.sizes == dom.full) {
        c = ctx_.buffer_of[static_cast<size_t>(st[0])];  // the epilogue updates the gemm's result in place
      } else if (trial) {
        c = -3;
      } else {
        Buffer b;
        b.id = static_cast<int32_t>(ctx_.buffers.size());
        b.dtype = s_.graph.node(dom.gemm).meta.dtype;
        b.sizes = dom.full;
        b.strides = contiguous_strides(dom.full);
        ctx_.buffers.push_back(b);
        c = b.id;
      }
    }
    for (NodeId m : st)
      if (m != dom.gemm) kb.store(m, ctx_.buffer_of[static_cast<size_t>(m)]);
    if (dom.gemm >= 0) kb.set_gemm(c);
    Kernel k = kb.finish();
    if (const int64_t limit = opt_.target.max_kernel_buffers; limit > 0 && members.size() > 1) {
      std::vector<int32_t> bound = k.reads();
      const std::vector<int32_t> w = k.writes();
      bound.insert(bound.end(), w.begin(), w.end());
      std::sort(bound.begin(), bound.end());
      const auto n = std::unique(bound.begin(), bound.end()) - bound.begin();
      if (n > limit)
        throw Refusal("the kernel would bind " + std::to_string(n) + " buffers, more than the target's " +
                      std::to_string(limit));
    }
    return k;
  }

  // Why `id` cannot join group `gi` (nullopt: it can; `dom` then holds the joined domain).
  std::optional<std::string> try_join(size_t gi, NodeId id, Domain& dom) {
    const Group& G = groups_[gi];
    const Graph& g = s_.graph;
    const Node& node = g.node(id);
    if (G.reference) return "reference kernels run alone";
    if (G.whole) return "attention and convolution kernels run alone";
    if (G.scatter) return "scatter kernels run alone";
    if (static_cast<int64_t>(G.members.size()) >= opt_.max_fusion_size)
      return "the kernel has max_fusion_size (" + std::to_string(opt_.max_fusion_size) + ") nodes";
    for (NodeId f : frontier_[static_cast<size_t>(id)]) {
      const int32_t fg = group_of_[static_cast<size_t>(f)];
      if (fg >= 0 && static_cast<size_t>(fg) > gi)
        return "it reads " + label(f) + " from a later kernel";
    }
    if (const int64_t d = depth_in(gi, id); d > opt_.max_inline_depth)
      return "the kernel would compute " + std::to_string(d) + " ops on one path (max_inline_depth " +
             std::to_string(opt_.max_inline_depth) + ")";
    const bool reduction = op_def(node.op).category == OpCategory::reduction;
    dom = G.dom;
    if ((G.dom.has_reduction() || G.dom.gemm >= 0) && !reduction && !opt_.epilogue_fusion)
      return "epilogue fusion is off (fusion.epilogue_fusion)";
    if (reduction) {
      if (G.dom.gemm >= 0) return "a reduction does not fuse into a matmul's epilogue";
      const Domain mine = Domain::reduction(g.node(node.inputs[0]).meta.sizes, node.attrs.ints(0));
      if (G.dom.has_reduction()) {
        if (!(mine == G.dom)) return "it reduces another domain (" + shape_str(mine.full) + ") than the kernel";
      } else {
        if (!(mine.full == G.dom.full)) return "its input shape differs from the kernel's domain";
        dom = mine;  // the pointwise kernel becomes this reduction's prologue
      }
    } else {
      if (!dom.natural_map(node.meta.sizes))
        return "its shape " + shape_str(node.meta.sizes) + " does not fit the domain " + shape_str(dom.full);
      if (dom.gemm >= 0 && !(node.meta.sizes == dom.full)) return "a matmul epilogue has the matmul's shape";
    }
    std::vector<NodeId> members = G.members;
    members.insert(std::upper_bound(members.begin(), members.end(), id), id);
    try {
      build_kernel(dom, members, "trial");
    } catch (const Refusal& r) {
      return std::string(r.what());
    }
    return std::nullopt;
  }

  // The longest chain of ops kernel gi would compute to reach `id` (its own inlined chain after
  // the longest one of the members it reads).
  int64_t depth_in(size_t gi, NodeId id) const {
    int64_t before = 0;
    for (NodeId f : frontier_[static_cast<size_t>(id)])
      if (group_of_[static_cast<size_t>(f)] == static_cast<int32_t>(gi)) before = std::max(before, kernel_depth_[static_cast<size_t>(f)]);
    return before + inline_depth_[static_cast<size_t>(id)];
  }

  void group() {
    const Graph& g = s_.graph;
    group_of_.assign(g.size(), -1);
    kernel_depth_.assign(g.size(), 0);
    for (NodeId id = 0; id < static_cast<NodeId>(g.size()); ++id) {
      const size_t k = static_cast<size_t>(id);
      if (!ctx_.realized[k] || ctx_.source[k]) continue;
      const Node& node = g.node(id);
      Group ng;
      ng.members = {id};
      if (is_reference_op(g, node, opt_.target)) {
        ng.reference = true;
        log("kernel " + std::to_string(groups_.size()) + ": " + label(id) + " alone (reference kernel)");
        start(std::move(ng));
        continue;
      }
      if (node.op == OpId::scaled_dot_product_attention || convolves(node.op)) {
        ng.whole = true;
        log("kernel " + std::to_string(groups_.size()) + ": " + label(id) + " alone (" +
            (convolves(node.op) ? "convolution" : "attention") + " kernel)");
        start(std::move(ng));
        continue;
      }
      const OpCategory cat = op_def(node.op).category;
      if (cat == OpCategory::scatter) {
        ng.scatter = true;
        log("kernel " + std::to_string(groups_.size()) + ": " + label(id) + " alone (scatter: sets its buffer to x, then writes src in)");
        start(std::move(ng));
        continue;
      }
      if (cat == OpCategory::matmul) {
        ng.dom = Domain::pointwise(node.meta.sizes);
        ng.dom.gemm = id;
        log("kernel " + std::to_string(groups_.size()) + ": " + label(id) + " (gemm template)");
        start(std::move(ng));
        continue;
      }
      // Candidates: the kernels it reads from, latest first; then (horizontal fusion) kernels
      // that read one of the same buffers, so mean and var of one tensor share a kernel.
      std::set<int32_t, std::greater<>> producers, siblings;
      for (NodeId f : frontier_[k])
        if (group_of_[static_cast<size_t>(f)] >= 0) producers.insert(group_of_[static_cast<size_t>(f)]);
      if (opt_.horizontal)
        for (NodeId f : frontier_[k])
          for (NodeId c : consumers_[static_cast<size_t>(f)])
            if (c != id && group_of_[static_cast<size_t>(c)] >= 0 && !producers.count(group_of_[static_cast<size_t>(c)]))
              siblings.insert(group_of_[static_cast<size_t>(c)]);
      std::vector<int32_t> cands(producers.begin(), producers.end());
      cands.insert(cands.end(), siblings.begin(), siblings.end());
      bool joined = false;
      for (int32_t gi : cands) {
        if (far_behind(groups_[static_cast<size_t>(gi)], id)) {
          log("not fusing " + label(id) + " into kernel " + std::to_string(gi) + ": it ends more than " +
              std::to_string(kFarBehind) + " nodes earlier (the value would be stored from there to its readers)");
          continue;
        }
        Domain dom;
        std::optional<std::string> why = try_join(static_cast<size_t>(gi), id, dom);
        if (why) {
          log("not fusing " + label(id) + " into kernel " + std::to_string(gi) + ": " + *why);
          continue;
        }
        kernel_depth_[k] = depth_in(static_cast<size_t>(gi), id);
        Group& G = groups_[static_cast<size_t>(gi)];
        G.dom = dom;
        G.members.insert(std::upper_bound(G.members.begin(), G.members.end(), id), id);
        group_of_[k] = gi;
        log("fused " + label(id) + " into kernel " + std::to_string(gi));
        joined = true;
        break;
      }
      if (joined) continue;
      ng.dom = cat == OpCategory::reduction ? Domain::reduction(g.node(node.inputs[0]).meta.sizes, node.attrs.ints(0))
                                            : Domain::pointwise(node.meta.sizes);
      log("kernel " + std::to_string(groups_.size()) + ": starts at " + label(id));
      start(std::move(ng));
    }
  }

  void start(Group g) {
    for (NodeId m : g.members) {
      group_of_[static_cast<size_t>(m)] = static_cast<int32_t>(groups_.size());
      kernel_depth_[static_cast<size_t>(m)] = inline_depth_[static_cast<size_t>(m)];
    }
    groups_.push_back(std::move(g));
  }

  std::set<NodeId> reads_of(const Group& G) const {
    std::set<NodeId> r;
    for (NodeId m : G.members)
      for (NodeId f : frontier_[static_cast<size_t>(m)])
        if (!std::binary_search(G.members.begin(), G.members.end(), f)) r.insert(f);
    return r;
  }

  // A kernel that ends far before node `id`: computing `id` there would store its value from
  // there to its readers (passes::rematerialize puts a backward's recomputed values just before
  // their readers; joined to the forward kernel that reads the same input, they were stored
  // across the step again).
  // Only large values that are not outputs pay for it (an optimizer's new state, an output,
  // joins the kernel of its gradient however early).
  static constexpr NodeId kFarBehind = 64;
  bool far_behind(const Group& G, NodeId id) const {
    return !G.members.empty() && G.members.back() + kFarBehind < id && !is_output_[static_cast<size_t>(id)] &&
           s_.graph.node(id).meta.numel().hint() >= (int64_t{1} << 16);
  }
  bool far_behind(const Group& A, const Group& B) const {
    for (NodeId m : B.members)
      if (far_behind(A, m)) return true;
    return false;
  }

  void horizontal() {
    for (size_t a = 0; a < groups_.size(); ++a) {
      if (!groups_[a].alive || groups_[a].reference || groups_[a].whole || groups_[a].scatter || groups_[a].dom.gemm >= 0) continue;
      for (size_t b = a + 1; b < groups_.size(); ++b) {
        Group& A = groups_[a];
        Group& B = groups_[b];
        if (!B.alive || B.reference || B.whole || B.scatter || B.dom.gemm >= 0 || !(A.dom == B.dom)) continue;
        const std::set<NodeId> ra = reads_of(A), rb = reads_of(B);
        bool shared = false, depends = false;
        for (NodeId f : rb) {
          if (ra.count(f)) shared = true;
          const int32_t fg = group_of_[static_cast<size_t>(f)];
          if (fg >= 0 && static_cast<size_t>(fg) >= a) depends = true;
        }
        if (!shared) continue;
        const std::string what = "kernels " + std::to_string(a) + " and " + std::to_string(b);
        if (far_behind(A, B)) {
          log("not fusing " + what + " horizontally: " + std::to_string(a) + " ends more than " + std::to_string(kFarBehind) +
              " nodes before " + std::to_string(b) + " starts");
          continue;
        }
        if (depends) {
          log("not fusing " + what + " horizontally: " + std::to_string(b) + " reads from kernel " +
              std::to_string(a) + " or a later one");
          continue;
        }
        if (static_cast<int64_t>(A.members.size() + B.members.size()) > opt_.max_fusion_size) {
          log("not fusing " + what + " horizontally: together they exceed max_fusion_size");
          continue;
        }
        std::vector<NodeId> members = A.members;
        members.insert(members.end(), B.members.begin(), B.members.end());
        std::sort(members.begin(), members.end());
        try {
          build_kernel(A.dom, members, "trial");
        } catch (const Refusal& r) {
          log("not fusing " + what + " horizontally: " + r.what());
          continue;
        }
        log("fused " + what + " horizontally (same domain " + shape_str(A.dom.full) + ", shared input)");
        for (NodeId m : B.members) group_of_[static_cast<size_t>(m)] = static_cast<int32_t>(a);
        A.members = std::move(members);
        B.alive = false;
        B.members.clear();
      }
    }
  }

  Kernel attention_kernel(NodeId id, const std::string& name) const {
    const Graph& g = s_.graph;
    const Node& node = g.node(id);
    const size_t r = node.meta.sizes.size();
    Kernel k;
    k.name = name;
    k.kind = KernelKind::attention;
    k.domain = node.meta.sizes;
    k.num_outer = static_cast<int32_t>(r);
    k.provenance = {id};
    Attention a;
    a.dtype = node.meta.dtype;
    a.batch.assign(node.meta.sizes.begin(), node.meta.sizes.end() - 2);
    a.lq = node.meta.sizes[r - 2];
    a.lk = g.node(node.inputs[1]).meta.sizes[r - 2];
    a.d = g.node(node.inputs[0]).meta.sizes.back().hint();
    a.dv = node.meta.sizes.back().hint();
    a.scale = node.attrs.f(0);
    a.out = ctx_.buffer_of[static_cast<size_t>(id)];
    int32_t* bufs[3] = {&a.q, &a.k, &a.v};
    Attention::Operand* views[3] = {&a.q_view, &a.k_view, &a.v_view};
    for (size_t j = 0; j < 3; ++j) {
      const std::optional<Layout> l = ctx_.layout(node.inputs[j], nullptr);
      if (!l) internal_fail("schedule: attention operand %", node.inputs[j], " of ", label(id), " is not in memory");
      *bufs[j] = ctx_.buffer_of[static_cast<size_t>(l->base)];
      views[j]->offset = l->offset;
      views[j]->batch_strides.assign(l->strides.begin(), l->strides.end() - 2);
      views[j]->row_stride = l->strides[r - 2];
    }
    if (node.inputs.size() > 3) {
      // The mask broadcast to [batch..., lq, lk]: its dims align to the right; a dim it lacks or
      // has of size 1 gets stride 0.
      const NodeId mi = node.inputs[3];
      const std::optional<Layout> l = ctx_.layout(mi, nullptr);
      if (!l) internal_fail("schedule: attention mask %", mi, " of ", label(id), " is not in memory");
      const SymShape& ms = g.node(mi).meta.sizes;
      SymShape strides(r, SymInt(0));
      for (size_t d = r - ms.size(); d < r; ++d) {
        const size_t j = d - (r - ms.size());
        if (!(ms[j].is_static() && ms[j].hint() == 1)) strides[d] = l->strides[j];
      }
      a.mask = ctx_.buffer_of[static_cast<size_t>(l->base)];
      a.mask_dtype = g.node(mi).meta.dtype;
      a.mask_view.offset = l->offset;
      a.mask_view.batch_strides.assign(strides.begin(), strides.end() - 2);
      a.mask_view.row_stride = strides[r - 2];
      a.mask_key_stride = strides[r - 1];
      // Evaluated once per mask: a decoder's layers all read the same one.
      const std::tuple<NodeId, int64_t, int64_t> key{mi, a.lq.is_static() ? a.lq.hint() : -1, a.lk.is_static() ? a.lk.hint() : -1};
      auto found = causal_masks_.find(key);
      if (found == causal_masks_.end()) found = causal_masks_.emplace(key, causal_mask(g, mi, a.lq, a.lk)).first;
      a.causal = found->second;
    }
    k.attention = std::move(a);
    return k;
  }

  Kernel convolution_kernel(NodeId id, const std::string& name) const {
    const Graph& g = s_.graph;
    const Node& node = g.node(id);
    Kernel k;
    k.name = name;
    k.kind = KernelKind::convolution;
    k.domain = node.meta.sizes;
    k.num_outer = static_cast<int32_t>(node.meta.sizes.size());
    k.provenance = {id};
    Convolution c;
    c.dtype = node.meta.dtype;
    // The operands in the order the op takes them, and the result: y = conv(x, w), gx from (gy,
    // w), gw from (x, gy).
    c.computes = node.op == OpId::convolution_input_grad    ? ConvolutionComputes::x
                 : node.op == OpId::convolution_weight_grad ? ConvolutionComputes::w
                                                            : ConvolutionComputes::y;
    int32_t* bufs[2] = {&c.x, &c.w};
    int32_t* result = &c.y;
    if (c.computes == ConvolutionComputes::x) {
      bufs[0] = &c.y;
      result = &c.x;
    } else if (c.computes == ConvolutionComputes::w) {
      bufs[1] = &c.y;
      result = &c.w;
    }
    for (size_t j = 0; j < 2; ++j) {
      const std::optional<Layout> l = ctx_.layout(node.inputs[j], nullptr);
      if (!l || !contiguous_from_start(g.node(node.inputs[j]).meta, *l))
        internal_fail("schedule: convolution operand %", node.inputs[j], " of ", label(id), " is not contiguous in memory");
      *bufs[j] = ctx_.buffer_of[static_cast<size_t>(l->base)];
    }
    *result = ctx_.buffer_of[static_cast<size_t>(id)];
    const NodeId x = c.computes == ConvolutionComputes::x ? id : node.inputs[0];
    const NodeId w = c.computes == ConvolutionComputes::w ? id : node.inputs[1];
    c.x_sizes = g.node(x).meta.sizes;
    for (const SymInt& e : g.node(w).meta.sizes) c.w_sizes.push_back(e.hint());
    c.strides = node.attrs.ints(0);
    c.pads = node.attrs.ints(1);
    c.dilations = node.attrs.ints(2);
    c.groups = node.attrs.i(3);
    c.channels_last = convolves_channels_last(node);
    k.convolution = std::move(c);
    return k;
  }

  void build() {
    int index = 0;
    for (Group& G : groups_) {
      if (!G.alive) continue;
      const std::string name = "k" + std::to_string(index++);
      if (G.reference) {
        const NodeId id = G.members[0];
        const Node& node = s_.graph.node(id);
        Kernel k;
        k.name = name;
        k.kind = KernelKind::reference;
        ReferenceOp r;
        r.op = node.op;
        r.attrs = node.attrs;
        for (NodeId i : node.inputs) r.inputs.push_back(ctx_.buffer_of[static_cast<size_t>(i)]);
        r.output = ctx_.buffer_of[static_cast<size_t>(id)];
        k.reference = std::move(r);
        k.provenance = G.members;
        s_.kernels.push_back(std::move(k));
        continue;
      }
      if (G.whole) {
        const NodeId id = G.members[0];
        s_.kernels.push_back(convolves(s_.graph.node(id).op) ? convolution_kernel(id, name)
                                                                        : attention_kernel(id, name));
        continue;
      }
      if (G.scatter) {
        // Two kernels: the buffer gets x (computed there if x is not stored), then every point of
        // src adds into it; the second must wait for the first to finish everywhere.
        const NodeId id = G.members[0];
        const Node& node = s_.graph.node(id);
        const int32_t out = ctx_.buffer_of[static_cast<size_t>(id)];
        try {
          KernelBuilder init(ctx_, Domain::pointwise(node.meta.sizes), G.members, name);
          init.store(node.inputs[0], out);
          s_.kernels.push_back(init.finish());
          KernelBuilder add(ctx_, Domain::pointwise(s_.graph.node(node.inputs[2]).meta.sizes), G.members,
                            "k" + std::to_string(index++));
          add.scatter(id, out);
          s_.kernels.push_back(add.finish());
        } catch (const Refusal& r) {
          fail("schedule: the kernels of ", label(id), " cannot be lowered: ", r.what());
        }
        continue;
      }
      try {
        s_.kernels.push_back(build_kernel(G.dom, G.members, name, false));
      } catch (const Refusal& r) {
        fail("schedule: kernel ", name, " cannot be lowered: ", r.what());
      }
    }
    s_.buffers = std::move(ctx_.buffers);
    for (NodeId o : s_.graph.outputs()) s_.outputs.push_back(ctx_.buffer_of[static_cast<size_t>(o)]);
  }
};

}  // namespace

bool forward_convolution_tiles_input(const Graph& g, const Node& n) {
  if (n.op != OpId::convolution && n.op != OpId::convolution_channels_last) return false;
  const bool last = n.op == OpId::convolution_channels_last;
  const SymShape& x = g.node(n.inputs[0]).meta.sizes;
  const SymShape& w = g.node(n.inputs[1]).meta.sizes;
  return convolution_tiles_input(n.attrs, std::span(last ? channels_first(x) : x).subspan(2), last ? channels_first(w) : w);
}
}  // namespace detail

bool Target::fuses_attention(const Graph& g, const Node& n) const {
  if (!fused_attention || n.op != OpId::scaled_dot_product_attention) return false;
  // The kernel works in base 2 with scale * log2(e) as a float: it must be a normal number.
  if (!std::isnormal(static_cast<float>(n.attrs.f(0) * 1.4426950408889634))) return false;
  const DType t = n.meta.dtype;
  if (t != DType::f16 && t != DType::bf16) return false;
  // q, k and v of t; a mask is bool or floating (the op's rule), and prepare casts a floating one
  // to t, as the op does before adding it.
  for (size_t j = 0; j < 3; ++j)
    if (g.node(n.inputs[j]).meta.dtype != t) return false;
  auto head_dim_ok = [](const SymInt& d) { return d.is_static() && d.hint() % 16 == 0 && d.hint() >= 16 && d.hint() <= 128; };
  const TensorMeta& q = g.node(n.inputs[0]).meta;
  const TensorMeta& v = g.node(n.inputs[2]).meta;
  return head_dim_ok(q.sizes.back()) && head_dim_ok(v.sizes.back());
}

bool Target::runs_convolution(const Graph& g, const Node& n) const {
  if (!convolution || !detail::convolves(n.op)) return false;
  const DType t = n.meta.dtype;
  if (!(t == DType::f32 || t == DType::f16 || t == DType::bf16) || n.meta.rank() < 3 || n.meta.rank() > 5) return false;
  // Two kinds decompose better than the library runs them: depthwise ones (a fused sum over
  // the taps that also takes their epilogue) and 1x1 ones of unit stride, no pads and one group,
  // which are a gemm over x as it lies (no window copy), with the gemm's epilogues.
  // The weight's sizes: an input, or a weight gradient's own.
  const SymShape& ws = n.op == OpId::convolution_weight_grad ? n.meta.sizes : g.node(n.inputs[1]).meta.sizes;
  const SymShape w = detail::convolves_channels_last(n) ? channels_first(ws) : ws;
  if (convolution_folds_taps(w)) return false;
  // A forward convolution whose windows tile x over a few channels (an image's: a patch
  // embedding) is one gemm over x's patches, a copy of x away: cuDNN's kernels vectorise over
  // the channels (its NHWC tensor-core ones want multiples of 8) and took 0.39 ms for ViT-B/16's
  // in f32 (H200) and 0.06-0.13 ms for ConvNeXt's 4x4 stem in bf16 (H100), where the copy and
  // the gemm take under 0.035. Over more channels (ConvNeXt's downsampling) cuDNN reads x once
  // where the gemm would copy it first.
  // In f32 without tensor cores (no TF32) the library's kernels are FMA loops as the gemm's are,
  // so over any channels (ConvNeXt's 2x2 downsamplings): then no library convolution is left to
  // want its own layout, and the graph's permutes choose it (prepare.cpp).
  if ((w[1].hint() % 8 != 0 || (t == DType::f32 && !channels_last_f32)) && detail::forward_convolution_tiles_input(g, n)) return false;
  // A gradient's pads cannot move into a pad op before it (the forward's can): the library pads
  // both ends alike.
  if (n.op == OpId::convolution_input_grad || n.op == OpId::convolution_weight_grad) {
    const std::vector<int64_t>& pads = n.attrs.ints(1);
    const size_t sp = pads.size() / 2;
    for (size_t d = 0; d < sp; ++d)
      if (pads[d] != pads[d + sp]) return false;
  }
  bool pointwise = n.attrs.i(3) == 1;
  for (size_t d = 2; d < w.size(); ++d) pointwise = pointwise && w[d].hint() == 1;
  for (int64_t s : n.attrs.ints(0)) pointwise = pointwise && s == 1;
  for (int64_t p : n.attrs.ints(1)) pointwise = pointwise && p == 0;
  return !pointwise;
}

Target Target::gpu() {
  Target t;
  // Thousands of partials: 132 SMs (H100) want a few blocks each; slices of >= 4096 elements
  // keep a block's threads busy. The second stage folds the partials in one block.
  t.split_parts = {2048, 1024, 512, 256, 128, 64, 48, 32, 16, 8};
  t.min_split_elements = int64_t{1} << 15;
  t.min_split_chunk = 4096;
  t.split_blocks_below = 512;  // about two blocks of 1024 threads per SM
  t.low_precision_gemm = true;
  t.one_batch_stride = true;
  return t;
}

Schedule schedule_graph(const Graph& g, const Target& target) {
  Options o = Options::from_config();
  o.target = target;
  return schedule_graph(g, o);
}

Schedule schedule_graph(const Graph& g, const Options& options) {
  Schedule s;
  s.graph = detail::prepare(g, options.target, s.checks);
  detail::Fuser(s, options).run();
  if (options.split_reductions) detail::split_reductions(s, options.target);
  detail::plan_buffers(s);
  return s;
}

}  // namespace kiln::schedule
