// GPT-2 (Hugging Face's GPT2LMHeadModel) written with kiln::nn, shared by the inference sample
// (samples/models/gpt2.cpp) and the training sample (samples/training/train_gpt2.cpp): token
// and position embeddings, pre-norm blocks of causal multi-head attention and a tanh-GELU MLP, a
// final layer norm and the language-model head tied to the token embeddings. Parameters carry
// the transformers state dict's names ("transformer.h.0.attn.c_attn.weight", ...); GPT-2's
// "Conv1D" layers keep their weights [in, out], as transformers does.
#pragma once

#include <string>
#include <vector>

#include <kiln/kiln.h>

namespace gpt2 {

using namespace kiln;

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

