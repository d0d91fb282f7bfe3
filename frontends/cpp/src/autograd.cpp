// The autograd engine: the recorded ops reachable from the differentiated outputs become steps
// over a scratch graph whose inputs are the tensors involved; sdk/autodiff appends the gradient
// nodes; the nodes the wanted gradients need are then replayed through the op dispatch, so
// they run eagerly on concrete tensors and are traced into the current graph on traced ones
// (a traced value of an earlier segment enters as that segment's output, as any value does).
#include "kiln/autograd.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "kiln/autodiff/autodiff.h"
#include "kiln/graph/error.h"
#include "kiln/ops.h"
#include "trace.h"

namespace kiln {

namespace {

using Impl = std::shared_ptr<detail::TensorImpl>;

bool from_call(const Impl& impl) { return impl->grad_fn && impl->grad_fn->call; }

// The tensors computed by recorded ops that lead to `roots`, inputs before their users; an
// explicit stack, so a deep chain of ops does not exhaust the C++ stack. With `stop_at_calls`
// a compiled call's outputs end the walk (they are neither listed nor walked through).
std::vector<Impl> recorded_order(const std::vector<Impl>& roots, bool stop_at_calls = false) {
  std::vector<Impl> order;
  std::unordered_set<const detail::TensorImpl*> seen;
  std::vector<std::pair<Impl, size_t>> stack;
  for (const Impl& r : roots) {
    if (!r->grad_fn || (stop_at_calls && from_call(r)) || !seen.insert(r.get()).second) continue;
    stack.emplace_back(r, 0);
    while (!stack.empty()) {
      auto& [impl, next] = stack.back();
      const auto& inputs = impl->grad_fn->inputs;
      if (next < inputs.size()) {
        const Impl& in = inputs[next++];
        if (in->requires_grad && in->grad_fn && !(stop_at_calls && from_call(in)) && seen.insert(in.get()).second)
          stack.emplace_back(in, 0);
        continue;
      }
      order.push_back(impl);
      stack.pop_back();
    }
  }
  return order;
}

// The scratch graph: one input per tensor involved, bound to that tensor.
struct Scratch {
  Graph graph;
  Device device;  // the outputs'
  std::vector<Tensor> bound;
  std::unordered_map<const detail::TensorImpl*, NodeId> nodes;

