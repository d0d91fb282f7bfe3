// A Llama-style decoder (Hugging Face's LlamaForCausalLM, inference) written with kiln::nn:
// token embeddings, pre-norm blocks of RMSNorm, causal attention with rotary position embeddings
// and grouped key/value heads, a SwiGLU MLP, a final RMSNorm and an untied language-model head.
// Parameters carry the transformers state dict's names ("model.layers.0.self_attn.q_proj.weight",
// ...), so `safetensors.torch.save_file(model.state_dict(), ...)` on the torch side gives weights
// it loads (tools/models/model_reference.py --model llama).
//
//   llama [--config small|bench] [--batch B] [--seq T] + model_sample.h's options
//
// --config small (the default): 2 layers, width 64, 4 heads over 2 key/value heads, MLP 176,
// vocab 100; bench is bench_models.py's "llama" (4 layers, width 1024, 16 heads over 4, MLP
// 2816, vocab 32000). Input: token ids [B, T]; output: logits [B, T, vocab].
#include <cmath>
#include <string>
#include <vector>

#include "model_sample.h"

using namespace kiln;

namespace llama {

struct Config {
  int64_t vocab = 100, width = 64, mlp = 176, layers = 2, heads = 4, kv_heads = 2;
  double rope_theta = 10000, eps = 1e-6;
  int64_t head_dim() const { return width / heads; }
};

// transformers' rotary frequencies 1 / theta^(2i / d), computed in f32 as torch does (a
// buffer there, not in the state dict).
Tensor inverse_frequencies(const Config& c, Device device) {
  const int64_t d = c.head_dim();
  std::vector<float> inv;
  for (int64_t i = 0; i < d; i += 2)
    inv.push_back(1.0f / std::pow(static_cast<float>(c.rope_theta), static_cast<float>(i) / static_cast<float>(d)));
  return from_vector(inv, {d / 2}, device);
}

// x [B, H, T, D] rotated by the angles' cos and sin [T, D]: x cos + rotate_half(x) sin.
Tensor rotary(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
  const int64_t half = x.size(3) / 2;
  const Tensor rotated = cat({-slice(x, 3, half, 2 * half), slice(x, 3, 0, half)}, 3);
  return x * cos_t + rotated * sin_t;
}

struct Attention {
  nn::Linear q_proj, k_proj, v_proj, o_proj;
  int64_t heads = 1, kv_heads = 1;

  Tensor operator()(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) const {
    const int64_t d = q_proj.weight.size(0) / heads;
    auto split_heads = [&](const Tensor& t, int64_t n) {  // [B, T, n * D] -> [B, n, T, D]
      Shape s = x.shape();
      s.pop_back();
      s.push_back(SymInt(n));
      s.push_back(SymInt(d));
      return transpose(reshape(t, s), 1, 2);
    };
    AttentionOptions causal;
    causal.is_causal = true;
    causal.enable_gqa = kv_heads != heads;
    const Tensor a = scaled_dot_product_attention(rotary(split_heads(q_proj(x), heads), cos_t, sin_t),
                                                  rotary(split_heads(k_proj(x), kv_heads), cos_t, sin_t),
                                                  split_heads(v_proj(x), kv_heads), causal);
    Shape merged = x.shape();
    merged.back() = SymInt(heads * d);
    return o_proj(reshape(transpose(a, 1, 2), merged));
  }
};

struct Mlp {
  nn::Linear gate_proj, up_proj, down_proj;
  Tensor operator()(const Tensor& x) const { return down_proj(silu(gate_proj(x)) * up_proj(x)); }
};

struct Layer {
  nn::RMSNorm input_layernorm, post_attention_layernorm;
  Attention self_attn;
  Mlp mlp;
  Tensor operator()(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) const {
    const Tensor h = x + self_attn(input_layernorm(x), cos_t, sin_t);
    return h + mlp(post_attention_layernorm(h));
  }
};

struct Model {
  nn::Embedding embed_tokens;
  std::vector<Layer> layers;
  nn::RMSNorm norm;
  nn::Linear lm_head;
  Tensor inv_freq;  // [head_dim / 2]

