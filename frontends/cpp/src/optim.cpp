// The optimizers' math as tensor ops (traced into compiled steps like any op), and the
// optimizer objects that run it as one compiled graph over all their parameters.
#include "kiln/optim.h"

#include <cmath>

#include "kiln/autograd.h"
#include "kiln/graph/error.h"
#include "kiln/ops.h"

namespace kiln::optim {

namespace {

// Optimizer math runs in f32 for f16/bf16 parameters (their state is f32), else in their type.
DType math_type(DType t) { return t == DType::f16 || t == DType::bf16 ? DType::f32 : t; }

void check_lists(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const Tensor& lr,
                 std::string_view who) {
  KILN_CHECK(params.size() == grads.size(), who, ": ", grads.size(), " gradients for ", params.size(), " parameters");
  KILN_CHECK(lr.defined() && lr.rank() == 0 && is_floating(lr.dtype()), who,
             ": the learning rate must be a 0-d floating tensor (so changing it does not recompile)");
  for (size_t k = 0; k < params.size(); ++k) {
    KILN_CHECK(params[k].defined() && is_floating(params[k].dtype()), who, ": parameter ", k,
               " must be a floating tensor");
    KILN_CHECK(!grads[k].defined() || grads[k].shape() == params[k].shape(), who, ": the gradient of parameter ", k,
               " is ", grads[k].defined() ? grads[k].meta().str() : "", " but the parameter is ", params[k].meta().str());
  }
}

Tensor state_zeros(const Tensor& p) { return zeros_like(p).to(math_type(p.dtype())); }

}  // namespace

SGDState SGDState::init(const std::vector<Tensor>& params, const SGDOptions& options) {
  NoGrad off;
  SGDState s;
  if (options.momentum != 0.0)
    for (const Tensor& p : params) s.momentum.push_back(state_zeros(p));
  s.step = full({}, 0.0, DType::f32, params.empty() ? Device::cpu() : params[0].device());
  return s;
}

AdamState AdamState::init(const std::vector<Tensor>& params) {
  NoGrad off;
  AdamState s;
  for (const Tensor& p : params) {
    s.m.push_back(state_zeros(p));
    s.v.push_back(state_zeros(p));
  }
  s.step = full({}, 0.0, DType::f32, params.empty() ? Device::cpu() : params[0].device());
  return s;
}

std::pair<std::vector<Tensor>, SGDState> sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                                                  const SGDState& state, const Tensor& lr, const SGDOptions& o) {
  check_lists(params, grads, lr, "sgd_step");
  KILN_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0), "sgd_step: nesterov needs momentum and no dampening");
  const bool momentum = o.momentum != 0.0;
  KILN_CHECK(!momentum || state.momentum.size() == params.size(), "sgd_step: the state has ", state.momentum.size(),
             " momentum buffers for ", params.size(), " parameters (SGDState::init makes them)");
  NoGrad off;
  SGDState next = state;
  next.step = state.step + 1.0;
  // torch's first step takes the gradient itself as the buffer (no dampening).
  const Tensor first = eq(state.step, 0.0);
  std::vector<Tensor> out = params;
  for (size_t k = 0; k < params.size(); ++k) {
    if (!grads[k].defined()) continue;
    const DType t = math_type(params[k].dtype());
    const Tensor p = params[k].to(t);
    Tensor g = grads[k].to(t);
    if (o.weight_decay != 0.0) g = g + p * o.weight_decay;
    if (momentum) {
      const Tensor buf = where(first, g, state.momentum[k] * o.momentum + g * (1.0 - o.dampening));
      next.momentum[k] = buf;
      g = o.nesterov ? g + buf * o.momentum : buf;
    }
    out[k] = (p - g * lr.to(t)).to(params[k].dtype());
  }
  return {std::move(out), std::move(next)};
}

std::pair<std::vector<Tensor>, AdamState> adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                                                    const AdamState& state, const Tensor& lr, const AdamOptions& o) {
  check_lists(params, grads, lr, "adam_step");
  KILN_CHECK(state.m.size() == params.size() && state.v.size() == params.size(), "adam_step: the state has moments for ",
             state.m.size(), " parameters, not ", params.size(), " (AdamState::init makes them)");
  NoGrad off;
  AdamState next = state;
  next.step = state.step + 1.0;
  // Bias corrections 1 - beta^t, from the step count (a tensor: no recompile per step).
  const Tensor c1 = 1.0 - pow(o.beta1, next.step);
  const Tensor c2 = 1.0 - pow(o.beta2, next.step);
  std::vector<Tensor> out = params;
  for (size_t k = 0; k < params.size(); ++k) {
    if (!grads[k].defined()) continue;
    const DType t = math_type(params[k].dtype());
    const Tensor rate = lr.to(t);
    Tensor p = params[k].to(t);
    Tensor g = grads[k].to(t);
    if (o.weight_decay != 0.0) {
      if (o.decoupled) p = p * (1.0 - rate * o.weight_decay);
      else g = g + p * o.weight_decay;
    }
    const Tensor m = state.m[k] * o.beta1 + g * (1.0 - o.beta1);
    const Tensor v = state.v[k] * o.beta2 + g * g * (1.0 - o.beta2);
    next.m[k] = m;
    next.v[k] = v;
    const Tensor denom = sqrt(v / c2.to(t)) + o.eps;
    out[k] = (p - rate * (m / c1.to(t)) / denom).to(params[k].dtype());
  }
  return {std::move(out), std::move(next)};
}

