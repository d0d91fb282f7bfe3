// Trains a small convolutional network (kiln::nn: two Conv2d + BatchNorm2d (training mode) + ReLU
// + max-pool stages, then a Linear classifier) on synthetic 16x16 images of four classes (horizontal stripes, vertical
// stripes, a diagonal, a centred square; each drawn at a random offset with noise), with SGD and
// momentum, printing the loss and the batch accuracy of each step. The training step (forward,
// cross-entropy, backward, SGD) is one kiln::compile'd function.
//
//   train_cnn [--device cpu|cuda|vulkan] [--batch B] [--steps N] [--lr LR] [--mode check|compiled|outside|eager] [--warmup W]
//
// --mode check (the default): the same steps eagerly on the CPU (backward(), optim::SGD) and
// compiled on --device, from the same weights and batches, side by side, then the loop with
// only the forward compiled (outside); exits non-zero when their losses differ from the
// eager ones by more than the tolerance or the loss does not fall.
// --mode compiled | outside | eager: only that loop on --device, with the median step time.
// (outside: the forward compiled and differentiated from outside, as torch.compile'd models
// are trained: loss.backward() and optim::SGD eagerly.)
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "../models/model_sample.h"
#include "training_loop.h"

using namespace kiln;
using samples::flag;
using samples::int_flag;
using samples::Loop;

namespace cnn {

struct Model {
  nn::Conv2d conv1, conv2;
  nn::BatchNorm2d bn1, bn2;
  nn::Linear head;

  static Model make(nn::Init& init) {
    const nn::ConvOptions same{.padding = {1}, .bias = false};
    return Model{nn::Conv2d::make(1, 8, {3, 3}, init, same), nn::Conv2d::make(8, 16, {3, 3}, init, same),
                 nn::BatchNorm2d::make(8, init), nn::BatchNorm2d::make(16, init), nn::Linear::make(16 * 4 * 4, 4, init)};
  }
  // Training mode: x [B, 1, 16, 16] -> logits [B, 4], and the model with its batch norms'
  // running statistics updated.
  std::pair<Tensor, Model> train(const Tensor& x) const {
    Model next = *this;
    auto [a, n1] = bn1.train(conv1(x));
    Tensor h = max_pool2d(relu(a), {2, 2});  // [B, 8, 8, 8]
    auto [b, n2] = bn2.train(conv2(h));
    h = max_pool2d(relu(b), {2, 2});         // [B, 16, 4, 4]
    next.bn1 = std::move(n1);
    next.bn2 = std::move(n2);
    return {head(flatten(h, 1)), std::move(next)};
  }
};

}  // namespace cnn

KILN_PYTREE(cnn::Model, &cnn::Model::conv1, &cnn::Model::conv2, &cnn::Model::bn1, &cnn::Model::bn2, &cnn::Model::head);

