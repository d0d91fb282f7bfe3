// The embind layer: web/src/core as a JavaScript class and functions. Every call catches what
// C++ throws and rethrows it as a JavaScript Error carrying the same message (a C++ exception
// would otherwise reach JavaScript as a bare number). web/js/kiln.js wraps this in the API of
// docs/web.md.
#include <emscripten/bind.h>
#include <emscripten/val.h>

#include <algorithm>
#include <cstddef>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core.h"
#include "kiln/format/graph_json.h"
#include "kiln/graph/device.h"
#include "kiln/graph/error.h"
#include "kiln/onnx/onnx.h"

using emscripten::val;

namespace {

[[noreturn]] void throw_js(const std::string& message) {
  val::global("Error").new_(val(message)).throw_();
  __builtin_unreachable();
}

template <class Fn>
auto guarded(Fn&& fn) -> decltype(fn()) {
  std::string message;
  try {
    return fn();
  } catch (const kiln::Error& e) {
    message = e.what();
  } catch (const kiln::InternalError& e) {
    message = e.what();  // already "internal error: file:line: ..."
  } catch (const std::exception& e) {
    message = std::string("internal error: ") + e.what();
  }
  throw_js(message);  // outside the catch block: the C++ exception is finished with
}

kiln::Graph graph_of(const std::string& graph_json) { return kiln::format::from_json(graph_json, "graph"); }

std::string compile(const std::string& graph_json, const std::string& request_json) {
  return guarded([&] { return kiln::web::compile_report(graph_of(graph_json), kiln::web::parse_request(request_json)); });
}
std::string plan_json(const std::string& graph_json, const std::string& request_json) {
  return guarded([&] { return kiln::web::plan_json(graph_of(graph_json), kiln::web::parse_request(request_json)); });
}
std::string cache_key(const std::string& graph_json, const std::string& request_json) {
  return guarded([&] { return kiln::web::cache_key(graph_of(graph_json), kiln::web::parse_request(request_json)); });
}
std::string cache_key_inputs(const std::string& graph_json, const std::string& request_json) {
  return guarded([&] { return kiln::web::cache_key_inputs_json(graph_of(graph_json), kiln::web::parse_request(request_json)); });
}
std::string run_reference(const std::string& graph_json, const std::string& inputs_json) {
  return guarded([&] { return kiln::web::run_reference(graph_of(graph_json), inputs_json); });
}
// Parses and re-serialises a graph: checks it and gives the canonical text.
std::string normalize_graph(const std::string& graph_json) {
  return guarded([&] { return kiln::format::to_json(graph_of(graph_json)); });
}
std::string graph_text(const std::string& graph_json) {
  return guarded([&] { return graph_of(graph_json).str(); });
}
// An ONNX model decoded by web/js/onnx.js (the model as JSON, its tensors' bytes in `parts`, an
// array of Uint8Arrays that are the blob one after another) imported for `device` (cpu, cuda:N,
// vulkan:N: off the CPU its weights become inputs, as kiln::onnx::compile imports it there) as a
// Kiln graph: the graph JSON. A part is copied into the module where the import first reads it:
// imported off the CPU, only the weights it folds and the small tensors are (docs/web.md).
std::string onnx_graph(const std::string& model_json, const val& parts, const std::string& device) {
  return guarded([&] {
    kiln::onnx::LoadOptions options;
    options.device = kiln::parse_device(device);
    options.parameter_values = false;  // only the graph is wanted: no second copy of the weights
    const size_t count = parts["length"].as<size_t>();
    std::vector<size_t> starts(count + 1, 0);  // part k is bytes [starts[k], starts[k + 1]) of the blob
    for (size_t k = 0; k < count; ++k) starts[k + 1] = starts[k] + parts[k]["length"].as<size_t>();
    const size_t n = starts[count];
    // Not a std::vector: its value-initialisation and destruction run byte by byte at -Os, seconds
    // for a model's weights; and pages never written are never touched.
    std::unique_ptr<std::byte[]> bytes(new std::byte[n == 0 ? 1 : n]);
    std::vector<bool> copied(count, false);
    const auto fetch = [&](size_t offset, size_t length) {
      size_t k = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), offset) - starts.begin());
      for (k = k == 0 ? 0 : k - 1; k < count && starts[k] < offset + length; ++k) {
        if (copied[k] || starts[k + 1] == starts[k]) continue;
        // A view made now: the module's memory may have grown (and its old buffer gone) since.
        const val at(emscripten::typed_memory_view(starts[k + 1] - starts[k], reinterpret_cast<unsigned char*>(bytes.get() + starts[k])));
        at.call<void>("set", parts[k]);
        copied[k] = true;
      }
    };
    return kiln::format::to_json(kiln::onnx::load_decoded(model_json, std::span(bytes.get(), n), fetch, options).graph);
  });
}
std::string op_table() { return guarded([] { return kiln::web::op_table_json(); }); }
std::string version() { return kiln::web::version(); }

// GraphBuilder with every method guarded.
class Builder {
 public:
  int symbol(const std::string& name, double example, double min, double max, bool user_dynamic) {
    return guarded([&] {
      return b_.symbol(name, static_cast<int64_t>(example), static_cast<int64_t>(min),
                       max < 0 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(max), user_dynamic);
    });
  }
  int input(const std::string& shape, const std::string& dtype, const std::string& name, const std::string& device) {
    return guarded([&] { return b_.input(shape, dtype, name, device); });
  }
  int op(const std::string& name, const std::string& inputs, const std::string& attrs) {
    return guarded([&] { return b_.op(name, inputs, attrs); });
  }
  std::string node(int id) const { return guarded([&] { return b_.node_json(id); }); }
  void set_name(int id, const std::string& name) {
    guarded([&] {
      b_.set_name(id, name);
      return 0;
    });
  }
  std::string finish(const std::string& outputs) { return guarded([&] { return b_.finish(outputs); }); }

 private:
  kiln::web::GraphBuilder b_;
};

}  // namespace

EMSCRIPTEN_BINDINGS(kiln) {
  emscripten::function("compile", &compile);
  emscripten::function("planJson", &plan_json);
  emscripten::function("cacheKey", &cache_key);
  emscripten::function("cacheKeyInputs", &cache_key_inputs);
  emscripten::function("runReference", &run_reference);
  emscripten::function("normalizeGraph", &normalize_graph);
  emscripten::function("onnxGraph", &onnx_graph);
  emscripten::function("graphText", &graph_text);
  emscripten::function("opTable", &op_table);
  emscripten::function("version", &version);
  emscripten::class_<Builder>("Builder")
      .constructor<>()
      .function("symbol", &Builder::symbol)
      .function("input", &Builder::input)
      .function("op", &Builder::op)
      .function("node", &Builder::node)
      .function("setName", &Builder::set_name)
      .function("finish", &Builder::finish);
}
