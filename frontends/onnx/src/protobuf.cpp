// The protobuf edge of the ONNX frontend: serialized ModelProto and TensorProto bytes -> the
// importer's structs (model_proto.h) through Debian's libonnx_proto (tensor bytes are swapped
// out of the parsed message, not copied), and the entry points that read model files.
#include <filesystem>
#include <set>

#include "importer.h"
#include "kiln/graph/files.h"
#include "kiln/onnx/onnx.h"
#include "model_proto.h"
#include "google/protobuf/unknown_field_set.h"
#include "onnx/onnx_pb.h"

namespace kiln::onnx::proto {

namespace {

namespace pb = ::onnx;

// NodeProto.metadata_props (field 9) is unknown to Debian's onnx.proto: libprotobuf keeps it
// among the message's unknown fields, each entry a StringStringEntryProto.
std::string name_scopes(const pb::NodeProto& n) {
  const google::protobuf::UnknownFieldSet& unknown = n.GetReflection()->GetUnknownFields(n);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const google::protobuf::UnknownField& f = unknown.field(i);
    if (f.number() != 9 || f.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) continue;
    pb::StringStringEntryProto entry;
    if (entry.ParseFromString(f.length_delimited()) && entry.key() == kNameScopesKey) return entry.value();
  }
  return {};
}

Tensor tensor(pb::TensorProto& t) {
  Tensor out;
  out.name = t.name();
  out.data_type = t.data_type();
  out.dims.assign(t.dims().begin(), t.dims().end());
  out.has_segment = t.has_segment();
  if (out.has_segment) {
    out.segment_begin = t.segment().begin();
    out.segment_end = t.segment().end();
  }
  out.has_raw_data = t.has_raw_data();
  if (out.has_raw_data) out.raw_data.swap(*t.mutable_raw_data());
  out.float_data.assign(t.float_data().begin(), t.float_data().end());
  out.double_data.assign(t.double_data().begin(), t.double_data().end());
  out.int64_data.assign(t.int64_data().begin(), t.int64_data().end());
  out.int32_data.assign(t.int32_data().begin(), t.int32_data().end());
  out.external = t.data_location() == pb::TensorProto::EXTERNAL;
  for (const pb::StringStringEntryProto& e : t.external_data()) out.external_data.emplace_back(e.key(), e.value());
  return out;
}

Attribute attribute(pb::AttributeProto& a) {
  Attribute out;
  out.name = a.name();
  out.ref_attr_name = a.ref_attr_name();
  out.type = a.type();
  out.has_f = a.has_f();
  out.has_i = a.has_i();
  out.has_s = a.has_s();
  out.has_t = a.has_t();
  out.f = a.f();
  out.i = a.i();
  out.s = a.s();
  if (a.has_t()) out.t = tensor(*a.mutable_t());
  out.floats.assign(a.floats().begin(), a.floats().end());
  out.ints.assign(a.ints().begin(), a.ints().end());
  out.strings.assign(a.strings().begin(), a.strings().end());
  return out;
}

ValueInfo value_info(const pb::ValueInfoProto& v) {
  ValueInfo out;
  out.name = v.name();
  out.has_tensor_type = v.type().has_tensor_type();
  if (!out.has_tensor_type) return out;
  const pb::TypeProto::Tensor& t = v.type().tensor_type();
  out.elem_type = t.elem_type();
  out.has_shape = t.has_shape();
  for (const pb::TensorShapeProto::Dimension& d : t.shape().dim()) {
    Dimension dim;
    dim.has_dim_value = d.has_dim_value();
    dim.has_dim_param = d.has_dim_param();
    dim.dim_value = d.dim_value();
    dim.dim_param = d.dim_param();
    out.dims.push_back(std::move(dim));
  }
  return out;
}

}  // namespace