  NodeId value(const Impl& impl) {
    if (const auto it = nodes.find(impl.get()); it != nodes.end()) return it->second;
    TensorMeta meta = impl->meta;
    // The replay reads the tensor itself; the graph needs only sizes, and one device (a host
    // constant a trace captured, as an attention mask, meets device values as generated ones do).
    meta.strides.clear();
    meta.device = device;
    const NodeId id = graph.add_input(std::move(meta));
    bound.emplace_back(impl);
    nodes.emplace(impl.get(), id);
    return id;
  }
};

// Runs the nodes of `g` that `wanted` needs through the op dispatch, inputs bound to `bound`.
std::vector<Tensor> replay(const Graph& g, const std::vector<Tensor>& bound, const std::vector<NodeId>& wanted,
                           Device device) {
  const std::vector<char> needed = needed_nodes(g, wanted);
  const bool traced = detail::current_trace() != nullptr;
  std::vector<Tensor> values(g.size());
  for (size_t id = 0; id < g.size(); ++id) {
    if (!needed[id]) continue;
    const Node& n = g.node(static_cast<NodeId>(id));
    if (n.op == OpId::input) {
      values[id] = bound[static_cast<size_t>(n.attrs.i(0))];
      continue;
    }
    std::vector<const Tensor*> in;
    for (NodeId i : n.inputs) in.push_back(&values[static_cast<size_t>(i)]);
    Tensor v = detail::record_or_run(n.op, in, n.attrs);
    // Eagerly, a generated block (zeros, a one-hot's iota) is made on the host: it joins the
    // tensors it meets on their device. (0-d values join any device; traced ones have none.)
    if (!traced && n.inputs.empty() && v.rank() > 0 && v.device() != device) v = v.to(device);
    values[id] = std::move(v);
  }
  std::vector<Tensor> out;
  for (NodeId w : wanted) out.push_back(w >= 0 ? values[static_cast<size_t>(w)] : Tensor());
  return out;
}

std::string meta_str(const Tensor& t) { return t.meta().str(); }

// The gradients of `outputs` (weighted by `grad_outputs`) with respect to `wrt` through recorded
// ops, up to compiled calls' outputs (which may be among `wrt`): undefined where no recorded op
// connects them.
std::vector<Tensor> plain_backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
                                   const std::vector<Impl>& wrt, bool create_graph, std::string_view who) {
  std::vector<Impl> roots;
  for (const Tensor& o : outputs) roots.push_back(o.impl());
  Scratch s;
  s.device = outputs[0].device();
  detail::Trace* trace = detail::current_trace();
  size_t facts_before = 0;
  if (trace) {
    // Symbolic sizes refer to the trace's symbols; what the rules decide about them goes back.
    s.graph.shapes() = trace->graph.shapes();
    facts_before = s.graph.shapes().facts().size();
  }
  std::vector<autodiff::Step> steps;
  for (const Impl& impl : recorded_order(roots, true)) {
    autodiff::Step step{impl->grad_fn->op, impl->grad_fn->attrs, {}, -1};
    for (const Impl& in : impl->grad_fn->inputs) step.inputs.push_back(s.value(in));
    step.output = s.value(impl);
    steps.push_back(std::move(step));
  }
  std::vector<autodiff::Seed> seeds;
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Tensor& o = outputs[k];
    const Tensor given = grad_outputs.empty() ? Tensor() : grad_outputs[k];
    NodeId g;
    if (given.defined()) {
      KILN_CHECK(given.shape() == o.shape(), who, ": the gradient of output ", k, " is ", meta_str(given),
                 " but the output is ", meta_str(o), "; they must have the same shape");
      g = s.value(given.impl());
    } else {
      const SymInt n = o.numel();
      KILN_CHECK(n == 1, who, ": output ", k, " is ", meta_str(o), ", not a single element: pass its gradient ",
                 "(d loss / d output, of its shape)");
      g = s.graph.add(OpId::full, {}, Attrs{o.shape(), 1.0, o.dtype()});
    }
    seeds.push_back(autodiff::Seed{s.value(o.impl()), g});
  }
  std::vector<NodeId> wrt_nodes;
  for (const Impl& w : wrt) wrt_nodes.push_back(s.value(w));
  const std::vector<NodeId> grads = autodiff::gradients(s.graph, steps, seeds, wrt_nodes);
  if (trace)
    for (size_t f = facts_before; f < s.graph.shapes().facts().size(); ++f)
      trace->graph.shapes().add_fact(s.graph.shapes().facts()[f]);
  NoGrad mode(create_graph);
  return replay(s.graph, s.bound, grads, outputs[0].device());
}

