// The ONNX frontend: reads an ONNX model (protobuf, through Debian's libonnx_proto) and
// imports it as a Kiln Graph, so a model exported from PyTorch or another framework compiles
// like a traced C++ function.
//
// Takes: a model file (weights inline or in external data files beside it), opsets 1..18 of
// the default domain. Gives: a Graph whose inputs are the model's inputs (named, in order) and
// whose outputs are the model's outputs; initializers and Constant nodes become constants.
// Dynamic dims (dim_param or unknown) become size symbols, one per distinct dim_param name.
// Constant subgraphs (shape arithmetic included: Shape, Gather, Concat, Unsqueeze feeding
// Reshape) are folded at import; over symbolic dims they stay symbolic sizes.
// Every ONNX op maps onto op-table primitives and composites (Conv and pooling as
// pad + strided slices + matmul / maximum / sum), see docs/onnx.md for the supported set.
// Malformed input, an unsupported domain, opset, op, attribute or dtype throws kiln::Error
// naming the node (name, op type, domain, opset).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/capture/capture.h"
#include "kiln/graph/graph.h"
#include "kiln/graph/tensor_data.h"

namespace kiln {
class Tensor;
}

namespace kiln::onnx {

struct LoadOptions {
  // The device the graph's inputs live on. Off the CPU, constants of rank > 0 become extra
  // graph inputs after the model's own (see Model::parameters): only 0-d constants may join
  // tensors of another device. A one-element constant that an elementwise op reads becomes a
  // 0-d one where that leaves the op's result as it was (a scale stays a value passes see).
  Device device = Device::cpu();
  // Example sizes of the model inputs, by input name: a dynamic dim takes its example value
  // from here (a value of 0 or 1 makes the dim static, as Kiln specialises those sizes).
  // Dims without an example get distinct example values first_made_up_size, the next, ...
  std::map<std::string, std::vector<int64_t>> example_sizes;
  // 2 by default (small inputs for `kiln run --random`); kiln::onnx::compile's first load, for
  // the model's names and early errors, makes up 64, 65, ...: a TopK's k or a slice's end along a
  // dynamic dim is a fact checked per call, not an error because a made-up size was too small.
  int64_t first_made_up_size = 2;
  // Model inputs bound to values at import (they stay graph inputs, unused): inputs that give
  // sizes, axes or other values the import needs (a Reshape whose shape is an input).
  std::map<std::string, TensorData> constant_inputs;
  // Lift constants of rank > 0 to parameters on the CPU too. What kiln::onnx::compile does:
  // weights then pass to the plan as arguments, so a compile's cache key and entry do not hold
  // them (hashing and storing a model's weights made a warm first call of BERT-base on the CPU
  // take 13 s).
  bool lift_constants = false;
  // false: constants lifted to inputs (off the CPU) keep no values (Model::parameters stays
  // empty), for inspecting a model's graph without a second copy of its weights (the web page).
  bool parameter_values = true;
};

// Thrown by load when an op needs the value of a graph input at import (see
// LoadOptions::constant_inputs); compile and the conformance runner bind it and load again.
class InputValueNeeded : public Error {
 public:
  InputValueNeeded(const std::string& message, std::string input) : Error(message), input(std::move(input)) {}
  std::string input;
};

struct Model {
  Graph graph;
  std::vector<std::string> input_names;   // graph inputs 0..n-1, the model's inputs
  std::vector<std::string> output_names;  // graph outputs, in order
  // Constants lifted to graph inputs n.. (only with LoadOptions::device off the CPU or
  // LoadOptions::lift_constants, and LoadOptions::parameter_values).
  std::vector<TensorData> parameters;
  int64_t opset = 0;       // of the default domain
  int64_t ir_version = 0;
  std::string producer;    // producer_name and version
};

// Loads a model file; external data files are read relative to its directory.
Model load(const std::string& path, const LoadOptions& options = {});
// Loads a serialized ModelProto held in memory; external data is looked up under `base_dir`
// (empty: external data is an error).
Model load_bytes(std::span<const std::byte> bytes, const std::string& base_dir, const LoadOptions& options = {});

// Loads a model decoded outside protobuf (the browser decodes it with protobufjs, web/js/onnx.js):
// `model_json` is the ModelProto as protobufjs's toObject gives it (camelCase names, 64-bit
// integers as numbers or strings, NaN and infinities as strings), except that each tensor's
// rawData is {"blob": [offset, length]}, a range of `blob`, and string attributes are text.
// External data must already be in the blob (there is no directory to read it from).
Model load_decoded(std::string_view model_json, std::span<const std::byte> blob, const LoadOptions& options = {});
// The same with a blob whose bytes are there only once fetch(offset, length) has been called for
// them (the page copies a model's parts into its module so, where the import reads them): an
// import off the CPU without parameter values reads no weight that it does not fold.
Model load_decoded(std::string_view model_json, std::span<const std::byte> blob,
                   const std::function<void(size_t offset, size_t length)>& fetch, const LoadOptions& options = {});

// Reads a serialized TensorProto (the test cases' input_N.pb / output_N.pb) as a host tensor.
TensorData load_tensor(const std::string& path);
TensorData parse_tensor(std::span<const std::byte> bytes, const std::string& what);

// A compiled model: call it with tensors in the model's input order, all on one device;
// returns the outputs on that device. The first call of each device and pattern of
// specialised sizes (a dynamic dim of size 0 or 1) loads and compiles; dynamic dims
// otherwise stay symbolic, so one compile serves every batch size.
class CompiledModel {
 public:
  CompiledModel(std::string path, CompileOptions options);
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) const;
  std::vector<TensorData> run(std::span<const TensorData> inputs) const;
  const std::vector<std::string>& input_names() const;
  const std::vector<std::string>& output_names() const;
  // The model as loaded for the CPU with its weights lifted to inputs after the model's own
  // and not read (Model::parameters empty): the model's inputs, outputs and their metadata.
  const Model& model() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// Loads the model once without its weights (for its names and to report errors early) and
// returns the callable.
// options.backend picks the backend ("kiln" default, "eager" = reference interpreter).
CompiledModel compile(const std::string& path, CompileOptions options = {});

// The model's graph input names (initializers excluded), without importing its nodes.
std::vector<std::string> input_names(const std::string& path);
// The model's initializers (its weights, external data read) by name, without importing its
// nodes: PyTorch's exporter names them as the module's state dict does.
std::map<std::string, TensorData> initializers(const std::string& path);

// Readable summary of a loaded model: inputs, outputs, opset, producer and the graph listing.
std::string describe(const Model& m);
// Its first part: ir version, opset, producer, named inputs and outputs (one line each).
std::string describe_header(const Model& m);

}  // namespace kiln::onnx
