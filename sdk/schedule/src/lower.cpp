// Lowering: graph nodes -> kernel IR instructions. A node is emitted at a Map (its element's
// position in the kernel's loop variables); pointwise ops broadcast the map to their inputs,
// view ops transform it (or, for reshapes, the strides of the buffer underneath), reductions
// become `reduce` instructions when the map walks the kernel's outer dims in order, and
// anything realized outside the kernel is a load from its buffer.
#include <algorithm>
#include <cstring>

#include "internal.h"
#include "kiln/graph/error.h"

namespace kiln::schedule::detail {

Affine unit(size_t rank, int32_t var) {
  Affine a;
  a.coeffs.assign(rank, SymInt(0));
  a.coeffs[static_cast<size_t>(var)] = 1;
  return a;
}

Affine zero(size_t rank) {
  Affine a;
  a.coeffs.assign(rank, SymInt(0));
  return a;
}

Affine compose(const Map& map, const SymShape& strides, const SymInt& offset, size_t rank) {
  Affine a = zero(rank);
  a.offset = offset;
  for (size_t d = 0; d < map.size(); ++d) {
    if (strides[d] == 0) continue;
    a.offset = a.offset + strides[d] * map[d].offset;
    for (size_t v = 0; v < rank; ++v)
      if (!(map[d].coeffs[v] == 0)) a.coeffs[v] = a.coeffs[v] + strides[d] * map[d].coeffs[v];
  }
  return a;
}

Domain Domain::pointwise(const SymShape& shape) {
  Domain d;
  d.full = shape;
  d.extents = shape;
  d.reduced.assign(shape.size(), false);
  for (size_t i = 0; i < shape.size(); ++i) d.var_of_dim.push_back(static_cast<int32_t>(i));
  d.num_outer = static_cast<int32_t>(shape.size());
  return d;
}

Domain Domain::reduction(const SymShape& input, const std::vector<int64_t>& dims) {
  Domain d;
  d.full = input;
  d.reduced.assign(input.size(), dims.empty());
  for (int64_t r : dims) d.reduced[static_cast<size_t>(r)] = true;
  d.var_of_dim.assign(input.size(), -1);
  int32_t v = 0;
  for (size_t i = 0; i < input.size(); ++i)
    if (!d.reduced[i]) {
      d.var_of_dim[i] = v++;
      d.extents.push_back(input[i]);
    }
  d.num_outer = v;
  for (size_t i = 0; i < input.size(); ++i)
    if (d.reduced[i]) {
      d.var_of_dim[i] = v++;
      d.extents.push_back(input[i]);
    }
  // Reducing nothing (a 0-d tensor) still has one inner step: an inner dim of extent 1.
  if (static_cast<size_t>(d.num_outer) == d.extents.size()) d.extents.push_back(1);
  return d;
}

std::optional<Map> Domain::natural_map(const SymShape& shape) const {
  const size_t rank = extents.size();
  if (shape == full) {
    // A reduced dim of size 1 is index 0 everywhere: the full shape is then also the kept
    // shape, and a value of that shape is one per outer point.
    Map m;
    for (size_t d = 0; d < full.size(); ++d)
      m.push_back(reduced[d] && full[d] == 1 ? zero(rank) : unit(rank, var_of_dim[d]));
    return m;
  }
  if (!has_reduction()) return std::nullopt;
  if (shape.size() == full.size()) {
    bool ok = true;
    for (size_t d = 0; d < full.size() && ok; ++d) ok = reduced[d] ? shape[d] == 1 : shape[d] == full[d];
    if (ok) {
      Map m;
      for (size_t d = 0; d < full.size(); ++d) m.push_back(reduced[d] ? zero(rank) : unit(rank, var_of_dim[d]));
      return m;
    }
  }
  SymShape kept;
  Map m;
  for (size_t d = 0; d < full.size(); ++d)
    if (!reduced[d]) {
      kept.push_back(full[d]);
      m.push_back(unit(rank, var_of_dim[d]));
    }
  if (shape == kept) return m;
  return std::nullopt;
}

bool reshape_is_unsqueeze(const SymShape& from, const SymShape& to) {
  SymShape a, b;
  for (const SymInt& s : from)
    if (!(s == 1)) a.push_back(s);
  for (const SymInt& s : to)
    if (!(s == 1)) b.push_back(s);
  return a == b;
}

std::optional<SymShape> reshape_strides(const SymShape& sizes, const SymShape& strides, const SymShape& new_sizes,
                                        const ShapeEnv& env) {
  SymShape out(new_sizes.size(), SymInt(0));
  if (sizes.empty()) {
    for (const SymInt& s : new_sizes)
      if (!(s == 1)) return std::nullopt;
    return out;
  }
  // torch's computeStride: walk chunks of dims that are contiguous among themselves.
  int64_t view_d = static_cast<int64_t>(new_sizes.size()) - 1;
  SymInt chunk_base_stride = strides.back();
  SymInt tensor_numel = 1, view_numel = 1;
  for (int64_t tensor_d = static_cast<int64_t>(sizes.size()) - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel = tensor_numel * sizes[static_cast<size_t>(tensor_d)];
    const bool chunk_ends =
        tensor_d == 0 || (!(sizes[static_cast<size_t>(tensor_d - 1)] == 1) &&
                          !env.known_equal(strides[static_cast<size_t>(tensor_d - 1)], tensor_numel * chunk_base_stride));
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel.hint() < tensor_numel.hint() || new_sizes[static_cast<size_t>(view_d)] == 1)) {
      out[static_cast<size_t>(view_d)] = view_numel * chunk_base_stride;
      view_numel = view_numel * new_sizes[static_cast<size_t>(view_d)];
      --view_d;
    }
    if (!env.known_equal(view_numel, tensor_numel)) return std::nullopt;
    if (tensor_d > 0) {
      chunk_base_stride = strides[static_cast<size_t>(tensor_d - 1)];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

namespace {

int64_t slice_start(const Node& n, const TensorMeta& in) {
  const int64_t d = n.attrs.i(0), start = n.attrs.i(1);
  const SymInt& size = in.sizes[static_cast<size_t>(d)];
  if (start == 0) return 0;
  // A slice of a symbolic dim from anywhere but 0 specialised it (infer_slice: a fact that the
  // size is its hint, checked when the plan runs), so the start is clamped at that value.
  const int64_t len = size.hint();
  return std::clamp(start < 0 ? start + len : start, int64_t{0}, len);
}

}  // namespace

std::optional<Layout> Context::layout(NodeId n, const std::vector<bool>* members) const {
  const Node& node = g.node(n);
  const bool member = members && (*members)[static_cast<size_t>(n)];
  if (source[static_cast<size_t>(n)] || (realized[static_cast<size_t>(n)] && !member)) {
    Layout l;
    l.base = n;
    l.strides = node.meta.strides.empty() ? contiguous_strides(node.meta.sizes) : node.meta.strides;
    return l;
  }
  // Not stored, or computed by this kernel: a view of a view of ... a buffer, or nothing.
  if (node.inputs.empty()) return std::nullopt;
  const TensorMeta& im = g.node(node.inputs[0]).meta;
  switch (node.op) {
    case OpId::permute: case OpId::expand: case OpId::squeeze: case OpId::unsqueeze: case OpId::slice:
    case OpId::unfold: case OpId::reshape: break;
    default: return std::nullopt;
  }
  std::optional<Layout> in = layout(node.inputs[0], members);
  if (!in) return std::nullopt;
  Layout l = *in;
  const SymShape& s = in->strides;
  switch (node.op) {
    case OpId::permute: {
      const std::vector<int64_t>& p = node.attrs.ints(0);
      l.strides.clear();
      for (int64_t d : p) l.strides.push_back(s[static_cast<size_t>(d)]);
      return l;
    }
    case OpId::expand: {
      const SymShape& out = node.meta.sizes;
      const size_t off = out.size() - im.sizes.size();
      l.strides.assign(out.size(), SymInt(0));
      for (size_t j = 0; j < im.sizes.size(); ++j)
        l.strides[j + off] = (im.sizes[j] == 1 && !(out[j + off] == 1)) ? SymInt(0) : s[j];
      return l;
    }
    case OpId::squeeze: {
      const std::vector<int64_t>& dims = node.attrs.ints(0);
      l.strides.clear();
      for (size_t d = 0; d < s.size(); ++d)
        if (std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) == dims.end()) l.strides.push_back(s[d]);
      return l;
    }
    case OpId::unsqueeze: {
      l.strides.insert(l.strides.begin() + node.attrs.i(0), SymInt(0));
      return l;
    }
    case OpId::slice: {
      const size_t d = static_cast<size_t>(node.attrs.i(0));
      l.offset = l.offset + s[d] * SymInt(slice_start(node, im));
      l.strides[d] = s[d] * SymInt(node.attrs.i(3));
      return l;
    }
    case OpId::unfold: {  // windows i * step apart, their elements one stride of dim apart
      const size_t d = static_cast<size_t>(node.attrs.i(0));
      l.strides[d] = s[d] * SymInt(node.attrs.i(2));
      l.strides.push_back(s[d]);
      return l;
    }
    case OpId::reshape: {
      std::optional<SymShape> st = reshape_strides(im.sizes, s, node.meta.sizes, g.shapes());
      if (!st) return std::nullopt;
      l.strides = *st;
      return l;
    }
    default: return std::nullopt;
  }
}

KernelBuilder::KernelBuilder(const Context& ctx, Domain domain, const std::vector<NodeId>& members, std::string name)
    : ctx_(ctx), dom_(std::move(domain)), member_(ctx.g.size(), false) {
  for (NodeId m : members) member_[static_cast<size_t>(m)] = true;
  k_.name = std::move(name);
  k_.domain = dom_.extents;
  k_.num_outer = dom_.num_outer;
  k_.kind = dom_.gemm >= 0 ? KernelKind::matmul : dom_.has_reduction() ? KernelKind::reduction : KernelKind::pointwise;
  k_.provenance = members;
}

int32_t KernelBuilder::add(Instr in) {
  // Local value numbering: the same op over the same values is computed once (a reduction
  // two composites share, such as layer_norm's mean and var's mean).
  if (in.kind == InstrKind::pointwise || in.kind == InstrKind::reduce || in.kind == InstrKind::size) {
    for (size_t i = 0; i < k_.instrs.size(); ++i) {
      const Instr& o = k_.instrs[i];
      if (o.kind == in.kind && o.op == in.op && o.dtype == in.dtype && o.args == in.args && o.reduce == in.reduce &&
          o.size == in.size && o.attrs == in.attrs)
        return static_cast<int32_t>(i);
    }
  }
  k_.instrs.push_back(std::move(in));
  return static_cast<int32_t>(k_.instrs.size() - 1);
}

int32_t KernelBuilder::constant(double v, DType t) {
  for (size_t i = 0; i < k_.instrs.size(); ++i) {
    const Instr& in = k_.instrs[i];
    if (in.kind == InstrKind::constant && in.dtype == t && std::memcmp(&in.value, &v, sizeof v) == 0)
      return static_cast<int32_t>(i);
  }
  Instr in;
  in.kind = InstrKind::constant;
  in.dtype = t;
  in.value = v;
  return add(std::move(in));
}

int32_t KernelBuilder::pointwise(OpId op, DType t, std::vector<int32_t> args, Attrs attrs) {
  Instr in;
  in.kind = InstrKind::pointwise;
  in.op = op;
  in.dtype = t;
  in.args = std::move(args);
  in.attrs = std::move(attrs);
  return add(std::move(in));
}

int32_t KernelBuilder::load(NodeId base, const Layout& layout, const Map& map, DType dtype) {
  const int32_t buffer = ctx_.buffer_of[static_cast<size_t>(base)];
  KILN_INTERNAL_CHECK(buffer >= 0, "schedule: node %", base, " has no buffer");
  Instr in;
  in.kind = InstrKind::load;
  in.dtype = dtype;
  in.buffer = buffer;
  in.index = compose(map, layout.strides, layout.offset, rank());
  // (a masked load is 0 where its mask is false, a gathered one reads elsewhere: neither is
  // the value a plain load at the same index gives)
  for (size_t i = 0; i < k_.instrs.size(); ++i)
    if (k_.instrs[i].kind == InstrKind::load && k_.instrs[i].buffer == buffer && k_.instrs[i].index == in.index &&
        k_.instrs[i].dtype == dtype && !k_.instrs[i].masked && !k_.instrs[i].gathered)
      return static_cast<int32_t>(i);
  return add(std::move(in));
}

int32_t KernelBuilder::load_where(const Layout& layout, const Map& map, DType dtype, int32_t mask, int32_t offset) {
  if (mask < 0 && offset < 0) return load(layout.base, layout, map, dtype);
  const int32_t buffer = ctx_.buffer_of[static_cast<size_t>(layout.base)];
  KILN_INTERNAL_CHECK(buffer >= 0, "schedule: node %", layout.base, " has no buffer");
  Instr in;
  in.kind = InstrKind::load;
  in.dtype = dtype;
  in.buffer = buffer;
  in.index = compose(map, layout.strides, layout.offset, rank());
  in.masked = mask >= 0;
  in.gathered = offset >= 0;
  if (in.masked) in.args.push_back(mask);
  if (in.gathered) in.args.push_back(offset);
  return add(std::move(in));
}

Layout KernelBuilder::layout_of_input(NodeId reader, NodeId input) const {
  // The scheduler realizes these inputs (fuse.cpp), so they are buffers or views of buffers,
  // unless this kernel computes them itself: then the reader must wait for another kernel.
  std::optional<Layout> l = ctx_.layout(input, &member_);
  if (!l)
    throw Refusal(std::string(op_name(ctx_.g.node(reader).op)) + " %" + std::to_string(reader) +
                  " reads %" + std::to_string(input) + " at other positions than this kernel computes it");
  return *l;
}

int32_t KernelBuilder::index_value(const Affine& a) {
  for (size_t i = 0; i < k_.instrs.size(); ++i)
    if (k_.instrs[i].kind == InstrKind::index && k_.instrs[i].index == a) return static_cast<int32_t>(i);
  Instr in;
  in.kind = InstrKind::index;
  in.dtype = DType::i64;
  in.index = a;
  return add(std::move(in));
}

int32_t KernelBuilder::size_value(const SymInt& s) {
  if (s.is_static()) return constant(static_cast<double>(s.hint()), DType::i64);
  Instr in;
  in.kind = InstrKind::size;
  in.dtype = DType::i64;
  in.size = s;
  return add(std::move(in));
}

// pad: the input element at position - before in each dim, where that is inside the input;
// the pad value elsewhere (negative pads crop: their bound always holds).
int32_t KernelBuilder::emit_pad(NodeId n, const Map& map) {
  const Node& node = ctx_.g.node(n);
  const NodeId x = node.inputs[0];
  const TensorMeta& im = ctx_.g.node(x).meta;
  const std::vector<int64_t>& pads = node.attrs.ints(0);
  const size_t r = im.sizes.size();
  Map in_map = map;
  std::vector<int32_t> conds;
  for (size_t i = 0; 2 * i < pads.size(); ++i) {
    const size_t d = r - 1 - i;
    const int64_t before = pads[2 * i], after = pads[2 * i + 1];
    in_map[d].offset = in_map[d].offset - SymInt(before);
    if (before == 0 && after == 0) continue;
    const int32_t at = index_value(in_map[d]);
    if (before > 0) conds.push_back(pointwise(OpId::ge, DType::bool_, {at, constant(0.0, DType::i64)}));
    if (after > 0) conds.push_back(pointwise(OpId::lt, DType::bool_, {at, size_value(im.sizes[d])}));
  }
  int32_t mask = -1;
  for (int32_t c : conds) mask = mask < 0 ? c : pointwise(OpId::logical_and, DType::bool_, {mask, c});
  const int32_t v = load_where(layout_of_input(n, x), in_map, node.meta.dtype, mask, -1);
  if (mask < 0) return v;
  return pointwise(OpId::where, node.meta.dtype, {mask, v, constant(node.attrs.f(1), node.meta.dtype)});
}

// cat: input j covers [offset_j, offset_j + size_j) of the cat dim; each input's load reads
// only inside its range, and a chain of selects picks the one that holds.
int32_t KernelBuilder::emit_cat(NodeId n, const Map& map) {
  const Node& node = ctx_.g.node(n);
  const size_t d = static_cast<size_t>(node.attrs.i(0));
  const DType t = node.meta.dtype;
  struct Part {
    NodeId x;
    SymInt begin, end;
  };
  std::vector<Part> parts;
  SymInt at = 0;
  for (NodeId x : node.inputs) {
    const SymInt& len = ctx_.g.node(x).meta.sizes[d];
    if (!(len == 0)) parts.push_back({x, at, at + len});
    at = at + len;
  }
  if (parts.empty()) return constant(0.0, t);  // an empty result: nothing is ever read
  int32_t result = -1;
  for (size_t j = parts.size(); j-- > 0;) {
    const Part& p = parts[j];
    Map in_map = map;
    in_map[d].offset = in_map[d].offset - p.begin;
    // Upper bounds select among the parts (the chain runs first to last); the load also needs
    // its lower bound so that it never reads before its own input.
    const int32_t pos = index_value(map[d]);
    int32_t upper = -1, lower = -1;
    if (j + 1 < parts.size()) upper = pointwise(OpId::lt, DType::bool_, {pos, size_value(p.end)});
    if (j > 0) lower = pointwise(OpId::ge, DType::bool_, {pos, size_value(p.begin)});
    int32_t mask = upper;
    if (lower >= 0) mask = mask < 0 ? lower : pointwise(OpId::logical_and, DType::bool_, {lower, upper});
    // A fill the scheduler left unstored (fuse.cpp) is its value at any position.
    const bool fill = fills(ctx_.g, p.x) && !ctx_.realized[static_cast<size_t>(p.x)];
    int32_t v = fill ? emit(p.x, in_map) : load_where(layout_of_input(n, p.x), in_map, t, mask, -1);
    if (fill && ctx_.g.node(p.x).meta.dtype != t) v = pointwise(OpId::cast, t, {v}, Attrs{t});
    result = result < 0 ? v : pointwise(OpId::where, t, {upper, v, result});
  }
  return result;
}

// index_select and gather: the load's position in the selected dim comes from the index
// tensor, read at the output's position in that dim (index_select's 1-D index) or at the
// output's position (gather's index has the output's shape). An index the graph keeps inside
// the dim (a constant, a clamped iota) was found so when scheduled (fuse.cpp, index_in_range);
// any other is clamped into the dim, so the load
// stays inside the input whatever the index (the plan's check reports indices outside it after
// the run, prepare.cpp).
int32_t KernelBuilder::emit_gathering(NodeId n, const Map& map) {
  const Node& node = ctx_.g.node(n);
  const NodeId x = node.inputs[0];
  const size_t d = static_cast<size_t>(node.attrs.i(0));
  const Layout l = layout_of_input(n, x);
  const int32_t offset = index_offset(node, n, node.op == OpId::gather ? map : Map{map[d]}, l.strides[d]);
  Map in_map = map;
  in_map[d] = zero(rank());
  return load_where(l, in_map, node.meta.dtype, -1, offset);
}

int32_t KernelBuilder::index_offset(const Node& node, NodeId n, const Map& map, const SymInt& stride) {
  const int32_t pos = emit(node.inputs[1], map);
  int32_t offset = pos;
  if (k_.instrs[static_cast<size_t>(pos)].dtype != DType::i64) offset = pointwise(OpId::cast, DType::i64, {pos}, Attrs{DType::i64});
  if (!index_in_range(ctx_.g, node)) {
    const SymInt& size = ctx_.g.node(node.inputs[0]).meta.sizes[static_cast<size_t>(node.attrs.i(0))];
    KILN_INTERNAL_CHECK(size.is_static(), "schedule: ", op_name(node.op), " node %", n, " indexes a symbolic dim");
    offset = pointwise(OpId::maximum, DType::i64, {offset, constant(0.0, DType::i64)});
    offset = pointwise(OpId::minimum, DType::i64, {offset, constant(static_cast<double>(size.hint() - 1), DType::i64)});
  }
  if (!(stride == 1)) offset = pointwise(OpId::mul, DType::i64, {offset, size_value(stride)});
  return offset;
}

namespace {
// How a scatter op's store meets the element it reaches.
Combine store_combine(const Node& n) {
  if (n.op == OpId::scatter) return Combine::none;
  if (n.op == OpId::scatter_add) return Combine::add;
  const std::optional<ScatterReduction> r = parse_scatter_reduction(n.attrs.s(1));
  KILN_INTERNAL_CHECK(r, "scatter_reduce: reduce \"", n.attrs.s(1), "\" passed the op's check but is unknown");
  switch (*r) {
    case ScatterReduction::amax: return Combine::max;
    case ScatterReduction::amin: return Combine::min;
    case ScatterReduction::prod: return Combine::mul;
  }
  return Combine::none;
}
}  // namespace

// scatter, scatter_add and scatter_reduce: the kernel's domain is src's (and the index's) shape;
// each point writes (or combines) its src value into the output at its own position but along
// dim, where the index (clamped like a gather's) says.
void KernelBuilder::scatter(NodeId n, int32_t buffer) {
  const Node& node = ctx_.g.node(n);
  const NodeId src = node.inputs[2];
  const size_t d = static_cast<size_t>(node.attrs.i(0));
  const std::optional<Map> map = dom_.natural_map(ctx_.g.node(src).meta.sizes);
  KILN_INTERNAL_CHECK(map.has_value(), "schedule: scatter %", n, " over a domain other than its src's");
  const SymShape strides = contiguous_strides(node.meta.sizes);
  Store s;
  s.buffer = buffer;
  s.combine = store_combine(node);
  s.value = emit(src, *map);
  s.offset = index_offset(node, n, *map, strides[d]);
  Map out_map = *map;
  out_map[d] = zero(rank());
  s.index = compose(out_map, strides, 0, rank());
  k_.stores.push_back(std::move(s));
}

int32_t KernelBuilder::emit(NodeId n, const Map& map) {
  auto& seen = memo_[n];
  for (const auto& [m, id] : seen)
    if (m == map) return id;
  const int32_t id = emit_node(n, map);
  memo_[n].emplace_back(map, id);
  return id;
}

int32_t KernelBuilder::emit_node(NodeId n, const Map& map) {
  const Node& node = ctx_.g.node(n);
  const TensorMeta& meta = node.meta;
  // Anything stored by another kernel (or a graph input or constant) is read from its buffer.
  if (ctx_.source[static_cast<size_t>(n)] || (ctx_.realized[static_cast<size_t>(n)] && !member_[static_cast<size_t>(n)])) {
    if (node.op == OpId::constant && meta.sizes.empty()) {
      const ConstantData& c = node.attrs.tensor(0);
      double v = 0.0;
      switch (c.dtype) {
        case DType::f32: { float f; std::memcpy(&f, c.bytes.data(), 4); v = f; break; }
        case DType::f64: std::memcpy(&v, c.bytes.data(), 8); break;
        case DType::i32: { int32_t i; std::memcpy(&i, c.bytes.data(), 4); v = static_cast<double>(i); break; }
        case DType::i64: { int64_t i; std::memcpy(&i, c.bytes.data(), 8); v = static_cast<double>(i); break; }
        case DType::bool_: v = c.bytes[0] != std::byte{0} ? 1.0 : 0.0; break;
        case DType::f16: { uint16_t h; std::memcpy(&h, c.bytes.data(), 2); v = half_bits_to_float(h); break; }
        case DType::bf16: { uint16_t h; std::memcpy(&h, c.bytes.data(), 2); v = bf16_bits_to_float(h); break; }
      }
      return constant(v, meta.dtype);
    }
    return load(n, *ctx_.layout(n, &member_), map, meta.dtype);
  }
  if (n == dom_.gemm) {
    // The gemm's result, read back row block by row block: only where the gemm wrote it.
    const std::optional<Map> natural = dom_.natural_map(meta.sizes);
    if (!natural || !(*natural == map))
      throw Refusal("the matmul's result is read at another position than the one its epilogue computes");
    Layout l;
    l.base = n;
    l.strides = contiguous_strides(meta.sizes);
    Instr in;
    in.kind = InstrKind::load;
    in.dtype = meta.dtype;  // f32 or f64
    in.buffer = -2;  // patched by set_gemm
    in.index = compose(map, l.strides, 0, rank());
    return add(std::move(in));
  }
  const OpDef& def = op_def(node.op);
  switch (def.category) {
    case OpCategory::unary:
    case OpCategory::binary:
    case OpCategory::ternary: {
      std::vector<int32_t> args;
      for (NodeId i : node.inputs) {
        const SymShape& is = ctx_.g.node(i).meta.sizes;
        const size_t off = meta.sizes.size() - is.size();
        Map im;
        for (size_t j = 0; j < is.size(); ++j)
          im.push_back(is[j] == 1 && !(meta.sizes[j + off] == 1) ? zero(rank()) : map[j + off]);
        args.push_back(emit(i, im));
      }
      return pointwise(node.op, meta.dtype, std::move(args), node.attrs);
    }
    case OpCategory::source: {
      if (node.op == OpId::full) return constant(node.attrs.f(1), meta.dtype);
      if (node.op == OpId::arange) {
        const int32_t f = pointwise(OpId::cast, DType::f64, {index_value(map[0])}, Attrs{DType::f64});
        const int32_t v = pointwise(OpId::add, DType::f64,
                                    {pointwise(OpId::mul, DType::f64, {f, constant(node.attrs.f(2), DType::f64)}),
                                     constant(node.attrs.f(0), DType::f64)});
        return meta.dtype == DType::f64 ? v : pointwise(OpId::cast, meta.dtype, {v}, Attrs{meta.dtype});
      }
      if (node.op == OpId::iota) {
        const int32_t i = index_value(map[static_cast<size_t>(node.attrs.i(1))]);
        return meta.dtype == DType::i64 ? i : pointwise(OpId::cast, meta.dtype, {i}, Attrs{meta.dtype});
      }
      break;
    }
    case OpCategory::layout: {
      const NodeId x = node.inputs[0];
      const TensorMeta& im = ctx_.g.node(x).meta;
      Map in_map;
      switch (node.op) {
        case OpId::permute: {
          const std::vector<int64_t>& p = node.attrs.ints(0);
          in_map.assign(p.size(), zero(rank()));
          for (size_t i = 0; i < p.size(); ++i) in_map[static_cast<size_t>(p[i])] = map[i];
          return emit(x, in_map);
        }
        case OpId::expand: {
          const size_t off = meta.sizes.size() - im.sizes.size();
          for (size_t j = 0; j < im.sizes.size(); ++j)
            in_map.push_back(im.sizes[j] == 1 && !(meta.sizes[j + off] == 1) ? zero(rank()) : map[j + off]);
          return emit(x, in_map);
        }
        case OpId::squeeze: {
          const std::vector<int64_t>& dims = node.attrs.ints(0);
          size_t k = 0;
          for (size_t d = 0; d < im.sizes.size(); ++d)
            in_map.push_back(std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) != dims.end() ? zero(rank())
                                                                                                       : map[k++]);
          return emit(x, in_map);
        }
        case OpId::unsqueeze: {
          in_map = map;
          in_map.erase(in_map.begin() + node.attrs.i(0));
          return emit(x, in_map);
        }
        case OpId::slice: {
          const size_t d = static_cast<size_t>(node.attrs.i(0));
          in_map = map;
          Affine a = map[d];
          const int64_t step = node.attrs.i(3);
          for (SymInt& c : a.coeffs) c = c * SymInt(step);
          a.offset = a.offset * SymInt(step) + SymInt(slice_start(node, im));
          in_map[d] = a;
          return emit(x, in_map);
        }
        case OpId::unfold: {  // x's position in dim: window * step + position in the window
          const size_t d = static_cast<size_t>(node.attrs.i(0));
          in_map.assign(map.begin(), map.end() - 1);
          Affine a = map[d];
          for (SymInt& c : a.coeffs) c = c * SymInt(node.attrs.i(2));
          a.offset = a.offset * SymInt(node.attrs.i(2));
          const Affine& k = map.back();
          for (size_t j = 0; j < a.coeffs.size(); ++j) a.coeffs[j] = a.coeffs[j] + k.coeffs[j];
          a.offset = a.offset + k.offset;
          in_map[d] = a;
          return emit(x, in_map);
        }
        case OpId::reshape: {
          std::optional<Layout> l = ctx_.layout(n, &member_);
          if (l) return load(l->base, *l, map, meta.dtype);
          const auto runs = reshape_split_runs(im.sizes, meta.sizes, ctx_.g.shapes());
          if (!runs)
            throw Refusal("reshape %" + std::to_string(n) + " of a value computed in this kernel (" +
                          std::string(op_name(ctx_.g.node(x).op)) + " %" + std::to_string(x) + ", " + shape_str(im.sizes) +
                          " -> " + shape_str(meta.sizes) + ")");
          for (const auto& [first, last] : *runs) {  // x's index: sum over the run of index * stride
            Affine a = zero(rank());
            SymInt stride = 1;
            for (size_t k = last; k-- > first;) {
              for (size_t j = 0; j < a.coeffs.size(); ++j) a.coeffs[j] = a.coeffs[j] + map[k].coeffs[j] * stride;
              a.offset = a.offset + map[k].offset * stride;
              stride = stride * meta.sizes[k];
            }
            in_map.push_back(std::move(a));
          }
          return emit(x, in_map);
        }
        case OpId::pad: return emit_pad(n, map);
        case OpId::cat: return emit_cat(n, map);
        case OpId::index_select:
        case OpId::gather: return emit_gathering(n, map);
        default: break;
      }
      break;
    }
    case OpCategory::reduction: return emit_reduction(n, map);
    default: break;
  }
  throw Refusal("node %" + std::to_string(n) + " (" + std::string(op_name(node.op)) +
                ") cannot be computed inside this kernel");
}

