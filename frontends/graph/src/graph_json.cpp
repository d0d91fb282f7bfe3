// The "kiln.graph" JSON format, version 1 (docs/graph-format.md).
//
// Writing builds an nlohmann::ordered_json document (keys in a fixed order) and prints it with
// a small printer of our own: the top level and its arrays one item a line, each symbol, fact
// and node on one line. The value encoders, the printer and the checked decoders are shared
// with the plan format (json_values.h). Reading checks the type of every value before using it, bounds every
// size so that no later arithmetic on hints can overflow, and rebuilds the graph through
// Graph::add_input / Graph::add, so the shape rules re-derive every node's type; the type the
// file states must then match.
#include "kiln/graph/files.h"
#include "kiln/format/graph_json.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "kiln/graph/json_values.h"
#include "kiln/graph/error.h"

namespace kiln::format {

namespace {

using namespace json_values;

// ---------------------------------------------------------------------------------------------
// Writing (the value encoders and the printer are in json_values.h)
// ---------------------------------------------------------------------------------------------

json node_json(const Graph& g, NodeId id, int64_t input_index, const ConstantDigest* digest) {
  const Node& n = g.node(id);
  const OpDef& def = op_def(n.op);
  json j = json::object();
  j["id"] = id;
  j["op"] = std::string(def.name);
  if (!n.name.empty()) j["name"] = n.name;
  if (!n.inputs.empty()) j["inputs"] = json(n.inputs);
  if (n.op == OpId::input) {
    // An input's index is its position among the graph's inputs.
    j["attrs"] = json::object({{"index", input_index}});
  } else if (!def.attrs.empty()) {
    j["attrs"] = attrs_json(def, n.attrs, "to_json: node " + std::to_string(id) + " (" + std::string(def.name) + ")", digest);
  }
  j["type"] = meta_json(n.meta);
  return j;
}

json graph_document(const Graph& g, const ConstantDigest* digest) {
  json doc = json::object();
  doc["format"] = "kiln.graph";
  doc["version"] = kGraphFormatVersion;
  json symbols = json::array();
  for (const SymbolInfo& s : g.shapes().symbols()) symbols.push_back(symbol_json(s));
  doc["symbols"] = std::move(symbols);
  json facts = json::array();
  for (const ShapeFact& f : g.shapes().facts()) facts.push_back(fact_json(f));
  doc["facts"] = std::move(facts);
  json nodes = json::array();
  int64_t input_index = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    NodeId id = static_cast<NodeId>(i);
    bool is_input = g.node(id).op == OpId::input;
    nodes.push_back(node_json(g, id, is_input ? input_index : -1, digest));
    if (is_input) ++input_index;
  }
  doc["nodes"] = std::move(nodes);
  doc["outputs"] = json(g.outputs());
  return doc;
}

// ---------------------------------------------------------------------------------------------
// Reading (the checked value decoders are ValueReader's, json_values.h)
// ---------------------------------------------------------------------------------------------

class Reader : public ValueReader {
 public:
  explicit Reader(std::string_view source) : ValueReader(source, "graph", Locations::labels) {}
  Graph read(std::string_view text);

