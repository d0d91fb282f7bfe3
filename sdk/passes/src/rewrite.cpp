#include "rewrite.h"

#include <cmath>
#include <cstring>

#include "kiln/graph/error.h"
#include "kiln/passes/passes.h"

namespace kiln::passes::detail {

bool same_value_meta(const TensorMeta& a, const TensorMeta& b) {
  return a.dtype == b.dtype && a.device == b.device && a.sizes == b.sizes;
}

Rewriter::Rewriter(const Graph& in, std::string_view pass) : in_(in), pass_(pass), map_(in.size(), -1) {
  out_.shapes() = in.shapes();
  for (NodeId id : in.inputs()) {
    const Node& n = in.node(id);
    map_[static_cast<size_t>(id)] = out_.add_input(n.meta, n.name);
  }
}

std::vector<NodeId> Rewriter::mapped_inputs(NodeId id) const {
  std::vector<NodeId> ins = in_.node(id).inputs;
  for (NodeId& i : ins) {
    KILN_INTERNAL_CHECK(map(i) >= 0, "passes: ", pass_, ": node %", id, " reads %", i,
               ", which the pass did not keep");
    i = map(i);
  }
  return ins;
}

NodeId Rewriter::copy(NodeId id) {
  const Node& n = in_.node(id);
  KILN_INTERNAL_CHECK(n.op != OpId::input, "passes: ", pass_, ": input %", id, " copied twice");
  const NodeId to = out_.add(n.op, mapped_inputs(id), n.attrs);
  if (!n.name.empty()) out_.set_name(to, n.name);
  bind(id, to);
  return to;
}

void Rewriter::bind(NodeId id, NodeId to) {
  const TensorMeta& was = in_.node(id).meta;
  const TensorMeta& now = out_.node(to).meta;
  KILN_INTERNAL_CHECK(same_value_meta(was, now), "passes: ", pass_, " replaced %", id, " (", op_name(in_.node(id).op),
             ", ", was.str(), ") by %", to, " (", op_name(out_.node(to).op), ", ", now.str(),
             "), which has another meta");
  map_[static_cast<size_t>(id)] = to;
}

Graph Rewriter::finish() {
  std::vector<NodeId> outs;
  for (NodeId o : in_.outputs()) {
    KILN_INTERNAL_CHECK(map(o) >= 0, "passes: ", pass_, " dropped output %", o);
    outs.push_back(map(o));
  }
  out_.set_outputs(std::move(outs));
  return std::move(out_);
}

std::optional<TensorMeta> probe(const Graph& g, OpId op, std::span<const NodeId> inputs, const Attrs& attrs) {
  const std::vector<TensorMeta> metas = g.metas_met(inputs);
  return probe(g, op, std::span<const TensorMeta>(metas), attrs);
}

std::optional<TensorMeta> probe(const Graph& g, OpId op, std::span<const TensorMeta> inputs, const Attrs& attrs) {
  Graph scratch;
  scratch.shapes() = g.shapes();
  std::vector<NodeId> ids;
  for (const TensorMeta& m : inputs) ids.push_back(scratch.add_input(m));
  try {
    const NodeId id = scratch.add(op, std::move(ids), attrs);
    if (scratch.shapes().facts().size() != g.shapes().facts().size()) return std::nullopt;
    return scratch.node(id).meta;
  } catch (const Error&) {
    return std::nullopt;
  }
}

namespace {

template <class T>
T read(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The stored element (bytes of dtype t) as a double and whether the double is exact.
std::optional<double> exact_at(const std::byte* p, DType t) {
  switch (t) {
    case DType::bool_: return read<uint8_t>(p) != 0 ? 1.0 : 0.0;
    case DType::i32: return static_cast<double>(read<int32_t>(p));
    case DType::i64: {
      const int64_t v = read<int64_t>(p);
      constexpr int64_t kExact = int64_t{1} << 53;
      if (v > kExact || v < -kExact) return std::nullopt;
      return static_cast<double>(v);
    }
    case DType::f16: return static_cast<double>(half_bits_to_float(read<uint16_t>(p)));
    case DType::bf16: return static_cast<double>(bf16_bits_to_float(read<uint16_t>(p)));
    case DType::f32: return static_cast<double>(read<float>(p));
    case DType::f64: return read<double>(p);
  }
  return std::nullopt;
}

// The element a `full` of `value` stores, read back as a double (what the reference's full
// kernel does: round to a float dtype, truncate toward zero for integers, != 0 for bool).
std::optional<double> full_element(double value, DType t) {
  if (std::isnan(value)) return value;
  switch (t) {
    case DType::bool_: return value != 0 ? 1.0 : 0.0;
    case DType::i32:
    case DType::i64: {
      const double v = std::trunc(value);
      if (!(std::fabs(v) < 9.0e15)) return std::nullopt;  // out of range: leave it alone
      if (t == DType::i32 && (v > 2147483647.0 || v < -2147483648.0)) return std::nullopt;
      return v;
    }
    case DType::f16: return static_cast<double>(half_bits_to_float(float_to_half_bits(static_cast<float>(value))));
    case DType::bf16: return static_cast<double>(bf16_bits_to_float(float_to_bf16_bits(static_cast<float>(value))));
    case DType::f32: return static_cast<double>(static_cast<float>(value));
    case DType::f64: return value;
  }
  return std::nullopt;
}

}  // namespace

std::optional<double> exact_element(const TensorData& t, int64_t k) {
  return exact_at(static_cast<const std::byte*>(t.data()) + k * dtype_size(t.dtype), t.dtype);
}

std::optional<double> uniform_value(const Graph& g, NodeId id) {
  for (;;) {
    const Node& n = g.node(id);
    switch (n.op) {
      case OpId::reshape:
      case OpId::expand:
      case OpId::permute:
      case OpId::squeeze:
      case OpId::unsqueeze: id = n.inputs[0]; continue;
      case OpId::full: {
        const std::optional<double> v = full_element(n.attrs.f(1), n.attrs.dtype(2));
        if (!v || std::isnan(*v)) return std::nullopt;
        return v;
      }
      case OpId::constant: {
        const ConstantData& c = n.attrs.tensor(0);
        const int64_t size = dtype_size(c.dtype);
        const int64_t count = static_cast<int64_t>(c.bytes.size()) / size;
        if (count == 0 || count > kMaxFoldElements) return std::nullopt;
        const std::optional<double> first = exact_at(c.bytes.data(), c.dtype);
        if (!first || std::isnan(*first)) return std::nullopt;
        for (int64_t k = 1; k < count; ++k) {
          const std::optional<double> v = exact_at(c.bytes.data() + k * size, c.dtype);
          if (!v || *v != *first) return std::nullopt;
        }
        return first;
      }
      default: return std::nullopt;
    }
  }
}

TensorData tensor_of(const ConstantData& c) {
  TensorData t = TensorData::empty_host(c.dtype, c.sizes);
  if (!c.bytes.empty()) std::memcpy(t.data(), c.bytes.data(), c.bytes.size());
  return t;
}

ConstantData constant_of(const TensorData& t) {
  KILN_CHECK(t.is_contiguous(), "passes: constant_of needs a contiguous tensor");
  ConstantData c;
  c.dtype = t.dtype;
  c.sizes = t.sizes;
  const auto* bytes = static_cast<const std::byte*>(t.data());
  c.bytes.assign(bytes, bytes + t.numel() * dtype_size(t.dtype));
  return c;
}

std::string rules_summary(std::string_view pass, const std::map<std::string, int>& fired, std::string_view noun,
                          std::string_view verb, int& total) {
  total = 0;
  std::string detail;
  for (const auto& [rule, count] : fired) {
    total += count;
    detail += (detail.empty() ? "" : ", ") + rule + ": " + std::to_string(count);
  }
  return std::string(pass) + ": " + std::to_string(total) + " " + std::string(noun) + (total == 1 ? "" : "s") +
         (verb.empty() ? "" : " " + std::string(verb)) + (detail.empty() ? "" : " (" + detail + ")");
}

}  // namespace kiln::passes::detail
