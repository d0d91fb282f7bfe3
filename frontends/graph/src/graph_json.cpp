// The "kiln.graph" JSON format, version 1 (docs/graph-format.md).
//
// Writing builds an nlohmann::ordered_json document (keys in a fixed order) and prints it with
// a small printer of our own: the top level and its arrays one item a line, each symbol, fact
// and node on one line. Reading checks the type of every value before using it, bounds every
// size so that no later arithmetic on hints can overflow, and rebuilds the graph through
// Graph::add_input / Graph::add, so the shape rules re-derive every node's type; the type the
// file states must then match.
#include "kiln/format/graph_json.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base64.h"
#include "kiln/graph/error.h"

namespace kiln::format {

namespace {

using json = nlohmann::ordered_json;

// Bounds on what a file may describe. A graph holds no data except constants, but shape rules
// and later stages do arithmetic on sizes (sums, products, strides), so every size at its
// example values stays below 2^48 and every tensor below 2^62 elements: no int64 overflow.
constexpr int64_t kMaxDim = int64_t{1} << 48;
constexpr int64_t kMaxNumel = int64_t{1} << 62;
constexpr int kMaxDepth = 64;  // JSON nesting; version 1 files need 5

// ---------------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------------

json size_json(const SymInt& s) {
  if (s.is_static()) return json(s.hint());
  return json(s.expr().str());
}

json shape_json(std::span<const SymInt> shape) {
  json a = json::array();
  for (const SymInt& s : shape) a.push_back(size_json(s));
  return a;
}

json float_json(double v) {
  if (std::isnan(v)) return json(std::signbit(v) ? "-nan" : "nan");
  if (std::isinf(v)) return json(v > 0 ? "inf" : "-inf");
  return json(v);
}

json meta_json(const TensorMeta& m) {
  json t = json::object();
  t["dtype"] = std::string(dtype_name(m.dtype));
  t["shape"] = shape_json(m.sizes);
  t["device"] = m.device.str();
  if (!m.strides.empty()) t["strides"] = shape_json(m.strides);
  return t;
}

json tensor_json(const ConstantData& c) {
  json t = json::object();
  t["dtype"] = std::string(dtype_name(c.dtype));
  t["shape"] = json(c.sizes);
  t["data_base64"] = detail::base64_encode(c.bytes);
  return t;
}

json attr_json(const Attrs& attrs, size_t k, AttrKind kind) {
  switch (kind) {
    case AttrKind::int_: return json(attrs.i(k));
    case AttrKind::float_: return float_json(attrs.f(k));
    case AttrKind::bool_: return json(attrs.b(k));
    case AttrKind::ints: return json(attrs.ints(k));
    case AttrKind::symints: return shape_json(attrs.symints(k));
    case AttrKind::dtype: return json(std::string(dtype_name(attrs.dtype(k))));
    case AttrKind::string: return json(attrs.s(k));
    case AttrKind::tensor: return tensor_json(attrs.tensor(k));
  }
  fail("unknown attribute kind");
}

json node_json(const Graph& g, NodeId id, int64_t input_index) {
  const Node& n = g.node(id);
  const OpDef& def = op_def(n.op);
  json j = json::object();
  j["id"] = id;
  j["op"] = std::string(def.name);
  if (!n.name.empty()) j["name"] = n.name;
  if (!n.inputs.empty()) j["inputs"] = json(n.inputs);
  if (n.op == OpId::input) {
    // An input's index is its position among the graph's inputs.
    j["attrs"] = json::object({{"index", input_index}});
  } else if (!def.attrs.empty()) {
    KILN_CHECK(n.attrs.size() == def.attrs.size(), "to_json: node ", id, " (", def.name, ") has ",
               n.attrs.size(), " attributes; the op declares ", def.attrs.size());
    json a = json::object();
    for (size_t k = 0; k < def.attrs.size(); ++k)
      a[std::string(def.attrs[k].name)] = attr_json(n.attrs, k, def.attrs[k].kind);
    j["attrs"] = std::move(a);
  }
  j["type"] = meta_json(n.meta);
  return j;
}

json graph_document(const Graph& g) {
  json doc = json::object();
  doc["format"] = "kiln.graph";
  doc["version"] = kGraphFormatVersion;
  json symbols = json::array();
  for (const SymbolInfo& s : g.shapes().symbols()) {
    json j = json::object();
    j["name"] = "s" + std::to_string(s.id);
    j["example"] = s.example;
    j["min"] = s.min;
    j["max"] = s.max;
    j["source"] = s.source;
    j["user_dynamic"] = s.user_dynamic;
    symbols.push_back(std::move(j));
  }
  doc["symbols"] = std::move(symbols);
  json facts = json::array();
  for (const ShapeFact& f : g.shapes().facts()) {
    json j = json::object();
    j["lhs"] = f.lhs.str();
    j["rhs"] = f.rhs.str();
    j["equal"] = f.equal;
    j["reason"] = f.reason;
    facts.push_back(std::move(j));
  }
  doc["facts"] = std::move(facts);
  json nodes = json::array();
  int64_t input_index = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    NodeId id = static_cast<NodeId>(i);
    bool is_input = g.node(id).op == OpId::input;
    nodes.push_back(node_json(g, id, is_input ? input_index : -1));
    if (is_input) ++input_index;
  }
  doc["nodes"] = std::move(nodes);
  doc["outputs"] = json(g.outputs());
  return doc;
}

// Inline form: {"a": 1, "b": [2, 3]}. Scalars print as nlohmann does (shortest round-trip
// doubles, escaped strings).
void print_inline(const json& j, std::string& out) {
  if (j.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [key, value] : j.items()) {
      if (!first) out += ", ";
      first = false;
      out += json(key).dump();
      out += ": ";
      print_inline(value, out);
    }
    out += '}';
  } else if (j.is_array()) {
    out += '[';
    bool first = true;
    for (const auto& value : j) {
      if (!first) out += ", ";
      first = false;
      print_inline(value, out);
    }
    out += ']';
  } else {
    out += j.dump();
  }
}

