// GPT-2 (Hugging Face's GPT2LMHeadModel, inference) written with kiln::nn: token and position
// embeddings, pre-norm blocks of causal multi-head attention and a tanh-GELU MLP, a final layer
// norm and the language-model head tied to the token embeddings. Parameters carry the
// transformers state dict's names ("transformer.h.0.attn.c_attn.weight", ...), so
// `safetensors.torch.save_file(model.state_dict(), ...)` on the torch side gives weights it
// loads (GPT-2's "Conv1D" layers keep their weights [in, out], as transformers does).
//
//   gpt2 [--device cpu|cuda] [--config small|124m] [--batch B] [--seq T]
//        [--weights W.safetensors --ids ids.npy --expect logits.npy]
//
// Without --weights: a small model (2 layers, width 64) with torch's initial values from a
// seeded nn::Init. The model passes to kiln::compile as a pytree (its tensors are graph
// inputs); the sample checks the compiled logits against eager execution, saves the state dict
// to a .safetensors file, loads it into a second model and checks that the same compiled entry
// gives the same logits for it, then times compiled and eager calls side by side. With
// --weights/--ids/--expect (e.g. GPT-2 124M exported from torch on the GPU machine) it checks
// the logits against torch's (relative L2). Exits non-zero when a check fails.
#include <kiln/kiln.h>
#include <kiln/npy/npy.h>

#include "sample_util.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

using namespace kiln;
using kiln::samples::median;
using kiln::samples::time_ms;

namespace gpt2 {

struct Config {
  int64_t vocab = 100, positions = 64, width = 64, layers = 2, heads = 2;
};

// transformers' Conv1D: y = x @ weight + bias, weight [in, out].
struct Conv1D {
  Tensor weight, bias;
  static Conv1D make(int64_t in, int64_t out, nn::Init& init) {
    // transformers initialises these N(0, 0.02) with zero biases.
    return Conv1D{init.normal({in, out}) * 0.02, init.filled({out}, 0.0)};
  }
  static Conv1D load(const StateDict& s, const std::string& prefix, int64_t in, int64_t out) {
    return Conv1D{take(s, prefix + "weight", {in, out}), take(s, prefix + "bias", {out})};
  }
  void save(StateDict& s, const std::string& prefix) const {
    s[prefix + "weight"] = weight;
    s[prefix + "bias"] = bias;
  }
  Tensor operator()(const Tensor& x) const { return matmul(x, weight) + bias; }
};

struct Block {
  nn::LayerNorm ln_1, ln_2;
  Conv1D c_attn, attn_proj, c_fc, mlp_proj;
  int64_t heads = 1;

  Tensor attention(const Tensor& x) const {
    const Tensor qkv = c_attn(x);  // [B, T, 3E]
    const int64_t e = qkv.size(2) / 3, d = e / heads;
    auto head = [&](int64_t part) {  // [B, T, E] slice -> [B, H, T, D]
      Shape split = x.shape();
      split.pop_back();
      split.push_back(SymInt(heads));
      split.push_back(SymInt(d));
      return transpose(reshape(slice(qkv, 2, part * e, (part + 1) * e), split), 1, 2);
    };
    AttentionOptions causal;
    causal.is_causal = true;
    const Tensor a = scaled_dot_product_attention(head(0), head(1), head(2), causal);
    return attn_proj(reshape(transpose(a, 1, 2), x.shape()));
  }
  Tensor operator()(const Tensor& x) const {
    const Tensor h = x + attention(ln_1(x));
    return h + mlp_proj(gelu(c_fc(ln_2(h)), "tanh"));
  }
};

struct Model {
  nn::Embedding wte, wpe;
  std::vector<Block> blocks;
  nn::LayerNorm ln_f;

