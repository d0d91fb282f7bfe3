// kiln::optim (kiln/optim.h): the functional steps against the update rules written out here in
// doubles (torch's formulas), the optimizer objects against the functional steps, training that
// converges, a compiled training step whose losses match the eager loop's, and bad input.
#include "helpers.h"

#include <cmath>

using namespace kiln;
using namespace frontend_test;

namespace {

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

Tensor f64v(const std::vector<double>& v) { return from_vector(v); }

}  // namespace

BOOST_AUTO_TEST_SUITE(optim_functional)

// Two steps of Adam and AdamW against their formulas: m, v, bias corrections, decay.
BOOST_AUTO_TEST_CASE(adam_and_adamw_follow_their_formulas) {
  for (bool decoupled : {false, true}) {
    BOOST_TEST_CONTEXT("decoupled " << decoupled) {
      const optim::AdamOptions o{.beta1 = 0.8, .beta2 = 0.9, .eps = 1e-3, .weight_decay = 0.1, .decoupled = decoupled};
      std::vector<double> p{1.0, -2.0, 0.5}, m(3, 0.0), v(3, 0.0);
      const std::vector<std::vector<double>> g{{0.3, -0.1, 2.0}, {-0.5, 0.2, 1.0}};
      const double lr = 0.05;
      std::vector<Tensor> params{f64v(p)};
      optim::AdamState state = optim::AdamState::init(params);
      for (int t = 1; t <= 2; ++t) {
        auto [np, ns] = optim::adam_step(params, {f64v(g[t - 1])}, state, scalar_tensor(lr, DType::f64), o);
        for (size_t i = 0; i < 3; ++i) {
          double gi = g[t - 1][i];
          if (decoupled) p[i] *= 1 - lr * o.weight_decay;
          else gi += o.weight_decay * p[i];
          m[i] = o.beta1 * m[i] + (1 - o.beta1) * gi;
          v[i] = o.beta2 * v[i] + (1 - o.beta2) * gi * gi;
          const double mh = m[i] / (1 - std::pow(o.beta1, t)), vh = v[i] / (1 - std::pow(o.beta2, t));
          p[i] -= lr * mh / (std::sqrt(vh) + o.eps);
        }
        check_values(np[0], p, 1e-6);
        check_values(ns.m[0], m, 1e-6);
        check_values(ns.v[0], v, 1e-6);
        check_values(ns.step, {static_cast<double>(t)});
        params = np;
        state = ns;
      }
    }
  }
}