namespace {

const optim::SGDOptions kSGD{.momentum = 0.9, .weight_decay = 1e-4};

// Images of four patterns at random offsets with noise, and their labels.
struct Batches {
  std::mt19937_64 rng{7};
  std::pair<Tensor, Tensor> next(int64_t batch, Device device) {
    std::normal_distribution<float> noise(0.0f, 0.3f);
    std::uniform_int_distribution<int> label(0, 3), shift(0, 3);
    std::vector<float> px(static_cast<size_t>(batch * 256));
    std::vector<int64_t> labels;
    for (int64_t b = 0; b < batch; ++b) {
      const int c = label(rng), dy = shift(rng), dx = shift(rng);
      labels.push_back(c);
      for (int y = 0; y < 16; ++y)
        for (int x = 0; x < 16; ++x) {
          const int u = (y + dy) % 16, v = (x + dx) % 16;
          const bool on = c == 0 ? u % 4 < 2 : c == 1 ? v % 4 < 2 : c == 2 ? std::abs(u - v) < 2 : (u >= 4 && u < 12 && v >= 4 && v < 12);
          px[static_cast<size_t>(b * 256 + y * 16 + x)] = (on ? 1.0f : 0.0f) + noise(rng);
        }
    }
    return {from_vector(px, {batch, 1, 16, 16}, device), from_vector(labels, {batch}, device)};
  }
};

double accuracy(const Tensor& logits, const Tensor& labels) {
  const std::vector<int64_t> got = argmax(logits.to(Device::cpu()), 1).to_vector<int64_t>();
  const std::vector<int64_t> want = labels.to(Device::cpu()).to_vector<int64_t>();
  size_t hits = 0;
  for (size_t i = 0; i < got.size(); ++i) hits += got[i] == want[i];
  return static_cast<double>(hits) / static_cast<double>(got.size());
}

// Each step's logits and labels, kept during the loop (not timed) for its accuracies after.
struct Outputs {
  std::vector<std::pair<Tensor, Tensor>> steps;
  void add(const Tensor& logits, const Tensor& labels) { steps.emplace_back(logits, labels); }
  std::vector<double> accuracies() const {
    std::vector<double> a;
    for (const auto& [logits, labels] : steps) a.push_back(accuracy(logits, labels));
    return a;
  }
};

Loop train_compiled(cnn::Model model, Batches batches, int64_t steps, int64_t batch, double lr, Device device) {
  auto step = kiln::compile([](const cnn::Model& m, const optim::SGDState& s, const Tensor& rate, const Tensor& x,
                               const Tensor& labels) {
    Tensor logits;
    cnn::Model stats = m;  // the batch norms' running statistics after this batch
    auto [loss, g] = value_and_grad(
        [&](const cnn::Model& q) {
          auto [z, next] = q.train(x);
          logits = z;
          stats = std::move(next);
          return cross_entropy(logits, labels);
        },
        m);
    // SGD updates the parameters; the running statistics have no gradient (undefined in g, so
    // sgd_step leaves them) and come from the forward.
    const std::vector<Tensor> grads = tree_leaves(g), running = tree_leaves(stats);
    auto [p, ns] = optim::sgd_step(tree_leaves(m), grads, s, rate, kSGD);
    for (size_t k = 0; k < p.size(); ++k)
      if (!grads[k].defined()) p[k] = running[k];
    return std::tuple{loss, logits.detach(), tree_replace(m, std::move(p)), std::move(ns)};
  });
  model = samples::to_device(model, device);
  optim::SGDState state = optim::SGDState::init(tree_leaves(model), kSGD);
  const Tensor rate = full({}, lr, DType::f32, device);
  Outputs seen;
  Loop out = samples::run_steps(steps, device, [&] { return batches.next(batch, device); }, [&](const auto& b) {
    auto [loss, logits, m, s] = step(model, state, rate, b.first, b.second);
    model = std::move(m);
    state = std::move(s);
    seen.add(logits, b.second);
    return loss;
  });
  out.accuracies = seen.accuracies();
  return out;
}

Loop train_eager(cnn::Model model, Batches batches, int64_t steps, int64_t batch, double lr, Device device) {
  std::vector<Tensor> params;
  std::tie(model, params) = samples::as_leaves(model, device);
  optim::SGD opt(params, lr, kSGD);
  Outputs seen;
  Loop out = samples::run_steps(steps, device, [&] { return batches.next(batch, device); }, [&](const auto& b) {
    auto [loss, logits] = samples::eager_train_step(model, opt, b.first, b.second);
    seen.add(logits, b.second);
    return loss;
  });
  out.accuracies = seen.accuracies();
  return out;
}

// torch's usual loop over a compiled model: the forward (train mode) and the loss are
// kiln::compile'd functions called on tensors that require gradients, so loss.backward() runs
// their compiled backwards (docs/autograd.md, "A compiled call differentiated from outside");
// optim::SGD steps as usual. The running statistics come back as outputs of the call. (The
// loss is compiled too: its kernels rather than an eager op at a time.)
Loop train_outside(cnn::Model model, Batches batches, int64_t steps, int64_t batch, double lr, Device device) {
  auto forward = kiln::compile([](const cnn::Model& m, const Tensor& x) {
    auto [logits, next] = m.train(x);
    return std::tuple{logits, next.bn1, next.bn2};
  });
  auto loss_of = kiln::compile([](const Tensor& logits, const Tensor& labels) { return cross_entropy(logits, labels); });
  std::vector<Tensor> params;
  std::tie(model, params) = samples::as_leaves(model, device);
  optim::SGD opt(params, lr, kSGD);
  Outputs seen;
  Loop out = samples::run_steps(steps, device, [&] { return batches.next(batch, device); }, [&](const auto& b) {
    opt.zero_grad();
    auto [logits, bn1, bn2] = forward(model, b.first);
    model.bn1.running_mean = bn1.running_mean.detach();
    model.bn1.running_var = bn1.running_var.detach();
    model.bn2.running_mean = bn2.running_mean.detach();
    model.bn2.running_var = bn2.running_var.detach();
    Tensor loss = loss_of(logits, b.second);
    loss.backward();
    opt.step();
    seen.add(logits.detach(), b.second);
    return loss;
  });
  out.accuracies = seen.accuracies();
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const Device device = samples::sample_device(argc, argv);
  const int64_t batch = int_flag(argc, argv, "--batch", 32), steps = int_flag(argc, argv, "--steps", 12);
  const int64_t warmup = int_flag(argc, argv, "--warmup", 3);
  const double lr = std::stod(flag(argc, argv, "--lr", "0.05"));
  const std::string mode = flag(argc, argv, "--mode", "check");
  if (batch < 1 || steps < 1) {
    std::fprintf(stderr, "train_cnn: --batch and --steps must be at least 1\n");
    return 2;
  }
  nn::Init init(0);
  const cnn::Model model = cnn::Model::make(init);
  std::printf("train_cnn: conv 1->8->16, linear 256->4; batch %lld of 16x16 images; SGD lr %g momentum 0.9 on %s\n",
              static_cast<long long>(batch), lr, device.str().c_str());
  if (mode == "compiled" || mode == "eager" || mode == "outside") {
    const Loop l = mode == "compiled" ? train_compiled(model, Batches{}, steps, batch, lr, device)
                   : mode == "eager"  ? train_eager(model, Batches{}, steps, batch, lr, device)
                                      : train_outside(model, Batches{}, steps, batch, lr, device);
    return samples::report(mode, l, warmup);
  }
  if (mode != "check") {
    std::fprintf(stderr, "train_cnn: --mode is check, compiled, outside or eager\n");
    return 2;
  }
  const Loop eager = train_eager(model, Batches{}, steps, batch, lr, Device::cpu());
  const Loop compiled = train_compiled(model, Batches{}, steps, batch, lr, device);
  const Loop outside = train_outside(model, Batches{}, steps, batch, lr, device);
  return samples::compare_both(eager, compiled, outside, 2e-3, "optim::SGD");
}
