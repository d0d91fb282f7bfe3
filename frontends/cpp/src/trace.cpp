#include "trace.h"

#include "debug_dump.h"
#include "device_move.h"

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "kiln/capture/backend.h"
#include "kiln/config/log.h"
#include "kiln/graph/error.h"
#include "kiln/eval/interpreter.h"
#include "kiln/compile.h"

namespace kiln::detail {

namespace {
thread_local Trace* t_current = nullptr;
thread_local std::vector<std::string> t_scopes;  // kiln::scope()s, outermost first
std::atomic<uint64_t> g_trace_ids{0};
}  // namespace

std::string scoped_name(std::string_view op) {
  if (t_scopes.empty()) return {};
  std::string name;
  for (const std::string& s : t_scopes) name += s + "/";
  return name += op;
}

Trace* current_trace() { return t_current; }
TraceScope::TraceScope(Trace& t) : previous_(t_current) { t_current = &t; }
TraceScope::~TraceScope() { t_current = previous_; }
uint64_t next_trace_id() { return ++g_trace_ids; }

Tensor wrap_node(Trace& t, NodeId id) {
  auto impl = std::make_shared<TensorImpl>();
  impl->meta = t.graph.node(id).meta;
  impl->trace_id = t.id;
  impl->node = id;
  if (t.values.size() <= static_cast<size_t>(id)) t.values.resize(static_cast<size_t>(id) + 1);
  t.values[static_cast<size_t>(id)] = impl;
  return Tensor(std::move(impl));
}

NodeId node_of(Trace& t, const Tensor& x, std::string_view op) {
  const auto& impl = x.impl();
  KILN_CHECK(impl != nullptr, op, ": an input tensor is undefined (default-constructed)");
  if (impl->trace_id == t.id) return impl->node;
  KILN_CHECK(impl->trace_id == 0, op, ": this tensor belongs to a trace that has ended; a traced tensor ",
             "escaped its compiled function (return it instead of storing it)");
  for (size_t i = 0; i < t.lifted.size(); ++i)
    if (t.lifted[i] == impl) return t.lifted_node[i];
  NodeId id;
  const TensorData& data = *impl->data;
  if (impl->from_break) {
    // A value computed by an earlier segment of this call: an input of this segment.
    id = t.graph.add_input(data.meta());
    t.input_values.push_back(data);
    t.input_arg.push_back(-1);
  } else {
    // A tensor from outside the function's arguments: captured by value, like a lambda
    // capture. Pass it as an argument instead if it changes between calls. A constant's bytes
    // live in the graph, so one made on a GPU (a causal mask built eagerly from static sizes)
    // comes to the host first.
    const TensorData c = eval::contiguous(move_data(data, Device::cpu()));
    auto constant = std::make_shared<ConstantData>();
    constant->dtype = c.dtype;
    constant->sizes = c.sizes;
    const auto* bytes = static_cast<const std::byte*>(c.data());
    constant->bytes.assign(bytes, bytes + c.numel() * dtype_size(c.dtype));
    id = t.graph.add(OpId::constant, {}, Attrs{std::shared_ptr<const ConstantData>(std::move(constant))});
    if (t.record_call_sites) record_call_site(t, id);  // where the op that took it in was called
  }
  t.lifted.push_back(impl);
  t.lifted_node.push_back(id);
  return id;
}

void record_call_site(Trace& t, NodeId id) {
  if (t.call_sites.size() <= static_cast<size_t>(id)) t.call_sites.resize(static_cast<size_t>(id) + 1);
  t.call_sites[static_cast<size_t>(id)] = capture_call_stack();
}

void materialize(Trace& t) {
  std::vector<std::shared_ptr<TensorImpl>> live;
  std::vector<NodeId> outputs;
  for (size_t id = 0; id < t.values.size(); ++id) {
    auto impl = t.values[id].lock();
    if (!impl || impl->trace_id != t.id) continue;
    live.push_back(impl);
    if (t.graph.node(static_cast<NodeId>(id)).op != OpId::input) outputs.push_back(static_cast<NodeId>(id));
  }
  std::vector<TensorData> results;
  if (!outputs.empty()) {
    t.graph.set_outputs(outputs);
    std::vector<TensorMeta> metas;
    for (NodeId i : t.graph.inputs()) metas.push_back(t.graph.node(i).meta);
    Executable exe;
    if (t.cache) {
      bool compiled = false;
      DebugDump dump(*t.cache);
      const CompileStats before = dump.active() ? dump.stats() : CompileStats{};
      const auto t0 = std::chrono::steady_clock::now();
      exe = t.cache->segment(t.graph, metas, static_cast<size_t>(t.graph_count), compiled);
      t.compiled_segment |= compiled;
      if (compiled) {
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        const std::string end = t.segment_end.empty() ? "the function's return" : "graph break: " + t.segment_end;
        dump.write(t.graph, nullptr, {.kind = "segment", .segment = t.graph_count, .graph_breaks = {end}, .compile_ms = ms,
                    .call_sites = &t.call_sites},
                   before);
      } else {
        dump.discard();
      }
    } else {
      exe = BackendRegistry::get("eager")(t.graph, metas);
    }
    std::vector<const TensorData*> in;
    for (const TensorData& v : t.input_values) in.push_back(&v);
    results = exe(in);
    ++t.graph_count;
    t.op_count += static_cast<int64_t>(t.graph.op_count());
    t.graphs.push_back(t.graph.str());
    if (!t.cache) t.traced_graphs.push_back(t.graph);
  }
  size_t next_result = 0;
  for (const auto& impl : live) {
    const Node& n = t.graph.node(impl->node);
    impl->data = n.op == OpId::input ? t.input_values[static_cast<size_t>(n.attrs.i(0))]
                                     : std::move(results.at(next_result++));
    impl->meta = impl->data->meta();
    impl->trace_id = 0;
    impl->node = -1;
    impl->from_break = true;
  }
  t.graph = Graph{};
  t.call_sites.clear();
  t.input_values.clear();
  t.input_arg.clear();
  t.values.clear();
  t.lifted.clear();
  t.lifted_node.clear();
}

void break_graph(Trace& t, std::string_view what, const std::source_location& loc) {
  // Line 0: no caller location is known (a conversion operator).
  const std::string where =
      loc.line() == 0 ? std::string() : " at " + std::string(loc.file_name()) + ":" + std::to_string(loc.line());
  KILN_CHECK(!t.fullgraph, "graph break in ", t.label, ": ", what, where,
             " needs a concrete value while tracing, and fullgraph=true forbids graph breaks; compute it ",
             "outside the compiled function or compile with fullgraph=false");
  const std::string reason = std::string(what) + where;
  KILN_LOG(graph_breaks, "graph break in ", t.label, ": ", reason);
  ++t.breaks;
  t.break_reasons.push_back(reason);
  if (t.cache && !t.cache->segmented()) t.cache->set_segmented();
  t.segment_end = reason;
  materialize(t);
  t.segment_end.clear();
}

}  // namespace kiln::detail

namespace kiln {

ScopeGuard::ScopeGuard(std::string name) {
  KILN_CHECK(!name.empty() && name.find('/') == std::string::npos, "kiln::scope: a scope name must be non-empty and hold no '/' (got '",
             name, "'); nest scopes for a path");
  detail::t_scopes.push_back(std::move(name));
}

ScopeGuard::~ScopeGuard() { detail::t_scopes.pop_back(); }

}  // namespace kiln
