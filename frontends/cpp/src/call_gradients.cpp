// A compiled call differentiated from outside (torch's AOTAutograd): call_gradients.h.
#include "call_gradients.h"

#include <map>
#include <mutex>

#include "kiln/autodiff/autodiff.h"
#include "kiln/graph/error.h"
#include "kiln/passes/passes.h"
#include "kiln/schedule/schedule.h"
#include "target_driver.h"

namespace kiln::detail {

namespace {

struct TrainingPair {
  Executable forward, backward;  // backward empty: no output depends on an input requiring gradients
  size_t outputs = 0;                // the function's own outputs (the forward's first ones)
  std::vector<int32_t> grads_of;     // backward output k: the gradient of graph input grads_of[k]
  std::vector<bool> seeded;          // per output: a gradient input in the backward (floating)
  std::vector<int32_t> given_results;  // the forward's results the backward takes, after the inputs
  std::vector<int32_t> wrt_slot;     // per graph input: its place among those requiring gradients, or -1
  size_t wrt_count = 0;
  // Per output, per input requiring gradients: whether the output depends on it. An input that
  // only outputs without a gradient depend on gets none (undefined, as torch's None), not zeros.
  std::vector<std::vector<bool>> reaches;
};

// The joint graph a call's forward and backward are cut from: the forward's nodes, its inputs
// first, before `boundary`; the gradients' inputs and nodes after.
struct Joint {
  Graph graph;
  NodeId boundary = 0;
  std::vector<NodeId> inputs, outputs;  // the forward's
  std::vector<NodeId> grad_inputs;      // one per seeded output
  std::vector<NodeId> grads;            // per input requiring gradients (-1: no output depends on it)
};

// A copy of node `n` appended to `out` over `inputs` (its own, mapped): an input in argument
// order, or the op with its attributes and name.
NodeId copy_node(Graph& out, const Node& n, std::vector<NodeId> inputs) {
  if (n.op == OpId::input) return out.add_input(n.meta, n.name);
  const NodeId to = out.add(n.op, std::move(inputs), n.attrs);
  if (!n.name.empty()) out.set_name(to, n.name);
  return to;
}

// The target's schedule for the call's device, where the "kiln" backend compiles it.
std::optional<schedule::Target> schedule_target(const FunctionCache& cache, const Graph& g) {
  if (cache.options().backend != "kiln") return std::nullopt;
  Device device;
  target::Runtime* rt = target_of(g, &device);
  const target::Codegen* codegen = rt ? target::find_codegen(rt->name()) : nullptr;
  if (!codegen) return std::nullopt;
  return codegen->capabilities(rt->codegen_request(device));
}

// `j` on the layout the target's schedule would give it (schedule::channels_last_layout), where
// that differs: its nodes reordered so that the forward's inputs and every node that no
// gradient input reaches come first (the forward's part), then the gradient inputs and the rest.
// So a value the backward reads is stored as the forward computes it (channels last), and the
// permutes back to the graph's layout move into the backward, where they cancel.
std::optional<Joint> laid_out(const Joint& j, const schedule::Target& target) {
  Graph marked = j.graph;
  std::vector<NodeId> roots = j.outputs;
  for (NodeId g : j.grads)
    if (g >= 0) roots.push_back(g);
  marked.set_outputs(roots);
  const std::optional<Graph> laid = schedule::channels_last_layout(marked, target);
  if (!laid) return std::nullopt;
  const Graph& l = *laid;
  const auto forward_inputs = static_cast<int64_t>(j.inputs.size());
  // Per node of l: reached from a gradient input.
  std::vector<char> late(l.size(), 0);
  for (NodeId id = 0; id < static_cast<NodeId>(l.size()); ++id) {
    const Node& n = l.node(id);
    bool r = n.op == OpId::input && n.attrs.i(0) >= forward_inputs;
    for (NodeId i : n.inputs) r = r || late[static_cast<size_t>(i)];
    late[static_cast<size_t>(id)] = r;
  }
  Joint out;
  out.graph.shapes() = l.shapes();
  std::vector<NodeId> map(l.size(), -1);
  auto copy = [&](NodeId id) {
    std::vector<NodeId> ins;
    for (NodeId i : l.node(id).inputs) ins.push_back(map[static_cast<size_t>(i)]);
    map[static_cast<size_t>(id)] = copy_node(out.graph, l.node(id), std::move(ins));
  };
  // Inputs in argument order: the forward's, then the gradients'.
  std::vector<NodeId> inputs(l.inputs().size(), -1);
  for (NodeId i : l.inputs()) inputs[static_cast<size_t>(l.node(i).attrs.i(0))] = i;
  for (int64_t k = 0; k < forward_inputs; ++k) copy(inputs[static_cast<size_t>(k)]);
  for (NodeId id = 0; id < static_cast<NodeId>(l.size()); ++id)
    if (l.node(id).op != OpId::input && !late[static_cast<size_t>(id)]) copy(id);
  out.boundary = static_cast<NodeId>(out.graph.size());
  for (size_t k = static_cast<size_t>(forward_inputs); k < inputs.size(); ++k) copy(inputs[k]);
  for (NodeId id = 0; id < static_cast<NodeId>(l.size()); ++id)
    if (l.node(id).op != OpId::input && late[static_cast<size_t>(id)]) copy(id);
  for (int64_t k = 0; k < forward_inputs; ++k) out.inputs.push_back(map[static_cast<size_t>(inputs[static_cast<size_t>(k)])]);
  for (size_t k = static_cast<size_t>(forward_inputs); k < inputs.size(); ++k) out.grad_inputs.push_back(map[static_cast<size_t>(inputs[k])]);
  size_t next = 0;
  for (size_t k = 0; k < j.outputs.size(); ++k) out.outputs.push_back(map[static_cast<size_t>(l.outputs()[next++])]);
  for (NodeId g : j.grads) out.grads.push_back(g >= 0 ? map[static_cast<size_t>(l.outputs()[next++])] : NodeId{-1});
  out.graph.set_outputs(out.outputs);
  return out;
}

// The nodes of `g` before `end` as a graph of their own, returning `outputs`.
Graph prefix(const Graph& g, NodeId end, std::vector<NodeId> outputs) {
  Graph out;
  out.shapes() = g.shapes();
  for (NodeId id = 0; id < end; ++id) copy_node(out, g.node(id), g.node(id).inputs);
  out.set_outputs(std::move(outputs));
  return out;
}

std::shared_ptr<TrainingPair> make_training_pair(FunctionCache& cache, const CompiledEntry& entry,
                                                 const std::vector<bool>& wrt) {
  const std::string& name = cache.name();
  const Graph& forward = *entry.graph;
  Graph joint = forward;
  const NodeId boundary = static_cast<NodeId>(joint.size());
  const std::vector<autodiff::Step> steps = autodiff::steps_of(forward);
  auto pair = std::make_shared<TrainingPair>();
  pair->outputs = forward.outputs().size();
  std::vector<autodiff::Seed> seeds;
  std::vector<NodeId> grad_inputs;
  for (NodeId o : forward.outputs()) {
    const TensorMeta& m = forward.node(o).meta;
    const bool seeded = autodiff::differentiable(m.dtype);
    pair->seeded.push_back(seeded);
    if (!seeded) continue;
    TensorMeta gm = m;
    gm.strides.clear();
    grad_inputs.push_back(joint.add_input(gm, "grad_output"));
    seeds.push_back(autodiff::Seed{o, grad_inputs.back()});
  }
  std::vector<NodeId> wrt_nodes;
  pair->wrt_slot.assign(forward.inputs().size(), -1);
  for (size_t k = 0; k < forward.inputs().size(); ++k)
    if (wrt[k]) {
      pair->wrt_slot[k] = static_cast<int32_t>(pair->wrt_count++);
      wrt_nodes.push_back(forward.inputs()[k]);
      pair->grads_of.push_back(static_cast<int32_t>(k));
    }
  {
    std::vector<std::vector<bool>> reach(forward.size());
    for (NodeId id = 0; id < static_cast<NodeId>(forward.size()); ++id) {
      std::vector<bool>& r = reach[static_cast<size_t>(id)];
      r.assign(pair->wrt_count, false);
      const Node& n = forward.node(id);
      if (n.op == OpId::input) {
        const int32_t slot = pair->wrt_slot[static_cast<size_t>(n.attrs.i(0))];
        if (slot >= 0) r[static_cast<size_t>(slot)] = true;
      }
      for (NodeId i : n.inputs)
        for (size_t k = 0; k < r.size(); ++k) r[k] = r[k] || reach[static_cast<size_t>(i)][k];
    }
    for (NodeId o : forward.outputs()) pair->reaches.push_back(reach[static_cast<size_t>(o)]);
  }
  Joint j;
  j.grads = autodiff::gradients(joint, steps, seeds, wrt_nodes);
  j.boundary = boundary;
  j.inputs = forward.inputs();
  j.outputs = forward.outputs();
  j.grad_inputs = grad_inputs;
  j.graph = std::move(joint);
  if (const std::optional<schedule::Target> target = schedule_target(cache, forward))
    if (std::optional<Joint> l = laid_out(j, *target)) j = std::move(*l);
  const std::vector<NodeId> stored = passes::partition_stored(j.graph, j.boundary, name);

  // The forward: the function's outputs, then the stored values.
  std::vector<NodeId> fwd_outputs = j.outputs;
  fwd_outputs.insert(fwd_outputs.end(), stored.begin(), stored.end());
  const Graph fwd = prefix(j.graph, j.boundary, std::move(fwd_outputs));

  // The backward: inputs for what it is given, then the nodes the gradients need.
  Graph bwd;
  bwd.shapes() = j.graph.shapes();
  std::vector<NodeId> map(j.graph.size(), -1);
  auto given = [&](NodeId id) {
    if (map[static_cast<size_t>(id)] >= 0) return false;
    TensorMeta m = j.graph.node(id).meta;
    m.strides.clear();
    map[static_cast<size_t>(id)] = bwd.add_input(std::move(m), j.graph.node(id).name);
    return true;
  };
  // (Generated outputs are computed again: their metas say cpu, where they meet device tensors.)
  const std::vector<bool> generated = passes::generated_only(j.graph);
  for (NodeId i : j.inputs) given(i);
  for (size_t k = 0; k < j.outputs.size(); ++k) {
    const NodeId o = j.outputs[k];
    if (!generated[static_cast<size_t>(o)] && given(o)) pair->given_results.push_back(static_cast<int32_t>(k));
  }
  for (size_t k = 0; k < stored.size(); ++k)
    if (given(stored[k])) pair->given_results.push_back(static_cast<int32_t>(j.outputs.size() + k));
  for (NodeId gi : j.grad_inputs) given(gi);
  std::vector<char> is_given(j.graph.size(), 0);
  for (size_t id = 0; id < j.graph.size(); ++id) is_given[id] = map[id] >= 0;
  const std::vector<char> needed = needed_nodes(j.graph, j.grads, is_given);
  for (NodeId id = 0; id < static_cast<NodeId>(j.graph.size()); ++id) {
    if (!needed[static_cast<size_t>(id)] || is_given[static_cast<size_t>(id)]) continue;
    const Node& n = j.graph.node(id);
    // A forward value the backward computes again: the cut leaves only cheap ops and sources.
    KILN_INTERNAL_CHECK(id >= j.boundary || n.op != OpId::input, "the backward of ", name, " needs forward input %", id,
                        " that it is not given");
    std::vector<NodeId> ins;
    for (NodeId i : n.inputs) ins.push_back(map[static_cast<size_t>(i)]);
    map[static_cast<size_t>(id)] = copy_node(bwd, n, std::move(ins));
  }
  std::vector<NodeId> bwd_outputs;
  std::vector<int32_t> grads_of;
  for (size_t k = 0; k < j.grads.size(); ++k) {
    if (j.grads[k] < 0) continue;  // the outputs do not depend on that input
    bwd_outputs.push_back(map[static_cast<size_t>(j.grads[k])]);
    grads_of.push_back(pair->grads_of[k]);
  }
  pair->grads_of = std::move(grads_of);
  bwd.set_outputs(bwd_outputs);

  // As the cache compiles its entries: the graphs' input metas as the backend's example.
  auto metas = [](const Graph& g) {
    std::vector<TensorMeta> m;
    for (NodeId i : g.inputs()) m.push_back(g.node(i).meta);
    return m;
  };
  // Nothing stored: the forward is the entry's own graph, compiled already.
  pair->forward = stored.empty() ? entry.executable : cache.compile_graph(fwd, metas(fwd));
  if (!bwd_outputs.empty()) pair->backward = cache.compile_graph(bwd, metas(bwd));
  return pair;
}

// Training pairs by forward graph and the inputs that require gradients (kiln::reset clears them).
struct TrainingPairs {
  std::mutex mu;
  std::map<std::pair<const Graph*, std::vector<bool>>, std::pair<std::shared_ptr<const Graph>, std::shared_ptr<TrainingPair>>>
      pairs;
};
TrainingPairs& training_pairs() {
  static TrainingPairs p;
  return p;
}

}  // namespace

// Runs `e`'s call for autograd: the forward graph with its stored values, and on each floating
// output a record of the call whose backward runs the backward graph.
Outputs run_for_gradients(FunctionCache& cache, const std::shared_ptr<const CompiledEntry>& e,
                                  std::span<const ArgView> args) {
  const Graph& g = *e->graph;
  const size_t n = e->tensor_arg_of_input.size();
  std::vector<bool> wrt(n, false);
  std::vector<std::shared_ptr<detail::TensorImpl>> wrt_impls;
  std::vector<TensorData> inputs;
  for (size_t k = 0; k < n; ++k) {
    const ArgView& a = args[static_cast<size_t>(e->tensor_arg_of_input[k])];
    inputs.push_back(*a.tensor);
    wrt[k] = a.requires_grad && autodiff::differentiable(a.tensor->dtype);
  }
  std::shared_ptr<TrainingPair> pair;
  {
    TrainingPairs& all = training_pairs();
    std::lock_guard<std::mutex> lock(all.mu);
    auto& slot = all.pairs[{&g, wrt}];
    if (!slot.second) slot = {e->graph, make_training_pair(cache, *e, wrt)};
    pair = slot.second;
  }
  std::vector<const TensorData*> ptrs;
  for (const TensorData& t : inputs) ptrs.push_back(&t);
  std::vector<TensorData> results = pair->forward(std::span<const TensorData* const>(ptrs));
  // The backward's given values: the forward's inputs and outputs and the stored values.
  auto given = std::make_shared<std::vector<TensorData>>(std::move(inputs));
  for (int32_t k : pair->given_results) given->push_back(results[static_cast<size_t>(k)]);
  results.resize(pair->outputs);
  Outputs out;
  for (TensorData& r : results) out.push_back(Tensor::from_data(std::move(r)));
  if (!pair->backward) return out;  // no output depends on an input that requires gradients

  auto call = std::make_shared<detail::CompiledCall>();
  call->outputs = out.size();
  std::vector<TensorMeta> out_meta;
  for (const Tensor& t : out) out_meta.push_back(t.data().meta());
  call->backward = [pair, given, out_meta, label = cache.name()](const std::vector<std::shared_ptr<detail::TensorImpl>>& gout) {
    std::vector<TensorData> grads;  // one per seeded output; zeros where no gradient reached it
    for (size_t k = 0; k < gout.size(); ++k) {
      if (!pair->seeded[k]) continue;
      if (gout[k]) {
        const Tensor gk(gout[k]);
        KILN_CHECK(!gk.is_traced(), label, ": the backward of a compiled call got a traced gradient");
        grads.push_back(gk.contiguous().data());
      } else {
        grads.push_back(zeros(out_meta[k].sizes, out_meta[k].dtype, out_meta[k].device).data());
      }
    }
    std::vector<const TensorData*> ptrs;
    for (const TensorData& t : *given) ptrs.push_back(&t);
    for (const TensorData& t : grads) ptrs.push_back(&t);
    std::vector<TensorData> r = pair->backward(std::span<const TensorData* const>(ptrs));
    // One per input of the records: the inputs that require gradients, in graph input order.
    std::vector<std::shared_ptr<detail::TensorImpl>> per_input(pair->wrt_count);
    for (size_t j = 0; j < pair->grads_of.size(); ++j) {
      const size_t slot = static_cast<size_t>(pair->wrt_slot[static_cast<size_t>(pair->grads_of[j])]);
      bool reached = false;
      for (size_t k = 0; k < gout.size(); ++k) reached = reached || (gout[k] && pair->reaches[k][slot]);
      if (reached) per_input[slot] = Tensor::from_data(std::move(r[j])).impl();
    }
    return per_input;
  };
  for (size_t k = 0; k < n; ++k)
    if (wrt[k]) wrt_impls.push_back(std::static_pointer_cast<detail::TensorImpl>(
                    args[static_cast<size_t>(e->tensor_arg_of_input[k])].grad_owner));
  for (size_t k = 0; k < out.size(); ++k) {
    if (!pair->seeded[k]) continue;
    const std::shared_ptr<detail::TensorImpl>& impl = out[k].impl();
    impl->requires_grad = true;
    auto record = std::make_shared<detail::GradRecord>();
    record->inputs = wrt_impls;
    record->call = call;
    record->output = static_cast<int32_t>(k);
    impl->grad_fn = std::move(record);
  }
  return out;
}

void forget_training_pairs() {
  TrainingPairs& all = training_pairs();
  std::lock_guard<std::mutex> lock(all.mu);
  all.pairs.clear();
}

}  // namespace kiln::detail
