// The value encoders, printer and checked decoders the graph and plan JSON formats share
// (json_values.h).
#include "kiln/graph/json_values.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base64.h"

namespace kiln::json_values {

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

json tensor_json(const ConstantData& c, const ConstantDigest* digest) {
  json t = json::object();
  t["dtype"] = std::string(dtype_name(c.dtype));
  t["shape"] = json(c.sizes);
  if (digest && c.bytes.size() > kDigestAbove) t["data_digest"] = (*digest)(c.bytes);
  else t["data_base64"] = base64_encode(c.bytes);
  return t;
}

json symbol_json(const SymbolInfo& s) {
  json j = json::object();
  j["name"] = "s" + std::to_string(s.id);
  j["example"] = s.example;
  j["min"] = s.min;
  j["max"] = s.max;
  j["source"] = s.source;
  j["user_dynamic"] = s.user_dynamic;
  return j;
}

json fact_json(const ShapeFact& f) {
  json j = json::object();
  j["lhs"] = f.lhs.str();
  j["rhs"] = f.rhs.str();
  j["relation"] = relation_str(f.relation);
  j["reason"] = f.reason;
  return j;
}

namespace {

json attr_json(const Attrs& attrs, size_t k, AttrKind kind, const ConstantDigest* digest) {
  switch (kind) {
    case AttrKind::int_: return json(attrs.i(k));
    case AttrKind::float_: return float_json(attrs.f(k));
    case AttrKind::bool_: return json(attrs.b(k));
    case AttrKind::ints: return json(attrs.ints(k));
    case AttrKind::symints: return shape_json(attrs.symints(k));
    case AttrKind::dtype: return json(std::string(dtype_name(attrs.dtype(k))));
    case AttrKind::string: return json(attrs.s(k));
    case AttrKind::tensor: return tensor_json(attrs.tensor(k), digest);
  }
  fail("unknown attribute kind");
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

bool all_numbers(const json& a) {
  return std::all_of(a.begin(), a.end(), [](const json& v) { return v.is_number() || v.is_boolean(); });
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
  } else if (j.is_array() && !j.empty() && !all_numbers(j)) {
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

}  // namespace

json attrs_json(const OpDef& def, const Attrs& attrs, const std::string& who, const ConstantDigest* digest) {
  KILN_CHECK(attrs.size() == def.attrs.size(), who, " has ", attrs.size(), " attributes; the op declares ",
             def.attrs.size());
  json a = json::object();
  for (size_t k = 0; k < def.attrs.size(); ++k) a[std::string(def.attrs[k].name)] = attr_json(attrs, k, def.attrs[k].kind, digest);
  return a;
}

std::string print_document(const json& doc, int indent) {
  if (indent < 0) return doc.dump();
  std::string out;
  print_block(doc, indent, 0, out);
  return out;
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

namespace {

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

}  // namespace

std::string unknown_op_message(std::string_view name) {
  std::string best;
  size_t best_d = std::numeric_limits<size_t>::max();
  for (const OpDef& d : all_ops()) {
    size_t dist = edit_distance(name, d.name);
    if (dist < best_d) best_d = dist, best = std::string(d.name);
  }
  std::string msg = "unknown op '" + std::string(name) + "'";
  if (!best.empty() && best_d <= std::max<size_t>(2, name.size() / 3)) msg += " (did you mean '" + best + "'?)";
  return msg;
}

void ValueReader::fail_at(const std::string& where, std::string_view field, const std::string& message) const {
  std::string m = source_;
  m += ": ";
  if (locations_ == Locations::labels) {
    // "graph.json: node 3 (matmul): field 'inputs': expected 2 inputs, got 1"
    if (!where.empty()) m += where + ": ";
    if (!field.empty()) m += "field '" + std::string(field) + "': ";
  } else {
    // "plan.json: kernels[2].reads[0]: buffer 17 does not exist (the plan has 5 buffers)"
    std::string path = where;
    if (!field.empty()) path += (path.empty() ? "" : ".") + std::string(field);
    if (!path.empty()) m += path + ": ";
  }
  m += message;
  throw Error(m);
}

std::string ValueReader::item(std::string_view singular, std::string_view list, size_t i) const {
  if (locations_ == Locations::labels) return std::string(singular) + " " + std::to_string(i);
  return std::string(list) + "[" + std::to_string(i) + "]";
}

json ValueReader::parse_document(std::string_view text, std::string_view format, int version) const {
  if (nesting_depth(text, kMaxDepth) > kMaxDepth)
    fail_at("", "", "JSON nested deeper than " + std::to_string(kMaxDepth) + " levels");
  json doc;
  try {
    doc = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    fail_at("", "", std::string("invalid JSON: ") + e.what());
  }
  const std::string quoted = "\"" + std::string(format) + "\"";
  if (!doc.is_object()) fail_at("", "", "expected a JSON object at the top level, got " + describe(doc));
  const json* f = maybe(doc, "format");
  if (!f) fail_at("", "", "missing field 'format' (expected " + quoted + ")");
  if (!f->is_string() || f->get_ref<const std::string&>() != format)
    fail_at("", "format", "expected " + quoted + ", got " + describe(*f));
  const json* v = maybe(doc, "version");
  if (!v) fail_at("", "", "missing field 'version' (this build reads version " + std::to_string(version) + ")");
  if (!v->is_number_integer() || v->get<int64_t>() != version)
    fail_at("", "version", "unsupported " + noun_ + " format version " + v->dump() + "; this build of Kiln reads version " +
                               std::to_string(version));
  return doc;
}

const json& ValueReader::need(const json& obj, const char* key, const std::string& where, std::string_view field) const {
  auto it = obj.find(key);
  if (it == obj.end()) fail_at(where, field, std::string("missing field '") + key + "'");
  return *it;
}

const json* ValueReader::maybe(const json& obj, const char* key) const {
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

void ValueReader::only_keys(const json& obj, std::initializer_list<const char*> keys, const std::string& where,
                            std::string_view field) const {
  for (const auto& item : obj.items()) {
    const std::string& key = item.key();
    bool known = std::any_of(keys.begin(), keys.end(), [&](const char* k) { return key == k; });
    if (!known) {
      std::string list;
      for (const char* k : keys) list += (list.empty() ? "'" : ", '") + std::string(k) + "'";
      fail_at(where, field, "unknown field '" + key + "' (expected " + list + ")");
    }
  }
}

const json& ValueReader::object(const json& v, const std::string& where, std::string_view field) const {
  if (!v.is_object()) fail_at(where, field, "expected an object, got " + describe(v));
  return v;
}

const json& ValueReader::array(const json& v, const std::string& where, std::string_view field) const {
  if (!v.is_array()) fail_at(where, field, "expected an array, got " + describe(v));
  return v;
}

int64_t ValueReader::integer(const json& v, const std::string& where, std::string_view field) const {
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

bool ValueReader::boolean(const json& v, const std::string& where, std::string_view field) const {
  if (!v.is_boolean()) fail_at(where, field, "expected true or false, got " + describe(v));
  return v.get<bool>();
}

const std::string& ValueReader::string(const json& v, const std::string& where, std::string_view field) const {
  if (!v.is_string()) fail_at(where, field, "expected a string, got " + describe(v));
  return v.get_ref<const std::string&>();
}

double ValueReader::floating(const json& v, const std::string& where, std::string_view field) const {
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

DType ValueReader::dtype(const json& v, const std::string& where, std::string_view field) const {
  const std::string& s = string(v, where, field);
  try {
    return parse_dtype(s);
  } catch (const Error& e) {
    fail_at(where, field, e.what());
  }
}

bool ValueReader::magnitude(const SymExpr& e, int64_t* out) const {
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

SymExpr ValueReader::sym_expr(const std::string& text, const std::string& where, std::string_view field) const {
  SymExpr e;
  try {
    e = parse_sym_expr(text);
  } catch (const Error& err) {
    fail_at(where, field, "bad size expression \"" + text + "\": " + err.what());
  }
  for (SymbolId s : e.free_symbols())
    if (s >= examples_.size())
      fail_at(where, field, "size expression \"" + text + "\" uses s" + std::to_string(s) + ", but the " + noun_ +
                                " declares " + std::to_string(examples_.size()) + " symbols");
  int64_t mag = 0;
  if (!magnitude(e, &mag) || mag > kMaxDim)
    fail_at(where, field, "size expression \"" + text + "\" is too large (sizes are limited to 2^48)");
  return e;
}

SymInt ValueReader::size(const json& v, const std::string& where, std::string_view field) const {
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

SymShape ValueReader::shape(const json& v, const std::string& where, std::string_view field) const {
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

TensorMeta ValueReader::meta(const json& v, const std::string& where, std::string_view field) const {
  const std::string f(field);
  object(v, where, f);
  only_keys(v, {"dtype", "shape", "device", "strides"}, where, f);
  TensorMeta m;
  m.dtype = dtype(need(v, "dtype", where, f), where, f + ".dtype");
  m.sizes = shape(need(v, "shape", where, f), where, f + ".shape");
  if (const json* d = maybe(v, "device")) {
    const std::string& text = string(*d, where, f + ".device");
    try {
      m.device = parse_device(text);
    } catch (const Error& e) {
      fail_at(where, f + ".device", e.what());
    }
  }
  if (const json* s = maybe(v, "strides")) {
    m.strides = shape(*s, where, f + ".strides");
    if (m.strides.size() != m.sizes.size())
      fail_at(where, f + ".strides", "has " + std::to_string(m.strides.size()) + " strides for a tensor of rank " +
                                         std::to_string(m.sizes.size()));
  }
  return m;
}

std::shared_ptr<const ConstantData> ValueReader::tensor(const json& v, const std::string& where,
                                                        const std::string& field) const {
  object(v, where, field);
  only_keys(v, {"dtype", "shape", "data_base64"}, where, field);
  auto c = std::make_shared<ConstantData>();
  c->dtype = dtype(need(v, "dtype", where, field), where, field + ".dtype");
  const json& shape_v = array(need(v, "shape", where, field), where, field + ".shape");
  int64_t numel = 1;
  for (size_t i = 0; i < shape_v.size(); ++i) {
    int64_t n = integer(shape_v[i], where, field + ".shape");
    if (n < 0) fail_at(where, field + ".shape", "negative size " + std::to_string(n));
    if (n > kMaxDim || !mul_ok(numel, n, &numel) || numel > kMaxNumel)
      fail_at(where, field + ".shape", "the constant is too large");
    c->sizes.push_back(n);
  }
  const std::string& data = string(need(v, "data_base64", where, field), where, field + ".data_base64");
  int64_t esize = dtype_size(c->dtype);
  // numel <= 2^62 and the byte count is compared before anything is allocated.
  uint64_t want = static_cast<uint64_t>(numel) * static_cast<uint64_t>(esize);
  if (data.size() % 4 != 0 || base64_decoded_size(data) != want)
    fail_at(where, field + ".data_base64",
            "holds " + std::to_string(data.size() % 4 == 0 ? base64_decoded_size(data) : 0) +
                " bytes (or is not base64); a " + std::string(dtype_name(c->dtype)) + " tensor of shape " +
                shape_str(static_shape(c->sizes)) + " needs " + std::to_string(want));
  auto bytes = base64_decode(data);
  if (!bytes) fail_at(where, field + ".data_base64", "is not valid base64");
  c->bytes = std::move(*bytes);
  if (c->dtype == DType::bool_)
    for (std::byte b : c->bytes)
      if (std::to_integer<unsigned>(b) > 1) fail_at(where, field + ".data_base64", "a bool element is neither 0 nor 1");
  return c;
}

AttrValue ValueReader::attr(const json& v, AttrKind kind, const std::string& where, const std::string& field) const {
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

Attrs ValueReader::attrs(const json* v, const OpDef& def, const std::string& where, const std::string& field,
                         const AttrValue* fallback) const {
  static const json kEmpty = json::object();
  if (v) object(*v, where, field);
  const json& av = v ? *v : kEmpty;
  for (const auto& item : av.items()) {
    const std::string& key = item.key();
    bool known = std::any_of(def.attrs.begin(), def.attrs.end(), [&](const AttrSpec& s) { return s.name == key; });
    if (!known) {
      std::string list;
      for (const AttrSpec& s : def.attrs) list += (list.empty() ? "'" : ", '") + std::string(s.name) + "'";
      fail_at(where, field, "unknown attribute '" + key + "' (" +
                                (list.empty() ? std::string("the op takes none") : "expected " + list) + ")");
    }
  }
  Attrs out;
  for (const AttrSpec& spec : def.attrs) {
    std::string f = field + "." + std::string(spec.name);
    auto it = av.find(std::string(spec.name));
    if (it == av.end()) {
      if (fallback) {
        out.values.push_back(*fallback);
        continue;
      }
      fail_at(where, f, "missing attribute '" + std::string(spec.name) + "' of kind " +
                            std::string(attr_kind_name(spec.kind)));
    }
    out.values.push_back(attr(*it, spec.kind, where, f));
  }
  return out;
}

void ValueReader::read_symbols(const json& v, ShapeEnv& env) {
  array(v, "", "symbols");
  for (size_t i = 0; i < v.size(); ++i) {
    std::string where = item("symbol", "symbols", i);
    const json& s = object(v[i], where, "");
    only_keys(s, {"name", "example", "min", "max", "source", "user_dynamic"}, where);
    SymbolInfo info;
    info.id = static_cast<SymbolId>(i);
    const std::string& name = string(need(s, "name", where), where, "name");
    std::string expected = "s" + std::to_string(i);
    if (name != expected)
      fail_at(where, "name", "symbols must be listed as s0, s1, ... in order: expected '" + expected + "', got '" + name + "'");
    if (locations_ == Locations::labels) where = "symbol " + expected;
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

std::vector<ShapeFact> ValueReader::read_facts(const json& v) const {
  array(v, "", "facts");
  std::vector<ShapeFact> facts;
  for (size_t i = 0; i < v.size(); ++i) {
    std::string where = item("fact", "facts", i);
    const json& f = object(v[i], where, "");
    only_keys(f, {"lhs", "rhs", "relation", "equal", "reason"}, where);
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
    // "relation" ("==", "!=", ">="), or the older "equal" (true: ==, false: !=); == by default.
    const json* relation = maybe(f, "relation");
    const json* e = maybe(f, "equal");
    if (relation && e) fail_at(where, "equal", "a fact gives its relation or equal, not both");
    if (e) fact.relation = boolean(*e, where, "equal") ? Relation::eq : Relation::ne;
    if (relation) {
      const std::string rel = string(*relation, where, "relation");
      if (rel == "==") fact.relation = Relation::eq;
      else if (rel == "!=") fact.relation = Relation::ne;
      else if (rel == ">=") fact.relation = Relation::ge;
      else fail_at(where, "relation", "'" + rel + "' is not a relation (==, != or >=)");
    }
    if (const json* r = maybe(f, "reason")) fact.reason = string(*r, where, "reason");
    facts.push_back(std::move(fact));
  }
  return facts;
}

}  // namespace kiln::json_values
