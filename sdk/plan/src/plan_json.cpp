// The "kiln.plan" JSON format, version 1 (docs/graph-format.md, "Kernel plans").
//
// Writing builds an ordered document with the graph format's value encoders and prints it with
// the same printer (kiln/graph/json_values.h). Reading decodes every value with the graph format's
// checked decoders (ValueReader, with errors located by field path: "kernels[2].reads[0]"), then
// checks the plan against itself with plan::validate (bind.h), whose messages use the same paths:
// buffer ids, every buffer reference, slots, symbol bindings, constants, reference kernels.
#include "kiln/plan/plan_json.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <limits>
#include <utility>

#include "kiln/graph/json_values.h"
#include "kiln/plan/bind.h"

namespace kiln::plan {

namespace {

using namespace json_values;

// ---------------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------------

json buffer_json(const PlanBuffer& b) {
  json j = json::object();
  j["id"] = b.id;
  j["kind"] = b.kind;
  j["dtype"] = std::string(dtype_name(b.dtype));
  j["sizes"] = shape_json(b.sizes);
  j["strides"] = shape_json(b.strides);
  j["index"] = b.index;
  j["slot"] = b.slot;
  if (b.data) j["data"] = tensor_json(*b.data);
  return j;
}

json kernel_json(const PlanKernel& k, size_t i) {
  json j = json::object();
  j["name"] = k.name;
  j["kind"] = k.kind;
  j["entry"] = k.entry;
  j["variants"] = json(k.variants);
  j["source"] = k.source;
  if (!k.language.empty()) j["language"] = k.language;
  j["parallel_extent"] = size_json(k.parallel_extent);
  j["grain"] = k.grain;
  if (k.launch.block > 0) {  // GPU kernels only, so cpu plans keep their form
    json l = json::object();
    l["block"] = k.launch.block;
    l["items_per_block"] = k.launch.items_per_block;
    l["max_blocks"] = k.launch.max_blocks;
    l["shared_bytes"] = k.launch.shared_bytes;
    if (!k.launch.grid_stride) l["grid_stride"] = false;
    j["launch"] = std::move(l);
  }
  if (k.gemm) {
    const PlanGemm& g = *k.gemm;
    json m = json::object();
    m["a"] = g.a;
    m["b"] = g.b;
    m["c"] = g.c;
    m["dtype"] = std::string(dtype_name(g.dtype));
    m["m"] = size_json(g.m);
    m["n"] = size_json(g.n);
    m["k"] = size_json(g.k);
    m["batch"] = shape_json(g.batch);
    m["a_batch_strides"] = shape_json(g.a_batch_strides);
    m["b_batch_strides"] = shape_json(g.b_batch_strides);
    m["a_offset"] = size_json(g.a_offset);
    m["b_offset"] = size_json(g.b_offset);
    m["a_strides"] = shape_json(SymShape{g.a_row_stride, g.a_col_stride});
    m["b_strides"] = shape_json(SymShape{g.b_row_stride, g.b_col_stride});
    if (!g.epilogue.empty()) {
      m["epilogue"] = g.epilogue;
      if (g.bias >= 0) m["bias"] = g.bias;
    }
    if (g.alpha != 1.0) m["alpha"] = g.alpha;
    if (g.tile != std::array<int64_t, 2>{0, 0}) m["tile"] = json(g.tile);
    j["gemm"] = std::move(m);
  }
  if (k.convolution) {
    const PlanConvolution& c = *k.convolution;
    json m = json::object();
    m["x"] = c.x;
    m["w"] = c.w;
    m["y"] = c.y;
    m["dtype"] = std::string(dtype_name(c.dtype));
    m["x_sizes"] = shape_json(c.x_sizes);
    m["w_sizes"] = json(c.w_sizes);
    m["strides"] = json(c.strides);
    m["pads"] = json(c.pads);
    m["dilations"] = json(c.dilations);
    m["groups"] = c.groups;
    if (c.channels_last) m["channels_last"] = true;
    if (c.computes != ConvolutionComputes::y) m["computes"] = std::string(convolution_computes_name(c.computes));
    j["convolution"] = std::move(m);
  }
  if (k.fixed_signature()) {
    j["arg_buffers"] = json(k.arg_buffers);
    j["arg_values"] = shape_json(k.arg_values);
  }
  j["provenance"] = json(k.provenance);
  j["reads"] = json(k.reads);
  j["writes"] = json(k.writes);
  if (k.kind == "reference") {
    const OpDef& def = op_def(k.op);
    j["op"] = std::string(def.name);
    j["attrs"] = attrs_json(def, k.attrs, "plan_to_json: kernel " + std::to_string(i) + " (" + k.name + ")");
    j["inputs"] = json(k.inputs);
    j["output"] = k.output;
  }
  return j;
}

json plan_document(const KernelPlan& p) {
  json doc = json::object();
  doc["format"] = "kiln.plan";
  doc["version"] = p.version;
  doc["target"] = p.target;
  doc["prelude"] = p.prelude;
  if (p.arch != 0) doc["arch"] = p.arch;
  json symbols = json::array();
  for (const SymbolInfo& s : p.symbols) symbols.push_back(symbol_json(s));
  doc["symbols"] = std::move(symbols);
  json facts = json::array();
  for (const ShapeFact& f : p.facts) facts.push_back(fact_json(f));
  doc["facts"] = std::move(facts);
  json bindings = json::array();
  for (const SymbolBinding& b : p.bindings) {
    json j = json::object();
    j["symbol"] = "s" + std::to_string(b.symbol);
    j["input"] = b.input;
    j["dim"] = b.dim;
    bindings.push_back(std::move(j));
  }
  doc["bindings"] = std::move(bindings);
  json buffers = json::array();
  for (const PlanBuffer& b : p.buffers) buffers.push_back(buffer_json(b));
  doc["buffers"] = std::move(buffers);
  doc["slots"] = shape_json(p.slots);
  json kernels = json::array();
  for (size_t i = 0; i < p.kernels.size(); ++i) kernels.push_back(kernel_json(p.kernels[i], i));
  doc["kernels"] = std::move(kernels);
  doc["outputs"] = json(p.outputs);
  if (!p.checks.empty()) doc["checks"] = json(p.checks);
  doc["peak_intermediate_bytes"] = p.peak_intermediate_bytes;
  doc["guards"] = json(p.guards);
  if (!p.origin.empty()) {
    json origin = json::object();
    origin["graph"] = p.origin.graph;
    origin["request"] = json(p.origin.request);
    origin["options"] = json(p.origin.options);
    origin["kiln_version"] = p.origin.kiln_version;
    doc["origin"] = std::move(origin);
  }
  if (!p.signature.empty()) doc["signature"] = p.signature;
  return doc;
}

// ---------------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------------

std::string at(std::string_view list, size_t i) { return std::string(list) + "[" + std::to_string(i) + "]"; }

class PlanReader : public ValueReader {
 public:
  explicit PlanReader(std::string_view source) : ValueReader(source, "plan", Locations::paths), source_(source) {}
  // `parts`: text parts kept beside the plan (take_plan_text), put back before the checks that
  // need them; those taken are removed from it.
  KernelPlan read(std::string_view text, std::vector<std::pair<std::string, std::string>>* parts = nullptr);

