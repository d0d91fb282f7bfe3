#include "kiln/graph/graph.h"

#include <algorithm>
#include <bit>
#include <sstream>

#include "kiln/graph/error.h"

namespace kiln {

namespace {

uint64_t mix(uint64_t h, uint64_t v) { return h ^ (v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2)); }

uint64_t hash_meta(const TensorMeta& m) {
  uint64_t h = mix(static_cast<uint64_t>(m.dtype), static_cast<uint64_t>(m.device.type) * 64 + m.device.index);
  for (const auto& s : m.sizes) h = mix(h, s.hash());
  h = mix(h, 0xABC);
  for (const auto& s : m.strides) h = mix(h, s.hash());
  return h;
}

std::string attr_str(const AttrValue& v) {
  std::ostringstream out;
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool>) {
          out << (x ? "true" : "false");
        } else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, double>) {
          out << x;
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          out << '[';
          for (size_t i = 0; i < x.size(); ++i) out << (i ? ", " : "") << x[i];
          out << ']';
        } else if constexpr (std::is_same_v<T, std::vector<SymInt>>) {
          out << shape_str(x);
        } else if constexpr (std::is_same_v<T, DType>) {
          out << dtype_name(x);
        } else if constexpr (std::is_same_v<T, std::string>) {
          out << '"' << x << '"';
        } else {
          out << "tensor " << dtype_name(x->dtype) << shape_str(static_shape(x->sizes));
        }
      },
      v);
  return out.str();
}

// A node's static sizes, as every shape rule gives them, within what a tensor may have (2^48
// bytes, as TensorData and plan buffers): an expand, a tile or an input to 2^62 elements is
// refused where it is made, by name, not where something first counts its bytes.
void check_size(const TensorMeta& m, NodeId id, std::string_view op) {
  for (const SymInt& s : m.sizes)
    if (s.is_static() && s.hint() == 0) return;  // no element, whatever the other dims
  int64_t bytes = dtype_size(m.dtype);
  for (const SymInt& s : m.sizes) {
    if (!s.is_static()) continue;  // bound at run time, and checked there (plan::bind, TensorData)
    const int64_t d = s.hint();
    if (d < 0) continue;  // the shape rules refuse these with their own sentence
    if (__builtin_mul_overflow(bytes, d, &bytes) || bytes > (int64_t{1} << 48))
      fail("node %", id, " (", op, "): its ", dtype_name(m.dtype), shape_str(m.sizes),
           " output would need more bytes than a tensor may have (2^48)");
  }
}

}  // namespace

NodeId Graph::add_input(TensorMeta meta, std::string name) {
  check_size(meta, static_cast<NodeId>(nodes_.size()), "input" + (name.empty() ? std::string() : " '" + name + "'"));
  Node n;
  n.op = OpId::input;
  n.attrs.values.push_back(static_cast<int64_t>(inputs_.size()));
  n.meta = std::move(meta);
  n.name = std::move(name);
  const auto id = static_cast<NodeId>(nodes_.size());
  nodes_.push_back(std::move(n));
  inputs_.push_back(id);
  return id;
}

