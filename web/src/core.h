// web/src/core: what the JavaScript API does, as portable C++ over JSON text, so that the
// WebAssembly module (bindings.cpp) and the native test helper (tests/web/native_plan.cpp) run
// the very same code. Nothing here is specific to the web: it calls the stages the native
// build calls (sdk/passes, sdk/schedule, targets/<t>/codegen, frontends/graph,
// sdk/eval) and shapes their results as JSON for the page.
//
// Takes: graph JSON text (docs/graph-format.md) or a GraphBuilder, and a compile request
//   {"target": "cpu"|"cuda"|"vulkan", "mode": "default"|..., "options": {"fusion.max_fusion_size": 8},
//    "device_request": {"arch": "90"}}  (optional: the codegen request of one device, as a plan's origin records it).
// Gives: JSON text (compile_report, run_reference, op_table_json, cache_key) or throws
//   kiln::Error with the same message native code gives for the same input.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "kiln/config/config.h"
#include "kiln/graph/graph.h"

namespace kiln::web {

// Kiln's version string as in every native cache key: the project version and the fingerprint
// of the sources that shape plans ("0.1.0+3f2a9c0d11e4b7a2", sdk/cache's kiln_version()).
std::string version();

// The op table as JSON: [{"name", "category", "min_inputs", "max_inputs", "attrs": [{"name", "kind"}]}].
std::string op_table_json();

// The target names compile() knows ("cpu", "cuda", "vulkan").
std::vector<std::string> targets();

// A compile request, parsed and checked from JSON (unknown keys, targets, modes and options are
// kiln::Errors with native's messages).
struct Request {
  std::string target = "cpu";
  std::string mode = "default";
  std::map<std::string, ConfigValue> options;
  // The target's codegen request for one device (a CUDA device's "arch", ...), as a native compile
  // makes it and a plan's origin records it; empty: for any device of the target.
  std::map<std::string, std::string> device_request;
};
Request parse_request(std::string_view request_json);

// The KernelPlan JSON for a graph: the default pass pipeline, the scheduler and the target's
// codegen under the request's mode and options (exactly `kiln show --save-plan` for "cpu").
std::string plan_json(const Graph& g, const Request& r);

// Everything the inspector shows for one compile, as one JSON object: the graph after each
// pass, the scheduled graph, the fusion decisions, the kernels with source and provenance, the
// guards, the plan (text and JSON), the cache key and the time each stage took.
std::string compile_report(const Graph& g, const Request& r);

// The cache key of (graph, request): sdk/cache's make_key(), the function the native caches
// key their entries with (XXH3-128 over the length-prefixed components, 32 hex digits), over
// this compile's components: pipeline "<target>.plan" (passes, scheduler and codegen of the
// captured graph, so a lookup runs no optimiser), the canonical captured graph serialised
// losslessly, the inputs' metadata, config::codegen_hash() under the request, the target, no
// device and no toolchain (a plan is source text, the same wherever it is made), Kiln's version
// with its source fingerprint, and cache_key_tag.
std::string cache_key(const Graph& g, const Request& r);
// The components cache_key() hashes, by name (the codegen hash as a decimal string).
std::string cache_key_inputs_json(const Graph& g, const Request& r);

// Runs a graph on the reference interpreter. `inputs_json`:
//   {"inputs": [{"shape": [2, 3], "data": [...]}, ...]}   explicit values (dtype from the graph), or
//   {"random": <seed>, "symbols": {"s0": 4}}             uniform [-2, 2) inputs (Philox bits, no libm) at the symbols' examples
//                                                         (or the given values)
// Gives {"inputs": [...], "outputs": [{"dtype", "shape", "data": [...]}]}: values as numbers
// (non-finite ones as "inf", "-inf", "nan").
std::string run_reference(const Graph& g, std::string_view inputs_json);

// Builds a graph from calls, the way the C++ frontend traces one: the same argument
// normalisation (negative dims, -1 in reshape, scalars next to tensors).
class GraphBuilder {
 public:
  // A new size symbol named `name` (used in shapes as that name or as "s<i>").
  int symbol(const std::string& name, int64_t example, int64_t min, int64_t max, bool user_dynamic);
  // An input of the given shape (JSON array of integers and symbol names; an unknown name
  // makes a new symbol with example 16) and dtype; returns its node id.
  int input(std::string_view shape_json, const std::string& dtype, const std::string& name, const std::string& device);
  // Appends an op. `inputs_json`: array of node ids, or numbers / booleans (scalars: a 0-d
  // `full` of the dtype a C++ scalar would take next to the first tensor operand). `attrs_json`:
  // object of the op's attributes by name (missing ones are errors, as in the graph format).
  int op(const std::string& name, std::string_view inputs_json, std::string_view attrs_json);
  // {"id", "op", "dtype", "shape": [...], "device"} of a node.
  std::string node_json(int id) const;
  void set_name(int id, const std::string& name);
  // The graph with these outputs (JSON array of node ids), as graph JSON text.
  std::string finish(std::string_view outputs_json);
  const Graph& graph() const { return g_; }

 private:
  Graph g_;
  std::map<std::string, SymInt> named_;
  SymInt size_of(const nlohmann::ordered_json& v, const std::string& where);
  AttrValue attr(const nlohmann::ordered_json& v, AttrKind kind, const std::string& where);
};

}  // namespace kiln::web
