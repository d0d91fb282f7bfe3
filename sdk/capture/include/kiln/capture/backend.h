// Backends: what turns a captured Graph into something that runs. A backend is a function
// from a graph and its example input metas to an Executable; the registry maps names to
// backends. The capture stage only calls them; the frontend registers the built-in ones
// ("eager", "kiln", "cudagraphs") and users register their own.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/graph/graph.h"
#include "kiln/graph/tensor_data.h"

namespace kiln {

// Runs a compiled graph: inputs in graph-input order (0-d tensors for scalar arguments),
// returns the graph's outputs in order.
using Executable = std::function<std::vector<TensorData>(std::span<const TensorData* const> inputs)>;
using Backend = std::function<Executable(const Graph& graph, std::span<const TensorMeta> example_inputs)>;

class BackendRegistry {
 public:
  // Adds or replaces a backend; an empty name or an empty function is an error.
  static void add(const std::string& name, Backend backend);
  static std::vector<std::string> names();  // sorted
  // The backend of that name; unknown names throw listing the registered ones.
  static Backend get(std::string_view name);
};

}  // namespace kiln