// SGD with momentum: torch's first step takes the gradient as the buffer (no dampening); nesterov.
BOOST_AUTO_TEST_CASE(sgd_follows_its_formulas) {
  for (bool nesterov : {false, true}) {
    BOOST_TEST_CONTEXT("nesterov " << nesterov) {
      const optim::SGDOptions o{.momentum = 0.9, .dampening = nesterov ? 0.0 : 0.25, .weight_decay = 0.01,
                                .nesterov = nesterov};
      std::vector<double> p{1.0, -2.0}, buf(2, 0.0);
      const std::vector<std::vector<double>> g{{0.3, -0.1}, {-0.5, 0.2}, {0.1, 0.1}};
      std::vector<Tensor> params{f64v(p)};
      optim::SGDState state = optim::SGDState::init(params, o);
      for (int t = 0; t < 3; ++t) {
        auto [np, ns] = optim::sgd_step(params, {f64v(g[t])}, state, scalar_tensor(0.1), o);
        for (size_t i = 0; i < 2; ++i) {
          double gi = g[t][i] + o.weight_decay * p[i];
          buf[i] = t == 0 ? gi : o.momentum * buf[i] + (1 - o.dampening) * gi;
          p[i] -= 0.1 * (nesterov ? gi + o.momentum * buf[i] : buf[i]);
        }
        check_values(np[0], p, 1e-6);
        check_values(ns.momentum[0], buf, 1e-6);
        params = np;
        state = ns;
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(clipping_scales_to_the_global_norm) {
  const auto [clipped, norm] = optim::clip_grad_norm({f32({3, 0}), f32({0, 4})}, 1.0);
  check_values(norm, {5});
  check_values(clipped[0], {0.6, 0}, 1e-5);
  check_values(clipped[1], {0, 0.8}, 1e-5);
  const auto [kept, small] = optim::clip_grad_norm({f32({0.3f, 0.4f})}, 1.0);
  check_values(kept[0], {0.3, 0.4}, 1e-5);
}

// bf16 parameters: f32 state, the update computed in f32 and rounded once.
BOOST_AUTO_TEST_CASE(low_precision_parameters_keep_f32_state) {
  const std::vector<Tensor> params{f32({1, 2}).to(DType::bf16)};
  const optim::AdamState s = optim::AdamState::init(params);
  BOOST_TEST(s.m[0].dtype() == DType::f32);
  const auto [np, ns] = optim::adam_step(params, {f32({0.5f, -0.5f}).to(DType::bf16)}, s, scalar_tensor(0.1),
                                         optim::AdamOptions{});
  BOOST_TEST(np[0].dtype() == DType::bf16);
  check_values(np[0], {0.8984375, 2.09375}, 1e-6);  // 0.9 and 2.1 rounded to bf16
}

// The scaler's state machine: a non-finite gradient skips the step and halves the scale; after
// growth_interval finite steps the scale doubles; unscale divides by the scale.
BOOST_AUTO_TEST_CASE(loss_scaling_follows_torchs_grad_scaler) {
  const optim::GradScalerOptions o{.init_scale = 8.0, .growth_interval = 2};
  optim::GradScalerState s = optim::GradScalerState::init(o);
  const auto [g, found] = optim::unscale({f32({8, -16}), Tensor()}, s);
  check_values(g[0], {1, -2});
  BOOST_TEST(!g[1].defined());
  BOOST_TEST(!found.item<bool>());
  const auto [bad, found_bad] = optim::unscale({f32({1, INFINITY})}, s);
  BOOST_TEST(found_bad.item<bool>());
  BOOST_TEST(optim::unscale({f32({NAN, 1})}, s).second.item<bool>());
  // Skipped step: parameters kept, scale halved, tracker reset.
  const std::vector<Tensor> kept = optim::unless(found_bad, {f32({5, 5})}, {f32({1, 2})});
  check_values(kept[0], {1, 2});
  s = optim::update_scale(s, found_bad, o);
  check_values(s.scale, {4});
  // Two finite steps: the scale doubles on the second.
  s = optim::update_scale(s, found, o);
  check_values(s.scale, {4});
  check_values(s.growth_tracker, {1});
  s = optim::update_scale(s, found, o);
  check_values(s.scale, {8});
  check_values(s.growth_tracker, {0});
}

// f16 parameters trained with the scaler object: steps whose gradients overflow are skipped
// (the scale backs off from 2^24 until they fit), then the regression fits.
BOOST_AUTO_TEST_CASE(f16_training_with_loss_scaling) {
  const Tensor x = randn({32, 3}, DType::f32, Device::cpu(), 5);
  const Tensor y = matmul(x, f32({1, -2, 0.5f}, {3, 1}));
  const Tensor w = zeros({3, 1}, DType::f16).requires_grad_();
  optim::SGD opt({w}, 0.05, {.momentum = 0.9});
  optim::GradScaler scaler({.init_scale = 16777216.0, .growth_interval = 1000});
  int skipped = 0;
  double last = 0;
  for (int step = 0; step < 120; ++step) {
    opt.zero_grad();
    const Tensor d = matmul(x.to(DType::f16), w) - y.to(DType::f16);
    const Tensor loss = mean(d * d);
    scaler.scale(loss).backward();
    skipped += !scaler.step(opt);
    scaler.update();
    last = loss.item<double>();
  }
  BOOST_TEST(skipped >= 1);               // 2^24 * the first gradients overflow f16
  BOOST_TEST(scaler.scale_value() < 16777216.0);
  BOOST_TEST(last < 1e-2, "final loss " << last);
  check_values(w.to(DType::f32), {1, -2, 0.5}, 0.05);
}

BOOST_AUTO_TEST_CASE(bad_input_says_what_is_wrong) {
  const std::vector<Tensor> params{f32({1, 2})};
  const optim::AdamState s = optim::AdamState::init(params);
  BOOST_TEST(contains(error_of([&] { optim::adam_step(params, {f32({1, 2, 3})}, s, scalar_tensor(0.1), {}); }),
                      "the gradient of parameter 0"));
  BOOST_TEST(contains(error_of([&] { optim::adam_step(params, {f32({1, 2})}, s, f32({0.1f}), {}); }),
                      "must be a 0-d floating tensor"));
  BOOST_TEST(contains(error_of([&] { optim::AdamW({f32({1, 2})}, 0.1); }), "must be a leaf that requires gradients"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(optim_training)

namespace {

// y = x @ w_true + b_true + noise, fitted by a linear layer.
struct Regression {
  Tensor x, y;
  Regression() {
    x = randn({64, 5}, DType::f32, Device::cpu(), 1);
    const Tensor w = f32({0.5f, -1.0f, 2.0f, 0.0f, 0.25f}, {5, 1});
    y = matmul(x, w) + 0.3 + randn({64, 1}, DType::f32, Device::cpu(), 2) * 0.01;
  }
  Tensor loss(const Tensor& w, const Tensor& b) const {
    const Tensor d = matmul(x, w) + b - y;
    return mean(d * d);
  }
};

}  // namespace

// The optimizer objects drive a regression's loss to its noise floor, and a learning-rate change
// between steps takes effect.
BOOST_AUTO_TEST_CASE(optimizers_fit_a_regression) {
  const Regression r;
  for (int which = 0; which < 2; ++which) {
    BOOST_TEST_CONTEXT((which == 0 ? "SGD" : "AdamW")) {
      const Tensor w = zeros({5, 1}).requires_grad_(), b = zeros({1}).requires_grad_();
      std::unique_ptr<optim::Optimizer> opt;
      if (which == 0) opt = std::make_unique<optim::SGD>(std::vector<Tensor>{w, b}, 0.1, optim::SGDOptions{.momentum = 0.9});
      else opt = std::make_unique<optim::AdamW>(std::vector<Tensor>{w, b}, 0.1);
      double first = 0, last = 0;
      for (int step = 0; step < 150; ++step) {
        if (step == 100) opt->set_lr(0.01);
        opt->zero_grad();
        const Tensor loss = r.loss(w, b);
        loss.backward();
        opt->step();
        (step == 0 ? first : last) = loss.item<double>();
      }
      BOOST_TEST(first > 1.0);
      BOOST_TEST(last < 2e-3, "final loss " << last);
      BOOST_TEST(w.requires_grad());  // still the same leaves
      check_values(b, {0.3}, 0.05);
    }
  }
}

// The whole training step (forward, backward, AdamW) compiled gives the eager loop's losses.
BOOST_AUTO_TEST_CASE(a_compiled_step_matches_the_eager_loop) {
  const Regression r;
  auto step = kiln::compile([&r](const std::vector<Tensor>& p, const optim::AdamState& s, const Tensor& lr) {
    const auto [loss, g] = value_and_grad([&](const std::vector<Tensor>& q) { return r.loss(q[0], q[1]); }, p);
    auto [np, ns] = optim::adam_step(p, g, s, lr, optim::AdamOptions{.weight_decay = 0.01, .decoupled = true});
    return std::tuple{loss, np, ns};
  });
  std::vector<Tensor> p{zeros({5, 1}), zeros({1})};
  optim::AdamState s = optim::AdamState::init(p);
  const Tensor w = zeros({5, 1}).requires_grad_(), b = zeros({1}).requires_grad_();
  optim::AdamW eager({w, b}, 0.05);
  for (int k = 0; k < 20; ++k) {
    const double lr = k < 10 ? 0.05 : 0.02;
    eager.set_lr(lr);
    eager.zero_grad();
    const Tensor loss = r.loss(w, b);
    loss.backward();
    eager.step();
    auto [compiled_loss, np, ns] = step(p, s, scalar_tensor(lr));
    BOOST_TEST(std::abs(compiled_loss.item<double>() - loss.item<double>()) <= 1e-5 * (1 + loss.item<double>()),
               "step " << k);
    p = np;
    s = ns;
  }
  BOOST_TEST(step.stats().compiles == 1);  // the learning rate changed without a recompile
  const std::vector<double> we = values(w), wc = values(p[0]);
  for (size_t i = 0; i < we.size(); ++i) BOOST_TEST(std::abs(we[i] - wc[i]) < 1e-4);
}

BOOST_AUTO_TEST_SUITE_END()