int32_t KernelBuilder::emit_reduction(NodeId n, const Map& map) {
  const Node& node = ctx_.g.node(n);
  const TensorMeta& xm = ctx_.g.node(node.inputs[0]).meta;
  const std::vector<int64_t>& dims = node.attrs.ints(0);
  const Domain mine = Domain::reduction(xm.sizes, dims);
  if (!dom_.has_reduction() || !(mine.full == dom_.full) || mine.reduced != dom_.reduced)
    throw Refusal("reduction %" + std::to_string(n) + " iterates another domain");
  // Its result exists once per outer point: the map must walk the outer dims in order.
  const std::optional<Map> natural = dom_.natural_map(node.meta.sizes);
  if (!natural || !(*natural == map))
    throw Refusal("reduction %" + std::to_string(n) + " is read in another order than it is computed");
  if (auto it = reductions_.find(n); it != reductions_.end()) return it->second;

  const int32_t x = emit(node.inputs[0], *dom_.natural_map(dom_.full));
  const DType t = node.meta.dtype;
  SymInt count = 1;
  for (size_t d = 0; d < dom_.full.size(); ++d)
    if (dom_.reduced[d]) count = count * dom_.full[d];
  auto reduce = [&](ReduceKind kind, int32_t v, DType dt) {
    Instr in;
    in.kind = InstrKind::reduce;
    in.reduce = kind;
    in.dtype = dt;
    in.args = {v};
    return add(std::move(in));
  };
  // Counts are divided by in f32 (f64 for f64): 65600 elements are not an f16 number.
  const DType count_t = t == DType::f64 ? DType::f64 : DType::f32;
  auto as_float = [&](const SymInt& s) {
    Instr in;
    in.kind = InstrKind::size;
    in.dtype = DType::i64;
    in.size = s;
    return pointwise(OpId::cast, count_t, {add(std::move(in))}, Attrs{count_t});
  };
  auto cast_to = [&](int32_t v, DType dt) {
    return k_.instrs[static_cast<size_t>(v)].dtype == dt ? v : pointwise(OpId::cast, dt, {v}, Attrs{dt});
  };
  int32_t result = -1;
  switch (node.op) {
    case OpId::sum: result = reduce(ReduceKind::sum, cast_to(x, t), t); break;
    case OpId::prod: result = reduce(ReduceKind::prod, cast_to(x, t), t); break;
    case OpId::max: result = reduce(ReduceKind::max, x, t); break;
    case OpId::min: result = reduce(ReduceKind::min, x, t); break;
    case OpId::argmax: result = reduce(ReduceKind::argmax, x, t); break;
    case OpId::argmin: result = reduce(ReduceKind::argmin, x, t); break;
    // mean and var compute in f32 for f16/bf16 (the reference works in double), rounded once.
    case OpId::mean: {
      const int32_t s = reduce(ReduceKind::sum, cast_to(x, count_t), count_t);
      result = cast_to(pointwise(OpId::div, count_t, {s, as_float(count)}), t);
      break;
    }
    case OpId::var: {
      const int32_t xf = cast_to(x, count_t);
      const int32_t mean = pointwise(OpId::div, count_t, {reduce(ReduceKind::sum, xf, count_t), as_float(count)});
      const int32_t d = pointwise(OpId::sub, count_t, {xf, mean});
      const int32_t ss = reduce(ReduceKind::sum, pointwise(OpId::mul, count_t, {d, d}), count_t);
      const int64_t correction = node.attrs.i(2);
      // torch divides by max(0, N - correction): N <= correction gives inf (or NaN).
      SymInt denom = count - SymInt(correction);
      int32_t d_val;
      if (denom.is_static()) {
        d_val = as_float(denom.hint() < 0 ? SymInt(0) : denom);
      } else {
        d_val = pointwise(OpId::maximum, count_t, {as_float(denom), constant(0.0, count_t)});
      }
      result = cast_to(pointwise(OpId::div, count_t, {ss, d_val}), t);
      break;
    }
    default: throw Refusal("reduction " + std::string(op_name(node.op)) + " has no kernel lowering");
  }
  reductions_[n] = result;
  return result;
}