// The gradients of `outputs` with respect to `wrt` where compiled calls made from outside may lie
// between them: the recorded ops from the outputs down to the calls' outputs first (one scratch
// graph), then each call, users before what they use (a call's outputs come after its inputs in
// recorded_order, so decreasing first-output position), its compiled backward given the
// gradients its outputs gathered, and the recorded ops below it from its inputs. Gradients are
// linear in the seeds, so the passes' results add up.
std::vector<Tensor> run_backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
                                 const std::vector<Impl>& wrt, bool create_graph, std::string_view who) {
  KILN_CHECK(!outputs.empty(), who, ": no outputs to differentiate");
  KILN_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(), who, ": ", grad_outputs.size(),
             " grad_outputs for ", outputs.size(), " outputs");
  std::vector<Impl> roots;
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Tensor& o = outputs[k];
    KILN_CHECK(o.defined(), who, ": output ", k, " is undefined");
    KILN_CHECK(o.requires_grad(), who, ": output ", k, " (", meta_str(o), ") does not require gradients: no tensor ",
               "it was computed from requires them (call requires_grad_() on the leaves first, outside kiln::NoGrad)");
    const Tensor given = k < grad_outputs.size() ? grad_outputs[k] : Tensor();
    KILN_CHECK(!given.defined() || given.shape() == o.shape(), who, ": the gradient of output ", k, " is ",
               meta_str(given), " but the output is ", meta_str(o), "; they must have the same shape");
    roots.push_back(o.impl());
  }
  const std::vector<Impl> order = recorded_order(roots);
  // The calls, each with its outputs by index, and its first output's position.
  struct Call {
    const detail::CompiledCall* call = nullptr;
    const detail::GradRecord* record = nullptr;  // one of its outputs' (they share the inputs)
    std::vector<Impl> outputs;
    size_t first = 0;
  };
  std::vector<Call> calls;
  std::unordered_map<const detail::CompiledCall*, size_t> call_index;
  for (size_t pos = 0; pos < order.size(); ++pos) {
    const Impl& impl = order[pos];
    if (!from_call(impl)) continue;
    const detail::CompiledCall* c = impl->grad_fn->call.get();
    auto [it, fresh] = call_index.emplace(c, calls.size());
    if (fresh) calls.push_back(Call{c, impl->grad_fn.get(), std::vector<Impl>(c->outputs), pos});
    calls[it->second].outputs[static_cast<size_t>(impl->grad_fn->output)] = impl;
  }
  if (calls.empty()) return plain_backward(outputs, grad_outputs, wrt, create_graph, who);
  KILN_CHECK(!create_graph, who, ": create_graph through the output of a compiled call (", calls.front().outputs.size(),
             " outputs): its backward is compiled and records nothing to differentiate again; call the function "
             "eagerly (kiln::set_stance(Stance::force_eager) or CompileOptions::disable) for gradients of gradients");
  KILN_CHECK(detail::current_trace() == nullptr, who, ": inside a compiled function, a gradient reaches the output of "
             "a compiled call made outside it; pass that output in as an argument");

  // Gradients gathered per tensor: the wanted ones and the calls' outputs.
  std::unordered_map<const detail::TensorImpl*, Tensor> gathered;
  std::unordered_set<const detail::TensorImpl*> wanted;
  for (const Impl& w : wrt) wanted.insert(w.get());
  auto gather = [&](const Impl& at, const Tensor& g) {
    if (!g.defined()) return;
    Tensor& slot = gathered[at.get()];
    slot = slot.defined() ? add(slot, g) : g;
  };
  // One pass through recorded ops from `from` (weighted by `grads`) down to the wanted tensors
  // and the calls' outputs.
  auto pass = [&](const std::vector<Tensor>& from, const std::vector<Tensor>& grads) {
    std::vector<Tensor> roots_left, grads_left;
    for (size_t k = 0; k < from.size(); ++k) {
      const Impl& r = from[k].impl();
      // A leaf or a call's output takes its gradient as it is (a leaf nobody wants, none);
      // through recorded ops, the scratch graph's pass gives it to the wanted tensors (a wanted
      // root among them).
      if (!r->grad_fn || from_call(r)) {
        if (!wanted.count(r.get()) && !from_call(r)) continue;
        Tensor g = grads[k];
        if (!g.defined()) {
          KILN_CHECK(from[k].numel() == 1, who, ": output ", k, " is ", meta_str(from[k]),
                     ", not a single element: pass its gradient (d loss / d output, of its shape)");
          g = full(from[k].shape(), 1.0, from[k].dtype(), from[k].device());
        }
        gather(r, g);
        continue;
      }
      roots_left.push_back(from[k]);
      grads_left.push_back(grads[k]);
    }
    if (roots_left.empty()) return;
    std::vector<Impl> targets, below;
    std::unordered_set<const detail::TensorImpl*> targeted;
    for (const Impl& w : wrt)
      if (targeted.insert(w.get()).second) targets.push_back(w);
    for (const Tensor& t : roots_left) below.push_back(t.impl());
    for (const Impl& impl : recorded_order(below, true))
      for (const Impl& in : impl->grad_fn->inputs)
        if (from_call(in) && targeted.insert(in.get()).second) targets.push_back(in);  // once, however often read
    const std::vector<Tensor> g = plain_backward(roots_left, grads_left, targets, false, who);
    for (size_t k = 0; k < targets.size(); ++k) gather(targets[k], g[k]);
  };
  std::vector<Tensor> seeds = grad_outputs;
  seeds.resize(outputs.size());
  pass(outputs, seeds);
  std::sort(calls.begin(), calls.end(), [](const Call& a, const Call& b) { return a.first > b.first; });
  for (const Call& c : calls) {
    std::vector<Impl> grads_out(c.outputs.size());
    bool any = false;
    for (size_t k = 0; k < c.outputs.size(); ++k)
      if (c.outputs[k]) {
        if (const auto it = gathered.find(c.outputs[k].get()); it != gathered.end()) {
          grads_out[k] = it->second.impl();
          any = true;
        }
      }
    if (!any) continue;
    const std::vector<Impl> grads_in = c.call->backward(grads_out);
    std::vector<Tensor> from, grads;
    for (size_t k = 0; k < grads_in.size(); ++k)
      if (grads_in[k]) {
        from.emplace_back(c.record->inputs[k]);
        grads.emplace_back(grads_in[k]);
      }
    pass(from, grads);
  }
  std::vector<Tensor> result;
  for (const Impl& w : wrt) {
    const auto it = gathered.find(w.get());
    result.push_back(it == gathered.end() ? Tensor() : it->second);
  }
  return result;
}

}  // namespace

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const GradOptions& options) {
  std::vector<Impl> wrt;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    KILN_CHECK(x.defined(), "grad: input ", k, " is undefined");
    KILN_CHECK(x.requires_grad(), "grad: input ", k, " (", meta_str(x), ") does not require gradients; call ",
               "requires_grad_() on it before computing the outputs from it");
    wrt.push_back(x.impl());
  }
  std::vector<Tensor> out = run_backward(outputs, options.grad_outputs, wrt, options.create_graph, "grad");
  for (size_t k = 0; k < out.size(); ++k) {
    KILN_CHECK(out[k].defined() || options.allow_unused, "grad: input ", k, " (", meta_str(inputs[k]),
               ") is not used to compute the outputs (GradOptions::allow_unused gives an undefined tensor instead)");
  }
  return out;
}