 private:
  void read_node(const json& v, size_t index, Graph& g, int64_t& next_input);
};

void Reader::read_node(const json& v, size_t index, Graph& g, int64_t& next_input) {
  std::string where = "node " + std::to_string(index);
  const json& n = object(v, where, "");
  // Read the op first so every later message names it.
  const std::string& op_text = string(need(n, "op", where), where, "op");
  std::optional<OpId> op = find_op(op_text);
  if (!op) fail_at(where, "", unknown_op_message(op_text));
  const OpDef& def = op_def(*op);
  where += " (" + std::string(def.name) + ")";
  only_keys(n, {"id", "op", "name", "inputs", "attrs", "type"}, where);

  int64_t id = integer(need(n, "id", where), where, "id");
  if (id != static_cast<int64_t>(index))
    fail_at(where, "id", "nodes must be listed with ids 0, 1, ... in order: expected " + std::to_string(index) +
                             ", got " + std::to_string(id));
  std::string name;
  if (const json* nm = maybe(n, "name")) name = string(*nm, where, "name");

  std::vector<NodeId> inputs;
  if (const json* in = maybe(n, "inputs")) {
    array(*in, where, "inputs");
    for (size_t i = 0; i < in->size(); ++i) {
      int64_t ref = integer((*in)[i], where, "inputs");
      if (ref < 0 || ref >= static_cast<int64_t>(index))
        fail_at(where, "inputs", "input " + std::to_string(i) + " refers to node " + std::to_string(ref) +
                                     "; a node may only use nodes listed before it (ids 0.." +
                                     std::to_string(static_cast<int64_t>(index) - 1) + ")");
      inputs.push_back(static_cast<NodeId>(ref));
    }
  }
  int given = static_cast<int>(std::min<size_t>(inputs.size(), 1u << 20));
  if (given < def.min_inputs || (def.max_inputs >= 0 && given > def.max_inputs)) {
    std::string want = def.max_inputs < 0 ? "at least " + std::to_string(def.min_inputs)
                       : def.min_inputs == def.max_inputs
                           ? std::to_string(def.min_inputs)
                           : std::to_string(def.min_inputs) + " to " + std::to_string(def.max_inputs);
    fail_at(where, "inputs", "expected " + want + " input" + (want == "1" ? "" : "s") + ", got " + std::to_string(given));
  }

  // Attributes by name, in the op's declared order. An input's index may be left out: it is
  // its position.
  const AttrValue next_index = next_input;
  Attrs attrs = ValueReader::attrs(maybe(n, "attrs"), def, where, "attrs", *op == OpId::input ? &next_index : nullptr);

  const json* type_v = maybe(n, "type");
  NodeId got;
  if (*op == OpId::input) {
    int64_t idx = std::get<int64_t>(attrs.values.at(0));
    if (idx != next_input)
      fail_at(where, "attrs.index", "inputs are numbered in the order they are listed: expected " +
                                        std::to_string(next_input) + ", got " + std::to_string(idx));
    if (!type_v) fail_at(where, "", "missing field 'type' (an input's type is required)");
    TensorMeta m = meta(*type_v, where, "type");
    try {
      got = g.add_input(std::move(m), name);
    } catch (const Error& e) {
      fail_at(where, "", e.what());
    }
    ++next_input;
  } else {
    try {
      got = g.add(*op, inputs, std::move(attrs));
    } catch (const Error& e) {
      fail_at(where, "", e.what());
    }
    const TensorMeta& inferred = g.node(got).meta;
    int64_t numel = 1;
    for (const SymInt& s : inferred.sizes) {
      int64_t mag = s.hint();
      if (s.is_symbolic() && !magnitude(s.expr(), &mag)) mag = kMaxNumel;
      if (mag > kMaxDim || !mul_ok(numel, std::max<int64_t>(mag, 1), &numel) || numel > kMaxNumel)
        fail_at(where, "", "inferred type " + inferred.str() + " is too large (sizes are limited to 2^48, tensors to 2^62 elements)");
    }
    if (type_v) {
      TensorMeta stated = meta(*type_v, where, "type");
      if (!(stated == inferred))
        fail_at(where, "", "type in file " + stated.str() + " does not match inferred " + inferred.str());
    }
    // Graph::add takes no name; the graph owns its nodes, so set it in place.
    if (!name.empty()) g.set_name(got, name);
  }
  KILN_INTERNAL_CHECK(got == static_cast<NodeId>(index), "graph JSON ", where, ": the graph gave this node id ", got);
}

Graph Reader::read(std::string_view text) {
  const json doc = parse_document(text, "kiln.graph", kGraphFormatVersion);
  only_keys(doc, {"format", "version", "symbols", "facts", "nodes", "outputs"}, "");

  Graph g;
  if (const json* s = maybe(doc, "symbols")) read_symbols(*s, g.shapes());
  std::vector<ShapeFact> facts;
  if (const json* f = maybe(doc, "facts")) facts = read_facts(*f);
  const json& nodes = array(need(doc, "nodes", ""), "", "nodes");
  int64_t next_input = 0;
  for (size_t i = 0; i < nodes.size(); ++i) read_node(nodes[i], i, g, next_input);

  std::vector<NodeId> outputs;
  const json& out_v = array(need(doc, "outputs", ""), "", "outputs");
  for (size_t i = 0; i < out_v.size(); ++i) {
    int64_t ref = integer(out_v[i], "", "outputs");
    if (ref < 0 || ref >= static_cast<int64_t>(g.size()))
      fail_at("", "outputs", "output " + std::to_string(i) + " refers to node " + std::to_string(ref) + ", but the graph has " +
                                 std::to_string(g.size()) + " nodes");
    outputs.push_back(static_cast<NodeId>(ref));
  }
  try {
    g.set_outputs(std::move(outputs));
  } catch (const Error& e) {
    fail_at("", "outputs", e.what());
  }

  // The facts are the file's, in its order, followed by any fact the shape rules needed
  // while rebuilding that the file did not state.
  ShapeEnv env;
  for (const SymbolInfo& s : g.shapes().symbols()) env.add_symbol(s);
  for (const ShapeFact& f : facts) env.add_fact(f);
  for (const ShapeFact& f : g.shapes().facts())
    if (std::find(facts.begin(), facts.end(), f) == facts.end()) env.add_fact(f);
  g.shapes() = std::move(env);
  return g;
}

}  // namespace

namespace {

std::string print_graph(const Graph& g, int indent, const ConstantDigest* digest) {
  try {
    return print_document(graph_document(g, digest), indent);
  } catch (const json::exception& e) {
    // Only text that is not UTF-8 (a node name, a symbol's source, a fact's reason) gets here.
    fail("to_json: cannot write the graph as JSON: ", e.what());
  }
}

}  // namespace

std::string to_json(const Graph& g, int indent) { return print_graph(g, indent, nullptr); }

std::string key_json(const Graph& g, const json_values::ConstantDigest& digest) { return print_graph(g, -1, &digest); }

Graph from_json(std::string_view text, std::string_view source_name) {
  return Reader(source_name).read(text);
}

Graph load_graph(const std::string& path) {
  return from_json(read_regular_file(path, "graph file"), path);
}

void save_graph(const Graph& g, const std::string& path) {
  std::string text = to_json(g) + "\n";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail("cannot write graph file '", path, "': ", std::strerror(errno));
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) fail("cannot write graph file '", path, "'");
}

}  // namespace kiln::format
