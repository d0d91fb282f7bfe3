#include "model_files.h"

#include "kiln/format/graph_json.h"
#include "kiln/graph/error.h"
#if KILN_HAVE_ONNX
#include "kiln/onnx/onnx.h"
#endif

namespace kiln::cli {

bool is_onnx_path(const std::string& path) {
  return path.size() > 5 && path.compare(path.size() - 5, 5, ".onnx") == 0;
}

Graph load_model_graph(const std::string& path) {
  if (!is_onnx_path(path)) return format::load_graph(path);
#if KILN_HAVE_ONNX
  return onnx::load(path).graph;
#else
  fail("'", path, "' is an ONNX model, and this build of kiln has no ONNX frontend (KILN_WITH_ONNX=OFF; "
       "it needs Debian's libonnx-dev and libprotobuf-dev)");
#endif
}

std::string model_summary(const std::string& path) {
  if (!is_onnx_path(path)) return "";
#if KILN_HAVE_ONNX
  const onnx::Model m = onnx::load(path);
  const std::string d = onnx::describe(m);
  // describe() ends with the graph listing, which kiln show prints itself.
  const size_t listing = d.find("\n%");
  return listing == std::string::npos ? d : d.substr(0, listing + 1);
#else
  return "";
#endif
}

}  // namespace kiln::cli
