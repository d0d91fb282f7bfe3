#include "model_files.h"

#include <algorithm>

#include "kiln/format/graph_json.h"
#include "kiln/graph/error.h"
#if KILN_HAVE_ONNX
#include "kiln/onnx/onnx.h"
#endif

namespace kiln::cli {

bool is_onnx_path(const std::string& path) {
  return path.size() > 5 && path.compare(path.size() - 5, 5, ".onnx") == 0;
}

ModelFile load_model_file(const std::string& path, const std::vector<std::vector<int64_t>>& input_sizes, Device device,
                          bool weights_as_inputs) {
  if (!is_onnx_path(path)) return {format::load_graph(path), ""};
#if KILN_HAVE_ONNX
  onnx::LoadOptions options;
  options.device = device;
  options.lift_constants = weights_as_inputs;
  options.parameter_values = false;  // only the graph is returned: no copy of the lifted weights
  onnx::Model m = onnx::load(path, options);
  if (!input_sizes.empty()) {  // the names come from a first import; import again at the given sizes
    for (size_t k = 0; k < std::min(input_sizes.size(), m.input_names.size()); ++k)
      options.example_sizes[m.input_names[k]] = input_sizes[k];
    m = onnx::load(path, options);
  }
  std::string summary = onnx::describe_header(m);
  return {std::move(m.graph), std::move(summary)};
#else
  fail("'", path, "' is an ONNX model, and this build of kiln has no ONNX frontend (KILN_WITH_ONNX=OFF; "
       "it needs Debian's libonnx-dev and libprotobuf-dev)");
#endif
}

}  // namespace kiln::cli
