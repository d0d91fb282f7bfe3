// Internal to frontends/cpp: the tracing context of one compiled call, and the one entry
// point every op goes through (record a node while tracing, run eagerly otherwise).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "call_sites.h"
#include "kiln/capture/capture.h"
#include "kiln/tensor.h"

namespace kiln::detail {

struct Trace {
  uint64_t id = 0;
  Graph graph;
  std::vector<TensorData> input_values;  // the value bound to each graph input
  std::vector<int32_t> input_arg;        // call argument of each graph input; -1 for segment values
  std::vector<std::weak_ptr<TensorImpl>> values;       // per node, the Tensor holding it
  std::vector<std::shared_ptr<TensorImpl>> lifted;     // concrete tensors taken into this graph
  std::vector<NodeId> lifted_node;
  FunctionCache* cache = nullptr;  // segments compile through it; null: eager backend (explain)
  std::string label;               // the compiled function, for messages
  bool fullgraph = false;
  int64_t breaks = 0;
  std::vector<std::string> break_reasons;
  std::string segment_end;          // while a break materializes a segment: that break's reason
  std::vector<std::string> graphs;  // readable form of each graph run (explain)
  std::vector<Graph> traced_graphs;  // each graph run, kept when explaining (cache == null)
  // Per node of `graph`, the stack that traced it (call_sites.h), while a debug dump wants them.
  bool record_call_sites = false;
  std::vector<CallStack> call_sites;
  int64_t graph_count = 0;
  int64_t op_count = 0;
  bool compiled_segment = false;
};

Trace* current_trace();

// Installs a trace on this thread for the scope's lifetime.
class TraceScope {
 public:
  explicit TraceScope(Trace& t);
  ~TraceScope();

 private:
  Trace* previous_;
};

uint64_t next_trace_id();
// The name of an op traced now, after this thread's kiln::scope()s ("encoder/layer.0/matmul");
// empty outside any scope.
std::string scoped_name(std::string_view op);
Tensor wrap_node(Trace& t, NodeId id);
// Keeps the stack now as node `id`'s call site (Trace::record_call_sites).
void record_call_site(Trace& t, NodeId id);
NodeId node_of(Trace& t, const Tensor& x, std::string_view op);
// Runs the graph traced so far and makes every live value of it concrete; starts a new segment.
void materialize(Trace& t);
// A value is needed while tracing: a graph break (or an error under fullgraph).
void break_graph(Trace& t, std::string_view what, const std::source_location& loc);

// Records or runs one op as given (no autocast casts); records it for autograd where an input
// requires gradients.
Tensor record_or_run(OpId op, std::span<const Tensor* const> inputs, Attrs attrs);

// Records or runs one op.
Tensor dispatch(OpId op, std::span<const Tensor* const> inputs, Attrs attrs);
inline Tensor dispatch(OpId op, std::initializer_list<const Tensor*> inputs, Attrs attrs = {}) {
  return dispatch(op, std::span<const Tensor* const>(inputs.begin(), inputs.size()), std::move(attrs));
}

}  // namespace kiln::detail