NodeId Graph::add(OpId op, std::vector<NodeId> inputs, Attrs attrs) {
  const OpDef& def = op_def(op);
  const auto id = static_cast<NodeId>(nodes_.size());
  KILN_CHECK(op != OpId::input, "node ", id, ": inputs are added with add_input");
  const int n = static_cast<int>(inputs.size());
  KILN_CHECK(n >= def.min_inputs && (def.max_inputs < 0 || n <= def.max_inputs), def.name, ": expected ",
             def.min_inputs == def.max_inputs ? std::to_string(def.min_inputs)
             : def.max_inputs < 0             ? std::to_string(def.min_inputs) + " or more"
                                  : std::to_string(def.min_inputs) + " to " + std::to_string(def.max_inputs),
             " inputs, got ", n);
  KILN_CHECK(attrs.size() == def.attrs.size(), def.name, ": expected ", def.attrs.size(), " attributes, got ",
             attrs.size());
  for (size_t k = 0; k < def.attrs.size(); ++k)
    KILN_CHECK(attr_kind_of(attrs.values[k]) == def.attrs[k].kind, def.name, ": attribute '", def.attrs[k].name,
               "' must be ", attr_kind_name(def.attrs[k].kind), ", got ",
               attr_kind_name(attr_kind_of(attrs.values[k])));
  const TensorMeta* metas[8];
  std::vector<const TensorMeta*> many;
  std::span<const TensorMeta* const> in;
  if (n <= 8) {
    for (int i = 0; i < n; ++i) {
      KILN_CHECK(inputs[i] >= 0 && inputs[i] < id, def.name, ": input ", i, " refers to node ", inputs[i],
                 ", which is not an earlier node");
      metas[i] = &nodes_[static_cast<size_t>(inputs[i])].meta;
    }
    in = std::span<const TensorMeta* const>(metas, static_cast<size_t>(n));
  } else {
    for (int i = 0; i < n; ++i) {
      KILN_CHECK(inputs[i] >= 0 && inputs[i] < id, def.name, ": input ", i, " refers to node ", inputs[i],
                 ", which is not an earlier node");
      many.push_back(&nodes_[static_cast<size_t>(inputs[i])].meta);
    }
    in = many;
  }
  // Generated values (sources, constants and what is computed from them alone) take the device
  // of the placed inputs they meet (the first input that is neither generated nor a 0-d cpu
  // scalar): a graph runs on its inputs' device, and its constants are part of the program (a
  // causal mask a trace built eagerly on the GPU is a host constant of the graph).
  const TensorMeta* placed = placed_input(inputs);
  std::vector<TensorMeta> moved;
  std::vector<const TensorMeta*> moved_in;
  if (placed && !(placed->device == Device::cpu())) {
    for (int i = 0; i < n; ++i) {
      if (!placeless(inputs[static_cast<size_t>(i)])) continue;
      if (moved.empty())
        for (int j = 0; j < n; ++j) moved.push_back(*in[static_cast<size_t>(j)]);
      moved[static_cast<size_t>(i)].device = placed->device;
    }
    for (const TensorMeta& m : moved) moved_in.push_back(&m);
    if (!moved.empty()) in = moved_in;
  }
  TensorMeta meta = def.infer(InferContext{op, in, attrs, shapes_});
  check_size(meta, id, def.name);
  nodes_.push_back(Node{op, std::move(inputs), std::move(attrs), std::move(meta), {}});
  return id;
}

const TensorMeta* Graph::placed_input(std::span<const NodeId> inputs) const {
  for (NodeId i : inputs) {
    const TensorMeta& m = node(i).meta;
    if (!(m.device == Device::cpu() && m.rank() == 0) && !placeless(i)) return &m;
  }
  return nullptr;
}

std::vector<TensorMeta> Graph::metas_met(std::span<const NodeId> inputs) const {
  std::vector<TensorMeta> metas;
  for (NodeId i : inputs) metas.push_back(node(i).meta);
  if (const TensorMeta* placed = placed_input(inputs))
    for (size_t k = 0; k < inputs.size(); ++k)
      if (placeless(inputs[k])) metas[k].device = placed->device;
  return metas;
}

bool Graph::placeless(NodeId id) const {
  for (size_t i = placeless_.size(); i <= static_cast<size_t>(id); ++i) {
    const Node& n = nodes_[i];
    bool p = false;
    switch (n.op) {
      case OpId::full: case OpId::arange: case OpId::iota: case OpId::constant: p = true; break;
      case OpId::randn: case OpId::rand:  // placed by their key, if they have one
        p = n.inputs.empty() || placeless_[static_cast<size_t>(n.inputs[0])] != 0;
        break;
      case OpId::input: p = false; break;
      default:
        p = !n.inputs.empty() &&
            std::all_of(n.inputs.begin(), n.inputs.end(), [&](NodeId k) { return placeless_[static_cast<size_t>(k)] != 0; });
    }
    placeless_.push_back(p ? 1 : 0);
  }
  return placeless_[static_cast<size_t>(id)] != 0;
}

void Graph::set_outputs(std::vector<NodeId> outputs) {
  for (NodeId o : outputs)
    KILN_CHECK(o >= 0 && static_cast<size_t>(o) < nodes_.size(), "graph output refers to node ", o,
               ", but the graph has ", nodes_.size(), " nodes");
  outputs_ = std::move(outputs);
}

void Graph::set_name(NodeId id, std::string name) {
  KILN_CHECK(id >= 0 && static_cast<size_t>(id) < nodes_.size(), "set_name: node ", id, " does not exist");
  nodes_[static_cast<size_t>(id)].name = std::move(name);
}

size_t Graph::op_count() const { return nodes_.size() - inputs_.size(); }

