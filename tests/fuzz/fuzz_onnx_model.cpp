// libFuzzer target for the ONNX loader (frontends/onnx): load_bytes on arbitrary bytes may give
// a model or throw kiln::Error; any other exception (kiln::InternalError, a bug in Kiln,
// included: it is not a kiln::Error, so it escapes and libFuzzer reports the abort), a crash or
// a sanitizer report is a finding.
// Input that starts with '{' goes to load_decoded instead: a model as the browser's decoder hands
// it over (JSON), the input's own bytes serving as the blob its tensors' byte ranges point into.
// A model that loads is also run on the reference interpreter with zero-filled inputs of its
// input sizes (symbols at their example values), which must give outputs or a kiln::Error.
#include <algorithm>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "kiln/graph/error.h"
#include "kiln/onnx/onnx.h"
#include "kiln/eval/interpreter.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::onnx::Model m;
  try {
    const std::span<const std::byte> bytes = std::as_bytes(std::span(data, size));
    if (size > 0 && data[0] == '{')
      m = kiln::onnx::load_decoded(std::string_view(reinterpret_cast<const char*>(data), size), bytes);
    else
      m = kiln::onnx::load_bytes(bytes, "");
  } catch (const kiln::Error&) {
    return 0;  // rejected with a message: fine (only kiln::Error: an InternalError must escape)
  }
  std::vector<kiln::TensorData> inputs;
  const std::vector<int64_t> examples = m.graph.shapes().examples();
  int64_t total = 0;
  for (kiln::NodeId i : m.graph.inputs()) {
    std::vector<int64_t> sizes;
    int64_t n = 1;
    for (const kiln::SymInt& s : m.graph.node(i).meta.sizes) {
      sizes.push_back(s.evaluate(examples));
      n *= sizes.back() > 0 ? sizes.back() : 1;
      if (n > (1 << 16)) return 0;  // keep runs small
    }
    total += n;
    if (total > (1 << 18)) return 0;
    inputs.push_back(kiln::TensorData::empty_host(m.graph.node(i).meta.dtype, sizes));
  }
  for (const kiln::Node& n : m.graph.nodes()) {  // every intermediate small too
    int64_t count = 1;
    for (const kiln::SymInt& s : n.meta.sizes) {
      count *= std::max<int64_t>(s.evaluate(examples), 1);
      if (count > (1 << 18)) return 0;
    }
  }
  try {
    (void)kiln::eval::run_graph(m.graph, inputs);
  } catch (const kiln::Error&) {
  }
  return 0;
}
