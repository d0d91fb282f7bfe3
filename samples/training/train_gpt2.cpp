// Trains a GPT-2-style decoder (samples/models/gpt2_model.h) to predict the next byte of a text
// (by default the first 33 chapters of Moby-Dick, public domain: data/moby_dick.txt), printing the
// loss of each step. The whole training step (forward, cross-entropy, backward, AdamW) is one
// kiln::compile'd function of the model, the optimizer state, the learning rate and the batch.
//
//   train_gpt2 [--device cpu|cuda|vulkan] [--config small|124m] [--batch B] [--seq T] [--steps N]
//              [--lr LR] [--mode check|compiled|outside|eager] [--autocast bf16|f16] [--warmup W] [--corpus F]
//
// --mode check (the default): the same steps eagerly on the CPU (backward(), optim::AdamW),
//   compiled on --device, and with only the forward and loss compiled (outside), from the same
//   weights and batches, side by side; exits non-zero when the compiled losses differ from the
//   eager ones by more than the tolerance or the loss does not fall.
// --mode compiled | outside | eager: only that loop on --device; prints the median step time
//   after --warmup steps (synchronised), the first step (trace and compile) and the final loss.
//   (outside: torch's usual loop over a torch.compile'd model; the forward and the loss
//   compiled, differentiated from outside by loss.backward(), then optim::AdamW's step.)
// --config small (the default): 2 layers, width 64, 2 heads, 256 byte tokens; 124m: GPT-2's
// sizes (vocabulary 50257, of which bytes use the first 256).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "../models/gpt2_model.h"
#include "../models/model_sample.h"
#include "training_loop.h"

using namespace kiln;
using samples::flag;
using samples::int_flag;
using samples::Loop;

namespace {

// Batches of byte windows: inputs [B, T] and the next bytes [B, T], from a fixed sequence of
// positions (a 64-bit LCG), so every run and both loops see the same batches.
struct Batches {
  std::string text;
  uint64_t state = 0x853c49e6748fea9bull;
  std::pair<Tensor, Tensor> next(int64_t batch, int64_t seq, Device device) {
    std::vector<int64_t> ids, targets;
    const uint64_t span = text.size() - static_cast<uint64_t>(seq) - 1;
    for (int64_t b = 0; b < batch; ++b) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const size_t at = static_cast<size_t>((state >> 17) % span);
      for (int64_t t = 0; t < seq; ++t) {
        ids.push_back(static_cast<unsigned char>(text[at + static_cast<size_t>(t)]));
        targets.push_back(static_cast<unsigned char>(text[at + static_cast<size_t>(t) + 1]));
      }
    }
    return {from_vector(ids, {batch, seq}, device), from_vector(targets, {batch, seq}, device)};
  }
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "train_gpt2: cannot read the corpus %s\n", path.c_str());
    std::exit(2);
  }
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The compiled loop: one graph per step shape for forward, backward and the update.
Loop train_compiled(gpt2::Model model, Batches batches, int64_t steps, int64_t batch, int64_t seq, double lr,
                    Device device) {
  auto step = kiln::compile([](const gpt2::Model& m, const optim::AdamState& s, const Tensor& rate, const Tensor& ids,
                               const Tensor& targets) {
    auto [loss, g] = value_and_grad([&](const gpt2::Model& q) { return cross_entropy(q(ids), targets); }, m);
    auto [p, ns] = optim::adam_step(tree_leaves(m), tree_leaves(g), s, rate, samples::kAdamW);
    return std::tuple{loss, tree_replace(m, std::move(p)), std::move(ns)};
  });
  model = samples::to_device(model, device);
  optim::AdamState state = optim::AdamState::init(tree_leaves(model));
  const Tensor rate = full({}, lr, DType::f32, device);
  return samples::run_steps(steps, device, [&] { return batches.next(batch, seq, device); }, [&](const auto& b) {
    auto [loss, m, s] = step(model, state, rate, b.first, b.second);
    model = std::move(m);
    state = std::move(s);
    return loss;
  });
}

