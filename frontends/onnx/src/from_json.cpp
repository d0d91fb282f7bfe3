// A model decoded outside the protobuf library (the browser decodes it in JavaScript with
// protobufjs, web/js/onnx.js) -> the importer's structs (model_proto.h) -> a Graph. The JSON is
// the ModelProto as protobufjs's toObject gives it (camelCase names; 64-bit integers as numbers
// or strings; NaN and infinities as strings), with two changes that keep bytes out of the text:
// a tensor's rawData is {"blob": [offset, length]}, a range of the blob passed beside it, and
// string attributes are text. Every field is checked: bad input is a kiln::Error naming the field.
#include <cmath>
#include <limits>

#include "importer.h"
#include "kiln/onnx/onnx.h"
#include "model_proto.h"
#include "nlohmann/json.hpp"

namespace kiln::onnx {

namespace {

using json = nlohmann::json;

class Decoder {
 public:
  explicit Decoder(std::span<const std::byte> blob, const proto::BlobFetch* fetch = nullptr) : blob_(blob), fetch_(fetch) {}

  proto::Model model(const json& j) {
    proto::Model m;
    const std::string at = "model";
    object(j, at);
    m.ir_version = i64(j, "irVersion", at);
    m.producer_name = str(j, "producerName", at);
    m.producer_version = str(j, "producerVersion", at);
    for_each(j, "opsetImport", at, [&](const json& o, const std::string& where) {
      object(o, where);
      m.opset_import.push_back({str(o, "domain", where), i64(o, "version", where)});
    });
    if (j.contains("graph")) m.graph = graph(j["graph"], "graph");
    return m;
  }

 private:
  proto::Graph graph(const json& j, const std::string& at) {
    object(j, at);
    proto::Graph g;
    for_each(j, "node", at, [&](const json& n, const std::string& where) { g.node.push_back(node(n, where)); });
    for_each(j, "initializer", at, [&](const json& t, const std::string& where) { g.initializer.push_back(tensor(t, where)); });
    if (j.contains("sparseInitializer")) g.sparse_initializers = list(j, "sparseInitializer", at).size();
    for_each(j, "input", at, [&](const json& v, const std::string& where) { g.input.push_back(value_info(v, where)); });
    for_each(j, "output", at, [&](const json& v, const std::string& where) { g.output.push_back(value_info(v, where)); });
    return g;
  }

  proto::Node node(const json& j, const std::string& at) {
    object(j, at);
    proto::Node n;
    n.name = str(j, "name", at);
    n.op_type = str(j, "opType", at);
    n.domain = str(j, "domain", at);
    n.input = strings(j, "input", at);
    n.output = strings(j, "output", at);
    for_each(j, "attribute", at, [&](const json& a, const std::string& where) { n.attribute.push_back(attribute(a, where)); });
    for_each(j, "metadataProps", at, [&](const json& e, const std::string& where) {
      object(e, where);
      if (str(e, "key", where) == proto::kNameScopesKey) n.name_scopes = str(e, "value", where);
    });
    return n;
  }

  proto::Attribute attribute(const json& j, const std::string& at) {
    object(j, at);
    proto::Attribute a;
    a.name = str(j, "name", at);
    a.ref_attr_name = str(j, "refAttrName", at);
    a.type = static_cast<int32_t>(i64(j, "type", at));
    a.has_f = j.contains("f");
    a.has_i = j.contains("i");
    a.has_s = j.contains("s");
    a.has_t = j.contains("t");
    a.f = static_cast<float>(f64(j, "f", at));
    a.i = i64(j, "i", at);
    a.s = str(j, "s", at);
    if (a.has_t) a.t = tensor(j["t"], at + ".t");
    for_each(j, "floats", at, [&](const json& x, const std::string& where) { a.floats.push_back(static_cast<float>(f64(x, where))); });
    for_each(j, "ints", at, [&](const json& x, const std::string& where) { a.ints.push_back(i64(x, where)); });
    a.strings = strings(j, "strings", at);
    return a;
  }