  static Model make(const Config& c, nn::Init& init) {
    Model m{nn::Embedding::make(c.vocab, c.width, init), nn::Embedding::make(c.positions, c.width, init), {},
            nn::LayerNorm::make({c.width}, init)};
    m.wte.weight = m.wte.weight * 0.02;  // transformers: N(0, 0.02) embeddings
    m.wpe.weight = m.wpe.weight * 0.01;
    for (int64_t i = 0; i < c.layers; ++i)
      m.blocks.push_back(Block{nn::LayerNorm::make({c.width}, init), nn::LayerNorm::make({c.width}, init),
                               Conv1D::make(c.width, 3 * c.width, init), Conv1D::make(c.width, c.width, init),
                               Conv1D::make(c.width, 4 * c.width, init), Conv1D::make(4 * c.width, c.width, init),
                               c.heads});
    return m;
  }
  static Model load(const StateDict& s, const Config& c) {
    const std::string t = "transformer.";
    Model m{nn::Embedding::load(s, t + "wte.", c.vocab, c.width), nn::Embedding::load(s, t + "wpe.", c.positions, c.width),
            {}, nn::LayerNorm::load(s, t + "ln_f.", {c.width})};
    for (int64_t i = 0; i < c.layers; ++i) {
      const std::string p = t + "h." + std::to_string(i) + ".";
      m.blocks.push_back(Block{nn::LayerNorm::load(s, p + "ln_1.", {c.width}), nn::LayerNorm::load(s, p + "ln_2.", {c.width}),
                               Conv1D::load(s, p + "attn.c_attn.", c.width, 3 * c.width),
                               Conv1D::load(s, p + "attn.c_proj.", c.width, c.width),
                               Conv1D::load(s, p + "mlp.c_fc.", c.width, 4 * c.width),
                               Conv1D::load(s, p + "mlp.c_proj.", 4 * c.width, c.width), c.heads});
    }
    return m;
  }
  StateDict state_dict() const {
    StateDict s;
    const std::string t = "transformer.";
    wte.save(s, t + "wte.");
    wpe.save(s, t + "wpe.");
    ln_f.save(s, t + "ln_f.");
    for (size_t i = 0; i < blocks.size(); ++i) {
      const std::string p = t + "h." + std::to_string(i) + ".";
      blocks[i].ln_1.save(s, p + "ln_1.");
      blocks[i].ln_2.save(s, p + "ln_2.");
      blocks[i].c_attn.save(s, p + "attn.c_attn.");
      blocks[i].attn_proj.save(s, p + "attn.c_proj.");
      blocks[i].c_fc.save(s, p + "mlp.c_fc.");
      blocks[i].mlp_proj.save(s, p + "mlp.c_proj.");
    }
    s["lm_head.weight"] = wte.weight;  // tied, as transformers' state dict lists it
    return s;
  }
  // ids [B, T] (i64) -> logits [B, T, vocab]
  Tensor operator()(const Tensor& ids) const {
    Tensor h = wte(ids) + wpe(arange(ids.shape()[1], DType::i64, ids.device()));
    for (const Block& b : blocks) h = b(h);
    return matmul(ln_f(h), transpose(wte.weight, 0, 1));
  }
};

}  // namespace gpt2

KILN_PYTREE(gpt2::Conv1D, &gpt2::Conv1D::weight, &gpt2::Conv1D::bias);
KILN_PYTREE(gpt2::Block, &gpt2::Block::ln_1, &gpt2::Block::ln_2, &gpt2::Block::c_attn, &gpt2::Block::attn_proj,
            &gpt2::Block::c_fc, &gpt2::Block::mlp_proj, &gpt2::Block::heads);
KILN_PYTREE(gpt2::Model, &gpt2::Model::wte, &gpt2::Model::wpe, &gpt2::Model::blocks, &gpt2::Model::ln_f);