// The eager loop, as torch's: leaves that require gradients, backward(), optim::AdamW.
Loop train_eager(gpt2::Model model, Batches batches, int64_t steps, int64_t batch, int64_t seq, double lr,
                 Device device) {
  std::vector<Tensor> params;
  std::tie(model, params) = samples::as_leaves(model, device);
  optim::AdamW opt(params, lr, samples::kAdamW);
  return samples::run_steps(steps, device, [&] { return batches.next(batch, seq, device); }, [&](const auto& b) {
    opt.zero_grad();
    Tensor loss = cross_entropy(model(b.first), b.second);
    loss.backward();
    opt.step();
    return loss;
  });
}

// torch's usual loop over a compiled model: the forward and the loss are one kiln::compile'd
// function, called on parameters that require gradients, so loss.backward() runs its compiled
// backward (docs/autograd.md, "A compiled call differentiated from outside"); optim::AdamW
// steps as usual.
Loop train_outside(gpt2::Model model, Batches batches, int64_t steps, int64_t batch, int64_t seq, double lr,
                   Device device) {
  auto loss_of = kiln::compile(
      [](const gpt2::Model& m, const Tensor& ids, const Tensor& targets) { return cross_entropy(m(ids), targets); });
  std::vector<Tensor> params;
  std::tie(model, params) = samples::as_leaves(model, device);
  optim::AdamW opt(params, lr, samples::kAdamW);
  return samples::run_steps(steps, device, [&] { return batches.next(batch, seq, device); }, [&](const auto& b) {
    opt.zero_grad();
    Tensor loss = loss_of(model, b.first, b.second);
    loss.backward();
    opt.step();
    return loss;
  });
}

}  // namespace

int main(int argc, char** argv) {
  const Device device = samples::sample_device(argc, argv);
  gpt2::Config c{256, 64, 64, 2, 2};
  if (flag(argc, argv, "--config") == "124m") c = gpt2::Config{50257, 1024, 768, 12, 12};
  const int64_t batch = int_flag(argc, argv, "--batch", 4), seq = int_flag(argc, argv, "--seq", 32);
  const int64_t steps = int_flag(argc, argv, "--steps", 8), warmup = int_flag(argc, argv, "--warmup", 3);
  const double lr = std::stod(flag(argc, argv, "--lr", "3e-3"));
  const std::string mode = flag(argc, argv, "--mode", "check");
  const std::string low = flag(argc, argv, "--autocast");
  if (seq > c.positions || seq < 1 || batch < 1 || steps < 1) {
    std::fprintf(stderr, "train_gpt2: --seq must be in [1, %lld], --batch and --steps at least 1\n",
                 static_cast<long long>(c.positions));
    return 2;
  }
  std::optional<autocast> mixed;
  if (!low.empty()) mixed.emplace(parse_dtype(low));
  Batches batches{read_file(flag(argc, argv, "--corpus", KILN_TRAINING_DATA "/moby_dick.txt"))};
  nn::Init init(0);
  const gpt2::Model model = gpt2::Model::make(c, init);
  std::printf("train_gpt2: %lld layers, width %lld, %lld heads, vocab %lld; batch [%lld, %lld] of %zu bytes; AdamW lr %g%s on %s\n",
              static_cast<long long>(c.layers), static_cast<long long>(c.width), static_cast<long long>(c.heads),
              static_cast<long long>(c.vocab), static_cast<long long>(batch), static_cast<long long>(seq),
              batches.text.size(), lr, low.empty() ? "" : (", autocast(" + low + ")").c_str(), device.str().c_str());

  if (mode == "compiled" || mode == "eager" || mode == "outside") {
    const Loop l = mode == "compiled" ? train_compiled(model, batches, steps, batch, seq, lr, device)
                   : mode == "eager"  ? train_eager(model, batches, steps, batch, seq, lr, device)
                                      : train_outside(model, batches, steps, batch, seq, lr, device);
    return samples::report(mode, l, warmup);
  }
  if (mode != "check") {
    std::fprintf(stderr, "train_gpt2: --mode is check, compiled, outside or eager\n");
    return 2;
  }
  const Loop eager = train_eager(model, batches, steps, batch, seq, lr, Device::cpu());
  const Loop compiled = train_compiled(model, batches, steps, batch, seq, lr, device);
  const Loop outside = train_outside(model, batches, steps, batch, seq, lr, device);
  // f32: rounding differences between the interpreter and generated kernels, grown over steps;
  // under autocast, bf16's 8 bits.
  const double tolerance = low.empty() ? 2e-3 : 5e-2;
  return samples::compare_both(eager, compiled, outside, tolerance, "optim::AdamW");
}