std::pair<std::vector<Tensor>, Tensor> clip_grad_norm(const std::vector<Tensor>& grads, double max_norm) {
  KILN_CHECK(max_norm > 0, "clip_grad_norm: max_norm must be positive, got ", max_norm);
  NoGrad off;
  Tensor total;
  for (const Tensor& g : grads) {
    if (!g.defined()) continue;
    const Tensor f = g.to(DType::f32);
    const Tensor sq = sum(f * f);
    total = total.defined() ? total + sq : sq;
  }
  if (!total.defined()) return {grads, scalar_tensor(0.0)};
  const Tensor norm = sqrt(total);
  const Tensor scale = minimum(1.0, max_norm / (norm + 1e-6));
  std::vector<Tensor> out = grads;
  for (Tensor& g : out)
    if (g.defined()) g = (g.to(DType::f32) * scale).to(g.dtype());
  return {std::move(out), norm};
}

GradScalerState GradScalerState::init(const GradScalerOptions& o, Device device) {
  KILN_CHECK(o.init_scale > 0 && o.growth_factor > 1 && o.backoff_factor > 0 && o.backoff_factor < 1 &&
                 o.growth_interval >= 1,
             "GradScaler: init_scale > 0, growth_factor > 1, 0 < backoff_factor < 1 and growth_interval >= 1, got ",
             o.init_scale, ", ", o.growth_factor, ", ", o.backoff_factor, ", ", o.growth_interval);
  NoGrad off;
  return {full({}, o.init_scale, DType::f32, device), full({}, 0.0, DType::f32, device)};
}

std::pair<std::vector<Tensor>, Tensor> unscale(const std::vector<Tensor>& grads, const GradScalerState& state) {
  NoGrad off;
  const Tensor inv = reciprocal(state.scale);
  std::vector<Tensor> out = grads;
  // sum(g * 0) is 0 for finite gradients and NaN where one holds an inf or NaN.
  Tensor probe = scalar_tensor(0.0);
  for (Tensor& g : out) {
    if (!g.defined()) continue;
    const Tensor f = g.to(DType::f32);
    probe = probe + sum(f * 0.0);
    g = (f * inv).to(g.dtype());
  }
  return {std::move(out), isnan(probe)};
}

std::vector<Tensor> unless(const Tensor& skip, const std::vector<Tensor>& updated, const std::vector<Tensor>& kept) {
  KILN_CHECK(updated.size() == kept.size(), "unless: ", updated.size(), " updated tensors for ", kept.size(), " kept");
  NoGrad off;
  std::vector<Tensor> out;
  for (size_t k = 0; k < updated.size(); ++k) out.push_back(where(skip, kept[k], updated[k]));
  return out;
}

GradScalerState update_scale(const GradScalerState& s, const Tensor& found_inf, const GradScalerOptions& o) {
  NoGrad off;
  const Tensor grown = s.growth_tracker + 1.0;
  const Tensor grow = grown >= static_cast<double>(o.growth_interval);
  GradScalerState next;
  next.scale = where(found_inf, s.scale * o.backoff_factor, where(grow, s.scale * o.growth_factor, s.scale));
  next.growth_tracker = where(logical_or(found_inf, grow), 0.0, grown);
  return next;
}

GradScaler::GradScaler(GradScalerOptions options, Device device)
    : options_(options), state_(GradScalerState::init(options, device)) {}

Tensor GradScaler::scale(const Tensor& loss) const { return loss * state_.scale.to(loss.dtype()); }

bool GradScaler::step(Optimizer& optimizer) {
  NoGrad off;
  const std::vector<Tensor>& params = optimizer.params();
  std::vector<Tensor> grads;
  for (const Tensor& p : params) grads.push_back(p.grad());
  auto [unscaled, found] = unscale(grads, state_);
  found_inf_ = found;
  if (found.to(Device::cpu()).item<bool>()) return false;
  for (size_t k = 0; k < params.size(); ++k)
    if (unscaled[k].defined()) params[k].set_grad(unscaled[k]);
  optimizer.step();
  return true;
}

