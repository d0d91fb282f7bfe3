// The non-template core of kiln::compile: the cached fast path, misses (stances, limits,
// automatic dynamic), tracing a call into a graph, and graph-break segments.
#include "kiln/compile.h"

#include "kiln/capture/grad_mode.h"

#include <chrono>
#include <filesystem>
#include <ostream>
#include <sstream>

#include "kiln/capture/grad_mode.h"
#include "kiln/caches.h"
#include "kiln/config/config.h"
#include "kiln/config/log.h"
#include "kiln/format/graph_json.h"
#include "kiln/graph/error.h"
#include "kiln/passes/passes.h"
#include "kiln/eval/interpreter.h"
#include "call_gradients.h"
#include "debug_dump.h"
#include "device_move.h"
#include "target_driver.h"
#include "trace.h"

namespace kiln {

namespace {

// The reference interpreter reads and writes host memory: device inputs (of a graph no target
// takes, such as one with empty tensors) are copied to the host, and each output goes back to
// the device the graph says it lives on.
Executable reference_executable(Graph graph) {
  auto g = std::make_shared<const Graph>(std::move(graph));
  return [g](std::span<const TensorData* const> inputs) {
    std::vector<TensorData> values;
    values.reserve(inputs.size());
    for (const TensorData* t : inputs) values.push_back(detail::move_data(*t, Device::cpu()));
    std::vector<TensorData> outputs = eval::run_graph(*g, values);
    for (size_t i = 0; i < outputs.size(); ++i)
      outputs[i] = detail::move_data(outputs[i], g->node(g->outputs()[i]).meta.device);
    return outputs;
  };
}

void register_builtin_backends() {
  static const bool done = [] {
    // "eager" interprets the captured graph op by op: it checks capture alone.
    BackendRegistry::add("eager", [](const Graph& g, std::span<const TensorMeta>) { return reference_executable(g); });
    // "kiln" is the fusing compiler: the graph passes, then the scheduler and the target of
    // the inputs' device (sdk/target's registry); graphs no target takes run on the reference.
    BackendRegistry::add("kiln", [](const Graph& g, std::span<const TensorMeta>) {
      Graph optimised = passes::run_default_pipeline(g);
      Device device;
      if (target::Runtime* rt = detail::target_of(optimised, &device))
        return detail::target_executable(*rt, device, optimised);
      return reference_executable(std::move(optimised));
    });
    // "cudagraphs": eager kernels (no fusion) replayed as a CUDA graph, as torch.compile's: each
    // op its own kernel (what eager mode launches), recorded once and replayed.
    BackendRegistry::add("cudagraphs", [](const Graph& g, std::span<const TensorMeta>) -> Executable {
      target::ensure_builtin_targets();
      if (!target::find_runtime(DeviceType::cuda))
        fail("backend 'cudagraphs' needs a CUDA device, and this build of Kiln has no CUDA runtime "
             "(KILN_WITH_CUDA=OFF)");
      Graph optimised = passes::run_default_pipeline(g);
      Device device;
      target::Runtime* rt = detail::target_of(optimised, &device);
      KILN_CHECK(rt != nullptr && device.type == DeviceType::cuda, "backend 'cudagraphs' runs graphs whose inputs are ",
                 "all on one CUDA device (and not empty); use backend 'kiln' for others");
      config::Patch eager_kernels({{"fusion.max_fusion_size", int64_t{1}},
                                   {"fusion.epilogue_fusion", false},
                                   {"fusion.horizontal", false},
                                   {"cudagraphs", true},
                                   {"keep_buffers", true}});
      return detail::target_executable(*rt, device, optimised);
    });
    return true;
  }();
  (void)done;
}

detail::Outputs wrap_all(std::vector<TensorData>&& results) {
  detail::Outputs out;
  out.reserve(results.size());
  for (TensorData& d : results) out.push_back(Tensor::from_data(std::move(d)));
  return out;
}

detail::Outputs run_entry(const CompiledEntry& e, std::span<const ArgView> args) {
  constexpr size_t kSmall = 16;
  const size_t n = e.tensor_arg_of_input.size();
  const TensorData* small[kSmall];
  std::vector<const TensorData*> many;
  const TensorData** in = small;
  if (n > kSmall) {
    many.resize(n);
    in = many.data();
  }
  for (size_t k = 0; k < n; ++k) in[k] = args[static_cast<size_t>(e.tensor_arg_of_input[k])].tensor;
  return wrap_all(e.executable(std::span<const TensorData* const>(in, n)));
}

// Inputs of a new trace: one graph input per tensor argument, symbolic where planned.
std::vector<Tensor> begin_trace(detail::Trace& t, std::span<const ArgView> args,
                                const std::vector<std::vector<DimPlan>>& plan, const std::vector<std::string>& names) {
  std::vector<Tensor> traced(args.size());
  for (size_t a = 0; a < args.size(); ++a) {
    if (args[a].kind != ArgView::Kind::tensor) continue;
    const TensorData& data = *args[a].tensor;
    const std::string name = a < names.size() ? names[a] : "";
    TensorMeta meta = data.meta();
    for (size_t d = 0; d < meta.sizes.size(); ++d) {
      if (plan.empty() || !plan[a][d].dynamic) continue;
      const DimPlan& p = plan[a][d];
      const std::string source =
          "input " + std::to_string(a) + (name.empty() ? "" : " (" + name + ")") + " dim " + std::to_string(d);
      meta.sizes[d] = t.graph.shapes().create_symbol(data.sizes[d], p.min, p.max, source, p.user_dynamic);
    }
    if (!meta.strides.empty()) {
      KILN_CHECK(shape_is_static(meta.sizes), "input ", a, " is not contiguous and has dynamic dims; call ",
                 "contiguous() on it or mark its dims static");
    }
    const NodeId id = t.graph.add_input(std::move(meta), name);
    t.input_values.push_back(data);
    t.input_arg.push_back(static_cast<int32_t>(a));
    traced[a] = detail::wrap_node(t, id);
  }
  return traced;
}

}  // namespace

namespace detail {

std::string function_label(const std::source_location& loc) {
  return std::string(loc.function_name()) + " at " + std::filesystem::path(loc.file_name()).filename().string() + ":" +
         std::to_string(loc.line());
}

uint64_t map_keys_hash(uint64_t h, std::string_view key) {
  // Equal key lists give equal values, and a list that differs (a key renamed, added or
  // dropped) gives another with overwhelming probability.
  auto mix = [&h](unsigned char c) { h = (h ^ c) * 1099511628211ull; };
  for (int b = 0; b < 8; ++b) mix(static_cast<unsigned char>(key.size() >> (8 * b)));
  for (char c : key) mix(static_cast<unsigned char>(c));
  return h;
}

bool any_traced_arg(std::span<const ArgView> args) {
  for (const ArgView& a : args)
    if (a.kind == ArgView::Kind::tensor && a.tensor == nullptr) return true;
  return false;
}

std::string argument_name(const CompileOptions& options, size_t k) {
  return k < options.arg_names.size() && !options.arg_names[k].empty() ? options.arg_names[k] : "arg" + std::to_string(k);
}

std::string pytree_member_name(std::string_view member_list, size_t i) {
  // "&State::h, &ns::State::c": the i-th comma-separated entry, after its last "::".
  size_t at = 0;
  for (size_t j = 0; j < i; ++j) {
    at = member_list.find(',', at);
    if (at == std::string_view::npos) return std::to_string(i);
    ++at;
  }
  std::string_view m = member_list.substr(at, std::min(member_list.find(',', at), member_list.size()) - at);
  if (const size_t q = m.rfind("::"); q != std::string_view::npos) m = m.substr(q + 2);
  while (!m.empty() && (m.front() == ' ' || m.front() == '&')) m.remove_prefix(1);
  while (!m.empty() && m.back() == ' ') m.remove_suffix(1);
  return m.empty() ? std::to_string(i) : std::string(m);
}

Outputs call_compiled(FunctionCache& cache, std::span<const ArgView> args,
                      std::span<const std::vector<DimMark>* const> marks, FunctionRef<Outputs()> run_eager,
                      FunctionRef<Outputs(const Outputs&)> run_traced, std::shared_ptr<const void>* structure,
                      const FunctionRef<std::vector<std::string>()>* leaf_names) {
  // Inside another trace the function is inlined into that trace.
  if (cache.options().disable || current_trace() || any_traced_arg(args)) return run_eager();
  if (stance() == Stance::force_eager) {
    cache.count_eager_call();
    return run_eager();
  }
  // Arguments that require gradients: the call runs as a forward and a backward graph
  // (run_for_gradients), and its outputs record the call.
  bool for_gradients = false;
  for (const ArgView& a : args) for_gradients = for_gradients || (a.requires_grad && grad_enabled());
  KILN_CHECK(!for_gradients || !cache.segmented(), cache.name(), ": called on arguments that require gradients, and ",
             "it breaks its graph: differentiating a compiled call from outside needs one graph (remove the break, or ",
             "compute the gradients inside the function and return them)");
  register_builtin_backends();
  if (!cache.segmented()) {
    thread_local std::vector<int64_t> symbols;
    if (auto entry = cache.lookup(args, symbols)) {
      if (structure) *structure = entry->result_structure;
      return for_gradients ? detail::run_for_gradients(cache, entry, args) : run_entry(*entry, args);
    }
    if (cache.on_miss(args) == MissAction::run_eager) return run_eager();
  }

  Trace t;
  t.id = next_trace_id();
  t.cache = &cache;
  t.label = cache.name();
  t.fullgraph = cache.options().fullgraph;
  // Source lines for the dump (a stack walk per op: only when one is written).
  t.record_call_sites = !config::get<std::string>("debug_dir").empty() && call_sites_supported();
  // Segments are traced static: they are found by their whole graph.
  // The remote cache (plan_dims may read a dynamic-shape profile from it) and the CPU target's
  // one-time set-up, started while this thread traces.
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  detail::prepare_before_first_trace();
  const auto plan = cache.segmented() ? std::vector<std::vector<DimPlan>>{} : cache.plan_dims(args, marks);
  const std::vector<std::string> names = leaf_names ? (*leaf_names)() : cache.options().arg_names;
  Outputs result;
  {
    TraceScope scope(t);
    const Outputs traced = begin_trace(t, args, plan, names);
    result = run_traced(traced);
  }
  if (t.breaks == 0 && !cache.segmented()) {
    std::vector<NodeId> outputs;
    for (const Tensor& r : result) outputs.push_back(node_of(t, r, "return"));
    t.graph.set_outputs(outputs);
    auto graph = std::make_shared<Graph>(std::move(t.graph));
    // The device's libraries start loading beside the passes and the compile.
    Device device;
    const std::shared_ptr<void> device_setup = target_of(*graph, &device) ? start_device_setup(*graph, device) : nullptr;
    const auto t1 = Clock::now();
    DebugDump dump(cache);
    const CompileStats before = dump.active() ? dump.stats() : CompileStats{};
    auto entry = cache.add(graph, args, t.input_arg, names, structure ? *structure : nullptr, !for_gradients);
    const auto t2 = Clock::now();
    auto ms = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
    dump.write(*entry->graph, &entry->guards, {.kind = "first", .trace_ms = ms(t0, t1), .compile_ms = ms(t1, t2), .call_sites = &t.call_sites}, before);
    Outputs out = for_gradients ? detail::run_for_gradients(cache, entry, args) : run_entry(*entry, args);
    // Where a first call's time goes (the cold compile of kiln bench is this call).
    KILN_LOG(cache, "first call of ", cache.name(), ": trace ", ms(t0, t1), " ms, guards and compile ", ms(t1, t2),
             " ms, first run ", ms(t2, Clock::now()), " ms");
    return out;
  }
  // The function broke its graph: run the last segment and hand back concrete results.
  KILN_CHECK(!for_gradients, cache.name(), ": called on arguments that require gradients, and it breaks its graph (",
             t.breaks, " break(s)): differentiating a compiled call from outside needs one graph (remove the break, or ",
             "compute the gradients inside the function and return them)");
  {
    TraceScope scope(t);
    for (const Tensor& r : result) node_of(t, r, "return");  // returned constants join the last segment
    materialize(t);
  }
  if (t.compiled_segment) cache.count_graph_breaks(t.breaks);
  return result;
}

ExplainOutput explain_impl(std::span<const ArgView> args, FunctionRef<Outputs(const Outputs&)> run_traced) {
  KILN_CHECK(!any_traced_arg(args), "explain: arguments must be concrete tensors");
  register_builtin_backends();
  Trace t;
  t.id = next_trace_id();
  t.label = "explain";
  Outputs result;
  {
    TraceScope scope(t);
    const Outputs traced = begin_trace(t, args, {}, {});
    result = run_traced(traced);
    for (const Tensor& r : result) node_of(t, r, "return");
    materialize(t);
  }
  ExplainOutput e;
  e.graph_count = t.graph_count;
  e.graph_break_count = t.breaks;
  e.op_count = t.op_count;
  e.break_reasons = t.break_reasons;
  e.graphs = t.graphs;
  for (size_t i = 0; i < t.traced_graphs.size(); ++i) {
    const std::string prefix = t.traced_graphs.size() > 1 ? "graph " + std::to_string(i) + ": " : "";
    for (std::string& k : kernel_list(t.traced_graphs[i])) e.kernels.push_back(prefix + std::move(k));
  }
  e.kernel_count = static_cast<int64_t>(e.kernels.size());
  return e;
}

}  // namespace detail

std::string ExplainOutput::str() const {
  std::ostringstream out;
  out << "graphs: " << graph_count << "\ngraph breaks: " << graph_break_count << "\nops: " << op_count << "\n";
  out << "kernels (CPU, after fusion): " << kernel_count << "\n";
  if (!break_reasons.empty()) {
    out << "break reasons:\n";
    for (size_t i = 0; i < break_reasons.size(); ++i) out << "  " << i + 1 << ". " << break_reasons[i] << "\n";
  }
  for (size_t i = 0; i < graphs.size(); ++i) out << "graph " << i << ":\n" << graphs[i];
  if (!kernels.empty()) {
    out << "kernels:\n";
    for (const std::string& k : kernels) out << "  " << k << "\n";
  }
  return out.str();
}
std::ostream& operator<<(std::ostream& out, const ExplainOutput& e) { return out << e.str(); }

void reset() {
  reset_all_function_caches();
  detail::forget_training_pairs();
}

std::vector<std::string> list_backends() {
  register_builtin_backends();
  return BackendRegistry::names();
}

void register_backend(const std::string& name, Backend backend) {
  register_builtin_backends();
  BackendRegistry::add(name, std::move(backend));
}

bool is_compiling() { return detail::current_trace() != nullptr; }

void graph_break(std::source_location loc) {
  if (detail::Trace* t = detail::current_trace()) detail::break_graph(*t, "graph_break()", loc);
}

void mark_dynamic(const Tensor& x, int64_t dim, int64_t min, int64_t max) {
  KILN_CHECK(x.defined(), "mark_dynamic: the tensor is undefined");
  const int64_t d = normalize_dim(dim, x.rank(), "mark_dynamic");
  KILN_CHECK(min >= 0 && min <= max, "mark_dynamic: empty or negative range [", min, ", ", max, "]");
  auto& marks = x.impl()->marks;
  std::erase_if(marks, [&](const DimMark& m) { return m.dim == d; });
  marks.push_back({d, true, min, max});
}

void mark_static(const Tensor& x, int64_t dim) {
  KILN_CHECK(x.defined(), "mark_static: the tensor is undefined");
  const int64_t d = normalize_dim(dim, x.rank(), "mark_static");
  auto& marks = x.impl()->marks;
  std::erase_if(marks, [&](const DimMark& m) { return m.dim == d; });
  marks.push_back({d, false, 2, std::numeric_limits<int64_t>::max()});
}

}  // namespace kiln