bool all_scalars(const json& a) {
  return std::all_of(a.begin(), a.end(), [](const json& v) { return v.is_primitive(); });
}

// Block form for the top-level object and its arrays; their items print inline.
void print_block(const json& j, int indent, int depth, std::string& out) {
  std::string pad(static_cast<size_t>(indent * (depth + 1)), ' ');
  std::string close_pad(static_cast<size_t>(indent * depth), ' ');
  if (j.is_object() && !j.empty() && depth == 0) {
    out += "{\n";
    bool first = true;
    for (const auto& [key, value] : j.items()) {
      if (!first) out += ",\n";
      first = false;
      out += pad;
      out += json(key).dump();
      out += ": ";
      print_block(value, indent, depth + 1, out);
    }
    out += '\n';
    out += close_pad;
    out += '}';
  } else if (j.is_array() && !j.empty() && !all_scalars(j)) {
    out += "[\n";
    bool first = true;
    for (const auto& value : j) {
      if (!first) out += ",\n";
      first = false;
      out += pad;
      print_inline(value, out);
    }
    out += '\n';
    out += close_pad;
    out += ']';
  } else {
    print_inline(j, out);
  }
}

// ---------------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------------

std::string describe(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::boolean: return v.get<bool>() ? "true" : "false";
    case json::value_t::string: {
      std::string s = v.dump();
      if (s.size() > 40) s = s.substr(0, 37) + "...\"";
      return "string " + s;
    }
    case json::value_t::binary: return "binary data";
    case json::value_t::discarded: return "nothing";
    default: return "number " + v.dump();
  }
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// Max nesting depth of JSON text, counting brackets outside strings; stops early past `limit`.
int nesting_depth(std::string_view text, int limit) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
      if (max_depth > limit) return max_depth;
    } else if (c == ']' || c == '}') --depth;
  }
  return max_depth;
}

// Checked arithmetic.
bool mul_ok(int64_t a, int64_t b, int64_t* r) { return !__builtin_mul_overflow(a, b, r); }
bool add_ok(int64_t a, int64_t b, int64_t* r) { return !__builtin_add_overflow(a, b, r); }

