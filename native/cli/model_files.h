// The files `kiln run` and `kiln show` take: a graph in Kiln's JSON format, or an ONNX model
// (a path ending in .onnx, imported by kiln::onnx when this build has the ONNX frontend).
#pragma once

#include <string>

#include "kiln/graph/graph.h"

namespace kiln::cli {

bool is_onnx_path(const std::string& path);
// The graph of a JSON graph file or an ONNX model (its inputs named as the model's).
Graph load_model_graph(const std::string& path);
// For an ONNX model: its opset, producer, named inputs and outputs (one line each); else "".
std::string model_summary(const std::string& path);

}  // namespace kiln::cli