namespace {

double relative_l2(const Tensor& got, const Tensor& want) {
  const std::vector<double> a = got.to(Device::cpu()).to_vector<double>(), b = want.to(Device::cpu()).to_vector<double>();
  if (a.size() != b.size()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) num += (a[i] - b[i]) * (a[i] - b[i]), den += b[i] * b[i];
  return std::sqrt(num / (den > 0 ? den : 1));
}

std::string flag(int argc, char** argv, const std::string& name, const std::string& fallback = "") {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == name) return argv[i + 1];
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const Device device = flag(argc, argv, "--device", "cpu") == "cuda" ? Device::cuda(0) : Device::cpu();
  gpt2::Config config;
  if (flag(argc, argv, "--config") == "124m") config = gpt2::Config{50257, 1024, 768, 12, 12};
  const int64_t batch = std::stoll(flag(argc, argv, "--batch", "2")), seq = std::stoll(flag(argc, argv, "--seq", "16"));
  auto forward = kiln::compile([](const gpt2::Model& m, const Tensor& ids) { return m(ids); });
  bool ok = true;
  auto check = [&](const char* what, double err, double tolerance) {
    std::printf("%-52s relative L2 %.3g (at most %.0e)\n", what, err, tolerance);
    ok = ok && err <= tolerance;
  };

  const std::string weights = flag(argc, argv, "--weights");
  if (!weights.empty()) {
    // Torch's weights and logits for the same ids.
    const gpt2::Model m = gpt2::Model::load(load_state_dict(weights, device), config);
    const Tensor ids = Tensor::from_data(npy::load_npy(flag(argc, argv, "--ids"))).to(DType::i64).to(device);
    const Tensor expect = Tensor::from_data(npy::load_npy(flag(argc, argv, "--expect")));
    Tensor logits;
    const double first = time_ms([&] { logits = forward(m, ids); synchronize(device); });
    std::printf("first call (trace, compile, run): %.1f ms\n", first);
    check("compiled logits against torch's", relative_l2(logits, expect), 1e-4);
    std::vector<double> compiled_ms;
    for (int r = 0; r < 20; ++r) compiled_ms.push_back(time_ms([&] { forward(m, ids); synchronize(device); }));
    std::printf("median per call: compiled %.3f ms\n", median(compiled_ms));
  } else {
    nn::Init init(0, DType::f32, device);
    const gpt2::Model m = gpt2::Model::make(config, init);
    std::vector<int64_t> id_values(static_cast<size_t>(batch * seq));
    for (size_t i = 0; i < id_values.size(); ++i) id_values[i] = static_cast<int64_t>((i * 37 + 11) % config.vocab);
    const Tensor ids = from_vector(id_values, {batch, seq}, device);
    Tensor compiled;
    const double first = time_ms([&] { compiled = forward(m, ids); synchronize(device); });
    const Tensor eager = m(ids);
    std::printf("GPT-2 %lld layers, width %lld, %lld heads, vocab %lld; ids [%lld, %lld] on %s\n",
                static_cast<long long>(config.layers), static_cast<long long>(config.width),
                static_cast<long long>(config.heads), static_cast<long long>(config.vocab),
                static_cast<long long>(batch), static_cast<long long>(seq), device.str().c_str());
    std::printf("first call (trace, compile, run): %.1f ms\n", first);
    check("compiled logits against eager", relative_l2(compiled, eager), 1e-5);

    // The state dict through a .safetensors file into a second model: the same compiled entry.
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("kiln_sample_gpt2_" + std::to_string(::getpid()) + ".safetensors")).string();
    save_state_dict(m.state_dict(), path, {{"format", "pt"}});
    const gpt2::Model loaded = gpt2::Model::load(load_state_dict(path, device), config);
    std::filesystem::remove(path);
    check("a model loaded from its .safetensors file", relative_l2(forward(loaded, ids), compiled), 0);
    const CompileStats stats = forward.stats();
    std::printf("compiles %lld, cache hits %lld\n", static_cast<long long>(stats.compiles),
                static_cast<long long>(stats.cache_hits));
    ok = ok && stats.compiles == 1;

    std::vector<double> compiled_ms, eager_ms;
    for (int r = 0; r < 10; ++r) {
      compiled_ms.push_back(time_ms([&] { forward(m, ids); synchronize(device); }));
      eager_ms.push_back(time_ms([&] { m(ids); synchronize(device); }));
    }
    std::printf("median per call: compiled %.3f ms, eager %.3f ms\n", median(compiled_ms), median(eager_ms));
  }
  std::printf("%s\n", ok ? "gpt2: all checks passed" : "gpt2: a check FAILED");
  return ok ? 0 : 1;
}