  proto::Tensor tensor(const json& j, const std::string& at) {
    object(j, at);
    proto::Tensor t;
    t.name = str(j, "name", at);
    t.data_type = static_cast<int32_t>(i64(j, "dataType", at));
    for_each(j, "dims", at, [&](const json& x, const std::string& where) { t.dims.push_back(i64(x, where)); });
    if (j.contains("segment")) {
      const json& s = j["segment"];
      object(s, at + ".segment");
      t.has_segment = true;
      t.segment_begin = i64(s, "begin", at + ".segment");
      t.segment_end = i64(s, "end", at + ".segment");
    }
    if (j.contains("rawData")) {
      const std::string where = at + ".rawData";
      const json& r = j["rawData"];
      KILN_CHECK(r.is_object() && r.contains("blob") && r["blob"].is_array() && r["blob"].size() == 2, "onnx: ", where,
                 " must be {\"blob\": [offset, length]}");
      const int64_t offset = i64(r["blob"][0], where + ".blob[0]"), length = i64(r["blob"][1], where + ".blob[1]");
      KILN_CHECK(offset >= 0 && length >= 0 && static_cast<uint64_t>(offset) <= blob_.size() &&
                     static_cast<uint64_t>(length) <= blob_.size() - static_cast<uint64_t>(offset),
                 "onnx: ", where, " is bytes ", offset, " to ", offset, " + ", length, ", outside the ", blob_.size(),
                 "-byte blob");
      t.has_raw_data = true;
      // A view: load_decoded's caller keeps the blob until the import is done (no copy of the weights).
      t.raw_view = blob_.subspan(static_cast<size_t>(offset), static_cast<size_t>(length));
      t.blob_fetch = fetch_;
    }
    for_each(j, "floatData", at, [&](const json& x, const std::string& where) { t.float_data.push_back(static_cast<float>(f64(x, where))); });
    for_each(j, "doubleData", at, [&](const json& x, const std::string& where) { t.double_data.push_back(f64(x, where)); });
    for_each(j, "int64Data", at, [&](const json& x, const std::string& where) { t.int64_data.push_back(i64(x, where)); });
    for_each(j, "int32Data", at, [&](const json& x, const std::string& where) {
      const int64_t v = i64(x, where);
      KILN_CHECK(v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max(), "onnx: ", where,
                 " is outside int32");
      t.int32_data.push_back(static_cast<int32_t>(v));
    });
    t.external = i64(j, "dataLocation", at) == 1;  // TensorProto.EXTERNAL
    for_each(j, "externalData", at, [&](const json& e, const std::string& where) {
      object(e, where);
      t.external_data.emplace_back(str(e, "key", where), str(e, "value", where));
    });
    return t;
  }

  proto::ValueInfo value_info(const json& j, const std::string& at) {
    object(j, at);
    proto::ValueInfo v;
    v.name = str(j, "name", at);
    if (!j.contains("type")) return v;
    const json& type = j["type"];
    object(type, at + ".type");
    if (!type.contains("tensorType")) return v;
    const std::string tt_at = at + ".type.tensorType";
    const json& tt = type["tensorType"];
    object(tt, tt_at);
    v.has_tensor_type = true;
    v.elem_type = static_cast<int32_t>(i64(tt, "elemType", tt_at));
    if (!tt.contains("shape")) return v;
    v.has_shape = true;
    const json& shape = tt["shape"];
    object(shape, tt_at + ".shape");
    for_each(shape, "dim", tt_at + ".shape", [&](const json& d, const std::string& where) {
      object(d, where);
      proto::Dimension dim;
      dim.has_dim_value = d.contains("dimValue");
      dim.has_dim_param = d.contains("dimParam");
      dim.dim_value = i64(d, "dimValue", where);
      dim.dim_param = str(d, "dimParam", where);
      v.dims.push_back(std::move(dim));
    });
    return v;
  }