const Tensor& Tensor::requires_grad_(bool on) const {
  KILN_CHECK(impl_ != nullptr, "requires_grad_(): the tensor is undefined (default-constructed)");
  KILN_CHECK(!on || is_floating(dtype()), "requires_grad_(): only floating tensors can require gradients, not ",
             meta().str());
  KILN_CHECK(impl_->grad_fn == nullptr, "requires_grad_(): this tensor was computed by recorded ops, so it already ",
             "requires gradients; only leaves can be marked (use detach() for a new leaf)");
  impl_->requires_grad = on;
  return *this;
}

bool Tensor::requires_grad() const { return impl_ && impl_->requires_grad; }
bool Tensor::is_leaf() const { return !impl_ || impl_->grad_fn == nullptr; }
Tensor Tensor::grad() const { return impl_ && impl_->grad ? Tensor(impl_->grad) : Tensor(); }

void Tensor::set_grad(const Tensor& g) const {
  KILN_CHECK(impl_ != nullptr, "set_grad(): the tensor is undefined (default-constructed)");
  KILN_CHECK(!g.defined() || g.shape() == shape(), "set_grad(): the gradient is ", g.defined() ? g.meta().str() : "",
             " but the tensor is ", meta().str());
  impl_->grad = g.impl();
}

void Tensor::backward(const Tensor& gradient, bool create_graph) const {
  KILN_CHECK(impl_ != nullptr, "backward(): the tensor is undefined (default-constructed)");
  // The leaves this depends on: the inputs of recorded ops that are marked and not computed.
  std::vector<Impl> leaves;
  std::unordered_set<const detail::TensorImpl*> seen;
  if (impl_->requires_grad && !impl_->grad_fn) leaves.push_back(impl_);
  for (const Impl& impl : recorded_order({impl_}))
    for (const Impl& in : impl->grad_fn->inputs)
      if (in->requires_grad && !in->grad_fn && seen.insert(in.get()).second) leaves.push_back(in);
  const detail::Trace* trace = detail::current_trace();
  for (const Impl& leaf : leaves) {
    // A captured tensor is a constant of the graph: its gradient would be a traced value that
    // outlives the trace.
    KILN_CHECK(!trace || leaf->trace_id == trace->id || leaf->from_break, "backward() in ", trace ? trace->label : "",
               ": a gradient reaches ", leaf->meta.str(), ", a tensor captured from outside the compiled function's ",
               "arguments; pass it as an argument (and return kiln::grad's result) to differentiate with respect to it");
  }
  const std::vector<Tensor> grads =
      run_backward({*this}, {gradient}, leaves, create_graph, "backward()");
  NoGrad mode(create_graph);
  for (size_t k = 0; k < leaves.size(); ++k) {
    if (!grads[k].defined()) continue;
    const Tensor old = leaves[k]->grad ? Tensor(leaves[k]->grad) : Tensor();
    leaves[k]->grad = (old.defined() ? add(old, grads[k]) : grads[k]).impl();
  }
}

Tensor Tensor::detach() const {
  KILN_CHECK(impl_ != nullptr, "detach(): the tensor is undefined (default-constructed)");
  if (is_traced()) {
    // A traced value is one node: the detached one is a view of it with nothing recorded.
    NoGrad mode;
    return kiln::reshape(*this, shape());
  }
  auto impl = std::make_shared<detail::TensorImpl>();
  impl->meta = impl_->meta;
  impl->data = impl_->data;
  impl->from_break = impl_->from_break;
  return Tensor(std::move(impl));
}

}  // namespace kiln