bool parse_model(const void* data, size_t size, Model& out) {
  pb::ModelProto mp;
  if (size >= (size_t{1} << 31) || !mp.ParseFromArray(data, static_cast<int>(size))) return false;
  out = Model{};
  out.ir_version = mp.ir_version();
  out.producer_name = mp.producer_name();
  out.producer_version = mp.producer_version();
  for (const pb::OperatorSetIdProto& o : mp.opset_import()) out.opset_import.push_back({o.domain(), o.version()});
  if (!mp.has_graph()) return true;
  pb::GraphProto& gp = *mp.mutable_graph();
  Graph& g = out.graph.emplace();
  g.sparse_initializers = static_cast<size_t>(gp.sparse_initializer_size());
  for (pb::TensorProto& t : *gp.mutable_initializer()) g.initializer.push_back(tensor(t));
  for (const pb::ValueInfoProto& v : gp.input()) g.input.push_back(value_info(v));
  for (const pb::ValueInfoProto& v : gp.output()) g.output.push_back(value_info(v));
  for (pb::NodeProto& n : *gp.mutable_node()) {
    Node node;
    node.name = n.name();
    node.op_type = n.op_type();
    node.domain = n.domain();
    node.input.assign(n.input().begin(), n.input().end());
    node.output.assign(n.output().begin(), n.output().end());
    for (pb::AttributeProto& a : *n.mutable_attribute()) node.attribute.push_back(attribute(a));
    node.name_scopes = name_scopes(n);
    g.node.push_back(std::move(node));
  }
  return true;
}

bool parse_tensor(const void* data, size_t size, Tensor& out) {
  pb::TensorProto t;
  if (size >= (size_t{1} << 31) || !t.ParseFromArray(data, static_cast<int>(size))) return false;
  out = tensor(t);
  return true;
}

}  // namespace kiln::onnx::proto

namespace kiln::onnx {

namespace pb = proto;
using namespace detail;

namespace {

std::string read_file(const std::string& path, const std::string& what) {
  try {
    return read_regular_file(path, what);
  } catch (const Error& e) {
    fail("onnx: ", e.what());
  }
}

// The model in `bytes`, decoded; a kiln::Error naming `what` where they are not a ModelProto.
pb::Model parse(std::span<const std::byte> bytes, const std::string& what) {
  KILN_CHECK(bytes.size() < (size_t{1} << 31), "onnx: ", what, " is larger than 2 GiB (protobuf's limit)");
  pb::Model mp;
  KILN_CHECK(pb::parse_model(bytes.data(), bytes.size(), mp), "onnx: ", what,
             " is not a valid ONNX protobuf (malformed or truncated ModelProto, ", bytes.size(), " bytes)");
  return mp;
}

pb::Model parse_file(const std::string& path, const std::string& what) {
  const std::string bytes = read_file(path, "model");
  return parse(std::as_bytes(std::span(bytes.data(), bytes.size())), what);
}

}  // namespace

Model load_bytes(std::span<const std::byte> bytes, const std::string& base_dir, const LoadOptions& options) {
  return import_model(parse(bytes, "the model"), base_dir, options);
}

Model load(const std::string& path, const LoadOptions& options) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  try {
    return import_model(parse_file(path, "the model"), dir, options);
  } catch (const InputValueNeeded& e) {
    throw InputValueNeeded(path + ": " + e.what(), e.input);
  } catch (const Error& e) {
    fail(path, ": ", e.what());
  }
}

std::vector<std::string> input_names(const std::string& path) {
  const pb::Model mp = parse_file(path, path);
  std::set<std::string> inits;
  std::vector<std::string> out;
  if (!mp.graph) return out;
  for (const pb::Tensor& t : mp.graph->initializer) inits.insert(t.name);
  for (const pb::ValueInfo& vi : mp.graph->input)
    if (!inits.count(vi.name)) out.push_back(vi.name);
  return out;
}

std::map<std::string, TensorData> initializers(const std::string& path) {
  const pb::Model mp = parse_file(path, path);
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  std::map<std::string, TensorData> out;
  if (!mp.graph) return out;
  for (const pb::Tensor& t : mp.graph->initializer) {
    KILN_CHECK(!t.name.empty(), "onnx: ", path, ": an initializer has no name");
    try {
      KILN_CHECK(out.emplace(t.name, tensor_from_proto(t, dir)).second, "the name is used by two initializers");
    } catch (const Error& e) {
      fail(path, ": initializer '", t.name, "': ", e.what());
    }
  }
  return out;
}

TensorData parse_tensor(std::span<const std::byte> bytes, const std::string& what) {
  pb::Tensor t;
  KILN_CHECK(bytes.size() < (size_t{1} << 31) && pb::parse_tensor(bytes.data(), bytes.size(), t),
             "onnx: ", what, " is not a valid TensorProto (malformed or truncated)");
  return tensor_from_proto(t, "");
}

TensorData load_tensor(const std::string& path) {
  const std::string bytes = read_file(path, "tensor file");
  return parse_tensor(std::as_bytes(std::span(bytes.data(), bytes.size())), "'" + path + "'");
}

}  // namespace kiln::onnx
