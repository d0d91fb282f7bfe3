// The files `kiln run` and `kiln show` take: a graph in Kiln's JSON format, or an ONNX model
// (a path ending in .onnx, imported by kiln::onnx when this build has the ONNX frontend).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/graph/device.h"
#include "kiln/graph/graph.h"

namespace kiln::cli {

bool is_onnx_path(const std::string& path);
struct ModelFile {
  Graph graph;          // its inputs named as the model's
  std::string summary;  // an ONNX model's opset, producer, named inputs and outputs; "" for JSON
};
// A JSON graph file or an ONNX model, read and imported once. `input_sizes` (by input position,
// may be empty) are the sizes the inputs will have: an ONNX model's dynamic dims take them as
// their examples (sizes 0 and 1 become static, as kiln::onnx::compile does), so a file of any
// size in a dynamic dim runs. An ONNX model is imported for `device` as kiln::onnx::compile
// imports it there (off the CPU its weights become inputs, onnx::LoadOptions::device).
// `weights_as_inputs`: on the CPU too, as kiln::onnx::compile imports a model (its weights are
// never read: the graph stays small whatever their size).
ModelFile load_model_file(const std::string& path, const std::vector<std::vector<int64_t>>& input_sizes = {},
                          Device device = Device::cpu(), bool weights_as_inputs = false);

}  // namespace kiln::cli
