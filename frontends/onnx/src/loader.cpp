// Reading ONNX protobufs (models and tensors) and turning a ModelProto's graph into a Kiln
// Graph: inputs with symbolic dims, initializers, nodes in order through the converters of
// ops.cpp, outputs cast to their declared types.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "importer.h"
#include "kiln/graph/custom_ops.h"
#include "nlohmann/json.hpp"
#include "kiln/graph/files.h"
#include "kiln/onnx/onnx.h"
#include "kiln/eval/interpreter.h"

namespace kiln::onnx {

namespace pb = proto;
using namespace detail;

namespace detail {

namespace {

const char* kElemNames[] = {"UNDEFINED", "FLOAT",  "UINT8",  "INT8",   "UINT16",    "INT16",     "INT32",
                            "INT64",     "STRING", "BOOL",   "FLOAT16", "DOUBLE",   "UINT32",    "UINT64",
                            "COMPLEX64", "COMPLEX128", "BFLOAT16"};

int64_t checked_numel(const std::vector<int64_t>& sizes, const std::string& what) {
  int64_t n = 1;
  for (int64_t s : sizes) {
    KILN_CHECK(s >= 0, "onnx: ", what, " has a negative dim (", s, ")");
    KILN_CHECK(s == 0 || n <= (int64_t{1} << 40) / s, "onnx: ", what, " is too large");
    n *= s;
  }
  return n;
}

}  // namespace

std::string elem_type_name(int32_t e) {
  if (e >= 0 && e < static_cast<int32_t>(std::size(kElemNames))) return kElemNames[e];
  return "type " + std::to_string(e);
}

DType dtype_of(int32_t e, const std::string& what) {
  switch (e) {
    case pb::Tensor::FLOAT: return DType::f32;
    case pb::Tensor::DOUBLE: return DType::f64;
    case pb::Tensor::FLOAT16: return DType::f16;
    case pb::Tensor::BFLOAT16: return DType::bf16;
    case pb::Tensor::INT32: return DType::i32;
    case pb::Tensor::INT64: return DType::i64;
    case pb::Tensor::BOOL: return DType::bool_;
    default:
      fail(what, " has element type ", elem_type_name(e),
           ", which Kiln does not support (it has FLOAT, DOUBLE, FLOAT16, BFLOAT16, INT32, INT64 and BOOL)");
  }
}

TensorData make_tensor(DType t, std::vector<int64_t> sizes, const std::vector<double>& values) {
  const int64_t want = checked_numel(sizes, "a constant made while importing");
  KILN_CHECK(want <= (int64_t{1} << 24), "onnx: a constant of ", want, " elements made while importing is too large");
  TensorData out = TensorData::empty_host(t, std::move(sizes));
  const int64_t n = out.numel();
  KILN_INTERNAL_CHECK(static_cast<int64_t>(values.size()) == n || values.size() == 1, "onnx: ", values.size(),
             " values for ", n, " elements");
  // Written as f64 and converted with the reference's cast semantics.
  TensorData d = TensorData::empty_host(DType::f64, out.sizes);
  for (int64_t k = 0; k < n; ++k) d.data_as<double>()[k] = values.size() == 1 ? values[0] : values[k];
  return t == DType::f64 ? d : eval::convert(d, t);
}

std::vector<double> doubles_of(const TensorData& t) {
  const TensorData d = eval::convert(t, DType::f64);
  return {d.data_as<double>(), d.data_as<double>() + d.numel()};
}

std::vector<int64_t> ints_of(const TensorData& t) {
  const TensorData d = eval::convert(t, DType::i64);
  return {d.data_as<int64_t>(), d.data_as<int64_t>() + d.numel()};
}

TensorData tensor_from_proto(const pb::Tensor& t, const std::string& base_dir, std::shared_ptr<ConstantData> backing,
                             bool view_raw) {
  const std::string what = "tensor '" + t.name + "'";
  const DType dt = dtype_of(t.data_type, what);
  const std::vector<int64_t>& sizes = t.dims;
  const int64_t n = checked_numel(sizes, what);
  KILN_CHECK(!t.has_segment || t.segment_end <= t.segment_begin, "onnx: ", what,
             " is segmented, which is not supported");
  const size_t nbytes = static_cast<size_t>(n * dtype_size(dt));
  // Allocated once the data is known to be there (a fuzzed size must not allocate).
  TensorData out;
  // `from`: the bytes, where they are at hand (raw data): the backing is made from them, with no
  // zero fill first.
  auto allocate = [&](std::span<const std::byte> from = {}) {
    if (!backing || nbytes == 0) {
      out = TensorData::empty_host(dt, sizes);
      if (!from.empty()) std::memcpy(out.data(), from.data(), nbytes);
      return;
    }
    backing->dtype = dt;
    backing->sizes = sizes;
    if (from.empty()) backing->bytes.resize(nbytes);
    else backing->bytes.assign(from.begin(), from.end());
    out.storage = std::make_shared<Storage>(Device::cpu(), backing->bytes.data(), nbytes, [backing](void*) {});
    out.dtype = dt;
    out.sizes = sizes;
    out.strides = contiguous_strides(sizes);
  };
  auto count_is = [&](int64_t got, const char* field) {
    KILN_CHECK(got == n, "onnx: ", what, " holds ", got, " values in ", field, ", expected ", n, " for shape [",
               [&] {
                 std::string s;
                 for (size_t k = 0; k < sizes.size(); ++k) s += (k ? ", " : "") + std::to_string(sizes[k]);
                 return s;
               }(),
               "]");
  };
  if (t.external) {
    std::string location;
    int64_t offset = 0, length = -1;
    for (const auto& [key, value] : t.external_data) {
      if (key == "location") location = value;
      else if (key == "offset" || key == "length") {
        int64_t v = 0;
        try {
          size_t used = 0;
          v = std::stoll(value, &used);
          KILN_CHECK(used == value.size() && v >= 0, "");
        } catch (const std::exception&) {
          fail("onnx: ", what, " has external data ", key, " '", value, "', not a non-negative integer");
        }
        (key == "offset" ? offset : length) = v;
      }
    }
    KILN_CHECK(!location.empty(), "onnx: ", what, " has external data without a location");
    KILN_CHECK(!base_dir.empty(), "onnx: ", what, " has its data in external file '", location,
               "', and the model was not loaded from a file (no directory to look in)");
    const std::filesystem::path rel(location);
    KILN_CHECK(rel.is_relative() && std::none_of(rel.begin(), rel.end(), [](const auto& p) { return p == ".."; }),
               "onnx: ", what, " has external data location '", location,
               "', which must be a relative path inside the model's directory");
    // Resolved with its links: the file must really lie inside the model's directory (a link
    // there could point anywhere) and be a regular file (a FIFO or a device would hang the read
    // or never end).
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path root = fs::canonical(base_dir, ec);
    KILN_CHECK(!ec, "onnx: ", what, ": cannot resolve the model's directory '", base_dir, "': ", ec.message());
    const fs::path file = fs::canonical(root / rel, ec);
    KILN_CHECK(!ec, "onnx: ", what, ": cannot open its external data file '", (root / rel).string(), "': ", ec.message());
    KILN_CHECK(std::mismatch(root.begin(), root.end(), file.begin(), file.end()).first == root.end(), "onnx: ", what,
               ": its external data file '", location, "' resolves to '", file.string(),
               "', outside the model's directory (a link out of it)");
    check_regular_file(file.string(), "onnx: " + what + ": its external data file");
    std::ifstream f(file, std::ios::binary);
    KILN_CHECK(f.good(), "onnx: ", what, ": cannot open its external data file '", file.string(), "'");
    f.seekg(0, std::ios::end);
    const int64_t size = static_cast<int64_t>(f.tellg());
    if (length < 0) length = size - offset;
    KILN_CHECK(length == static_cast<int64_t>(nbytes), "onnx: ", what, " has ", length,
               " bytes of external data, expected ", nbytes);
    KILN_CHECK(offset <= size && length <= size - offset, "onnx: ", what, ": external data file '", file.string(),
               "' has ", size, " bytes, too few for offset ", offset, " + length ", length);
    allocate();
    f.seekg(offset);
    f.read(static_cast<char*>(out.data()), static_cast<std::streamsize>(nbytes));
    KILN_CHECK(f.good() || nbytes == 0, "onnx: ", what, ": error reading '", file.string(), "'");
    return out;
  }
  if (t.has_raw_data) {
    const std::span<const std::byte> raw = t.raw();
    KILN_CHECK(raw.size() == nbytes, "onnx: ", what, " has ", raw.size(),
               " bytes of raw data, expected ", nbytes);
    // Bools are normalised in place below, so they are copied.
    if (view_raw && !backing && dt != DType::bool_ && nbytes > 0 &&
        reinterpret_cast<uintptr_t>(raw.data()) % static_cast<uintptr_t>(dtype_size(dt)) == 0) {
      out.storage = std::make_shared<Storage>(Device::cpu(), const_cast<std::byte*>(raw.data()), nbytes, [](void*) {});
      out.dtype = dt;
      out.sizes = sizes;
      out.strides = contiguous_strides(sizes);
      return out;  // its bytes fetched by the caller (Importer::tensor)
    }
    t.fetch();
    allocate(raw);
    if (dt == DType::bool_)
      for (int64_t k = 0; k < n; ++k) out.data_as<uint8_t>()[k] = out.data_as<uint8_t>()[k] != 0;
    return out;
  }
  count_is(static_cast<int64_t>(dt == DType::f32 ? t.float_data.size() : dt == DType::f64 ? t.double_data.size()
                                : dt == DType::i64 ? t.int64_data.size() : t.int32_data.size()),
           dt == DType::f32 ? "float_data" : dt == DType::f64 ? "double_data" : dt == DType::i64 ? "int64_data" : "int32_data");
  allocate();
  switch (dt) {
    case DType::f32:
      if (n) std::memcpy(out.data(), t.float_data.data(), nbytes);
      break;
    case DType::f64:
      if (n) std::memcpy(out.data(), t.double_data.data(), nbytes);
      break;
    case DType::i64:
      if (n) std::memcpy(out.data(), t.int64_data.data(), nbytes);
      break;
    case DType::i32:
      if (n) std::memcpy(out.data(), t.int32_data.data(), nbytes);
      break;
    case DType::bool_:
      for (int64_t k = 0; k < n; ++k) out.data_as<uint8_t>()[k] = t.int32_data[static_cast<size_t>(k)] != 0;
      break;
    case DType::f16:
    case DType::bf16:  // 16-bit patterns in int32_data
      for (int64_t k = 0; k < n; ++k)
        out.data_as<uint16_t>()[k] = static_cast<uint16_t>(t.int32_data[static_cast<size_t>(k)]);
      break;
  }
  return out;
}

const pb::Tensor& tensor_attr(const pb::Attribute& a) {
  static const pb::Tensor none;
  return a.t ? *a.t : none;
}

// ---- NodeCtx --------------------------------------------------------------------------

const pb::Attribute* NodeCtx::attr(const std::string& name) const {
  for (const pb::Attribute& a : node.attribute)
    if (a.name == name) return &a;
  return nullptr;
}

int64_t NodeCtx::i(const std::string& name, int64_t def) const {
  const pb::Attribute* a = attr(name);
  if (!a) return def;
  KILN_CHECK(a->type == pb::Attribute::INT || (a->type == pb::Attribute::UNDEFINED && a->has_i),
             "attribute '", name, "' must be an int");
  return a->i;
}

double NodeCtx::f(const std::string& name, double def) const {
  const pb::Attribute* a = attr(name);
  if (!a) return def;
  KILN_CHECK(a->type == pb::Attribute::FLOAT || (a->type == pb::Attribute::UNDEFINED && a->has_f),
             "attribute '", name, "' must be a float");
  return a->f;
}

std::string NodeCtx::s(const std::string& name, const std::string& def) const {
  const pb::Attribute* a = attr(name);
  if (!a) return def;
  KILN_CHECK(a->type == pb::Attribute::STRING || (a->type == pb::Attribute::UNDEFINED && a->has_s),
             "attribute '", name, "' must be a string");
  return a->s;
}

std::vector<int64_t> NodeCtx::ints(const std::string& name) const {
  const pb::Attribute* a = attr(name);
  if (!a) return {};
  KILN_CHECK(a->type == pb::Attribute::INTS || a->type == pb::Attribute::UNDEFINED,
             "attribute '", name, "' must be a list of ints");
  return {a->ints.begin(), a->ints.end()};
}

std::vector<double> NodeCtx::floats(const std::string& name) const {
  const pb::Attribute* a = attr(name);
  if (!a) return {};
  KILN_CHECK(a->type == pb::Attribute::FLOATS || a->type == pb::Attribute::UNDEFINED,
             "attribute '", name, "' must be a list of floats");
  return {a->floats.begin(), a->floats.end()};
}

const V& NodeCtx::input(size_t k) const {
  KILN_CHECK(present(k), "input ", k, " is required but missing");
  return in[k];
}

size_t NodeCtx::outputs() const {
  size_t n = 0;
  for (const std::string& o : node.output) n += !o.empty();
  return n;
}

// ---- Importer -------------------------------------------------------------------------

V Importer::input(NodeId id) {
  auto v = std::make_shared<Val>();
  v->id = id;
  v->dtype = g_.node(id).meta.dtype;
  v->sizes = g_.node(id).meta.sizes;
  return v;
}

V Importer::constant(TensorData t) {
  auto v = std::make_shared<Val>();
  v->dtype = t.dtype;
  v->sizes = static_shape(t.sizes);
  if (t.rank() <= 1 && (is_integral(t.dtype))) {
    SymShape s;
    for (int64_t x : ints_of(t)) s.push_back(x);
    v->ints = std::move(s);
  }
  v->data = std::make_shared<const TensorData>(t.is_contiguous() ? std::move(t) : eval::contiguous(t));
  return v;
}

const TensorData& Importer::read(const V& v) {
  KILN_INTERNAL_CHECK(v->data != nullptr, "onnx: a value read at import is not known");
  if (const pb::Tensor* t = std::exchange(v->unfetched, nullptr)) t->fetch();
  if (const pb::Tensor* t = std::exchange(v->unread_external, nullptr))
    v->data = std::make_shared<const TensorData>(tensor_from_proto(*t, base_dir_, nullptr, false));
  return *v->data;
}

V Importer::tensor(const pb::Tensor& t) {
  const std::string what = "tensor '" + t.name + "'";
  if (elide_weights_ && t.external && is_floating(dtype_of(t.data_type, what)) && checked_numel(t.dims, what) > 1) {
    // A weight in an external file: read only where the import reads it (read()); its checks
    // (location, length) run then.
    TensorData d;
    d.dtype = dtype_of(t.data_type, what);
    d.sizes = t.dims;
    d.strides = contiguous_strides(d.sizes);
    auto v = std::make_shared<Val>();
    v->dtype = d.dtype;
    v->sizes = static_shape(d.sizes);
    v->data = std::make_shared<const TensorData>(std::move(d));
    v->unread_external = &t;
    return v;
  }
  if (elide_weights_) {
    // A view of the raw data. A floating-point one of more than one element (a weight) is fetched
    // only where the import reads it (read()): folded into a small value. Others now: their
    // integers are read at once (constant()).
    TensorData d = tensor_from_proto(t, base_dir_, nullptr, true);
    const bool view = t.has_raw_data && d.numel() > 0 && d.data() == static_cast<const void*>(t.raw().data());
    const bool defer = view && is_floating(d.dtype) && d.numel() > 1;
    if (view && !defer) t.fetch();
    V v = constant(std::move(d));
    if (defer) v->unfetched = &t;
    return v;
  }
  auto backing = std::make_shared<ConstantData>();
  V v = constant(tensor_from_proto(t, base_dir_, backing));
  if (!backing->bytes.empty()) v->graph_data = std::move(backing);
  return v;
}

V Importer::scalar(double x, DType t) { return constant(make_tensor(t, {}, {x})); }

V Importer::known_ints(SymShape values, bool is_scalar) {
  KILN_INTERNAL_CHECK(!is_scalar || values.size() == 1, "a scalar of ", values.size(), " values");
  if (shape_is_static(values)) {
    std::vector<int64_t> sizes;
    if (!is_scalar) sizes.push_back(static_cast<int64_t>(values.size()));
    TensorData t = TensorData::empty_host(DType::i64, sizes);
    for (size_t k = 0; k < values.size(); ++k) t.data_as<int64_t>()[k] = values[k].hint();
    return constant(std::move(t));
  }
  auto v = std::make_shared<Val>();
  v->dtype = DType::i64;
  if (!is_scalar) v->sizes = {static_cast<int64_t>(values.size())};
  v->ints = std::move(values);
  return v;
}

NodeId Importer::id(const V& v) {
  if (v->id >= 0) return v->id;
  if (elide_weights_ && v->data && v->data->rank() > 0 && v->data->numel() > 1) {
    v->id = g_.add_input(TensorMeta{v->data->dtype, Device::cpu(), static_shape(v->data->sizes), {}});
    placeholders_.insert(v->id);
    return v->id;
  }
  if (v->graph_data) {
    v->id = g_.add(OpId::constant, {}, {v->graph_data});
    return v->id;
  }
  if (v->data) {
    read(v);
    auto c = std::make_shared<ConstantData>();
    c->dtype = v->data->dtype;
    c->sizes = v->data->sizes;
    const auto* bytes = static_cast<const std::byte*>(v->data->data());
    c->bytes.assign(bytes, bytes + v->data->numel() * dtype_size(c->dtype));  // no zero fill first: weights are large
    v->id = g_.add(OpId::constant, {}, {std::shared_ptr<const ConstantData>(std::move(c))});
    return v->id;
  }
  std::string s;
  for (const SymInt& x : *v->ints) s += (s.empty() ? "" : ", ") + x.str();
  fail("the integer tensor [", s,
       "] depends on dynamic input sizes and is used as tensor data; Kiln keeps such values only as sizes "
       "(Reshape, Expand, ConstantOfShape, Slice and similar shape inputs)");
}

constexpr int64_t kMaxFoldedElements = int64_t{1} << 22;

// Shape arithmetic over dynamic sizes (an exporter's batch * heads, seq * 2, ...): add, sub and
// mul of integer values whose elements are known sizes (rank 0 or 1, broadcast) give known
// sizes again, so they can still feed a Reshape; null when `o` is anything else.
V Importer::symbolic_arith(OpId o, const std::vector<V>& inputs) {
  if (o != OpId::add && o != OpId::sub && o != OpId::mul) return nullptr;
  size_t n = 1;
  bool scalar = true;
  for (const V& v : inputs) {
    if (!v->ints || v->sizes.size() > 1 || !is_integral(v->dtype)) return nullptr;
    scalar = scalar && v->sizes.empty();
    const size_t k = v->ints->size();
    if (k != 1 && n != 1 && k != n) return nullptr;
    n = std::max(n, k);
  }
  SymShape out;
  for (size_t i = 0; i < n; ++i) {
    const SymInt& a = (*inputs[0]->ints)[inputs[0]->ints->size() == 1 ? 0 : i];
    const SymInt& b = (*inputs[1]->ints)[inputs[1]->ints->size() == 1 ? 0 : i];
    out.push_back(o == OpId::add ? a + b : o == OpId::sub ? a - b : a * b);
  }
  return known_ints(std::move(out), scalar);
}

V Importer::op(OpId o, std::vector<V> inputs, Attrs attrs) {
  bool known = !inputs.empty();
  for (const V& v : inputs) known = known && v->data;
  if (known) {
    // Folded only when the result is small: a constant that big stays a node over constants.
    // The shape rule runs once, here; run_op takes its result.
    Graph scratch;
    std::vector<NodeId> ids;
    for (const V& v : inputs) ids.push_back(scratch.add_input(TensorMeta{v->dtype, Device::cpu(), v->sizes, {}}));
    const TensorMeta out = scratch.node(scratch.add(o, ids, attrs)).meta;
    if (shape_is_static(out.sizes) && out.numel().hint() <= kMaxFoldedElements) {
      std::vector<TensorData> args;
      for (const V& v : inputs) args.push_back(read(v));
      return constant(eval::run_op(o, args, attrs, out.dtype, shape_hints(out.sizes)));
    }
  }
  if (V sym = symbolic_arith(o, inputs)) return sym;
  std::vector<NodeId> ids;
  for (const V& v : inputs) ids.push_back(id(v));
  V r = input(g_.add(o, std::move(ids), std::move(attrs)));
  // A value computed from one graph input (and constants) remembers it: binding that input
  // at import makes the value known (InputValueNeeded).
  std::string source;
  for (const V& v : inputs) {
    if (v->data) continue;
    if (v->input_name.empty() || (!source.empty() && source != v->input_name)) return r;
    source = v->input_name;
  }
  r->input_name = source;
  return r;
}

V Importer::permute(const V& v, std::vector<int64_t> dims) {
  bool identity = true;
  for (size_t k = 0; k < dims.size(); ++k) identity = identity && dims[k] == static_cast<int64_t>(k);
  return identity ? v : op(OpId::permute, {v}, {std::move(dims)});
}

V Importer::slice(const V& v, int64_t dim, int64_t start, int64_t end, int64_t step) {
  return op(OpId::slice, {v}, {dim, start, end, step});
}

V Importer::reduce(OpId r, const V& v, std::vector<int64_t> dims, bool keepdim) {
  std::sort(dims.begin(), dims.end());
  dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  return op(r, {v}, {std::move(dims), keepdim});
}

std::vector<int64_t> Importer::static_ints(const V& v, const std::string& what) {
  if (v->data) {
    KILN_CHECK(is_integral(v->data->dtype) || v->data->dtype == DType::bool_, what, " must be an integer tensor, got ",
               dtype_name(v->data->dtype));
    return ints_of(read(v));
  }
  if (v->ints) {
    std::vector<int64_t> out;
    for (const SymInt& s : *v->ints) {
      KILN_CHECK(s.is_static(), what, " depends on the dynamic size ", s.str(), ", and must be known at import");
      out.push_back(s.hint());
    }
    return out;
  }
  if (!v->input_name.empty())
    throw InputValueNeeded(what + " must be known at import, and it is computed from graph input '" + v->input_name +
                               "': bind that input to a value (LoadOptions::constant_inputs)",
                           v->input_name);
  fail(what, " must be a constant (an initializer, a Constant node, or computed from them and from shapes)");
}

std::vector<double> Importer::static_doubles(const V& v, const std::string& what) {
  if (v->data) return doubles_of(read(v));
  std::vector<double> out;
  for (int64_t x : static_ints(v, what)) out.push_back(static_cast<double>(x));
  return out;
}

SymShape Importer::sym_ints(const V& v, const std::string& what) {
  if (v->ints) return *v->ints;
  return static_shape(static_ints(v, what));
}

}  // namespace detail

// ---- the model ------------------------------------------------------------------------

namespace detail {

namespace {

// A node of another domain than ai.onnx runs as the custom op registered as "<domain>::<op_type>"
// (kiln/graph/custom_ops.h; ONNX Runtime's custom ops): its attributes become the op's config,
// a JSON object of their values (floats, ints, strings and lists of them), keys sorted.
Converter custom_converter(const pb::Node& n) {
  const std::string name = n.domain + "::" + n.op_type;
  const std::shared_ptr<const CustomOpDef> op = find_custom_op(name);
  KILN_CHECK(op != nullptr, "the domain '", n.domain, "' is not supported (Kiln imports the default domain ai.onnx, ",
             "and a node of another domain as the custom op registered as <domain>::<op_type>, here ", name,
             ", which is not registered)");
  nlohmann::json config = nlohmann::json::object();
  for (const pb::Attribute& a : n.attribute) {
    switch (a.type) {
      case pb::Attribute::FLOAT: config[a.name] = static_cast<double>(a.f); break;
      case pb::Attribute::INT: config[a.name] = a.i; break;
      case pb::Attribute::STRING: config[a.name] = a.s; break;
      case pb::Attribute::FLOATS: {
        std::vector<double> v(a.floats.begin(), a.floats.end());
        config[a.name] = v;
        break;
      }
      case pb::Attribute::INTS: config[a.name] = a.ints; break;
      case pb::Attribute::STRINGS: config[a.name] = a.strings; break;
      default: fail("attribute '", a.name, "' is a tensor or graph, which a custom op's config cannot hold");
    }
  }
  const std::string text = config.dump();
  return [name, version = op->version, text](NodeCtx& c) -> std::vector<V> {
    std::vector<V> inputs;
    for (const V& v : c.in) {
      KILN_CHECK(v != nullptr, "custom op ", name, ": an input is omitted (custom ops take no optional inputs)");
      inputs.push_back(v);
    }
    size_t outputs = 0;
    for (const std::string& o : c.node.output) outputs += o.empty() ? 0 : 1;
    KILN_CHECK(outputs == 1 && !c.node.output[0].empty(), "custom op ", name, ": the node has ", c.node.output.size(),
               " outputs; custom ops give one");
    return {c.im.op(OpId::custom, std::move(inputs), Attrs{name, version, text})};
  };
}

std::string node_label(const pb::Node& n, size_t index, int64_t opset) {
  std::string s = "node ";
  s += n.name.empty() ? "#" + std::to_string(index) : "'" + n.name + "'";
  s += " (" + n.op_type + ", domain " + (n.domain.empty() ? std::string("ai.onnx") : n.domain) + ", opset " +
       std::to_string(opset) + ")";
  return s;
}

// The strings of a Python list's repr (['a', "b's"]); nullopt where the text is not one.
std::optional<std::vector<std::string>> python_strings(const std::string& text) {
  std::vector<std::string> out;
  size_t i = 0;
  auto skip = [&] { while (i < text.size() && (text[i] == ' ' || text[i] == ',')) ++i; };
  skip();
  if (i == text.size() || text[i++] != '[') return std::nullopt;
  for (skip(); i < text.size() && text[i] != ']'; skip()) {
    const char quote = text[i++];
    if (quote != '\'' && quote != '"') return std::nullopt;
    std::string item;
    while (i < text.size() && text[i] != quote) {
      if (text[i] == '\\' && i + 1 < text.size()) ++i;
      item += text[i++];
    }
    if (i++ == text.size()) return std::nullopt;
    out.push_back(std::move(item));
  }
  if (i == text.size()) return std::nullopt;
  return out;
}

// The name an ONNX node's Kiln nodes take: its module scopes and its own name, '/'-separated
// ("encoder/layer.0/attention/self/node_MatMul_12"), which the inspector groups by. The scopes
// are PyTorch's exporter's (metadata "pkg.torch.onnx.name_scopes": each module's dotted path,
// then the node's own); a name already scoped with '/' (torch.onnx's TorchScript exporter:
// "/encoder/layer.0/MatMul") stays as it is, without its leading '/'.
std::string scoped_name(const pb::Node& n) {
  std::string own = n.name.empty() ? n.op_type : n.name;
  if (own.size() > 1 && own[0] == '/') return own.substr(1);
  const auto levels = python_strings(n.name_scopes);
  if (!levels || levels->size() < 2) return own;
  std::string path, parent;
  for (size_t k = 0; k + 1 < levels->size(); ++k) {  // the last is the node's own (its FX node's) name
    const std::string& module = (*levels)[k];
    if (module.empty()) continue;
    const bool nested = !parent.empty() && module.size() > parent.size() + 1 && module.compare(0, parent.size() + 1, parent + ".") == 0;
    std::string segment = nested ? module.substr(parent.size() + 1) : module;
    std::replace(segment.begin(), segment.end(), '/', '_');
    path += segment + "/";
    parent = module;
  }
  return path + own;
}

constexpr int64_t kMinOpset = 1, kMaxOpset = 18;  // 18: Reduce* axes as input, Split num_outputs, Pad axes

}  // namespace

Model import_model(const pb::Model& mp, const std::string& base_dir, const LoadOptions& options) {
  Model m;
  m.ir_version = mp.ir_version;
  m.producer = mp.producer_name + (mp.producer_version.empty() ? "" : " " + mp.producer_version);
  std::map<std::string, int64_t> opsets;
  for (const pb::OperatorSet& o : mp.opset_import) opsets[o.domain == "ai.onnx" ? "" : o.domain] = o.version;
  KILN_CHECK(mp.graph.has_value(), "onnx: the model has no graph");
  if (!opsets.count("")) {
    std::string domains;
    for (const auto& [d, v] : opsets) domains += (domains.empty() ? "" : ", ") + d + " " + std::to_string(v);
    fail("onnx: the model imports no opset of the default domain (ai.onnx), only ", domains.empty() ? "none" : domains,
         "; Kiln imports the default domain");
  }
  m.opset = opsets[""];
  KILN_CHECK(m.opset >= kMinOpset && m.opset <= kMaxOpset, "onnx: the model uses opset ", m.opset,
             " of domain ai.onnx; Kiln imports opsets ", kMinOpset, " to ", kMaxOpset);
  const pb::Graph& gp = *mp.graph;
  KILN_CHECK(gp.sparse_initializers == 0, "onnx: sparse initializers are not supported");

  Graph& g = m.graph;
  Importer im(g, options.device, base_dir);
  im.elide_weights((options.device != Device::cpu() || options.lift_constants) && !options.parameter_values);
  std::map<std::string, V> env;
  for (const pb::Tensor& t : gp.initializer) {
    KILN_CHECK(!t.name.empty(), "onnx: an initializer has no name");
    env[t.name] = im.tensor(t);
  }
  std::map<std::string, SymInt> named_dims;
  KILN_CHECK(options.first_made_up_size >= 2, "onnx: LoadOptions::first_made_up_size must be at least 2, got ",
             options.first_made_up_size);
  int64_t next_hint = options.first_made_up_size;
  for (const pb::ValueInfo& vi : gp.input) {
    if (env.count(vi.name)) continue;  // an initializer listed as an input (IR < 4): a constant
    const std::string what = "onnx: graph input '" + vi.name + "'";
    KILN_CHECK(vi.has_tensor_type, what, " is not a tensor (sequence, map and optional inputs are not supported)");
    const DType dt = dtype_of(vi.elem_type, what);
    KILN_CHECK(vi.has_shape, what, " has no shape (its rank must be known)");
    const auto ex = options.example_sizes.find(vi.name);
    const std::vector<int64_t>* example = ex == options.example_sizes.end() ? nullptr : &ex->second;
    KILN_CHECK(!example || example->size() == vi.dims.size(), what, " has rank ",
               vi.dims.size(), " but its example has rank ", example ? example->size() : 0);
    TensorMeta meta;
    meta.dtype = dt;  // imported on the CPU; moved to options.device below
    for (size_t d = 0; d < vi.dims.size(); ++d) {
      const pb::Dimension& dim = vi.dims[d];
      if (dim.has_dim_value) {
        KILN_CHECK(dim.dim_value >= 0, what, " has negative size ", dim.dim_value, " at dim ", d);
        meta.sizes.push_back(dim.dim_value);
        continue;
      }
      const std::string source = "input " + std::to_string(m.input_names.size()) + " (" + vi.name + ") dim " +
                                 std::to_string(d) + (dim.has_dim_param ? " '" + dim.dim_param + "'" : "");
      const int64_t hint = example ? (*example)[d] : -1;
      if (hint >= 0 && hint < 2) {
        meta.sizes.push_back(hint);  // sizes 0 and 1 are specialised
        continue;
      }
      if (dim.has_dim_param && !dim.dim_param.empty()) {
        auto it = named_dims.find(dim.dim_param);
        if (it != named_dims.end()) {
          meta.sizes.push_back(it->second);
          continue;
        }
      }
      const SymInt s = g.shapes().create_symbol(hint >= 2 ? hint : next_hint++, 2,
                                                std::numeric_limits<int64_t>::max(), source, false);
      if (dim.has_dim_param && !dim.dim_param.empty()) named_dims.emplace(dim.dim_param, s);
      meta.sizes.push_back(s);
    }
    const NodeId in = g.add_input(meta, vi.name);
    const auto bound = options.constant_inputs.find(vi.name);
    if (bound != options.constant_inputs.end()) {
      KILN_CHECK(bound->second.dtype == dt && static_cast<int64_t>(bound->second.sizes.size()) == meta.rank(), what,
                 " is bound to a value of another dtype or rank");
      env[vi.name] = im.constant(bound->second);
    } else {
      env[vi.name] = im.input(in);
      env[vi.name]->input_name = vi.name;
    }
    m.input_names.push_back(vi.name);
  }

  for (size_t k = 0; k < gp.node.size(); ++k) {
    const pb::Node& n = gp.node[k];
    const std::string domain = n.domain == "ai.onnx" ? "" : n.domain;
    const auto os = opsets.find(domain);
    const int64_t opset = os == opsets.end() ? -1 : os->second;
    const std::string label = node_label(n, k, opset);
    Converter custom;
    if (!domain.empty()) {
      try {
        custom = custom_converter(n);
      } catch (const Error& e) {
        fail("onnx: ", label, ": ", e.what());
      }
    }
    const Converter* conv = domain.empty() ? find_converter(n.op_type) : &custom;
    KILN_CHECK(conv, "onnx: ", label, ": unsupported op type '", n.op_type, "'");
    NodeCtx ctx{im, n, {}, opset};
    for (const std::string& name : n.input) {
      if (name.empty()) {
        ctx.in.push_back(nullptr);
        continue;
      }
      const auto it = env.find(name);
      KILN_CHECK(it != env.end(), "onnx: ", label, ": input '", name, "' is not defined before the node");
      ctx.in.push_back(it->second);
    }
    for (const pb::Attribute& a : n.attribute)
      KILN_CHECK(a.ref_attr_name.empty(), "onnx: ", label, ": attribute '", a.name,
                 "' refers to a function attribute, which is not supported");
    std::vector<V> outs;
    const size_t first_new = im.graph().size();
    try {
      outs = (*conv)(ctx);
    } catch (const InputValueNeeded& e) {
      throw InputValueNeeded("onnx: " + label + ": " + e.what(), e.input);
    } catch (const Error& e) {
      fail("onnx: ", label, ": ", e.what());
    } catch (const InternalError&) {
      throw;  // a bug in Kiln, not in the model: not to be reported as the node's fault
    } catch (const std::exception& e) {  // e.g. std::out_of_range from the standard library
      fail("onnx: ", label, ": ", e.what());
    }
    // The nodes it became are named after it (where a converter did not name them).
    const std::string name = scoped_name(n);
    for (size_t id = first_new; id < im.graph().size(); ++id)
      if (im.graph().node(static_cast<NodeId>(id)).name.empty()) im.graph().set_name(static_cast<NodeId>(id), name);
    for (size_t j = 0; j < n.output.size(); ++j) {
      if (n.output[j].empty()) continue;
      KILN_CHECK(j < outs.size() && outs[j], "onnx: ", label, ": output ", j, " ('", n.output[j], "') is not supported");
      env[n.output[j]] = outs[j];
    }
  }

  std::vector<NodeId> outputs;
  for (const pb::ValueInfo& vi : gp.output) {
    const auto it = env.find(vi.name);
    KILN_CHECK(it != env.end(), "onnx: graph output '", vi.name, "' is not computed by any node");
    V v = it->second;
    try {
      if (vi.has_tensor_type && vi.elem_type != 0) v = im.cast(v, dtype_of(vi.elem_type, "graph output '" + vi.name + "'"));
      outputs.push_back(im.id(v));
    } catch (const Error& e) {
      fail("onnx: graph output '", vi.name, "': ", e.what());
    }
    m.output_names.push_back(vi.name);
  }
  KILN_CHECK(!outputs.empty(), "onnx: the graph has no outputs");
  g.set_outputs(outputs);
  if (options.device != Device::cpu() || options.lift_constants) {
    // Off the CPU only 0-d constants may join device tensors: the others become inputs
    // (parameters), and the graph is built again over inputs on the device. (On the CPU when
    // asked: weights as arguments instead of constants of the compiled graph.)
    Graph lifted;
    for (const SymbolInfo& s : g.shapes().symbols()) lifted.shapes().add_symbol(s);
    for (const ShapeFact& f : g.shapes().facts()) lifted.shapes().add_fact(f);
    std::vector<NodeId> map(g.size(), -1);
    for (NodeId i : g.inputs()) {
      if (im.is_placeholder(i)) continue;  // a weight: lifted where first read, as constants are
      TensorMeta meta = g.node(i).meta;
      meta.device = options.device;
      map[i] = lifted.add_input(meta, g.node(i).name);
    }
    // A one-element constant that a binary or ternary elementwise op reads is read as a 0-d one
    // where the op's result stays the same (dtype and sizes: no dims it adds, no promotion it
    // changes): it stays a constant the kernels and passes see (a scale the attention
    // recognizer folds, an eps) instead of becoming a parameter.
    std::vector<NodeId> scalar(g.size(), -1);
    auto as_scalar = [&](NodeId c) {
      if (scalar[static_cast<size_t>(c)] < 0) {
        auto data = std::make_shared<ConstantData>(g.node(c).attrs.tensor(0));
        data->sizes.clear();
        scalar[static_cast<size_t>(c)] = lifted.add(OpId::constant, {}, {std::shared_ptr<const ConstantData>(std::move(data))});
      }
      return scalar[static_cast<size_t>(c)];
    };
    // Old node x's value in the new graph: a constant of rank > 0 becomes a parameter (a graph
    // input) where something first reads it.
    size_t lifted_count = 0;
    auto value = [&](NodeId x) {
      if (map[x] >= 0) return map[x];
      const Node& k = g.node(x);
      KILN_INTERNAL_CHECK(k.op == OpId::constant || im.is_placeholder(x), "onnx: node ", x, " read before it was lifted");
      TensorMeta meta = k.meta;
      meta.device = options.device;
      map[x] = lifted.add_input(meta, "param" + std::to_string(lifted_count++));
      if (options.parameter_values) {  // (never with placeholders: elide_weights)
        // Copied into a host buffer that starts on a cache line, as the runtimes' own do (a
        // constant's std::vector bytes do not: the CPU's vector loads would split lines).
        const ConstantData& c = k.attrs.tensor(0);
        TensorData t = TensorData::empty_host(c.dtype, c.sizes);
        if (!c.bytes.empty()) std::memcpy(t.data(), c.bytes.data(), c.bytes.size());
        m.parameters.push_back(std::move(t));
      }
      return map[x];
    };
    auto one_element = [&](NodeId c) {
      const Node& k = g.node(c);
      return k.op == OpId::constant && k.meta.rank() > 0 && k.attrs.tensor(0).bytes.size() == static_cast<size_t>(dtype_size(k.meta.dtype));
    };
    for (size_t i = 0; i < g.size(); ++i) {
      const Node& n = g.node(static_cast<NodeId>(i));
      if (n.op == OpId::input) continue;
      const OpCategory cat = op_def(n.op).category;
      if (cat == OpCategory::binary || cat == OpCategory::ternary) {
        const bool any = std::any_of(n.inputs.begin(), n.inputs.end(), one_element);
        if (any) {
          // Probe the op over the 0-d operands in a scratch graph before committing to it.
          Graph scratch;
          scratch.shapes() = lifted.shapes();
          std::vector<NodeId> probe;
          for (NodeId x : n.inputs) {
            TensorMeta m = g.node(x).meta;
            if (one_element(x)) m.sizes.clear();  // a 0-d constant, on the CPU
            else m.device = options.device;
            probe.push_back(scratch.add_input(m));
          }
          bool same = false;
          try {
            const TensorMeta& m = scratch.node(scratch.add(n.op, probe, n.attrs)).meta;
            same = m.dtype == n.meta.dtype && m.sizes == n.meta.sizes;
          } catch (const Error&) {
          }
          if (same) {
            std::vector<NodeId> ins;
            for (NodeId x : n.inputs) ins.push_back(one_element(x) ? as_scalar(x) : value(x));
            map[i] = lifted.add(n.op, std::move(ins), n.attrs);
            if (!n.name.empty()) lifted.set_name(map[i], n.name);
            continue;
          }
        }
      }
      if (n.op == OpId::constant && n.meta.rank() > 0) continue;  // lifted where first read
      std::vector<NodeId> ins;
      for (NodeId x : n.inputs) ins.push_back(value(x));
      map[i] = lifted.add(n.op, std::move(ins), n.attrs);
      if (!n.name.empty()) lifted.set_name(map[i], n.name);
    }
    std::vector<NodeId> outs;
    for (NodeId o : g.outputs()) outs.push_back(value(o));
    lifted.set_outputs(outs);
    m.graph = std::move(lifted);
  }
  return m;
}

}  // namespace detail

std::string describe(const Model& m) { return describe_header(m) + m.graph.str(); }

std::string describe_header(const Model& m) {
  std::ostringstream s;
  s << "onnx model: ir_version " << m.ir_version << ", opset " << m.opset;
  if (!m.producer.empty()) s << ", producer " << m.producer;
  s << "\n";
  for (size_t k = 0; k < m.input_names.size(); ++k)
    s << "input " << k << " " << m.input_names[k] << ": " << m.graph.node(m.graph.inputs()[k]).meta.str() << "\n";
  for (size_t k = 0; k < m.output_names.size(); ++k)
    s << "output " << k << " " << m.output_names[k] << ": " << m.graph.node(m.graph.outputs()[k]).meta.str() << "\n";
  return s.str();
}

}  // namespace kiln::onnx