void GradScaler::update() {
  KILN_CHECK(found_inf_.defined(), "GradScaler::update: call step() first");
  state_ = update_scale(state_, found_inf_, options_);
  found_inf_ = Tensor();
}

double GradScaler::scale_value() const { return state_.scale.to(Device::cpu()).item<double>(); }

Optimizer::Optimizer(std::vector<Tensor> params, double lr) : params_(std::move(params)), lr_(lr) {
  for (size_t k = 0; k < params_.size(); ++k) {
    const Tensor& p = params_[k];
    KILN_CHECK(p.defined() && p.requires_grad() && p.is_leaf(), "optimizer: parameter ", k,
               " must be a leaf that requires gradients (call requires_grad_() on it)");
    KILN_CHECK(p.device() == params_[0].device(), "optimizer: parameter ", k, " is on ", p.device().str(),
               " but parameter 0 on ", params_[0].device().str());
  }
}

void Optimizer::zero_grad() const {
  for (const Tensor& p : params_) p.set_grad({});
}

std::vector<Tensor> Optimizer::grads() const {
  std::vector<Tensor> out;
  for (const Tensor& p : params_) out.push_back(p.grad());
  return out;
}

Tensor Optimizer::lr_tensor() const {
  return full({}, lr_, DType::f32, params_.empty() ? Device::cpu() : params_[0].device());
}

void Optimizer::assign(const std::vector<Tensor>& updated) const {
  for (size_t k = 0; k < params_.size(); ++k) {
    const auto& impl = params_[k].impl();
    KILN_INTERNAL_CHECK(updated[k].shape() == impl->meta.sizes && updated[k].dtype() == impl->meta.dtype,
                        "optimizer: an update changed a parameter's shape or dtype");
    impl->data = updated[k].data();
    impl->meta = impl->data->meta();
  }
}

namespace {

// The parameters that have gradients, and their indices: the compiled step takes only those,
// so a parameter without one neither changes nor breaks the step's signature.
struct WithGrads {
  std::vector<size_t> index;
  std::vector<Tensor> params, grads;
  WithGrads(const std::vector<Tensor>& params_in, const std::vector<Tensor>& grads_in) {
    for (size_t k = 0; k < params_in.size(); ++k) {
      if (!grads_in[k].defined()) continue;
      index.push_back(k);
      params.push_back(params_in[k].detach());
      grads.push_back(grads_in[k].detach());
    }
  }
  template <class T>
  std::vector<Tensor> pick(const std::vector<T>& all) const {
    std::vector<Tensor> out;
    for (size_t k : index) out.push_back(all[k]);
    return out;
  }
  void put(std::vector<Tensor>& all, const std::vector<Tensor>& some) const {
    for (size_t i = 0; i < index.size(); ++i) all[index[i]] = some[i];
  }
};

}  // namespace

SGD::SGD(std::vector<Tensor> params, double lr, SGDOptions options)
    : Optimizer(std::move(params), lr), options_(options), state_(SGDState::init(params_, options)) {
  compiled_ = kiln::compile(
      [o = options_](const std::vector<Tensor>& p, const std::vector<Tensor>& g, const SGDState& s, const Tensor& lr) {
        return sgd_step(p, g, s, lr, o);
      });
}

void SGD::step() {
  NoGrad off;
  const WithGrads w(params_, grads());
  if (w.index.empty()) return;
  SGDState some{options_.momentum != 0.0 ? w.pick(state_.momentum) : std::vector<Tensor>{}, state_.step};
  auto [updated, next] = compiled_(w.params, w.grads, some, lr_tensor());
  std::vector<Tensor> all = params_;
  w.put(all, updated);
  if (options_.momentum != 0.0) w.put(state_.momentum, next.momentum);
  state_.step = next.step;
  assign(all);
}

Adam::Adam(std::vector<Tensor> params, double lr, AdamOptions options)
    : Optimizer(std::move(params), lr), options_(options), state_(AdamState::init(params_)) {
  compiled_ = kiln::compile(
      [o = options_](const std::vector<Tensor>& p, const std::vector<Tensor>& g, const AdamState& s, const Tensor& lr) {
        return adam_step(p, g, s, lr, o);
      });
}

void Adam::step() {
  NoGrad off;
  const WithGrads w(params_, grads());
  if (w.index.empty()) return;
  auto [updated, next] = compiled_(w.params, w.grads, AdamState{w.pick(state_.m), w.pick(state_.v), state_.step}, lr_tensor());
  std::vector<Tensor> all = params_;
  w.put(all, updated);
  w.put(state_.m, next.m);
  w.put(state_.v, next.v);
  state_.step = next.step;
  assign(all);
}

AdamW::AdamW(std::vector<Tensor> params, double lr, AdamOptions options) : Adam(std::move(params), lr, options) {}

}  // namespace kiln::optim