  // ---- fields -----------------------------------------------------------------------------

  static void object(const json& j, const std::string& at) { KILN_CHECK(j.is_object(), "onnx: ", at, " must be an object"); }

  static const json& list(const json& j, const char* key, const std::string& at) {
    const json& v = j[key];
    KILN_CHECK(v.is_array(), "onnx: ", at, ".", key, " must be an array");
    return v;
  }

  template <class Fn>
  static void for_each(const json& j, const char* key, const std::string& at, Fn&& fn) {
    if (!j.contains(key)) return;
    const json& v = list(j, key, at);
    for (size_t k = 0; k < v.size(); ++k) fn(v[k], at + "." + key + "[" + std::to_string(k) + "]");
  }

  static std::string str(const json& j, const char* key, const std::string& at) {
    if (!j.contains(key)) return "";
    KILN_CHECK(j[key].is_string(), "onnx: ", at, ".", key, " must be a string");
    return j[key].get<std::string>();
  }

  static std::vector<std::string> strings(const json& j, const char* key, const std::string& at) {
    std::vector<std::string> out;
    for_each(j, key, at, [&](const json& x, const std::string& where) {
      KILN_CHECK(x.is_string(), "onnx: ", where, " must be a string");
      out.push_back(x.get<std::string>());
    });
    return out;
  }

  // A 64-bit integer: a JSON integer, or a string of one (protobufjs's longs: String).
  static int64_t i64(const json& x, const std::string& at) {
    if (x.is_number_integer()) {
      KILN_CHECK(!x.is_number_unsigned() || x.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
                 "onnx: ", at, " is outside int64");
      return x.get<int64_t>();
    }
    if (x.is_string()) {
      const std::string& s = x.get_ref<const std::string&>();
      int64_t v = 0;
      size_t used = 0;
      try {
        v = std::stoll(s, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      KILN_CHECK(!s.empty() && used == s.size(), "onnx: ", at, " is '", s, "', not an integer");
      return v;
    }
    fail("onnx: ", at, " must be an integer");
  }
  static int64_t i64(const json& j, const char* key, const std::string& at) {
    return j.contains(key) ? i64(j[key], at + "." + key) : 0;
  }

  // A number, or "NaN", "Infinity", "-Infinity" (protobufjs's json: true).
  static double f64(const json& x, const std::string& at) {
    if (x.is_number()) return x.get<double>();
    if (x.is_string()) {
      const std::string& s = x.get_ref<const std::string&>();
      if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
      if (s == "Infinity") return std::numeric_limits<double>::infinity();
      if (s == "-Infinity") return -std::numeric_limits<double>::infinity();
    }
    fail("onnx: ", at, " must be a number (or \"NaN\", \"Infinity\", \"-Infinity\")");
  }
  static double f64(const json& j, const char* key, const std::string& at) {
    return j.contains(key) ? f64(j[key], at + "." + key) : 0.0;
  }

  std::span<const std::byte> blob_;
  const proto::BlobFetch* fetch_ = nullptr;
};

}  // namespace

Model load_decoded(std::string_view model_json, std::span<const std::byte> blob, const LoadOptions& options) {
  return load_decoded(model_json, blob, nullptr, options);
}

Model load_decoded(std::string_view model_json, std::span<const std::byte> blob,
                   const std::function<void(size_t offset, size_t length)>& fetch, const LoadOptions& options) {
  json j;
  try {
    j = json::parse(model_json.begin(), model_json.end());
  } catch (const json::exception& e) {
    fail("onnx: the decoded model is not valid JSON (", e.what(), ")");
  }
  const proto::BlobFetch range = [&](std::span<const std::byte> r) {
    fetch(static_cast<size_t>(r.data() - blob.data()), r.size());
  };
  return detail::import_model(Decoder(blob, fetch ? &range : nullptr).model(j), "", options);
}

}  // namespace kiln::onnx
