// kiln::optim: the optimizers of training loops (torch.optim's SGD, Adam and AdamW, and gradient
// clipping), in two forms over the same math:
//   - functional steps (sgd_step, adam_step): parameters, gradients and state in, new parameters
//     and state out, as tensor ops, so a compiled training step traces them with its forward and
//     backward and the update of every parameter fuses into that graph; the learning rate is a
//     0-d tensor, so changing it (a schedule) does not recompile;
//   - optimizer objects (SGD, AdamW) over parameters that require gradients, as torch's: step()
//     reads each parameter's grad() and replaces its values, zero_grad() clears the gradients.
//     step() runs one compiled graph for all parameters (the functional step under kiln::compile:
//     torch's fused/foreach optimizers), on the parameters' device.
// Parameters in f16/bf16 keep their optimizer state in f32 and are updated in f32, then rounded.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "kiln/compile.h"
#include "kiln/tensor.h"

namespace kiln::optim {

struct SGDOptions {
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;  // L2: weight_decay * p added to the gradient
  bool nesterov = false;
};

struct AdamOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  // true: AdamW's decoupled decay (p *= 1 - lr * weight_decay); false: Adam's L2 in the gradient.
  bool decoupled = false;
};

// The momentum buffers (empty without momentum) and the number of steps taken (an f32 0-d
// tensor: an input of a compiled step, not a guarded scalar).
struct SGDState {
  std::vector<Tensor> momentum;
  Tensor step;
  static SGDState init(const std::vector<Tensor>& params, const SGDOptions& options);
};

// First and second moments per parameter, and the number of steps taken.
struct AdamState {
  std::vector<Tensor> m;
  std::vector<Tensor> v;
  Tensor step;
  static AdamState init(const std::vector<Tensor>& params);
};

// One step for every parameter; `lr` is a 0-d floating tensor. Gradients are given per
// parameter (an undefined one: that parameter is left as it is).
std::pair<std::vector<Tensor>, SGDState> sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                                                  const SGDState& state, const Tensor& lr, const SGDOptions& options);
std::pair<std::vector<Tensor>, AdamState> adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                                                    const AdamState& state, const Tensor& lr, const AdamOptions& options);

// torch.nn.utils.clip_grad_norm_: the gradients scaled by min(1, max_norm / (norm + 1e-6)), where
// norm is their global L2 norm, and that norm (a 0-d f32 tensor).
std::pair<std::vector<Tensor>, Tensor> clip_grad_norm(const std::vector<Tensor>& grads, double max_norm);

// Loss scaling for f16 training (torch.amp.GradScaler): the loss is multiplied by a scale before
// backward, so small gradients survive f16's range; the gradients are divided by it again, and a
// step whose gradients hold an inf or NaN is skipped and the scale halved; after growth_interval
// finite steps in a row the scale doubles. The state is tensors (a compiled step takes it as an
// input and returns the next one, without recompiling or syncing with the host).
struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};
struct GradScalerState {
  Tensor scale;           // f32 0-d
  Tensor growth_tracker;  // f32 0-d: finite steps since the scale last changed
  static GradScalerState init(const GradScalerOptions& options = {}, Device device = Device::cpu());
};
// The gradients divided by the scale, and whether any of them holds an inf or NaN (bool 0-d).
std::pair<std::vector<Tensor>, Tensor> unscale(const std::vector<Tensor>& grads, const GradScalerState& state);
// `updated` where `skip` is false, else `kept` (a step's parameters or optimizer state).
std::vector<Tensor> unless(const Tensor& skip, const std::vector<Tensor>& updated, const std::vector<Tensor>& kept);
// The state after a step that found (or did not find) non-finite gradients.
GradScalerState update_scale(const GradScalerState& state, const Tensor& found_inf, const GradScalerOptions& options = {});

// An optimizer over parameters that require gradients (leaves; the tensors themselves are
// updated, as torch's optimizers update theirs).
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Reads each parameter's grad() and replaces the parameters' values; parameters without a
  // gradient are left as they are.
  virtual void step() = 0;
  void zero_grad() const;  // clears every parameter's grad()
  double lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }  // takes effect at the next step, without recompiling
  const std::vector<Tensor>& params() const { return params_; }

 protected:
  Optimizer(std::vector<Tensor> params, double lr);
  // The gradients (an undefined tensor where a parameter has none) and the learning rate as a
  // 0-d tensor on the parameters' device.
  std::vector<Tensor> grads() const;
  Tensor lr_tensor() const;
  // Gives each parameter the values of `updated` (same shapes and dtypes), keeping its identity.
  void assign(const std::vector<Tensor>& updated) const;
  std::vector<Tensor> params_;
  double lr_;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, double lr, SGDOptions options = {});
  void step() override;
  const SGDState& state() const { return state_; }

 private:
  SGDOptions options_;
  SGDState state_;
  std::function<std::pair<std::vector<Tensor>, SGDState>(const std::vector<Tensor>&, const std::vector<Tensor>&,
                                                         const SGDState&, const Tensor&)>
      compiled_;
};

// Adam, or AdamW with options.decoupled (AdamW below sets it, with torch's default decay 0.01).
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, double lr, AdamOptions options = {});
  void step() override;
  const AdamState& state() const { return state_; }

 private:
  AdamOptions options_;
  AdamState state_;
  std::function<std::pair<std::vector<Tensor>, AdamState>(const std::vector<Tensor>&, const std::vector<Tensor>&,
                                                          const AdamState&, const Tensor&)>
      compiled_;
};

class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, double lr, AdamOptions options = {.weight_decay = 0.01, .decoupled = true});
};

// torch.amp.GradScaler over an optimizer object: scale(loss).backward(); step(opt) unscales the
// gradients and steps unless one is not finite (a host sync, as torch's); update() adjusts the scale.
class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {}, Device device = Device::cpu());
  Tensor scale(const Tensor& loss) const;
  // Divides each parameter's grad() by the scale; steps unless one is inf or NaN. Returns
  // whether it stepped.
  bool step(Optimizer& optimizer);
  void update();
  double scale_value() const;
  const GradScalerState& state() const { return state_; }

 private:
  GradScalerOptions options_;
  GradScalerState state_;
  Tensor found_inf_;
};

}  // namespace kiln::optim

KILN_PYTREE(kiln::optim::SGDState, &kiln::optim::SGDState::momentum, &kiln::optim::SGDState::step);
KILN_PYTREE(kiln::optim::GradScalerState, &kiln::optim::GradScalerState::scale,
            &kiln::optim::GradScalerState::growth_tracker);
KILN_PYTREE(kiln::optim::AdamState, &kiln::optim::AdamState::m, &kiln::optim::AdamState::v,
            &kiln::optim::AdamState::step);
