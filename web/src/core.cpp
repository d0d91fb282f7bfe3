// web/src/core: see core.h.
#include "core.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <nlohmann/json.hpp>

#include "kiln/cache/cache.h"
#include "kiln/capture/guards.h"
#include "kiln/config/config.h"
#include "kiln/format/graph_json.h"
#include "kiln/plan/cost.h"
#include "kiln/plan/plan_json.h"
#include "kiln/graph/error.h"
#include "kiln/passes/passes.h"
#include "kiln/plan/plan.h"
#include "kiln/eval/random.h"
#include "kiln/eval/interpreter.h"
#include "kiln/schedule/schedule.h"
#include "kiln/target/target.h"

namespace kiln::web {

using json = nlohmann::ordered_json;

namespace {

json parse(std::string_view text, std::string_view what) {
  json v = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  KILN_CHECK(!v.is_discarded(), what, ": not valid JSON");
  return v;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// A config value from JSON: booleans, integers, floats as they are; a string is parsed the way
// the environment layer parses it unless the option is a String option.
ConfigValue config_value(const std::string& name, const json& v) {
  const config::OptionInfo info = config::option_info(name);  // unknown name: native's message
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) return v.get<double>();
  if (v.is_string()) {
    if (info.type == config::OptionType::String) return v.get<std::string>();
    return config::parse_value(name, v.get<std::string>());
  }
  fail("option '", name, "': expected a bool, number or string, got ", v.type_name());
}

// Runs `fn` with the request's mode and options as the per-compile config layers.
template <class Fn>
auto with_request(const Request& r, Fn&& fn) {
  config::CompileScope scope(r.mode, r.options);
  return fn();
}

// The registry's codegen of a target (every codegen this build has: kiln_link_builtin_targets).
const target::Codegen& codegen(const std::string& name) {
  target::ensure_builtin_targets();
  return target::codegen(name);
}

// The codegen request of the device the request names (empty: any device of the target).
target::CodegenRequest device_request(const Request& r) { return {r.device_request}; }

// The schedule of a graph for the request's target and device.
schedule::Schedule schedule_for(const Graph& g, const Request& r) {
  return schedule::schedule_graph(g, codegen(r.target).capabilities(device_request(r)));
}

plan::KernelPlan generate(const schedule::Schedule& s, const Request& r) {
  return codegen(r.target).generate(s, device_request(r)).plan;
}

json graph_object(const Graph& g) { return json::parse(format::to_json(g, -1)); }

json number_json(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

// Element i of a contiguous host tensor as a double (bool and integers exactly).
double element(const TensorData& t, int64_t i) {
  switch (t.dtype) {
    case DType::bool_: return t.data_as<uint8_t>()[i] ? 1.0 : 0.0;
    case DType::i32: return t.data_as<int32_t>()[i];
    case DType::i64: return static_cast<double>(t.data_as<int64_t>()[i]);
    case DType::f16: return half_bits_to_float(t.data_as<uint16_t>()[i]);
    case DType::bf16: return bf16_bits_to_float(t.data_as<uint16_t>()[i]);
    case DType::f32: return t.data_as<float>()[i];
    case DType::f64: return t.data_as<double>()[i];
  }
  return 0;
}

void set_element(TensorData& t, int64_t i, double v) {
  switch (t.dtype) {
    case DType::bool_: t.data_as<uint8_t>()[i] = v != 0; break;
    case DType::i32: t.data_as<int32_t>()[i] = static_cast<int32_t>(v); break;
    case DType::i64: t.data_as<int64_t>()[i] = static_cast<int64_t>(v); break;
    case DType::f16: t.data_as<uint16_t>()[i] = float_to_half_bits(static_cast<float>(v)); break;
    case DType::bf16: t.data_as<uint16_t>()[i] = float_to_bf16_bits(static_cast<float>(v)); break;
    case DType::f32: t.data_as<float>()[i] = static_cast<float>(v); break;
    case DType::f64: t.data_as<double>()[i] = v; break;
  }
}

json tensor_json(const TensorData& t) {
  const TensorData c = eval::contiguous(t);
  json data = json::array();
  for (int64_t i = 0; i < c.numel(); ++i) data.push_back(number_json(element(c, i)));
  return {{"dtype", dtype_name(c.dtype)}, {"shape", c.sizes}, {"data", std::move(data)}};
}

// Matches nodes of a graph to the nodes of `b` computing the same values (see match_nodes).
class Matcher {
 public:
  // Equal nodes without inputs (the `full`s of two decomposed layer_norms) are one value here:
  // rep_ names the first of each, and nodes are indexed over their inputs' representatives.
  explicit Matcher(const Graph& b) : b_(b), rep_(b.size()) {
    for (NodeId id = 0; id < static_cast<NodeId>(b.size()); ++id) {
      const Node& n = b.node(id);
      rep_[static_cast<size_t>(id)] = id;
      if (n.op == OpId::input) continue;
      if (n.inputs.empty()) {
        for (NodeId c : index_[{n.op, {}}])
          if (same(n, b.node(c))) {
            rep_[static_cast<size_t>(id)] = c;
            break;
          }
        if (rep_[static_cast<size_t>(id)] != id) continue;
      }
      index_[{n.op, reps(n.inputs)}].push_back(id);
    }
  }

  // One sweep in order: a node of `a` whose inputs are matched matches a node of `b` with the
  // same op, attributes, dtype, device and sizes over the matched inputs; a composite whose
  // inputs are matched, the node of `b` its decomposition's result matches (the scheduler
  // decomposes composites). Returns whether anything new was matched.
  bool forward(const Graph& a, std::vector<NodeId>& m, int depth = 0) const {
    bool progress = false;
    for (NodeId id = 0; id < static_cast<NodeId>(a.size()); ++id) {
      const Node& n = a.node(id);
      if (m[static_cast<size_t>(id)] >= 0 || n.op == OpId::input) continue;
      std::vector<NodeId> ins;
      for (NodeId i : n.inputs) ins.push_back(m[static_cast<size_t>(i)]);
      if (std::find(ins.begin(), ins.end(), -1) != ins.end()) continue;
      NodeId found = -1;
      if (const auto it = index_.find({n.op, reps(ins)}); it != index_.end())
        for (NodeId c : it->second)
          if (same(n, b_.node(c))) {
            found = c;
            break;
          }
      if (found < 0 && n.inputs.empty()) found = same_value_source(n);
      if (found < 0 && op_def(n.op).decompose && depth < 4) found = composite(a, n, ins, depth);
      if (found >= 0) m[static_cast<size_t>(id)] = found, progress = true;
    }
    return progress;
  }

 private:
  static bool same(const Node& x, const Node& y) {
    return x.op == y.op && x.attrs == y.attrs && x.meta.dtype == y.meta.dtype && x.meta.device == y.meta.device &&
           x.meta.sizes == y.meta.sizes;
  }

  // A source node's value where every element is the same: a full's, or a small constant's
  // (the passes fold a uniform constant into a full, as the scale of an attention).
  static std::optional<double> uniform_value(const Node& n) {
    constexpr int64_t kMaxElements = 4096;
    if (n.op == OpId::full) return n.attrs.f(1);
    if (n.op != OpId::constant) return std::nullopt;
    const ConstantData& c = n.attrs.tensor(0);
    int64_t count = 1;
    for (int64_t d : c.sizes) count *= d;
    if (count == 0 || count > kMaxElements || static_cast<int64_t>(c.bytes.size()) != count * dtype_size(c.dtype))
      return std::nullopt;
    TensorData t = TensorData::empty_host(c.dtype, c.sizes);
    std::memcpy(t.data(), c.bytes.data(), c.bytes.size());
    const double v = element(t, 0);
    for (int64_t i = 1; i < count; ++i) {
      const double e = element(t, i);
      if (!(e == v || (e != e && v != v)) || std::signbit(e) != std::signbit(v)) return std::nullopt;
    }
    return v;
  }

  // The source node of `b` (a full or a constant) holding the same uniform value as source `n`
  // of `a` with its dtype, device and sizes, or -1.
  NodeId same_value_source(const Node& n) const {
    const std::optional<double> v = uniform_value(n);
    if (!v) return -1;
    for (OpId op : {OpId::full, OpId::constant}) {
      const auto it = index_.find({op, {}});
      if (it == index_.end()) continue;
      for (NodeId c : it->second) {
        const Node& m = b_.node(c);
        if (m.meta.dtype != n.meta.dtype || m.meta.device != n.meta.device || m.meta.sizes != n.meta.sizes) continue;
        const std::optional<double> w = uniform_value(m);
        if (w && (*w == *v || (*w != *w && *v != *v)) && std::signbit(*w) == std::signbit(*v)) return c;
      }
    }
    return -1;
  }

  // The node of `b` computing composite `n` of `a` (inputs matched to `ins`), or -1.
  NodeId composite(const Graph& a, const Node& n, const std::vector<NodeId>& ins, int depth) const {
    Graph t;
    t.shapes() = a.shapes();
    std::vector<NodeId> args;
    for (NodeId i : n.inputs) args.push_back(t.add_input(a.node(i).meta));
    t.set_outputs({t.add(n.op, args, n.attrs)});
    const Graph d = passes::decompose(t);
    std::vector<NodeId> m(d.size(), -1);
    for (size_t k = 0; k < d.inputs().size(); ++k) m[static_cast<size_t>(d.inputs()[k])] = ins[k];
    while (forward(d, m, depth + 1)) {
    }
    return m[static_cast<size_t>(d.outputs()[0])];
  }

  std::vector<NodeId> reps(std::vector<NodeId> ids) const {
    for (NodeId& i : ids) i = rep_[static_cast<size_t>(i)];
    return ids;
  }

  const Graph& b_;
  std::vector<NodeId> rep_;
  std::map<std::pair<OpId, std::vector<NodeId>>, std::vector<NodeId>> index_;
};

// For each node of `a`, the node of `b` holding its value, where `b` is `a` rewritten (a pass, or
// the scheduler's decomposition): passes rebuild graphs and ids do not carry over, so nodes are
// matched by what they compute. To a fixpoint: inputs by position; Matcher::forward; output k
// matches output k; a matched node with the same op and arity as its match has its inputs
// matched position by position (a rewritten operand: x*1 -> x, a recognized or folded subgraph
// -> its replacement). What is left (nodes folded into a replacement: the inside of a recognized
// softmax) takes the match of a matched user. Nodes no output depends on stay unmatched (-1).
std::vector<NodeId> match_nodes(const Graph& a, const Graph& b) {
  std::vector<NodeId> m(a.size(), -1);
  for (size_t k = 0; k < a.inputs().size() && k < b.inputs().size(); ++k) m[a.inputs()[k]] = b.inputs()[k];
  const Matcher matcher(b);
  for (bool progress = true; progress;) {
    progress = matcher.forward(a, m);
    for (size_t k = 0; k < a.outputs().size() && k < b.outputs().size(); ++k)
      if (m[a.outputs()[k]] < 0) m[a.outputs()[k]] = b.outputs()[k], progress = true;
    for (NodeId id = static_cast<NodeId>(a.size()); id-- > 0;) {
      if (m[id] < 0) continue;
      const Node &n = a.node(id), &t = b.node(m[id]);
      if (n.op != t.op || n.inputs.size() != t.inputs.size()) continue;
      for (size_t j = 0; j < n.inputs.size(); ++j)
        if (m[n.inputs[j]] < 0) m[n.inputs[j]] = t.inputs[j], progress = true;
    }
  }
  // Users come after their inputs: one sweep from the end reaches every chain of absorbed nodes.
  std::vector<std::vector<NodeId>> users(a.size());
  for (NodeId id = 0; id < static_cast<NodeId>(a.size()); ++id)
    for (NodeId i : a.node(id).inputs) users[i].push_back(id);
  for (NodeId id = static_cast<NodeId>(a.size()); id-- > 0;)
    for (NodeId u : users[id])
      if (m[id] < 0 && m[u] >= 0) m[id] = m[u];
  return m;
}

// For each node of a graph, the kernels (indices into the plan) computing the scheduled node
// `to_scheduled` maps it to.
json node_kernels(const std::vector<NodeId>& to_scheduled, const std::vector<std::vector<int>>& kernels_of) {
  json out = json::array();
  for (NodeId s : to_scheduled) out.push_back(s >= 0 ? kernels_of[static_cast<size_t>(s)] : std::vector<int>{});
  return out;
}

constexpr int64_t kMaxRunElements = int64_t{1} << 22;  // per tensor: the page shows small runs

}  // namespace

std::string version() { return cache::kiln_version(); }

std::vector<std::string> targets() {
  target::ensure_builtin_targets();
  return target::codegen_names();
}

std::string op_table_json() {
  static constexpr const char* kCategory[] = {"source", "unary", "binary", "ternary",
                                              "reduction", "layout", "composite", "matmul"};
  json ops = json::array();
  for (const OpDef& d : all_ops()) {
    json attrs = json::array();
    for (const AttrSpec& a : d.attrs) attrs.push_back({{"name", a.name}, {"kind", attr_kind_name(a.kind)}});
    ops.push_back({{"name", d.name},
                   {"category", kCategory[static_cast<int>(d.category)]},
                   {"min_inputs", d.min_inputs},
                   {"max_inputs", d.max_inputs},
                   {"attrs", std::move(attrs)}});
  }
  return ops.dump();
}

Request parse_request(std::string_view request_json) {
  Request r;
  if (request_json.empty()) return r;
  const json v = parse(request_json, "compile request");
  KILN_CHECK(v.is_object(), "compile request: expected an object, got ", v.type_name());
  for (const auto& [key, value] : v.items()) {
    if (key == "target") {
      KILN_CHECK(value.is_string(), "compile request: 'target' must be a string");
      r.target = value.get<std::string>();
      const std::vector<std::string> known = targets();
      if (std::find(known.begin(), known.end(), r.target) == known.end()) codegen(r.target);  // says which there are
    } else if (key == "mode") {
      KILN_CHECK(value.is_string(), "compile request: 'mode' must be a string");
      r.mode = value.get<std::string>();
      config::mode_options(r.mode);  // an unknown mode: native's message listing them
    } else if (key == "options") {
      KILN_CHECK(value.is_object(), "compile request: 'options' must be an object");
      for (const auto& [name, ov] : value.items()) r.options[name] = config_value(name, ov);
    } else if (key == "device_request") {
      KILN_CHECK(value.is_object(), "compile request: 'device_request' must be an object");
      for (const auto& [name, dv] : value.items()) {
        KILN_CHECK(dv.is_string(), "compile request: device_request '", name, "' must be a string");
        r.device_request[name] = dv.get<std::string>();
      }
    } else {
      fail("compile request: unknown key '", key, "' (expected target, mode, options, device_request)");
    }
  }
  return r;
}

std::string plan_json(const Graph& g, const Request& r) {
  return with_request(r, [&] {
    const Graph scheduled = passes::run_default_pipeline(g);
    plan::KernelPlan p = generate(schedule_for(scheduled, r), r);
    // What made it, so that the native runtime can make it again and compare (docs/plan-trust.md).
    p.origin = target::plan_origin(format::to_json(scheduled, -1), device_request(r));
    return plan::plan_to_json(p);
  });
}

namespace {

// What cache_key() hashes, under the request's config layers.
cache::KeyInputs key_inputs(const Graph& g, const Request& r) {
  return with_request(r, [&] {
    // The native key's inputs; no device or toolchain: a plan is the same text wherever it is made.
    const Graph canonical = g.canonical();
    return cache::graph_key_inputs(canonical, format::key_json(canonical, cache::hash_hex_of), r.target + ".plan", r.target, "", "");
  });
}

}  // namespace

std::string cache_key(const Graph& g, const Request& r) { return cache::make_key(key_inputs(g, r)).hex; }

std::string cache_key_inputs_json(const Graph& g, const Request& r) {
  const cache::KeyInputs in = key_inputs(g, r);
  return json{{"pipeline", in.pipeline}, {"graph", in.graph},       {"inputs", in.inputs},
              {"codegen_hash", std::to_string(in.codegen_hash)},   {"target", in.target},
              {"device", in.device},     {"toolchain", in.toolchain}, {"kiln_version", in.kiln_version},
              {"tag", in.tag}}
      .dump();
}

std::string compile_report(const Graph& g, const Request& r) {
  return with_request(r, [&] {
    json out;
    out["target"] = r.target;
    out["mode"] = r.mode;
    out["cache_key"] = cache_key(g, r);
    json codegen = json::object();
    for (const auto& [name, value] : config::codegen_values()) codegen[name] = config::to_string(value);
    out["codegen_options"] = std::move(codegen);
    out["input"] = graph_object(g);
    out["input_text"] = g.str();

    const auto t0 = std::chrono::steady_clock::now();
    json passes = json::array();
    Graph current = g;
    std::vector<std::vector<NodeId>> matches;  // per pass: node of its input -> node of its output
    for (const passes::Pass& p : passes::default_pipeline()) {
      passes::PassResult pr = passes::run_pass(p, current);
      matches.push_back(match_nodes(current, pr.graph));
      passes.push_back({{"name", p.name},
                        {"summary", pr.summary},
                        {"changed", pr.changed},
                        {"ops_before", current.op_count()},
                        {"ops_after", pr.graph.op_count()},
                        {"before", current.str()},
                        {"after", pr.graph.str()}});
      current = std::move(pr.graph);
    }
    const double passes_ms = ms_since(t0);
    const auto t1 = std::chrono::steady_clock::now();
    const schedule::Schedule s = schedule_for(current, r);
    const double schedule_ms = ms_since(t1);
    const auto t2 = std::chrono::steady_clock::now();
    plan::KernelPlan p = generate(s, r);
    const double codegen_ms = ms_since(t2);
    const auto t3 = std::chrono::steady_clock::now();
    p.origin = target::plan_origin(format::to_json(current, -1), device_request(r));  // as plan_json: what made it
    out["plan"] = plan::plan_to_json(p);
    const double serialize_ms = ms_since(t3);

    out["passes"] = std::move(passes);
    out["optimized"] = graph_object(current);
    out["scheduled"] = graph_object(s.graph);
    out["scheduled_text"] = s.graph.str();
    out["decisions"] = s.decisions;
    out["schedule_text"] = s.str();
    json kernels = json::array();
    const std::vector<std::vector<int>> kernels_of = plan::kernels_of_nodes(p, s.graph);
    const std::vector<plan::KernelCost> costs = plan::kernel_costs(p, s.graph, kernels_of);
    for (size_t ki = 0; ki < p.kernels.size(); ++ki) {
      const plan::PlanKernel& k = p.kernels[ki];
      json ops = json::array();
      for (NodeId n : k.provenance)
        if (n >= 0 && static_cast<size_t>(n) < s.graph.size()) ops.push_back(op_name(s.graph.node(n).op));
      kernels.push_back({{"name", k.name},
                         {"kind", k.kind},
                         {"entry", k.entry},
                         {"variants", k.variants},
                         {"source", k.source},
                         {"language", k.language},
                         {"provenance", k.provenance},
                         {"ops", std::move(ops)},
                         {"reads", k.reads},
                         {"writes", k.writes},
                         {"parallel_extent", k.parallel_extent.str()},
                         {"bytes", costs[ki].bytes},
                         {"flops", costs[ki].flops}});
    }
    out["kernels"] = std::move(kernels);
    // Every node of the captured graph, of the graph after the passes and of the scheduled graph
    // with the kernels it ends up in (the captured and optimised graphs' nodes matched to the
    // scheduled graph's pass by pass: match_nodes), for the inspector's diagram.
    std::vector<NodeId> scheduled_of = match_nodes(current, s.graph);
    std::vector<NodeId> identity(s.graph.size());
    for (size_t i = 0; i < identity.size(); ++i) identity[i] = static_cast<NodeId>(i);
    std::vector<NodeId> from_input(g.size());
    for (size_t i = 0; i < from_input.size(); ++i) {
      NodeId id = static_cast<NodeId>(i);
      for (const std::vector<NodeId>& m : matches) id = id >= 0 ? m[static_cast<size_t>(id)] : -1;
      from_input[i] = id >= 0 ? scheduled_of[static_cast<size_t>(id)] : -1;
    }
    out["node_scheduled"] = {{"input", from_input}, {"optimized", scheduled_of}};
    out["node_kernels"] = {{"input", node_kernels(from_input, kernels_of)},
                           {"optimized", node_kernels(scheduled_of, kernels_of)},
                           {"scheduled", node_kernels(identity, kernels_of)}};
    out["prelude"] = p.prelude;
    // The guards a compiled function over this graph checks (sdk/capture, one argument per
    // graph input, named as the inputs are), then what the plan itself assumes.
    std::vector<ArgView> args(g.inputs().size());
    std::vector<int32_t> arg_of_input(g.inputs().size());
    std::vector<std::string> names;
    for (size_t i = 0; i < g.inputs().size(); ++i) {
      arg_of_input[i] = static_cast<int32_t>(i);
      names.push_back(g.node(g.inputs()[i]).name);
    }
    const GuardSet guards = GuardSet::build(g, args, arg_of_input, std::move(names), config::codegen_hash());
    json guard_lines = json::array();
    const std::string text = guards.str();
    for (size_t at = 0, nl; at < text.size(); at = nl + 1) {
      nl = text.find('\n', at);
      if (nl == std::string::npos) nl = text.size();
      guard_lines.push_back(text.substr(at, nl - at));
    }
    out["guards"] = std::move(guard_lines);
    out["plan_guards"] = p.guards;
    out["plan_text"] = p.str();
    out["peak_intermediate_bytes"] = p.peak_intermediate_bytes;
    out["timing_ms"] = {{"passes", passes_ms},
                        {"schedule", schedule_ms},
                        {"codegen", codegen_ms},
                        {"serialize", serialize_ms},
                        {"total", passes_ms + schedule_ms + codegen_ms + serialize_ms}};
    return out.dump();
  });
}

std::string run_reference(const Graph& g, std::string_view inputs_json) {
  const json req = parse(inputs_json, "run request");
  KILN_CHECK(req.is_object(), "run request: expected an object");
  std::vector<TensorData> inputs;
  if (req.contains("inputs")) {
    const json& list = req["inputs"];
    KILN_CHECK(list.is_array(), "run request: 'inputs' must be an array");
    KILN_CHECK(list.size() == g.inputs().size(), "run request: the graph takes ", g.inputs().size(), " input",
               g.inputs().size() == 1 ? "" : "s", ", got ", list.size());
    for (size_t i = 0; i < list.size(); ++i) {
      const json& t = list[i];
      const std::string where = "run request: input " + std::to_string(i);
      KILN_CHECK(t.is_object() && t.contains("shape") && t.contains("data"), where,
                 ": expected {\"shape\": [...], \"data\": [...]}");
      KILN_CHECK(t["shape"].is_array() && t["data"].is_array(), where, ": 'shape' and 'data' must be arrays");
      std::vector<int64_t> sizes;
      int64_t n = 1;
      for (const json& d : t["shape"]) {
        KILN_CHECK(d.is_number_integer() && d.get<int64_t>() >= 0, where, ": a size must be a non-negative integer");
        sizes.push_back(d.get<int64_t>());
        KILN_CHECK(sizes.back() <= kMaxRunElements && (n *= sizes.back()) <= kMaxRunElements, where,
                   ": too large to run here (at most ", kMaxRunElements, " elements)");
      }
      KILN_CHECK(static_cast<int64_t>(t["data"].size()) == n, where, ": shape holds ", n, " elements, data has ",
                 t["data"].size());
      TensorData td = TensorData::empty_host(g.node(g.inputs()[i]).meta.dtype, sizes);
      for (int64_t e = 0; e < n; ++e) {
        const json& x = t["data"][static_cast<size_t>(e)];
        double v = 0;
        if (x.is_number()) v = x.get<double>();
        else if (x.is_boolean()) v = x.get<bool>() ? 1 : 0;
        else if (x.is_string() && (x == "inf" || x == "-inf" || x == "nan"))
          v = x == "nan" ? NAN : (x == "inf" ? INFINITY : -INFINITY);
        else fail(where, ": data[", e, "] is not a number");
        set_element(td, e, v);
      }
      inputs.push_back(std::move(td));
    }
  } else {
    const uint64_t seed = req.contains("random") && req["random"].is_number_unsigned() ? req["random"].get<uint64_t>() : 0;
    std::vector<int64_t> values = g.shapes().examples();
    if (req.contains("symbols")) {
      KILN_CHECK(req["symbols"].is_object(), "run request: 'symbols' must be an object");
      for (const auto& [name, v] : req["symbols"].items()) {
        KILN_CHECK(name.size() > 1 && name[0] == 's', "run request: unknown symbol '", name, "'");
        const std::string digits = name.substr(1);
        KILN_CHECK(std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
                       digits.size() < 9 && std::stoul(digits) < values.size(),
                   "run request: unknown symbol '", name, "'");
        KILN_CHECK(v.is_number_integer(), "run request: symbol ", name, " must be an integer");
        values[std::stoul(digits)] = v.get<int64_t>();
      }
    }
    for (size_t i = 0; i < g.inputs().size(); ++i) {
      const TensorMeta& m = g.node(g.inputs()[i]).meta;
      std::vector<int64_t> sizes;
      int64_t n = 1;
      for (const SymInt& d : m.sizes) {
        sizes.push_back(d.evaluate(values));
        KILN_CHECK(sizes.back() >= 0 && sizes.back() <= kMaxRunElements && (n *= sizes.back()) <= kMaxRunElements,
                   "run request: input ", i, " would have ", n, " elements, too large to run here");
      }
      TensorData td = TensorData::empty_host(m.dtype, sizes);
      for (int64_t e = 0; e < n; ++e) {
        // Uniform in [-2, 2) from Philox's integer bits (no libm: the same bits everywhere).
        const uint64_t key = static_cast<uint64_t>(seed + i);
        const double v = static_cast<double>(philox_bits(key, static_cast<uint64_t>(e), 0)) * 0x1p-22 - 2.0;
        set_element(td, e, m.dtype == DType::bool_ ? (v > 0) : is_integral(m.dtype) ? std::round(v * 4) : v);
      }
      inputs.push_back(std::move(td));
    }
  }
  const std::vector<TensorData> outputs = eval::run_graph(g, inputs);
  json out;
  out["inputs"] = json::array();
  for (const TensorData& t : inputs) out["inputs"].push_back(tensor_json(t));
  out["outputs"] = json::array();
  for (const TensorData& t : outputs) {
    KILN_CHECK(t.numel() <= kMaxRunElements, "run: output too large to return");
    out["outputs"].push_back(tensor_json(t));
  }
  return out.dump();
}

// ---- GraphBuilder ------------------------------------------------------------------------

int GraphBuilder::symbol(const std::string& name, int64_t example, int64_t min, int64_t max, bool user_dynamic) {
  KILN_CHECK(!name.empty(), "symbol: a name is required");
  KILN_CHECK(!named_.count(name), "symbol: '", name, "' is already defined");
  KILN_CHECK(min >= 0 && min <= example && example <= max, "symbol '", name, "': need 0 <= min <= example <= max, got ",
             min, " <= ", example, " <= ", max);
  SymInt s = g_.shapes().create_symbol(example, min, max, "symbol " + name, user_dynamic);
  named_.emplace(name, s);
  return static_cast<int>(g_.shapes().symbols().size()) - 1;
}

SymInt GraphBuilder::size_of(const json& v, const std::string& where) {
  if (v.is_number_integer()) return SymInt(v.get<int64_t>());
  KILN_CHECK(v.is_string(), where, ": a size must be an integer or a symbol name, got ", v.dump());
  const std::string name = v.get<std::string>();
  if (auto it = named_.find(name); it != named_.end()) return it->second;
  // "s3": a symbol by id; an expression over ids ("2*s0"); otherwise a new named symbol.
  if (!name.empty() && name[0] == 's' && name.find_first_not_of("0123456789", 1) == std::string::npos &&
      name.size() > 1) {
    const size_t id = std::stoul(name.substr(1));
    KILN_CHECK(id < g_.shapes().symbols().size(), where, ": symbol ", name, " does not exist");
    return SymInt::symbol(static_cast<SymbolId>(id), g_.shapes().symbols()[id].example);
  }
  const bool identifier = !name.empty() && (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_') &&
                          std::all_of(name.begin(), name.end(), [](char c) {
                            return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
                          });
  if (!identifier) {
    const SymExpr e = parse_sym_expr(name);
    return SymInt(e, e.evaluate(g_.shapes().examples()));
  }
  symbol(name, 16, 2, std::numeric_limits<int64_t>::max(), false);
  return named_.at(name);
}

int GraphBuilder::input(std::string_view shape_json, const std::string& dtype, const std::string& name,
                        const std::string& device) {
  const json shape = parse(shape_json, "input shape");
  const std::string where = "input " + std::to_string(g_.inputs().size()) + (name.empty() ? "" : " (" + name + ")");
  KILN_CHECK(shape.is_array(), where, ": the shape must be an array");
  TensorMeta m;
  m.dtype = parse_dtype(dtype);
  m.device = device.empty() ? Device::cpu() : parse_device(device);
  for (const json& d : shape) {
    SymInt s = size_of(d, where);
    KILN_CHECK(s.is_symbolic() || s.hint() >= 0, where, ": negative size ", s.hint());
    m.sizes.push_back(std::move(s));
  }
  return g_.add_input(std::move(m), name);
}

AttrValue GraphBuilder::attr(const json& v, AttrKind kind, const std::string& where) {
  auto integer = [&](const json& x) {
    if (x.is_number_integer()) return x.get<int64_t>();
    KILN_CHECK(x.is_number_float() && std::trunc(x.get<double>()) == x.get<double>() &&
                   std::abs(x.get<double>()) < 9.007199254740992e15,
               where, ": expected an integer, got ", x.dump());
    return static_cast<int64_t>(x.get<double>());
  };
  switch (kind) {
    case AttrKind::int_: return integer(v);
    case AttrKind::float_:
      if (v.is_number()) return v.get<double>();
      if (v == "inf") return INFINITY;
      if (v == "-inf") return -INFINITY;
      if (v == "nan") return NAN;
      fail(where, ": expected a number, got ", v.dump());
    case AttrKind::bool_:
      KILN_CHECK(v.is_boolean(), where, ": expected true or false, got ", v.dump());
      return v.get<bool>();
    case AttrKind::ints: {
      KILN_CHECK(v.is_array(), where, ": expected an array of integers, got ", v.dump());
      std::vector<int64_t> out;
      for (const json& x : v) out.push_back(integer(x));
      return out;
    }
    case AttrKind::symints: {
      KILN_CHECK(v.is_array(), where, ": expected an array of sizes, got ", v.dump());
      std::vector<SymInt> out;
      for (const json& x : v) out.push_back(size_of(x, where));
      return out;
    }
    case AttrKind::dtype:
      KILN_CHECK(v.is_string(), where, ": expected a dtype name, got ", v.dump());
      return parse_dtype(v.get<std::string>());
    case AttrKind::string:
      KILN_CHECK(v.is_string(), where, ": expected a string, got ", v.dump());
      return v.get<std::string>();
    case AttrKind::tensor: {
      // {"dtype", "shape", "data": [numbers]}
      KILN_CHECK(v.is_object() && v.contains("dtype") && v.contains("shape") && v.contains("data"), where,
                 ": expected {\"dtype\", \"shape\", \"data\"}");
      auto c = std::make_shared<ConstantData>();
      c->dtype = parse_dtype(v["dtype"].get<std::string>());
      int64_t n = 1;
      for (const json& d : v["shape"]) {
        const int64_t s = integer(d);
        KILN_CHECK(s >= 0 && s <= kMaxRunElements && (n *= s) <= kMaxRunElements, where, ": bad constant shape");
        c->sizes.push_back(s);
      }
      KILN_CHECK(v["data"].is_array() && static_cast<int64_t>(v["data"].size()) == n, where, ": constant has ", n,
                 " elements, data has ", v["data"].is_array() ? v["data"].size() : 0);
      TensorData t = TensorData::empty_host(c->dtype, c->sizes);
      for (int64_t e = 0; e < n; ++e) set_element(t, e, v["data"][static_cast<size_t>(e)].get<double>());
      const auto* p = static_cast<const std::byte*>(t.data());
      c->bytes.assign(p, p + n * dtype_size(c->dtype));
      return std::shared_ptr<const ConstantData>(std::move(c));
    }
  }
  fail(where, ": unknown attribute kind");
}

int GraphBuilder::op(const std::string& name, std::string_view inputs_json, std::string_view attrs_json) {
  const std::optional<OpId> id = find_op(name);
  KILN_CHECK(id.has_value(), "unknown op '", name, "'");
  KILN_CHECK(*id != OpId::input, "use input() to add a graph input");
  const OpDef& def = op_def(*id);
  const json ins = parse(inputs_json, name);
  const json attrs = attrs_json.empty() ? json::object() : parse(attrs_json, name);
  KILN_CHECK(ins.is_array(), name, ": inputs must be an array");
  KILN_CHECK(attrs.is_object(), name, ": attributes must be an object");
  // The first tensor operand: scalars take their dtype next to it; dims normalise to its rank.
  const TensorMeta* first = nullptr;
  for (const json& x : ins)
    if (x.is_number_integer() && !x.is_boolean()) {
      // Node ids are integers; scalars are passed as {"scalar": v}.
      const int64_t n = x.get<int64_t>();
      KILN_CHECK(n >= 0 && static_cast<size_t>(n) < g_.size(), name, ": node ", n, " does not exist");
      if (!first) first = &g_.node(static_cast<NodeId>(n)).meta;
    }
  std::vector<NodeId> inputs;
  for (const json& x : ins) {
    if (x.is_object() && x.contains("scalar")) {
      const json& v = x["scalar"];
      KILN_CHECK(first, name, ": got a scalar but no tensor operand");
      ScalarKind kind = ScalarKind::floating;
      double value = 0;
      if (v.is_boolean()) kind = ScalarKind::boolean, value = v.get<bool>();
      else if (v.is_number_integer()) kind = ScalarKind::integer, value = static_cast<double>(v.get<int64_t>());
      else if (v.is_number()) value = v.get<double>();
      else if (v == "inf" || v == "-inf" || v == "nan") value = v == "nan" ? NAN : v == "inf" ? INFINITY : -INFINITY;
      else fail(name, ": a scalar operand must be a number or a boolean, got ", v.dump());
      inputs.push_back(g_.add(OpId::full, {}, Attrs{std::vector<SymInt>{}, value, weak_scalar_dtype(kind, first->dtype)}));
    } else {
      KILN_CHECK(x.is_number_integer(), name, ": an input must be a tensor or a scalar, got ", x.dump());
      inputs.push_back(static_cast<NodeId>(x.get<int64_t>()));
    }
  }
  const int64_t rank = first ? first->rank() : 0;
  Attrs a;
  for (const AttrSpec& spec : def.attrs) {
    const std::string key(spec.name);
    const std::string where = name + ": attribute '" + key + "'";
    KILN_CHECK(attrs.contains(key), name, ": missing attribute '", key, "'");
    AttrValue v = attr(attrs[key], spec.kind, where);
    // The C++ frontend's normalisation: negative dims count from the end (unsqueeze: of the
    // result), a reduction's dims sorted, one -1 in a reshape inferred, -1 in expand kept.
    if (key == "dim" || key == "dim0" || key == "dim1" || key == "start_dim" || key == "end_dim") {
      if (first && *id != OpId::cat) v = normalize_dim(std::get<int64_t>(v), *id == OpId::unsqueeze ? rank + 1 : rank, name);
      else if (first) v = normalize_dim(std::get<int64_t>(v), rank, name);
    } else if (key == "dims" && first) {
      auto dims = std::get<std::vector<int64_t>>(v);
      for (int64_t& d : dims) d = normalize_dim(d, rank, name);
      if (def.category == OpCategory::reduction || *id == OpId::squeeze) {
        std::sort(dims.begin(), dims.end());
        KILN_CHECK(std::adjacent_find(dims.begin(), dims.end()) == dims.end(), name, ": a dim is listed twice");
      }
      v = dims;
    } else if (key == "shape" && *id == OpId::reshape && first) {
      auto shape = std::get<std::vector<SymInt>>(v);
      int64_t infer_at = -1;
      SymInt known = 1;
      for (size_t i = 0; i < shape.size(); ++i) {
        if (shape[i] == -1) {
          KILN_CHECK(infer_at < 0, "reshape: only one size may be -1");
          infer_at = static_cast<int64_t>(i);
        } else {
          known = known * shape[i];
        }
      }
      if (infer_at >= 0) {
        const SymInt total = first->numel();
        KILN_CHECK(known.is_static() && known.hint() != 0, "reshape: cannot infer the -1 next to symbolic sizes");
        auto q = total.expr().exact_div(known.hint());
        KILN_CHECK(q.has_value(), "reshape: cannot infer the -1 for a tensor of ", total.str(), " elements");
        shape[static_cast<size_t>(infer_at)] = q->is_constant() ? SymInt(q->constant_value()) : SymInt(*q, total.hint() / known.hint());
      }
      v = shape;
    } else if (key == "shape" && *id == OpId::expand && first) {
      auto shape = std::get<std::vector<SymInt>>(v);
      const int64_t lead = static_cast<int64_t>(shape.size()) - rank;
      KILN_CHECK(lead >= 0, "expand: target has fewer dims than the input");
      for (size_t i = 0; i < shape.size(); ++i)
        if (shape[i] == -1) {
          KILN_CHECK(static_cast<int64_t>(i) >= lead, "expand: -1 is not allowed for a new leading dim");
          shape[i] = first->sizes[i - static_cast<size_t>(lead)];
        }
      v = shape;
    }
    a.values.push_back(std::move(v));
  }
  for (const auto& item : attrs.items()) {
    const std::string key = item.key();
    const bool known = std::any_of(def.attrs.begin(), def.attrs.end(), [&](const AttrSpec& s) { return s.name == key; });
    KILN_CHECK(known, name, ": unknown attribute '", key, "'");
  }
  return g_.add(*id, std::move(inputs), std::move(a));
}

std::string GraphBuilder::node_json(int id) const {
  KILN_CHECK(id >= 0 && static_cast<size_t>(id) < g_.size(), "node ", id, " does not exist");
  const Node& n = g_.node(id);
  json shape = json::array();
  for (const SymInt& s : n.meta.sizes) {
    if (s.is_static()) shape.push_back(s.hint());
    else shape.push_back(s.str());
  }
  return json{{"id", id}, {"op", op_name(n.op)}, {"dtype", dtype_name(n.meta.dtype)}, {"shape", std::move(shape)},
              {"device", n.meta.device.str()}}
      .dump();
}

void GraphBuilder::set_name(int id, const std::string& name) {
  KILN_CHECK(id >= 0 && static_cast<size_t>(id) < g_.size(), "node ", id, " does not exist");
  g_.set_name(id, name);
}

std::string GraphBuilder::finish(std::string_view outputs_json) {
  const json outs = parse(outputs_json, "outputs");
  KILN_CHECK(outs.is_array() && !outs.empty(), "outputs: expected a non-empty array of tensors");
  std::vector<NodeId> ids;
  for (const json& o : outs) {
    KILN_CHECK(o.is_number_integer() && o.get<int64_t>() >= 0 && static_cast<size_t>(o.get<int64_t>()) < g_.size(),
               "outputs: ", o.dump(), " is not a node of this graph");
    ids.push_back(static_cast<NodeId>(o.get<int64_t>()));
  }
  Graph g = g_;
  g.set_outputs(ids);
  return format::to_json(g);
}

}  // namespace kiln::web
