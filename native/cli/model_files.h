// The files `kiln run` and `kiln show` take: a graph in Kiln's JSON format, or an ONNX model
// (a path ending in .onnx, imported by kiln::onnx when this build has the ONNX frontend).
#pragma once

#include <string>

#include "kiln/graph/graph.h"

namespace kiln::cli {

bool is_onnx_path(const std::string& path);
struct ModelFile {
  Graph graph;          // its inputs named as the model's
  std::string summary;  // an ONNX model's opset, producer, named inputs and outputs; "" for JSON
};
// A JSON graph file or an ONNX model, read and imported once.
ModelFile load_model_file(const std::string& path);

}  // namespace kiln::cli