class Reader {
 public:
  explicit Reader(std::string_view source) : source_(source) {}

  // "graph.json: node 3 (matmul): field 'inputs': expected 2 inputs, got 1"
  [[noreturn]] void fail_at(const std::string& where, std::string_view field,
                            const std::string& message) const {
    std::string m = source_;
    m += ": ";
    if (!where.empty()) m += where + ": ";
    if (!field.empty()) m += "field '" + std::string(field) + "': ";
    m += message;
    throw Error(m);
  }

  Graph read(std::string_view text);

 private:
  std::string source_;
  std::vector<int64_t> examples_;  // symbol example values, by id
  std::vector<int64_t> mags_;      // max(1, example), for magnitude bounds

  const json& need(const json& obj, const char* key, const std::string& where) const {
    auto it = obj.find(key);
    if (it == obj.end()) fail_at(where, "", std::string("missing field '") + key + "'");
    return *it;
  }
  const json* maybe(const json& obj, const char* key) const {
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }
  void only_keys(const json& obj, std::initializer_list<const char*> keys, const std::string& where) const {
    for (const auto& item : obj.items()) {
      const std::string& key = item.key();
      bool known = std::any_of(keys.begin(), keys.end(), [&](const char* k) { return key == k; });
      if (!known) {
        std::string list;
        for (const char* k : keys) list += (list.empty() ? "'" : ", '") + std::string(k) + "'";
        fail_at(where, "", "unknown field '" + key + "' (expected " + list + ")");
      }
    }
  }
  const json& object(const json& v, const std::string& where, std::string_view field) const {
    if (!v.is_object()) fail_at(where, field, "expected an object, got " + describe(v));
    return v;
  }
  const json& array(const json& v, const std::string& where, std::string_view field) const {
    if (!v.is_array()) fail_at(where, field, "expected an array, got " + describe(v));
    return v;
  }
  int64_t integer(const json& v, const std::string& where, std::string_view field) const {
    if (v.is_number_unsigned()) {
      uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail_at(where, field, "integer " + v.dump() + " does not fit in 64 bits");
      return static_cast<int64_t>(u);
    }
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_number_float())
      fail_at(where, field, "expected an integer, got " + describe(v) + " (too large, or not whole)");
    fail_at(where, field, "expected an integer, got " + describe(v));
  }
  bool boolean(const json& v, const std::string& where, std::string_view field) const {
    if (!v.is_boolean()) fail_at(where, field, "expected true or false, got " + describe(v));
    return v.get<bool>();
  }
  const std::string& string(const json& v, const std::string& where, std::string_view field) const {
    if (!v.is_string()) fail_at(where, field, "expected a string, got " + describe(v));
    return v.get_ref<const std::string&>();
  }
  double floating(const json& v, const std::string& where, std::string_view field) const {
    if (v.is_number_float()) return v.get<double>();
    if (v.is_number_unsigned()) return static_cast<double>(v.get<uint64_t>());
    if (v.is_number_integer()) return static_cast<double>(v.get<int64_t>());
    if (v.is_string()) {
      const std::string& s = v.get_ref<const std::string&>();
      if (s == "inf") return std::numeric_limits<double>::infinity();
      if (s == "-inf") return -std::numeric_limits<double>::infinity();
      if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
      if (s == "-nan") return -std::numeric_limits<double>::quiet_NaN();
    }
    fail_at(where, field, "expected a number (or \"inf\", \"-inf\", \"nan\"), got " + describe(v));
  }
  DType dtype(const json& v, const std::string& where, std::string_view field) const {
    const std::string& s = string(v, where, field);
    try {
      return parse_dtype(s);
    } catch (const Error& e) {
      fail_at(where, field, e.what());
    }
  }

  // Sum of |coeff| * prod(max(1, example)) over the terms: bounds the expression's value at
  // the examples, and the coefficients of any product of such expressions.
  bool magnitude(const SymExpr& e, int64_t* out) const {
    int64_t total = 0;
    for (const SymTerm& t : e.terms()) {
      if (t.coeff == std::numeric_limits<int64_t>::min()) return false;
      int64_t m = t.coeff < 0 ? -t.coeff : t.coeff;
      for (SymbolId s : t.symbols)
        if (!mul_ok(m, mags_[s], &m)) return false;
      if (!add_ok(total, m, &total)) return false;
    }
    *out = total;
    return true;
  }

  // A size expression over the declared symbols, with its value at the examples.
  SymExpr sym_expr(const std::string& text, const std::string& where, std::string_view field) const {
    SymExpr e;
    try {
      e = parse_sym_expr(text);
    } catch (const Error& err) {
      fail_at(where, field, "bad size expression \"" + text + "\": " + err.what());
    }
    for (SymbolId s : e.free_symbols())
      if (s >= examples_.size())
        fail_at(where, field, "size expression \"" + text + "\" uses s" + std::to_string(s) + ", but the graph declares " +
                                  std::to_string(examples_.size()) + " symbols");
    int64_t mag = 0;
    if (!magnitude(e, &mag) || mag > kMaxDim)
      fail_at(where, field, "size expression \"" + text + "\" is too large (sizes are limited to 2^48)");
    return e;
  }

  // A non-negative size: an integer, or a string in SymExpr::str() form.
  SymInt size(const json& v, const std::string& where, std::string_view field) const {
    if (v.is_string()) {
      const std::string& text = v.get_ref<const std::string&>();
      SymExpr e = sym_expr(text, where, field);
      int64_t value = e.evaluate(examples_);  // bounded by magnitude: no overflow
      if (value < 0)
        fail_at(where, field, "size \"" + text + "\" is negative (" + std::to_string(value) + ") at the symbols' examples");
      if (e.is_constant()) return SymInt(value);
      return SymInt(std::move(e), value);
    }
    if (!v.is_number())
      fail_at(where, field, "expected a size (an integer or a symbolic expression string), got " + describe(v));
    int64_t n = integer(v, where, field);
    if (n < 0) fail_at(where, field, "negative size " + std::to_string(n));
    if (n > kMaxDim) fail_at(where, field, "size " + std::to_string(n) + " is too large (sizes are limited to 2^48)");
    return SymInt(n);
  }

  SymShape shape(const json& v, const std::string& where, std::string_view field) const {
    array(v, where, field);
    SymShape out;
    int64_t numel = 1;
    for (size_t i = 0; i < v.size(); ++i) {
      std::string f = std::string(field) + "[" + std::to_string(i) + "]";
      out.push_back(size(v[i], where, f));
      int64_t mag = 1;
      if (out.back().is_static()) mag = out.back().hint();
      else magnitude(out.back().expr(), &mag);
      if (!mul_ok(numel, std::max<int64_t>(mag, 1), &numel) || numel > kMaxNumel)
        fail_at(where, field, "shape " + shape_str(out) + "... has too many elements (the limit is 2^62)");
    }
    return out;
  }

  TensorMeta meta(const json& v, const std::string& where) const {
    object(v, where, "type");
    only_keys(v, {"dtype", "shape", "device", "strides"}, where + ": field 'type'");
    TensorMeta m;
    m.dtype = dtype(need(v, "dtype", where + ": field 'type'"), where, "type.dtype");
    m.sizes = shape(need(v, "shape", where + ": field 'type'"), where, "type.shape");
    if (const json* d = maybe(v, "device")) {
      const std::string& text = string(*d, where, "type.device");
      try {
        m.device = parse_device(text);
      } catch (const Error& e) {
        fail_at(where, "type.device", e.what());
      }
    }
    if (const json* s = maybe(v, "strides")) {
      m.strides = shape(*s, where, "type.strides");
      if (m.strides.size() != m.sizes.size())
        fail_at(where, "type.strides", "has " + std::to_string(m.strides.size()) + " strides for a tensor of rank " +
                                           std::to_string(m.sizes.size()));
    }
    return m;
  }

  std::shared_ptr<const ConstantData> tensor(const json& v, const std::string& where, const std::string& field) const {
    object(v, where, field);
    only_keys(v, {"dtype", "shape", "data_base64"}, where + ": field '" + field + "'");
    auto c = std::make_shared<ConstantData>();
    std::string ctx = where + ": field '" + field + "'";
    c->dtype = dtype(need(v, "dtype", ctx), where, field + ".dtype");
    const json& shape_v = array(need(v, "shape", ctx), where, field + ".shape");
    int64_t numel = 1;
    for (size_t i = 0; i < shape_v.size(); ++i) {
      int64_t n = integer(shape_v[i], where, field + ".shape");
      if (n < 0) fail_at(where, field + ".shape", "negative size " + std::to_string(n));
      if (n > kMaxDim || !mul_ok(numel, n, &numel) || numel > kMaxNumel)
        fail_at(where, field + ".shape", "the constant is too large");
      c->sizes.push_back(n);
    }
    const std::string& data = string(need(v, "data_base64", ctx), where, field + ".data_base64");
    int64_t esize = dtype_size(c->dtype);
    // numel <= 2^62 and the byte count is compared before anything is allocated.
    uint64_t want = static_cast<uint64_t>(numel) * static_cast<uint64_t>(esize);
    if (data.size() % 4 != 0 || detail::base64_decoded_size(data) != want)
      fail_at(where, field + ".data_base64",
              "holds " + std::to_string(data.size() % 4 == 0 ? detail::base64_decoded_size(data) : 0) +
                  " bytes (or is not base64); a " + std::string(dtype_name(c->dtype)) + " tensor of shape " +
                  shape_str(static_shape(c->sizes)) + " needs " + std::to_string(want));
    auto bytes = detail::base64_decode(data);
    if (!bytes) fail_at(where, field + ".data_base64", "is not valid base64");
    c->bytes = std::move(*bytes);
    if (c->dtype == DType::bool_)
      for (std::byte b : c->bytes)
        if (std::to_integer<unsigned>(b) > 1) fail_at(where, field + ".data_base64", "a bool element is neither 0 nor 1");
    return c;
  }

  AttrValue attr(const json& v, AttrKind kind, const std::string& where, const std::string& field) const {
    switch (kind) {
      case AttrKind::int_: return integer(v, where, field);
      case AttrKind::float_: return floating(v, where, field);
      case AttrKind::bool_: return boolean(v, where, field);
      case AttrKind::ints: {
        array(v, where, field);
        std::vector<int64_t> out;
        for (size_t i = 0; i < v.size(); ++i) out.push_back(integer(v[i], where, field + "[" + std::to_string(i) + "]"));
        return out;
      }
      case AttrKind::symints: return shape(v, where, field);
      case AttrKind::dtype: return dtype(v, where, field);
      case AttrKind::string: return string(v, where, field);
      case AttrKind::tensor: return tensor(v, where, field);
    }
    fail_at(where, field, "unknown attribute kind");
  }

  void read_symbols(const json& v, ShapeEnv& env);
  std::vector<ShapeFact> read_facts(const json& v) const;
  void read_node(const json& v, size_t index, Graph& g, int64_t& next_input);
};

