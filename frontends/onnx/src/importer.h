// Internal to frontends/onnx: the importer's state and the helpers its op converters share.
// Values are shared handles: a node of the graph, a folded constant (materialised as a
// constant node only when a kept node uses it), or a 0-/1-D integer tensor whose elements
// are known sizes, possibly symbolic (Shape of a dynamic input and what exporters compute
// from it).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kiln/graph/error.h"
#include "kiln/graph/graph.h"
#include "kiln/graph/tensor_data.h"
#include "kiln/onnx/onnx.h"
#include "model_proto.h"

namespace kiln::onnx::detail {

struct Val {
  NodeId id = -1;                       // -1 until materialised (constants, known sizes)
  DType dtype = DType::f32;
  SymShape sizes;
  std::shared_ptr<const TensorData> data;  // the value when known at import (read it with Importer::read)
  // The tensor whose raw bytes data views, where they are not fetched yet (a weight of a lazily
  // fetched blob: proto::Tensor::fetch).
  const proto::Tensor* unfetched = nullptr;
  // A weight in an external data file, not read yet (with elide_weights): `data` has its dtype
  // and sizes and no storage until read() loads it.
  const proto::Tensor* unread_external = nullptr;
  std::optional<SymShape> ints;            // known integer elements (rank 0 or 1)
  std::string input_name;                  // the graph input it is computed from (with constants)
  // A tensor of the model (Importer::tensor): the graph constant's data, which `data` views, so
  // that materialising it copies nothing.
  std::shared_ptr<const ConstantData> graph_data;
};
using V = std::shared_ptr<Val>;

// The ONNX element type as a Kiln dtype; unsupported ones throw naming `what`.
DType dtype_of(int32_t elem_type, const std::string& what);
std::string elem_type_name(int32_t elem_type);
// TensorProto -> host tensor; external data is read under base_dir. With `backing`, the bytes are
// read into backing->bytes (its dtype and sizes set), which the tensor's storage views and keeps.
// With view_raw (and no backing), raw data aligned for its dtype is viewed, not copied: the
// caller keeps `t` (or the buffer its raw data views) alive as long as the tensor.
TensorData tensor_from_proto(const proto::Tensor& t, const std::string& base_dir,
                             std::shared_ptr<ConstantData> backing = nullptr, bool view_raw = false);
// A tensor attribute's value (an empty tensor, of no element type, where it has none).
const proto::Tensor& tensor_attr(const proto::Attribute& a);

std::vector<int64_t> ints_of(const TensorData& t);  // integer (or bool) elements
std::vector<double> doubles_of(const TensorData& t);
TensorData make_tensor(DType t, std::vector<int64_t> sizes, const std::vector<double>& values);

class Importer;

// What a converter sees: the node, its inputs (null for a missing optional input), the opset.
struct NodeCtx {
  Importer& im;
  const proto::Node& node;
  std::vector<V> in;
  int64_t opset;

  const proto::Attribute* attr(const std::string& name) const;
  bool has(const std::string& name) const { return attr(name) != nullptr; }
  int64_t i(const std::string& name, int64_t def) const;
  double f(const std::string& name, double def) const;
  std::string s(const std::string& name, const std::string& def) const;
  std::vector<int64_t> ints(const std::string& name) const;  // empty when absent
  std::vector<double> floats(const std::string& name) const;
  bool present(size_t k) const { return k < in.size() && in[k] != nullptr; }
  const V& input(size_t k) const;  // required input k
  size_t outputs() const;          // number of non-empty outputs
};

class Importer {
 public:
  Importer(Graph& g, Device device, std::string base_dir) : g_(g), device_(device), base_dir_(std::move(base_dir)) {}

  Graph& graph() { return g_; }
  Device device() const { return device_; }
  const std::string& base_dir() const { return base_dir_; }

  // Adds an op; folds it on the reference interpreter when every input is known.
  V op(OpId op, std::vector<V> inputs, Attrs attrs = {});
  // add/sub/mul of known (possibly symbolic) integer sizes as known sizes; null otherwise.
  V symbolic_arith(OpId op, const std::vector<V>& inputs);
  V constant(TensorData t);
  // A tensor of the model (an initializer, a Constant's value), read once into the buffer that
  // the graph's constant holds and folding reads: weights are most of a model's bytes. With
  // elide_weights, not read at all where it is raw data aligned for its dtype: a view of it.
  V tensor(const proto::Tensor& t);
  V scalar(double v, DType t);
  V known_ints(SymShape values, bool scalar);  // a 0-d (scalar) or 1-D i64 value of known sizes
  NodeId id(const V& v);                       // materialises constants
  const TensorData& read(const V& v);          // a known value's elements (fetched first)
  V input(NodeId id);

  // Weights as placeholders: the import is for a device (where every constant of more than one
  // element becomes a parameter, an input) and no parameter values are wanted (the page's
  // import: the graph alone). A weight then is not copied into a graph constant: the value
  // folding reads views the decoder's buffer, which outlives the import, and id() gives it an
  // input node (a placeholder) that import_model lifts as the parameter it would have become.
  void elide_weights(bool on) { elide_weights_ = on; }
  bool is_placeholder(NodeId id) const { return placeholders_.count(id) > 0; }

  // Integer elements of a value that must be known at import (static).
  std::vector<int64_t> static_ints(const V& v, const std::string& what);
  // Elements of a value that must be known at import, as doubles.
  std::vector<double> static_doubles(const V& v, const std::string& what);
  // Known sizes of a value (may be symbolic); throws naming `what` when not known.
  SymShape sym_ints(const V& v, const std::string& what);

  // Common helpers of the converters.
  V cast(const V& v, DType t) { return v->dtype == t ? v : op(OpId::cast, {v}, {t}); }
  V reshape(const V& v, SymShape s) { return v->sizes == s ? v : op(OpId::reshape, {v}, {std::move(s)}); }
  V add(const V& a, const V& b) { return op(OpId::add, {a, b}); }
  V sub(const V& a, const V& b) { return op(OpId::sub, {a, b}); }
  V mul(const V& a, const V& b) { return op(OpId::mul, {a, b}); }
  V div(const V& a, const V& b) { return op(OpId::div, {a, b}); }
  V permute(const V& v, std::vector<int64_t> dims);
  V slice(const V& v, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
  V unsqueeze(const V& v, int64_t dim) { return op(OpId::unsqueeze, {v}, {dim}); }
  V reduce(OpId r, const V& v, std::vector<int64_t> dims, bool keepdim);

 private:
  Graph& g_;
  Device device_;
  std::string base_dir_;
  bool elide_weights_ = false;
  std::set<NodeId> placeholders_;
};

// A decoded model as a Kiln graph (loader.cpp): every entry point ends here, whichever decoder
// (protobuf.cpp, from_json.cpp) read the model. External data is read under base_dir (empty:
// external data is an error).
Model import_model(const proto::Model& model, const std::string& base_dir, const LoadOptions& options);

using Converter = std::function<std::vector<V>(NodeCtx&)>;
// The converter of an ONNX op type of the default domain, or null.
const Converter* find_converter(const std::string& op_type);
// Every op type with a converter, sorted (docs, --list).
std::vector<std::string> supported_ops();

}  // namespace kiln::onnx::detail
