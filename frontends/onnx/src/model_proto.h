// Internal to frontends/onnx: the part of ONNX's ModelProto that the importer reads, as plain
// structs. The importer works on these, never on protobuf's classes, so that a decoder other
// than libprotobuf (the browser's, where the model is decoded in JavaScript) can feed it; the
// native decoder is protobuf.cpp. Fields keep onnx.proto's names and numbering (data types,
// attribute types); `has_*` records presence where onnx.proto (proto2) makes it matter.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace kiln::onnx::proto {

// Copies a range of a decoded model's blob in where it is first read (the page's module: what an
// import off the CPU never reads, most of a model's weights, is never copied in).
using BlobFetch = std::function<void(std::span<const std::byte>)>;

struct Tensor {
  enum DataType : int32_t { UNDEFINED = 0, FLOAT = 1, UINT8 = 2, INT8 = 3, UINT16 = 4, INT16 = 5, INT32 = 6, INT64 = 7,
                            STRING = 8, BOOL = 9, FLOAT16 = 10, DOUBLE = 11, UINT32 = 12, UINT64 = 13, COMPLEX64 = 14,
                            COMPLEX128 = 15, BFLOAT16 = 16 };
  std::string name;
  int32_t data_type = UNDEFINED;  // TensorProto.DataType
  std::vector<int64_t> dims;
  bool has_segment = false;
  int64_t segment_begin = 0, segment_end = 0;
  bool has_raw_data = false;
  std::string raw_data;  // owned (the protobuf decoder moves the message's bytes here) ...
  std::span<const std::byte> raw_view;  // ... or a view of a buffer that outlives the import (the JSON decoder's blob)
  std::span<const std::byte> raw() const {
    return raw_view.data() ? raw_view : std::as_bytes(std::span(raw_data.data(), raw_data.size()));
  }
  // Where raw_view's bytes are only there once fetched: fetch() before reading them.
  const BlobFetch* blob_fetch = nullptr;
  void fetch() const {
    if (blob_fetch && has_raw_data && !raw_view.empty()) (*blob_fetch)(raw_view);
  }
  std::vector<float> float_data;
  std::vector<double> double_data;
  std::vector<int64_t> int64_data;
  std::vector<int32_t> int32_data;  // also bool, f16 and bf16 bit patterns
  bool external = false;            // data_location EXTERNAL
  std::vector<std::pair<std::string, std::string>> external_data;  // key, value
};

struct Graph;

struct Attribute {
  enum Type : int32_t { UNDEFINED = 0, FLOAT = 1, INT = 2, STRING = 3, TENSOR = 4, GRAPH = 5, FLOATS = 6, INTS = 7,
                        STRINGS = 8 };
  std::string name;
  std::string ref_attr_name;
  int32_t type = UNDEFINED;  // AttributeProto.AttributeType (others, e.g. sparse tensors, kept as numbers)
  bool has_f = false, has_i = false, has_s = false, has_t = false;
  float f = 0;
  int64_t i = 0;
  std::string s;
  std::optional<Tensor> t;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
};

struct Node {
  std::string name, op_type, domain;
  std::vector<std::string> input, output;
  std::vector<Attribute> attribute;
  // Of metadata_props (field 9, ONNX 1.16; newer than Debian's onnx.proto, so decoded by number):
  // the value of "pkg.torch.onnx.name_scopes", PyTorch's exporter's module scopes of the node as
  // a Python list's repr (['', 'encoder', 'encoder.layer.0', ..., 'the_fx_node']); empty if none.
  std::string name_scopes;
};
inline constexpr const char* kNameScopesKey = "pkg.torch.onnx.name_scopes";

struct Dimension {
  bool has_dim_value = false, has_dim_param = false;
  int64_t dim_value = 0;
  std::string dim_param;
};

struct ValueInfo {
  std::string name;
  bool has_tensor_type = false;  // a tensor (not a sequence, map, optional, ...)
  int32_t elem_type = 0;
  bool has_shape = false;
  std::vector<Dimension> dims;
};

struct Graph {
  std::vector<Node> node;
  std::vector<Tensor> initializer;
  size_t sparse_initializers = 0;  // refused
  std::vector<ValueInfo> input, output;
};

struct OperatorSet {
  std::string domain;
  int64_t version = 0;
};

struct Model {
  int64_t ir_version = 0;
  std::string producer_name, producer_version;
  std::vector<OperatorSet> opset_import;
  std::optional<Graph> graph;
};

// Decoders of serialized protobuf bytes (protobuf.cpp, libprotobuf): false where the bytes
// are not a valid message. The decoded model takes the tensors' bytes over without copying more
// than once.
bool parse_model(const void* data, size_t size, Model& out);
bool parse_tensor(const void* data, size_t size, Tensor& out);

}  // namespace kiln::onnx::proto