void KernelBuilder::store(NodeId n, int32_t buffer) {
  const TensorMeta& meta = ctx_.g.node(n).meta;
  std::optional<Map> map = dom_.natural_map(meta.sizes);
  if (!map) throw Refusal("node %" + std::to_string(n) + " of shape " + shape_str(meta.sizes) +
                          " does not fit the kernel's domain " + shape_str(dom_.full));
  Store s;
  s.buffer = buffer;
  s.value = emit(n, *map);
  s.index = compose(*map, contiguous_strides(meta.sizes), 0, rank());
  k_.stores.push_back(std::move(s));
}

void KernelBuilder::set_gemm(int32_t c) {
  for (Instr& in : k_.instrs)
    if (in.kind == InstrKind::load && in.buffer == -2) in.buffer = c;
  Gemm gm;
  const Node& mm = ctx_.g.node(dom_.gemm);
  const SymShape& out = mm.meta.sizes;
  const size_t r = out.size();
  gm.c = c;
  gm.dtype = mm.meta.dtype;
  gm.m = out[r - 2];
  gm.n = out[r - 1];
  gm.batch.assign(out.begin(), out.end() - 2);
  for (int side = 0; side < 2; ++side) {
    const NodeId op = mm.inputs[static_cast<size_t>(side)];
    const TensorMeta& om = ctx_.g.node(op).meta;
    std::optional<Layout> l = ctx_.layout(op, &member_);
    KILN_INTERNAL_CHECK(l.has_value(), "schedule: matmul operand %", op, " is not a view of a buffer");
    const size_t orank = om.sizes.size();
    SymShape bstrides(gm.batch.size(), SymInt(0));
    for (size_t j = 0; j + 2 < orank; ++j) {
      const size_t od = gm.batch.size() - (orank - 2) + j;
      bstrides[od] = om.sizes[j] == 1 ? SymInt(0) : l->strides[j];
    }
    const int32_t buf = ctx_.buffer_of[static_cast<size_t>(l->base)];
    if (side == 0) {
      gm.a = buf;
      gm.k = om.sizes[orank - 1];
      gm.a_offset = l->offset;
      gm.a_batch_strides = bstrides;
      gm.a_row_stride = l->strides[orank - 2];
      gm.a_col_stride = l->strides[orank - 1];
    } else {
      gm.b = buf;
      gm.b_offset = l->offset;
      gm.b_batch_strides = bstrides;
      gm.b_row_stride = l->strides[orank - 2];
      gm.b_col_stride = l->strides[orank - 1];
    }
  }
  k_.gemm = gm;
}

Kernel KernelBuilder::finish() {
  for (const Instr& in : k_.instrs)
    if (in.kind == InstrKind::load && in.buffer == -2) throw Refusal("matmul kernel without its gemm");
  finish_kernel(k_);
  collapse_dims(k_);
  return std::move(k_);
}

}  // namespace kiln::schedule::detail