void Reader::read_symbols(const json& v, ShapeEnv& env) {
  array(v, "", "symbols");
  for (size_t i = 0; i < v.size(); ++i) {
    std::string where = "symbol " + std::to_string(i);
    const json& s = object(v[i], where, "");
    only_keys(s, {"name", "example", "min", "max", "source", "user_dynamic"}, where);
    SymbolInfo info;
    info.id = static_cast<SymbolId>(i);
    const std::string& name = string(need(s, "name", where), where, "name");
    std::string expected = "s" + std::to_string(i);
    if (name != expected)
      fail_at(where, "name", "symbols must be listed as s0, s1, ... in order: expected '" + expected + "', got '" + name + "'");
    where = "symbol " + expected;
    info.example = integer(need(s, "example", where), where, "example");
    if (const json* m = maybe(s, "min")) info.min = integer(*m, where, "min");
    if (const json* m = maybe(s, "max")) info.max = integer(*m, where, "max");
    if (const json* m = maybe(s, "source")) info.source = string(*m, where, "source");
    if (const json* m = maybe(s, "user_dynamic")) info.user_dynamic = boolean(*m, where, "user_dynamic");
    if (info.min < 0) fail_at(where, "min", "negative minimum " + std::to_string(info.min));
    if (info.min > info.max)
      fail_at(where, "max", "range [" + std::to_string(info.min) + ", " + std::to_string(info.max) + "] is empty");
    if (info.example < info.min || info.example > info.max)
      fail_at(where, "example", "example " + std::to_string(info.example) + " is outside the range [" +
                                    std::to_string(info.min) + ", " + std::to_string(info.max) + "]");
    if (info.example > kMaxDim)
      fail_at(where, "example", "example " + std::to_string(info.example) + " is too large (sizes are limited to 2^48)");
    examples_.push_back(info.example);
    mags_.push_back(std::max<int64_t>(info.example, 1));
    try {
      env.add_symbol(info);
    } catch (const Error& e) {
      fail_at(where, "", e.what());
    }
  }
}