 private:
  KernelPlan p_;
  std::string source_;

  int32_t int32(const json& v, const std::string& where, std::string_view field) const {
    int64_t n = integer(v, where, field);
    if (n < std::numeric_limits<int32_t>::min() || n > std::numeric_limits<int32_t>::max())
      fail_at(where, field, "integer " + std::to_string(n) + " does not fit in 32 bits");
    return static_cast<int32_t>(n);
  }
  // A buffer id; plan::validate checks that it names a buffer.
  int32_t buffer_ref(const json& v, const std::string& where, std::string_view field) const {
    return int32(v, where, field);
  }
  std::vector<int32_t> buffer_refs(const json& v, const std::string& where, const std::string& field) const {
    array(v, where, field);
    std::vector<int32_t> out;
    for (size_t i = 0; i < v.size(); ++i) out.push_back(buffer_ref(v[i], where, at(field, i)));
    return out;
  }

  void read_buffer(const json& v, size_t i);
  void read_origin(const json& v);
  void read_bindings(const json& v);
  void read_kernel(const json& v, size_t i);
  PlanLaunch read_launch(const json& v, const std::string& where) const;
  PlanGemm read_gemm(const json& v, const std::string& where) const;
  PlanConvolution read_convolution(const json& v, const std::string& where) const;
  std::vector<int64_t> integers(const json& v, const std::string& where, const std::string& field) const {
    array(v, where, field);
    std::vector<int64_t> out;
    for (size_t i = 0; i < v.size(); ++i) out.push_back(integer(v[i], where, at(field, i)));
    return out;
  }
};

void PlanReader::read_buffer(const json& v, size_t i) {
  const std::string where = at("buffers", i);
  const json& b = object(v, where, "");
  only_keys(b, {"id", "kind", "dtype", "sizes", "strides", "index", "slot", "data"}, where);
  PlanBuffer buf;
  buf.id = int32(need(b, "id", where), where, "id");
  buf.kind = string(need(b, "kind", where), where, "kind");
  buf.dtype = dtype(need(b, "dtype", where), where, "dtype");
  buf.sizes = shape(need(b, "sizes", where), where, "sizes");
  buf.strides = shape(need(b, "strides", where), where, "strides");
  buf.index = int32(need(b, "index", where), where, "index");
  buf.slot = int32(need(b, "slot", where), where, "slot");
  if (const json* data = maybe(b, "data")) buf.data = tensor(*data, where, "data");
  p_.buffers.push_back(std::move(buf));
}

void PlanReader::read_bindings(const json& v) {
  array(v, "", "bindings");
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string where = at("bindings", i);
    const json& b = object(v[i], where, "");
    only_keys(b, {"symbol", "input", "dim"}, where);
    SymbolBinding sb;
    const std::string& name = string(need(b, "symbol", where), where, "symbol");
    uint32_t id = 0;
    auto [end, ec] = std::from_chars(name.data() + std::min<size_t>(1, name.size()), name.data() + name.size(), id);
    if (name.size() < 2 || name[0] != 's' || ec != std::errc() || end != name.data() + name.size() ||
        name != "s" + std::to_string(id) || id >= p_.symbols.size())
      fail_at(where, "symbol", "unknown symbol '" + name + "' (the plan declares " + std::to_string(p_.symbols.size()) +
                                   " symbols" + (p_.symbols.empty() ? "" : ", s0.." + ("s" + std::to_string(p_.symbols.size() - 1))) + ")");
    sb.symbol = id;
    sb.input = int32(need(b, "input", where), where, "input");
    sb.dim = int32(need(b, "dim", where), where, "dim");
    p_.bindings.push_back(sb);
  }
}

void PlanReader::read_kernel(const json& v, size_t i) {
  const std::string where = at("kernels", i);
  const json& k = object(v, where, "");
  PlanKernel ker;
  ker.kind = string(need(k, "kind", where), where, "kind");
  const bool reference = ker.kind == "reference";
  if (reference)
    only_keys(k, {"name", "kind", "entry", "variants", "source", "parallel_extent", "grain", "provenance", "reads",
                  "writes", "op", "attrs", "inputs", "output"},
              where);
  else
    only_keys(k, {"name", "kind", "entry", "variants", "source", "language", "parallel_extent", "grain", "launch", "gemm",
                  "convolution", "arg_buffers", "arg_values", "provenance", "reads", "writes"},
              where);
  ker.name = string(need(k, "name", where), where, "name");
  ker.entry = string(need(k, "entry", where), where, "entry");
  const json& variants = array(need(k, "variants", where), where, "variants");
  for (size_t j = 0; j < variants.size(); ++j) ker.variants.push_back(string(variants[j], where, at("variants", j)));
  ker.source = string(need(k, "source", where), where, "source");
  if (const json* lang = maybe(k, "language")) {
    ker.language = string(*lang, where, "language");
    if (ker.language != "llvm") fail_at(where, "language", "unknown source language '" + ker.language + "' (valid: llvm)");
    if (ker.entry.empty()) fail_at(where, "language", "only generated kernels (with an entry) have a source language");
  }
  ker.parallel_extent = size(need(k, "parallel_extent", where), where, "parallel_extent");
  ker.grain = integer(need(k, "grain", where), where, "grain");
  if (const json* l = maybe(k, "launch")) ker.launch = read_launch(*l, where + ".launch");
  if (const json* g = maybe(k, "gemm")) ker.gemm = read_gemm(*g, where + ".gemm");
  if (const json* c = maybe(k, "convolution")) ker.convolution = read_convolution(*c, where + ".convolution");
  if (const json* ab = maybe(k, "arg_buffers")) {
    ker.arg_buffers = buffer_refs(*ab, where, "arg_buffers");
    if (ker.arg_buffers.empty()) fail_at(where, "arg_buffers", "a kernel of fixed signature takes at least one buffer");
    const json* av = maybe(k, "arg_values");
    if (!av) fail_at(where, "arg_values", "arg_buffers needs arg_values (the values after the buffers; [] for none)");
    array(*av, where, "arg_values");
    for (size_t j = 0; j < av->size(); ++j) ker.arg_values.push_back(size((*av)[j], where, at("arg_values", j)));
  } else if (maybe(k, "arg_values")) {
    fail_at(where, "arg_values", "arg_values needs arg_buffers (the buffers the kernel takes first)");
  }
  const json& prov = array(need(k, "provenance", where), where, "provenance");
  for (size_t j = 0; j < prov.size(); ++j) {
    int32_t n = int32(prov[j], where, at("provenance", j));
    if (n < 0) fail_at(where, at("provenance", j), "expected a node id (0 or more), got " + std::to_string(n));
    ker.provenance.push_back(n);
  }
  ker.reads = buffer_refs(need(k, "reads", where), where, "reads");
  ker.writes = buffer_refs(need(k, "writes", where), where, "writes");
  if (reference) {
    const std::string& op_text = string(need(k, "op", where), where, "op");
    std::optional<OpId> op = find_op(op_text);
    if (!op) fail_at(where, "op", unknown_op_message(op_text));
    if (*op == OpId::input) fail_at(where, "op", "a reference kernel cannot run 'input' (inputs are buffers)");
    ker.op = *op;
    const OpDef& def = op_def(ker.op);
    ker.attrs = attrs(&need(k, "attrs", where), def, where, "attrs");
    ker.inputs = buffer_refs(need(k, "inputs", where), where, "inputs");
    ker.output = buffer_ref(need(k, "output", where), where, "output");
  }
  p_.kernels.push_back(std::move(ker));
}

PlanLaunch PlanReader::read_launch(const json& v, const std::string& where) const {
  const json& l = object(v, where, "");
  only_keys(l, {"block", "items_per_block", "max_blocks", "shared_bytes", "grid_stride"}, where);
  PlanLaunch r;
  auto at_least = [&](const char* field, int64_t lo) {
    const int64_t n = integer(need(l, field, where), where, field);
    if (n < lo) fail_at(where, field, "expected at least " + std::to_string(lo) + ", got " + std::to_string(n));
    return n;
  };
  r.block = at_least("block", 1);
  if (r.block > 1024) fail_at(where, "block", "a block has at most 1024 threads, got " + std::to_string(r.block));
  r.items_per_block = at_least("items_per_block", 1);
  r.max_blocks = at_least("max_blocks", 0);
  r.shared_bytes = at_least("shared_bytes", 0);
  if (l.contains("grid_stride")) {
    if (!l["grid_stride"].is_boolean()) fail_at(where, "grid_stride", "expected true or false");
    r.grid_stride = l["grid_stride"].get<bool>();
    if (!r.grid_stride && r.max_blocks > 0)
      fail_at(where, "max_blocks", "a kernel without a grid-stride loop (grid_stride false) needs every block: max_blocks must be 0, got " +
                                       std::to_string(r.max_blocks));
  }
  return r;
}

PlanConvolution PlanReader::read_convolution(const json& v, const std::string& where) const {
  const json& m = object(v, where, "");
  only_keys(m, {"x", "w", "y", "dtype", "x_sizes", "w_sizes", "strides", "pads", "dilations", "groups", "channels_last", "computes"},
            where);
  PlanConvolution c;
  c.x = buffer_ref(need(m, "x", where), where, "x");
  c.w = buffer_ref(need(m, "w", where), where, "w");
  c.y = buffer_ref(need(m, "y", where), where, "y");
  c.dtype = dtype(need(m, "dtype", where), where, "dtype");
  c.x_sizes = shape(need(m, "x_sizes", where), where, "x_sizes");
  c.w_sizes = integers(need(m, "w_sizes", where), where, "w_sizes");
  c.strides = integers(need(m, "strides", where), where, "strides");
  c.pads = integers(need(m, "pads", where), where, "pads");
  c.dilations = integers(need(m, "dilations", where), where, "dilations");
  c.groups = integer(need(m, "groups", where), where, "groups");
  if (const json* l = maybe(m, "channels_last")) {
    if (!l->is_boolean()) fail_at(where, "channels_last", "expected true or false");
    c.channels_last = l->get<bool>();
  }
  if (const json* e = maybe(m, "computes")) {
    const std::string s = e->is_string() ? e->get<std::string>() : "";
    if (s == "y") c.computes = ConvolutionComputes::y;
    else if (s == "x") c.computes = ConvolutionComputes::x;
    else if (s == "w") c.computes = ConvolutionComputes::w;
    else fail_at(where, "computes", "expected \"y\" (the convolution), \"x\" or \"w\" (a gradient)");
  }
  return c;
}

PlanGemm PlanReader::read_gemm(const json& v, const std::string& where) const {
  const json& m = object(v, where, "");
  only_keys(m, {"a", "b", "c", "dtype", "m", "n", "k", "batch", "a_batch_strides", "b_batch_strides", "a_offset",
                "b_offset", "a_strides", "b_strides", "epilogue", "bias", "alpha", "tile"},
            where);
  PlanGemm g;
  g.a = buffer_ref(need(m, "a", where), where, "a");
  g.b = buffer_ref(need(m, "b", where), where, "b");
  g.c = buffer_ref(need(m, "c", where), where, "c");
  g.dtype = dtype(need(m, "dtype", where), where, "dtype");
  g.m = size(need(m, "m", where), where, "m");
  g.n = size(need(m, "n", where), where, "n");
  g.k = size(need(m, "k", where), where, "k");
  g.batch = shape(need(m, "batch", where), where, "batch");
  g.a_batch_strides = shape(need(m, "a_batch_strides", where), where, "a_batch_strides");
  g.b_batch_strides = shape(need(m, "b_batch_strides", where), where, "b_batch_strides");
  g.a_offset = size(need(m, "a_offset", where), where, "a_offset");
  g.b_offset = size(need(m, "b_offset", where), where, "b_offset");
  const SymShape as = shape(need(m, "a_strides", where), where, "a_strides");
  const SymShape bs = shape(need(m, "b_strides", where), where, "b_strides");
  if (as.size() != 2 || bs.size() != 2) fail_at(where, "a_strides", "operand strides are [row, column] pairs");
  g.a_row_stride = as[0];
  g.a_col_stride = as[1];
  g.b_row_stride = bs[0];
  g.b_col_stride = bs[1];
  if (m.contains("alpha")) {
    if (!m["alpha"].is_number()) fail_at(where, "alpha", "is a number");
    g.alpha = m["alpha"].get<double>();
  }
  if (m.contains("tile")) {
    const json& t = m["tile"];
    if (!t.is_array() || t.size() != 2 || !t[0].is_number_integer() || !t[1].is_number_integer() || t[0].get<int64_t>() < 1 ||
        t[1].get<int64_t>() < 1 || t[0].get<int64_t>() > 4096 || t[1].get<int64_t>() > 4096)
      fail_at(where, "tile", "is [rows, cols] of a gemm shader's output tile, each from 1 to 4096");
    g.tile = {t[0].get<int64_t>(), t[1].get<int64_t>()};
  }
  if (m.contains("epilogue")) {
    const json& e = m["epilogue"];
    if (!e.is_string() || !plan::gemm_epilogue_known(e.get<std::string>()))
      fail_at(where, "epilogue", "is \"bias\", \"gelu_bias\" or \"gelu\"");
    g.epilogue = e.get<std::string>();
    if (plan::gemm_epilogue_has_bias(g.epilogue)) g.bias = buffer_ref(need(m, "bias", where), where, "bias");
    else if (m.contains("bias")) fail_at(where, "bias", "is not given with epilogue \"" + g.epilogue + "\"");
  }
  return g;
}

void PlanReader::read_origin(const json& v) {
  const json& o = object(v, "", "origin");
  only_keys(o, {"graph", "request", "options", "kiln_version"}, "origin");
  p_.origin.graph = string(need(o, "graph", "origin"), "origin", "graph");
  if (p_.origin.graph.empty()) fail_at("origin", "graph", "empty (a plan's origin names the graph that made it)");
  auto texts = [&](const char* field) {
    std::map<std::string, std::string> out;
    for (const auto& [key, value] : object(need(o, field, "origin"), "origin", field).items())
      out[key] = string(value, "origin." + std::string(field), key);
    return out;
  };
  p_.origin.request = texts("request");
  p_.origin.options = texts("options");
  p_.origin.kiln_version = string(need(o, "kiln_version", "origin"), "origin", "kiln_version");
}

KernelPlan PlanReader::read(std::string_view text, std::vector<std::pair<std::string, std::string>>* parts) {
  const json doc = parse_document(text, "kiln.plan", kPlanVersion);
  only_keys(doc,
            {"format", "version", "target", "prelude", "arch", "symbols", "facts", "bindings", "buffers", "slots", "kernels",
             "outputs", "checks", "peak_intermediate_bytes", "guards", "origin", "signature"},
            "");
  p_.version = kPlanVersion;
  p_.target = string(need(doc, "target", ""), "", "target");
  p_.prelude = string(need(doc, "prelude", ""), "", "prelude");
  if (doc.contains("arch")) {
    const int64_t arch = integer(doc["arch"], "", "arch");
    if (arch < 0 || arch >= 1000) fail_at("", "arch", "compute capability " + std::to_string(arch) + " out of range");
    p_.arch = static_cast<int>(arch);
  }
  ShapeEnv env;
  read_symbols(need(doc, "symbols", ""), env);
  p_.symbols = env.symbols();
  p_.facts = read_facts(need(doc, "facts", ""));

  const json& slots = array(need(doc, "slots", ""), "", "slots");
  for (size_t i = 0; i < slots.size(); ++i) p_.slots.push_back(size(slots[i], "", at("slots", i)));
  const json& buffers = array(need(doc, "buffers", ""), "", "buffers");
  for (size_t i = 0; i < buffers.size(); ++i) read_buffer(buffers[i], i);
  read_bindings(need(doc, "bindings", ""));
  const json& kernels = array(need(doc, "kernels", ""), "", "kernels");
  for (size_t i = 0; i < kernels.size(); ++i) read_kernel(kernels[i], i);
  p_.outputs = buffer_refs(need(doc, "outputs", ""), "", "outputs");
  if (doc.contains("checks")) {
    const json& checks = array(doc["checks"], "", "checks");
    for (size_t i = 0; i < checks.size(); ++i) p_.checks.push_back(string(checks[i], "", at("checks", i)));
  }

  p_.peak_intermediate_bytes = integer(need(doc, "peak_intermediate_bytes", ""), "", "peak_intermediate_bytes");
  if (p_.peak_intermediate_bytes < 0)
    fail_at("", "peak_intermediate_bytes", "negative byte count " + std::to_string(p_.peak_intermediate_bytes));
  const json& guards = array(need(doc, "guards", ""), "", "guards");
  for (size_t i = 0; i < guards.size(); ++i) p_.guards.push_back(string(guards[i], "", at("guards", i)));
  if (const json* origin = maybe(doc, "origin")) read_origin(*origin);
  if (const json* signature = maybe(doc, "signature")) {
    p_.signature = string(*signature, "", "signature");
    if (p_.signature.size() != 64 || p_.signature.find_first_not_of("0123456789abcdef") != std::string::npos)
      fail_at("", "signature", "is not 64 lowercase hex digits (an HMAC-SHA256)");
  }
  if (parts) {
    std::vector<std::pair<std::string, std::string>> rest;
    for (auto& [name, bytes] : *parts)
      if (!put_plan_text(p_, name, std::move(bytes))) rest.emplace_back(std::move(name), std::move(bytes));
    *parts = std::move(rest);
  }
  // Checks of the kernels' text, which the caches keep beside the plan's JSON.
  for (size_t i = 0; i < p_.kernels.size(); ++i)
    if (p_.kernels[i].fixed_signature() && p_.kernels[i].source.empty())
      fail_at(at("kernels", i), "arg_buffers", "only generated kernels (with a source) take arguments");
  validate(p_, source_);
  return std::move(p_);
}

}  // namespace

