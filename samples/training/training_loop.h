// What the training samples share: a loop's record (loss, optional accuracy and time per step),
// its report for --mode compiled|eager, and --mode check's step-by-step comparison of the eager
// loop with the compiled one.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "../sample_util.h"

namespace kiln::samples {

// A model (any pytree of tensors) with every tensor moved to `device`.
template <class Model>
Model to_device(const Model& m, Device device) {
  std::vector<Tensor> leaves = tree_leaves(m);
  for (Tensor& t : leaves) t = t.to(device);
  return tree_replace(m, std::move(leaves));
}

// The eager loops' parameters: the model on `device` with its tensors made leaves that require
// gradients (the model to call), and those leaves (for the optimizer).
template <class Model>
std::pair<Model, std::vector<Tensor>> as_leaves(const Model& m, Device device) {
  std::vector<Tensor> params = tree_leaves(to_device(m, device));
  for (Tensor& p : params) p = p.detach().requires_grad_();
  return {tree_replace(m, params), params};
}

struct Loop {
  std::vector<double> losses, accuracies, step_ms;  // accuracies: empty where not measured
};

// The AdamW of the samples that train with it (train_gpt2, train_resnet) and of
// tools/models/bench_train.py's torch side: betas 0.9/0.95, weight decay 0.1 (decoupled).
inline const optim::AdamOptions kAdamW{.beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1,
                                       .decoupled = true};

// `steps` steps of a loop on `device`: next_batch() makes step k's batch (not timed), step(batch)
// runs the step and returns its loss; each step is timed up to the device's synchronisation.
template <class NextBatch, class Step>
Loop run_steps(int64_t steps, Device device, NextBatch&& next_batch, Step&& step) {
  Loop out;
  for (int64_t k = 0; k < steps; ++k) {
    const auto batch = next_batch();
    Tensor loss;
    out.step_ms.push_back(time_ms([&] {
      loss = step(batch);
      synchronize(device);
    }));
    out.losses.push_back(loss.detach().to(Device::cpu()).item<double>());
  }
  return out;
}

// One eager step, as torch's loop, of a model whose train(x) gives the logits in training mode
// and the model with its batch norms' running statistics updated (its parameters the same
// leaves, which `opt` holds): zero_grad, forward, cross-entropy, backward, the optimizer's step.
// Returns the loss and the logits; `model` becomes the updated one.
template <class Model, class Optimizer>
std::pair<Tensor, Tensor> eager_train_step(Model& model, Optimizer& opt, const Tensor& x, const Tensor& labels) {
  opt.zero_grad();
  auto [logits, next] = model.train(x);
  model = std::move(next);
  Tensor loss = cross_entropy(logits, labels);
  loss.backward();
  opt.step();
  return {std::move(loss), std::move(logits)};
}

// Each step, then the first step (trace and compile), the median of the steps after `warmup`
// and the final loss. Returns the exit code: 0 when the final loss is finite.
inline int report(const std::string& mode, const Loop& l, int64_t warmup) {
  for (size_t k = 0; k < l.losses.size(); ++k) {
    std::printf("step %zu: loss %.5f", k, l.losses[k]);
    if (k < l.accuracies.size()) std::printf(", accuracy %.2f", l.accuracies[k]);
    std::printf(", %.2f ms\n", l.step_ms[k]);
  }
  const auto skip = static_cast<std::ptrdiff_t>(std::min<size_t>(static_cast<size_t>(std::max<int64_t>(warmup, 0)),
                                                                  l.step_ms.size() - 1));
  const std::vector<double> steady(l.step_ms.begin() + skip, l.step_ms.end());
  std::printf("%s: first step %.1f ms, median step %.3f ms over %zu steps, final loss %.5f\n", mode.c_str(),
              l.step_ms[0], median(steady), steady.size(), l.losses.back());
  return std::isfinite(l.losses.back()) ? 0 : 1;
}

// The two loops' losses side by side: fails (exit code 1) when a step's differ by more than
// `tolerance` (relative) or the compiled loop's loss did not fall by 0.1.
inline int compare(const Loop& eager, const Loop& compiled, double tolerance) {
  bool ok = true;
  for (size_t k = 0; k < eager.losses.size(); ++k) {
    const double e = eager.losses[k], d = compiled.losses[k];
    const bool same = std::abs(e - d) <= tolerance * std::abs(e);
    ok = ok && same;
    std::printf("step %zu: loss eager %.5f, compiled %.5f", k, e, d);
    if (k < compiled.accuracies.size()) std::printf(", accuracy %.2f", compiled.accuracies[k]);
    std::printf("%s\n", same ? "" : "  <- differs");
  }
  const bool fell = compiled.losses.back() < compiled.losses.front() - 0.1;
  if (!fell) std::printf("the loss did not fall by 0.1 over %zu steps\n", compiled.losses.size());
  std::printf("%s\n", ok && fell ? "OK" : "FAILED");
  return ok && fell ? 0 : 1;
}

// --mode check's verdict: the whole compiled step's losses, then those of the loop whose forward
// and loss are compiled and differentiated from outside (`optimizer` stepping), each against
// the eager loop's (compare). Returns 0 when both agree.
inline int compare_both(const Loop& eager, const Loop& compiled, const Loop& outside, double tolerance,
                        const char* optimizer) {
  const int compiled_step = compare(eager, compiled, tolerance);
  std::printf("the forward and the loss compiled, differentiated from outside (backward(), %s):\n", optimizer);
  return compiled_step | compare(eager, outside, tolerance);
}

}  // namespace kiln::samples