std::vector<ShapeFact> Reader::read_facts(const json& v) const {
  array(v, "", "facts");
  std::vector<ShapeFact> facts;
  for (size_t i = 0; i < v.size(); ++i) {
    std::string where = "fact " + std::to_string(i);
    const json& f = object(v[i], where, "");
    only_keys(f, {"lhs", "rhs", "equal", "reason"}, where);
    ShapeFact fact;
    auto side = [&](const char* key) {
      const json& s = need(f, key, where);
      if (s.is_number()) {
        // A constant side may be written as a plain integer.
        int64_t n = integer(s, where, key);
        if (n > kMaxDim || n < -kMaxDim) fail_at(where, key, "constant " + std::to_string(n) + " is too large");
        return SymExpr::constant(n);
      }
      return sym_expr(string(s, where, key), where, key);
    };
    fact.lhs = side("lhs");
    fact.rhs = side("rhs");
    if (const json* e = maybe(f, "equal")) fact.equal = boolean(*e, where, "equal");
    if (const json* r = maybe(f, "reason")) fact.reason = string(*r, where, "reason");
    facts.push_back(std::move(fact));
  }
  return facts;
}

void Reader::read_node(const json& v, size_t index, Graph& g, int64_t& next_input) {
  std::string where = "node " + std::to_string(index);
  const json& n = object(v, where, "");
  // Read the op first so every later message names it.
  const std::string& op_text = string(need(n, "op", where), where, "op");
  std::optional<OpId> op = find_op(op_text);
  if (!op) {
    std::string best;
    size_t best_d = std::numeric_limits<size_t>::max();
    for (const OpDef& d : all_ops()) {
      size_t dist = edit_distance(op_text, d.name);
      if (dist < best_d) best_d = dist, best = std::string(d.name);
    }
    std::string msg = "unknown op '" + op_text + "'";
    if (!best.empty() && best_d <= std::max<size_t>(2, op_text.size() / 3)) msg += " (did you mean '" + best + "'?)";
    fail_at(where, "", msg);
  }
  const OpDef& def = op_def(*op);
  where += " (" + std::string(def.name) + ")";
  only_keys(n, {"id", "op", "name", "inputs", "attrs", "type"}, where);

  int64_t id = integer(need(n, "id", where), where, "id");
  if (id != static_cast<int64_t>(index))
    fail_at(where, "id", "nodes must be listed with ids 0, 1, ... in order: expected " + std::to_string(index) +
                             ", got " + std::to_string(id));
  std::string name;
  if (const json* nm = maybe(n, "name")) name = string(*nm, where, "name");

  std::vector<NodeId> inputs;
  if (const json* in = maybe(n, "inputs")) {
    array(*in, where, "inputs");
    for (size_t i = 0; i < in->size(); ++i) {
      int64_t ref = integer((*in)[i], where, "inputs");
      if (ref < 0 || ref >= static_cast<int64_t>(index))
        fail_at(where, "inputs", "input " + std::to_string(i) + " refers to node " + std::to_string(ref) +
                                     "; a node may only use nodes listed before it (ids 0.." +
                                     std::to_string(static_cast<int64_t>(index) - 1) + ")");
      inputs.push_back(static_cast<NodeId>(ref));
    }
  }
  int given = static_cast<int>(std::min<size_t>(inputs.size(), 1u << 20));
  if (given < def.min_inputs || (def.max_inputs >= 0 && given > def.max_inputs)) {
    std::string want = def.max_inputs < 0 ? "at least " + std::to_string(def.min_inputs)
                       : def.min_inputs == def.max_inputs
                           ? std::to_string(def.min_inputs)
                           : std::to_string(def.min_inputs) + " to " + std::to_string(def.max_inputs);
    fail_at(where, "inputs", "expected " + want + " input" + (want == "1" ? "" : "s") + ", got " + std::to_string(given));
  }

  // Attributes by name, in the op's declared order.
  Attrs attrs;
  static const json kEmpty = json::object();
  const json* attrs_v = maybe(n, "attrs");
  if (attrs_v) object(*attrs_v, where, "attrs");
  const json& av = attrs_v ? *attrs_v : kEmpty;
  for (const auto& item : av.items()) {
    const std::string& key = item.key();
    bool known = std::any_of(def.attrs.begin(), def.attrs.end(), [&](const AttrSpec& s) { return s.name == key; });
    if (!known) {
      std::string list;
      for (const AttrSpec& s : def.attrs) list += (list.empty() ? "'" : ", '") + std::string(s.name) + "'";
      fail_at(where, "attrs", "unknown attribute '" + key + "' (" +
                                  (list.empty() ? std::string("the op takes none") : "expected " + list) + ")");
    }
  }
  for (const AttrSpec& spec : def.attrs) {
    std::string field = "attrs." + std::string(spec.name);
    auto it = av.find(std::string(spec.name));
    if (it == av.end()) {
      if (*op == OpId::input) {  // an input's index may be left out: it is its position
        attrs.values.push_back(next_input);
        continue;
      }
      fail_at(where, field, "missing attribute '" + std::string(spec.name) + "' of kind " +
                                std::string(attr_kind_name(spec.kind)));
    }
    attrs.values.push_back(attr(*it, spec.kind, where, field));
  }

  const json* type_v = maybe(n, "type");
  NodeId got;
  if (*op == OpId::input) {
    int64_t idx = std::get<int64_t>(attrs.values.at(0));
    if (idx != next_input)
      fail_at(where, "attrs.index", "inputs are numbered in the order they are listed: expected " +
                                        std::to_string(next_input) + ", got " + std::to_string(idx));
    if (!type_v) fail_at(where, "", "missing field 'type' (an input's type is required)");
    TensorMeta m = meta(*type_v, where);
    try {
      got = g.add_input(std::move(m), name);
    } catch (const Error& e) {
      fail_at(where, "", e.what());
    }
    ++next_input;
  } else {
    try {
      got = g.add(*op, inputs, std::move(attrs));
    } catch (const Error& e) {
      fail_at(where, "", e.what());
    }
    const TensorMeta& inferred = g.node(got).meta;
    int64_t numel = 1;
    for (const SymInt& s : inferred.sizes) {
      int64_t mag = s.hint();
      if (s.is_symbolic() && !magnitude(s.expr(), &mag)) mag = kMaxNumel;
      if (mag > kMaxDim || !mul_ok(numel, std::max<int64_t>(mag, 1), &numel) || numel > kMaxNumel)
        fail_at(where, "", "inferred type " + inferred.str() + " is too large (sizes are limited to 2^48, tensors to 2^62 elements)");
    }
    if (type_v) {
      TensorMeta stated = meta(*type_v, where);
      if (!(stated == inferred))
        fail_at(where, "", "type in file " + stated.str() + " does not match inferred " + inferred.str());
    }
    // Graph::add takes no name; the graph owns its nodes, so set it in place.
    if (!name.empty()) g.set_name(got, name);
  }
  if (got != static_cast<NodeId>(index))
    fail_at(where, "", "the graph gave this node id " + std::to_string(got));
}