std::string plan_to_json(const KernelPlan& p) {
  try {
    return print_document(plan_document(p), 2);
  } catch (const json::exception& e) {
    // Only text that is not UTF-8 (a kernel's source or name, a guard, a symbol's source) gets here.
    fail("plan_to_json: cannot write the plan as JSON: ", e.what());
  }
}

std::string plan_signed_text(KernelPlan p) {
  p.signature.clear();
  return plan_to_json(p);
}

KernelPlan plan_from_json(std::string_view text, std::string_view source_name) {
  return PlanReader(source_name).read(text);
}

KernelPlan plan_from_json(std::string_view text, std::string_view source_name,
                          std::vector<std::pair<std::string, std::string>>& parts) {
  return PlanReader(source_name).read(text, &parts);
}

std::string plan_difference(const KernelPlan& given, const KernelPlan& made) {
  json a = plan_document(given), b = plan_document(made);
  for (const char* key : {"origin", "signature"}) {
    a.erase(key);
    b.erase(key);
  }
  if (a == b) return "";
  // The first top-level field that differs, in the document's order; in a list, the first entry.
  for (const auto& [key, value] : a.items()) {
    const json* other = b.contains(key) ? &b[key] : nullptr;
    if (other != nullptr && *other == value) continue;
    if (other == nullptr) return "'" + key + "', which Kiln's plan does not have";
    if (!value.is_array() || !other->is_array()) return "'" + key + "'";
    for (size_t i = 0; i < std::max(value.size(), other->size()); ++i) {
      if (i >= value.size()) return "'" + key + "': it has " + std::to_string(value.size()) + " entries, Kiln's plan " + std::to_string(other->size());
      if (i < other->size() && value[i] == (*other)[i]) continue;
      std::string where = at(key, i);
      if (value[i].is_object() && value[i].contains("name") && value[i]["name"].is_string())
        where += " ('" + value[i]["name"].get<std::string>() + "')";
      if (i >= other->size()) return where + ", which Kiln's plan does not have";
      if (value[i].is_object() && (*other)[i].is_object())
      {
        for (const auto& [field, v] : value[i].items())
          if (!(*other)[i].contains(field) || (*other)[i][field] != v) return where + ": its '" + field + "'";
        for (const auto& [field, v] : (*other)[i].items())
          if (!value[i].contains(field)) return where + ": its '" + field + "'";
      }
      return where;
    }
  }
  for (const auto& [key, value] : b.items())
    if (!a.contains(key)) return "'" + key + "' is missing";
  return "the plan";  // not reached: the documents differ somewhere above
}

namespace {
constexpr std::string_view kPreludePart = "plan.prelude";
std::string source_part(size_t k) { return "kernel" + std::to_string(k) + ".source"; }
}  // namespace

std::vector<std::pair<std::string, std::string>> take_plan_text(KernelPlan& p) {
  std::vector<std::pair<std::string, std::string>> parts;
  if (!p.prelude.empty()) parts.emplace_back(kPreludePart, std::exchange(p.prelude, {}));
  for (size_t k = 0; k < p.kernels.size(); ++k)
    if (!p.kernels[k].source.empty()) parts.emplace_back(source_part(k), std::exchange(p.kernels[k].source, {}));
  return parts;
}

bool put_plan_text(KernelPlan& p, const std::string& name, std::string&& text) {
  if (name == kPreludePart) {
    p.prelude = std::move(text);
    return true;
  }
  size_t k = 0;
  if (name.rfind("kernel", 0) != 0 || std::sscanf(name.c_str() + 6, "%zu", &k) != 1 || source_part(k) != name) return false;
  KILN_CHECK(k < p.kernels.size(), "plan text '", name, "' names no kernel of the plan (", p.kernels.size(), " kernels)");
  p.kernels[k].source = std::move(text);
  return true;
}

}  // namespace kiln::plan