std::string Graph::str() const {
  std::ostringstream out;
  for (const auto& s : shapes_.symbols()) {
    out << "symbol s" << s.id << " in [" << s.min << ", " << s.max << "]";
    if (!s.source.empty()) out << " from " << s.source;
    out << (s.user_dynamic ? " (marked dynamic)" : "") << "\n";
  }
  for (const auto& f : shapes_.facts())
    out << "fact " << f.str() << (f.reason.empty() ? "" : "  (" + f.reason + ")") << "\n";
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    const OpDef& def = op_def(n.op);
    out << '%' << i << " = " << def.name;
    if (n.op == OpId::input) {
      out << ' ' << n.attrs.i(0);
      if (!n.name.empty()) out << " (" << n.name << ")";
    } else {
      out << '(';
      for (size_t k = 0; k < n.inputs.size(); ++k) out << (k ? ", %" : "%") << n.inputs[k];
      for (size_t k = 0; k < n.attrs.size(); ++k)
        out << ((k || !n.inputs.empty()) ? ", " : "") << def.attrs[k].name << '=' << attr_str(n.attrs.values[k]);
      out << ')';
    }
    out << " : " << n.meta.str() << "\n";
  }
  out << "return ";
  for (size_t k = 0; k < outputs_.size(); ++k) out << (k ? ", %" : "%") << outputs_[k];
  out << "\n";
  return out.str();
}

Graph Graph::canonical() const {
  // Live nodes: inputs (the signature) and everything the outputs reach.
  std::vector<char> live = needed_nodes(*this, outputs_);
  for (NodeId i : inputs_) live[static_cast<size_t>(i)] = 1;
  Graph g;
  for (const auto& s : shapes_.symbols()) {
    SymbolInfo info = s;
    info.source.clear();
    info.example = 0;
    g.shapes_.add_symbol(std::move(info));
  }
  for (const auto& f : shapes_.facts()) g.shapes_.add_fact({f.lhs, f.rhs, f.relation, {}});
  std::vector<NodeId> remap(nodes_.size(), -1);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (!live[i]) continue;
    Node n = nodes_[i];
    n.name.clear();
    for (NodeId& in : n.inputs) in = remap[static_cast<size_t>(in)];
    remap[i] = static_cast<NodeId>(g.nodes_.size());
    if (n.op == OpId::input) g.inputs_.push_back(remap[i]);
    g.nodes_.push_back(std::move(n));
  }
  for (NodeId o : outputs_) g.outputs_.push_back(remap[static_cast<size_t>(o)]);
  return g;
}

uint64_t Graph::structural_hash() const {
  const Graph c = canonical();
  uint64_t h = 0x4B494C4E;  // "KILN"
  for (const auto& s : c.shapes_.symbols()) h = mix(mix(mix(h, s.id), static_cast<uint64_t>(s.min)), static_cast<uint64_t>(s.max));
  for (const auto& f : c.shapes_.facts()) h = mix(mix(mix(h, f.lhs.hash()), f.rhs.hash()),
                                                 f.relation == Relation::eq   ? 1  // (== and != as the bool they were)
                                                 : f.relation == Relation::ne ? 0
                                                                              : 1 + static_cast<uint64_t>(f.relation));
  for (const auto& n : c.nodes_) {
    h = mix(h, static_cast<uint64_t>(n.op));
    for (NodeId in : n.inputs) h = mix(h, static_cast<uint64_t>(in));
    h = mix(h, n.attrs.hash());
    h = mix(h, hash_meta(n.meta));
  }
  for (NodeId o : c.outputs_) h = mix(h, static_cast<uint64_t>(o) + 0x100000);
  return h;
}

bool Graph::operator==(const Graph& o) const {
  if (nodes_.size() != o.nodes_.size() || inputs_ != o.inputs_ || outputs_ != o.outputs_ ||
      shapes_.symbols() != o.shapes_.symbols() || shapes_.facts() != o.shapes_.facts())
    return false;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& a = nodes_[i];
    const Node& b = o.nodes_[i];
    if (a.op != b.op || a.inputs != b.inputs || !(a.attrs == b.attrs) || !(a.meta == b.meta) || a.name != b.name)
      return false;
  }
  return true;
}

std::vector<char> needed_nodes(const Graph& g, std::span<const NodeId> roots, std::span<const char> stop) {
  std::vector<char> needed(g.size(), 0);
  for (NodeId r : roots)
    if (r >= 0) needed[static_cast<size_t>(r)] = 1;
  // Ids grow along edges: one pass from the last node down sees each node's readers first.
  for (size_t id = g.size(); id-- > 0;)
    if (needed[id] && !(id < stop.size() && stop[id]))
      for (NodeId in : g.node(static_cast<NodeId>(id)).inputs) needed[static_cast<size_t>(in)] = 1;
  return needed;
}

}  // namespace kiln