Graph Reader::read(std::string_view text) {
  if (nesting_depth(text, kMaxDepth) > kMaxDepth)
    fail_at("", "", "JSON nested deeper than " + std::to_string(kMaxDepth) + " levels");
  json doc;
  try {
    doc = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    fail_at("", "", std::string("invalid JSON: ") + e.what());
  }
  if (!doc.is_object()) fail_at("", "", "expected a JSON object at the top level, got " + describe(doc));
  const json* format = maybe(doc, "format");
  if (!format) fail_at("", "", "missing field 'format' (expected \"kiln.graph\")");
  if (!format->is_string() || format->get_ref<const std::string&>() != "kiln.graph")
    fail_at("", "format", "expected \"kiln.graph\", got " + describe(*format));
  const json* version = maybe(doc, "version");
  if (!version) fail_at("", "", "missing field 'version' (this build reads version " + std::to_string(kGraphFormatVersion) + ")");
  if (!version->is_number_integer() || version->get<int64_t>() != kGraphFormatVersion)
    fail_at("", "version", "unsupported graph format version " + version->dump() + "; this build of Kiln reads version " +
                               std::to_string(kGraphFormatVersion));
  only_keys(doc, {"format", "version", "symbols", "facts", "nodes", "outputs"}, "");

  Graph g;
  if (const json* s = maybe(doc, "symbols")) read_symbols(*s, g.shapes());
  std::vector<ShapeFact> facts;
  if (const json* f = maybe(doc, "facts")) facts = read_facts(*f);
  const json& nodes = array(need(doc, "nodes", ""), "", "nodes");
  int64_t next_input = 0;
  for (size_t i = 0; i < nodes.size(); ++i) read_node(nodes[i], i, g, next_input);

  std::vector<NodeId> outputs;
  const json& out_v = array(need(doc, "outputs", ""), "", "outputs");
  for (size_t i = 0; i < out_v.size(); ++i) {
    int64_t ref = integer(out_v[i], "", "outputs");
    if (ref < 0 || ref >= static_cast<int64_t>(g.size()))
      fail_at("", "outputs", "output " + std::to_string(i) + " refers to node " + std::to_string(ref) + ", but the graph has " +
                                 std::to_string(g.size()) + " nodes");
    outputs.push_back(static_cast<NodeId>(ref));
  }
  try {
    g.set_outputs(std::move(outputs));
  } catch (const Error& e) {
    fail_at("", "outputs", e.what());
  }

  // The facts are the file's, in its order, followed by any fact the shape rules needed
  // while rebuilding that the file did not state.
  ShapeEnv env;
  for (const SymbolInfo& s : g.shapes().symbols()) env.add_symbol(s);
  for (const ShapeFact& f : facts) env.add_fact(f);
  for (const ShapeFact& f : g.shapes().facts())
    if (std::find(facts.begin(), facts.end(), f) == facts.end()) env.add_fact(f);
  g.shapes() = std::move(env);
  return g;
}

}  // namespace

std::string to_json(const Graph& g, int indent) {
  try {
    json doc = graph_document(g);
    if (indent < 0) return doc.dump();
    std::string out;
    print_block(doc, indent, 0, out);
    return out;
  } catch (const json::exception& e) {
    // Only text that is not UTF-8 (a node name, a symbol's source, a fact's reason) gets here.
    fail("to_json: cannot write the graph as JSON: ", e.what());
  }
}

Graph from_json(std::string_view text, std::string_view source_name) {
  return Reader(source_name).read(text);
}

Graph load_graph(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open graph file '", path, "': ", std::strerror(errno));
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) fail("cannot read graph file '", path, "'");
  return from_json(buf.str(), path);
}

void save_graph(const Graph& g, const std::string& path) {
  std::string text = to_json(g) + "\n";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail("cannot write graph file '", path, "': ", std::strerror(errno));
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) fail("cannot write graph file '", path, "'");
}

}  // namespace kiln::format
