// One entry point for every op: record a node while tracing, or run it now. Eager layout
// ops become views of their input when the strides allow, as the API promises.
#include <algorithm>

#include "kiln/capture/autocast.h"
#include "kiln/capture/grad_mode.h"
#include "kiln/graph/error.h"
#include "kiln/eval/interpreter.h"
#include "kiln/target/target.h"
#include "target_driver.h"
#include "trace.h"

namespace kiln::detail {

namespace {

// The output meta of an op on concrete inputs, from the op table's shape rule.
TensorMeta infer_static(OpId op, std::span<const TensorData> inputs, const Attrs& attrs) {
  std::vector<TensorMeta> metas;
  std::vector<const TensorMeta*> ptrs;
  metas.reserve(inputs.size());
  for (const TensorData& d : inputs) metas.push_back(d.meta());
  for (const TensorMeta& m : metas) ptrs.push_back(&m);
  ShapeEnv env;
  return op_def(op).infer(InferContext{op, ptrs, attrs, env});
}

// Strides of a view of `in` for a layout op, or nullopt when the op needs a copy.
std::optional<TensorData> try_view(OpId op, const TensorData& in, const Attrs& attrs, const TensorMeta& out) {
  TensorData v = in;
  v.sizes = shape_hints(out.sizes);
  switch (op) {
    case OpId::reshape:
    case OpId::flatten:
      if (!in.is_contiguous()) return std::nullopt;
      v.strides = contiguous_strides(std::span<const int64_t>(v.sizes));
      return v;
    case OpId::permute: {
      const auto& dims = attrs.ints(0);
      for (size_t i = 0; i < dims.size(); ++i) v.strides[i] = in.strides[static_cast<size_t>(dims[i])];
      return v;
    }
    case OpId::transpose:
      std::swap(v.strides[static_cast<size_t>(attrs.i(0))], v.strides[static_cast<size_t>(attrs.i(1))]);
      return v;
    case OpId::expand: {
      const size_t lead = v.sizes.size() - in.sizes.size();
      v.strides.assign(v.sizes.size(), 0);
      for (size_t i = 0; i < in.sizes.size(); ++i)
        v.strides[lead + i] = in.sizes[i] == v.sizes[lead + i] ? in.strides[i] : 0;
      return v;
    }
    case OpId::squeeze: {
      v.strides.clear();
      const auto& dims = attrs.ints(0);
      for (size_t i = 0; i < in.sizes.size(); ++i)
        if (std::find(dims.begin(), dims.end(), static_cast<int64_t>(i)) == dims.end())
          v.strides.push_back(in.strides[i]);
      return v;
    }
    case OpId::unsqueeze: {
      const auto d = static_cast<size_t>(attrs.i(0));
      const int64_t stride = d < in.sizes.size() ? in.strides[d] * in.sizes[d] : 1;
      v.strides.insert(v.strides.begin() + static_cast<std::ptrdiff_t>(d), stride);
      return v;
    }
    case OpId::slice: {
      const auto d = static_cast<size_t>(attrs.i(0));
      const int64_t size = in.sizes[d];
      int64_t start = attrs.i(1);
      if (start < 0) start += size;
      start = std::clamp<int64_t>(start, 0, size);
      if (v.sizes[d] > 0) v.offset += start * in.strides[d];
      v.strides[d] = in.strides[d] * attrs.i(3);
      return v;
    }
    case OpId::unfold: {
      const auto d = static_cast<size_t>(attrs.i(0));
      v.strides[d] = in.strides[d] * attrs.i(2);
      v.strides.push_back(in.strides[d]);
      return v;
    }
    default:
      return std::nullopt;
  }
}

Tensor run_eager(OpId op, std::span<const Tensor* const> inputs, Attrs attrs) {
  std::vector<TensorData> in;
  in.reserve(inputs.size());
  for (const Tensor* t : inputs) {
    KILN_CHECK(t->defined(), op_name(op), ": an input tensor is undefined (default-constructed)");
    KILN_CHECK(!t->is_traced(), op_name(op), ": this tensor belongs to a trace that has ended; a traced tensor ",
               "escaped its compiled function (return it instead of storing it)");
    const TensorData& d = *t->impl()->data;
    if (d.device().type != DeviceType::cpu) {
      target::ensure_builtin_targets();
      const target::Runtime* rt = target::find_runtime(d.device().type);
      KILN_CHECK(rt != nullptr && rt->eager_policy().enabled, op_name(op), ": eager kernels do not run on ",
                 d.device().str(), " tensors (compile the function, or move them with to())");
    }
    in.push_back(d);
  }
  const TensorMeta out = infer_static(op, in, attrs);
  if (op_def(op).category == OpCategory::layout || op == OpId::flatten || op == OpId::transpose) {
    if (auto view = try_view(op, in[0], attrs, out)) return Tensor::from_data(std::move(*view));
  }
  // Compute ops run as compiled single-op kernels of their device's target (the same codegen as
  // compiled graphs) where its eager policy says so; the rest on the reference interpreter.
  if (auto r = eager(op, in, attrs, out)) return Tensor::from_data(std::move(*r));
  return Tensor::from_data(eval::eval_op(op, in, attrs));
}

// The type autocast's rule for `op` gives an input, or its own (kiln/capture/autocast.h):
// f32 inputs of the matmul family in the low type, bf16/f16 inputs of the f32 list in f32.
// Integers, bools and f64 are never cast (as torch.autocast).
DType autocast_input_type(AutocastRule rule, DType low, DType t) {
  const bool low_float = t == DType::bf16 || t == DType::f16;
  if (rule == AutocastRule::low && (t == DType::f32 || low_float)) return low;
  if (rule == AutocastRule::f32 && low_float) return DType::f32;
  return t;
}

// Whether autograd records this op: grad mode is on and an input requires gradients.
bool records_grad(std::span<const Tensor* const> inputs) {
  if (!grad_enabled()) return false;
  for (const Tensor* x : inputs)
    if (x->defined() && x->impl()->requires_grad) return true;
  return false;
}

Tensor cast_to(const Tensor& x, DType t) {
  const Tensor* in[] = {&x};
  return record_or_run(OpId::cast, in, Attrs{t});
}

// The op as given: a node of the trace, or run now; recorded for autograd where it must be.
Tensor record_or_run_here(OpId op, std::span<const Tensor* const> inputs, Attrs attrs) {
  std::shared_ptr<GradRecord> record;
  if (records_grad(inputs)) {
    record = std::make_shared<GradRecord>(GradRecord{op, attrs, {}});
    for (const Tensor* x : inputs) record->inputs.push_back(x->impl());
  }
  Tensor y;
  if (Trace* t = current_trace()) {
    std::vector<NodeId> ids;
    ids.reserve(inputs.size());
    for (const Tensor* x : inputs) ids.push_back(node_of(*t, *x, op_name(op)));
    const NodeId id = t->graph.add(op, std::move(ids), std::move(attrs));
    if (std::string name = scoped_name(op_name(op)); !name.empty()) t->graph.set_name(id, std::move(name));
    if (t->record_call_sites) record_call_site(*t, id);
    y = wrap_node(*t, id);
  } else {
    y = run_eager(op, inputs, std::move(attrs));
  }
  if (record && is_floating(y.dtype())) {
    y.impl()->requires_grad = true;
    y.impl()->grad_fn = std::move(record);
  }
  return y;
}

// An op's kiln::Error again, with the user's line that called the op: a shape rule names the op
// and what is wrong, this says where (the innermost op adds it; the ops around it keep it).
constexpr std::string_view kCalledAt = " (called at ";
[[noreturn]] void rethrow_with_call_site(const Error& e) {
  std::string message = e.what();
  if (message.find(kCalledAt) == std::string::npos)
    if (const std::string at = user_call_site_now(); !at.empty()) message += std::string(kCalledAt) + at + ")";
  throw Error(message);
}

}  // namespace

// A kiln::Error names the user's line that called the op (eager and traced alike).
Tensor record_or_run(OpId op, std::span<const Tensor* const> inputs, Attrs attrs) {
  try {
    return record_or_run_here(op, inputs, std::move(attrs));
  } catch (const Error& e) {
    rethrow_with_call_site(e);
  }
}

Tensor dispatch(OpId op, std::span<const Tensor* const> inputs, Attrs attrs) {
  const std::optional<DType> low = autocast_dtype();
  const AutocastRule rule = low ? autocast_rule(op) : AutocastRule::keep;
  if (rule == AutocastRule::keep) return record_or_run(op, inputs, std::move(attrs));
  // Autocast: the casts are made here, so eager calls and traces see the same ones.
  if (rule == AutocastRule::like_input) {
    const Tensor y = record_or_run(op, inputs, std::move(attrs));
    const DType in = inputs.empty() || !inputs[0]->defined() ? y.dtype() : inputs[0]->dtype();
    return (in == DType::bf16 || in == DType::f16) && y.dtype() != in ? cast_to(y, in) : y;
  }
  std::vector<Tensor> cast_inputs;
  cast_inputs.reserve(inputs.size());
  std::vector<const Tensor*> given(inputs.begin(), inputs.end());
  for (const Tensor*& x : given) {
    if (!x->defined()) continue;
    const DType want = autocast_input_type(rule, *low, x->dtype());
    if (want == x->dtype()) continue;
    cast_inputs.push_back(cast_to(*x, want));
    x = &cast_inputs.back();
  }
  return record_or_run(op, given, std::move(attrs));
}

}  // namespace kiln::detail