  static Model make(const Config& c, nn::Init& init) {
    auto linear = [&](int64_t in, int64_t out) { return nn::Linear::make(in, out, init, false); };
    Model m{nn::Embedding::make(c.vocab, c.width, init), {}, nn::RMSNorm::make({c.width}, init, c.eps),
            linear(c.width, c.vocab), {}};
    for (int64_t i = 0; i < c.layers; ++i) {
      const int64_t kv = c.kv_heads * c.head_dim();
      m.layers.push_back(Layer{nn::RMSNorm::make({c.width}, init, c.eps), nn::RMSNorm::make({c.width}, init, c.eps),
                               Attention{linear(c.width, c.width), linear(c.width, kv), linear(c.width, kv),
                                         linear(c.width, c.width), c.heads, c.kv_heads},
                               Mlp{linear(c.width, c.mlp), linear(c.width, c.mlp), linear(c.mlp, c.width)}});
    }
    m.inv_freq = inverse_frequencies(c, m.embed_tokens.weight.device());
    return m;
  }
  static Model load(const StateDict& s, const Config& c) {
    auto linear = [&](const std::string& p, int64_t in, int64_t out) { return nn::Linear::load(s, p, in, out, false); };
    Model m{nn::Embedding::load(s, "model.embed_tokens.", c.vocab, c.width), {},
            nn::RMSNorm::load(s, "model.norm.", {c.width}, c.eps), linear("lm_head.", c.width, c.vocab), {}};
    for (int64_t i = 0; i < c.layers; ++i) {
      const std::string p = "model.layers." + std::to_string(i) + ".";
      const int64_t kv = c.kv_heads * c.head_dim();
      m.layers.push_back(Layer{nn::RMSNorm::load(s, p + "input_layernorm.", {c.width}, c.eps),
                               nn::RMSNorm::load(s, p + "post_attention_layernorm.", {c.width}, c.eps),
                               Attention{linear(p + "self_attn.q_proj.", c.width, c.width),
                                         linear(p + "self_attn.k_proj.", c.width, kv),
                                         linear(p + "self_attn.v_proj.", c.width, kv),
                                         linear(p + "self_attn.o_proj.", c.width, c.width), c.heads, c.kv_heads},
                               Mlp{linear(p + "mlp.gate_proj.", c.width, c.mlp), linear(p + "mlp.up_proj.", c.width, c.mlp),
                                   linear(p + "mlp.down_proj.", c.mlp, c.width)}});
    }
    m.inv_freq = inverse_frequencies(c, m.embed_tokens.weight.device());
    return m;
  }
  StateDict state_dict() const {
    StateDict s;
    embed_tokens.save(s, "model.embed_tokens.");
    norm.save(s, "model.norm.");
    lm_head.save(s, "lm_head.");
    for (size_t i = 0; i < layers.size(); ++i) {
      const std::string p = "model.layers." + std::to_string(i) + ".";
      const Layer& l = layers[i];
      l.input_layernorm.save(s, p + "input_layernorm.");
      l.post_attention_layernorm.save(s, p + "post_attention_layernorm.");
      l.self_attn.q_proj.save(s, p + "self_attn.q_proj.");
      l.self_attn.k_proj.save(s, p + "self_attn.k_proj.");
      l.self_attn.v_proj.save(s, p + "self_attn.v_proj.");
      l.self_attn.o_proj.save(s, p + "self_attn.o_proj.");
      l.mlp.gate_proj.save(s, p + "mlp.gate_proj.");
      l.mlp.up_proj.save(s, p + "mlp.up_proj.");
      l.mlp.down_proj.save(s, p + "mlp.down_proj.");
    }
    return s;
  }
  // ids [B, T] (i64) -> logits [B, T, vocab]; positions 0 .. T-1 (T stays symbolic).
  Tensor operator()(const Tensor& ids) const {
    const Tensor positions = cast(arange(ids.shape()[1], DType::i64, ids.device()), DType::f32);
    const Tensor angles = unsqueeze(positions, 1) * unsqueeze(inv_freq, 0);  // [T, D / 2]
    const Tensor both = cat({angles, angles}, 1);                               // [T, D]
    const Tensor cos_t = cos(both), sin_t = sin(both);
    Tensor h = embed_tokens(ids);
    for (const Layer& l : layers) h = l(h, cos_t, sin_t);
    return lm_head(norm(h));
  }
};

}  // namespace llama

KILN_PYTREE(llama::Attention, &llama::Attention::q_proj, &llama::Attention::k_proj, &llama::Attention::v_proj,
            &llama::Attention::o_proj, &llama::Attention::heads, &llama::Attention::kv_heads);
KILN_PYTREE(llama::Mlp, &llama::Mlp::gate_proj, &llama::Mlp::up_proj, &llama::Mlp::down_proj);
KILN_PYTREE(llama::Layer, &llama::Layer::input_layernorm, &llama::Layer::post_attention_layernorm,
            &llama::Layer::self_attn, &llama::Layer::mlp);
KILN_PYTREE(llama::Model, &llama::Model::embed_tokens, &llama::Model::layers, &llama::Model::norm,
            &llama::Model::lm_head, &llama::Model::inv_freq);

int main(int argc, char** argv) {
  using samples::int_flag;
  llama::Config c;
  if (samples::flag(argc, argv, "--config") == "bench") c = llama::Config{32000, 1024, 2816, 4, 16, 4};
  const int64_t batch = int_flag(argc, argv, "--batch", 2), seq = int_flag(argc, argv, "--seq", 16);
  samples::ModelSample<llama::Model> sample;
  sample.name = "llama";
  sample.summary = std::to_string(c.layers) + " layers, width " + std::to_string(c.width) + ", " +
                   std::to_string(c.heads) + " heads over " + std::to_string(c.kv_heads) + " key/value heads, MLP " +
                   std::to_string(c.mlp) + ", vocab " + std::to_string(c.vocab) + "; ids [" + std::to_string(batch) +
                   ", " + std::to_string(seq) + "]";
  sample.make = [c](nn::Init& init) { return llama::Model::make(c, init); };
  sample.load = [c](const StateDict& s) { return llama::Model::load(s, c); };
  sample.example_input = [c, batch, seq](Device d) { return samples::example_ids(batch, seq, c.vocab, d); };
  sample.input_dtype = DType::i64;
  return samples::run(sample, argc, argv);
}
