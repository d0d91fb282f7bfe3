// BERT (Hugging Face's BertModel, inference, its last hidden state) written with kiln::nn: word,
// position and token-type embeddings with a layer norm, then post-norm encoder layers of
// bidirectional multi-head attention and an erf-GELU MLP. Parameters carry the transformers state
// dict's names ("encoder.layer.0.attention.self.query.weight", ...), so
// `safetensors.torch.save_file(model.state_dict(), ...)` on the torch side gives weights it loads
// (tools/models/model_reference.py --model bert; the pooler's weights are not read: the sample
// returns the last hidden state). Every token has type 0 and attends to every other (no padding
// mask), as BertModel(input_ids) computes.
//
//   bert [--config small|base] [--batch B] [--seq T] + model_sample.h's options
//
// --config small (the default): 2 layers, width 64, 2 heads, MLP 128, vocab 100, 64 positions;
// base is bert-base (12 layers, width 768, 12 heads, MLP 3072, vocab 30522, 512 positions).
// Input: token ids [B, T]; output: hidden states [B, T, width].
#include <string>
#include <vector>

#include "model_sample.h"

using namespace kiln;

namespace bert {

struct Config {
  int64_t vocab = 100, positions = 64, width = 64, mlp = 128, layers = 2, heads = 2, types = 2;
  double eps = 1e-12;
};

struct Layer {
  nn::Linear query, key, value, attention_out;
  nn::LayerNorm attention_norm;
  nn::Linear intermediate, output;
  nn::LayerNorm output_norm;
  int64_t heads = 1;

  Tensor attention(const Tensor& x) const {
    const int64_t d = x.size(2) / heads;
    auto split_heads = [&](const Tensor& t) {  // [B, T, E] -> [B, H, T, D]
      Shape s = x.shape();
      s.pop_back();
      s.push_back(SymInt(heads));
      s.push_back(SymInt(d));
      return transpose(reshape(t, s), 1, 2);
    };
    const Tensor a = scaled_dot_product_attention(split_heads(query(x)), split_heads(key(x)), split_heads(value(x)),
                                                  AttentionOptions{});
    return attention_out(reshape(transpose(a, 1, 2), x.shape()));
  }
  Tensor operator()(const Tensor& x) const {
    const Tensor h = attention_norm(x + attention(x));
    return output_norm(h + output(gelu(intermediate(h))));
  }
  static Layer make(const Config& c, nn::Init& init) {
    return Layer{nn::Linear::make(c.width, c.width, init),  nn::Linear::make(c.width, c.width, init),
                 nn::Linear::make(c.width, c.width, init),  nn::Linear::make(c.width, c.width, init),
                 nn::LayerNorm::make({c.width}, init, c.eps), nn::Linear::make(c.width, c.mlp, init),
                 nn::Linear::make(c.mlp, c.width, init),    nn::LayerNorm::make({c.width}, init, c.eps),
                 c.heads};
  }
  static Layer load(const StateDict& s, const std::string& p, const Config& c) {
    return Layer{nn::Linear::load(s, p + "attention.self.query.", c.width, c.width),
                 nn::Linear::load(s, p + "attention.self.key.", c.width, c.width),
                 nn::Linear::load(s, p + "attention.self.value.", c.width, c.width),
                 nn::Linear::load(s, p + "attention.output.dense.", c.width, c.width),
                 nn::LayerNorm::load(s, p + "attention.output.LayerNorm.", {c.width}, c.eps),
                 nn::Linear::load(s, p + "intermediate.dense.", c.width, c.mlp),
                 nn::Linear::load(s, p + "output.dense.", c.mlp, c.width),
                 nn::LayerNorm::load(s, p + "output.LayerNorm.", {c.width}, c.eps),
                 c.heads};
  }
  void save(StateDict& s, const std::string& p) const {
    query.save(s, p + "attention.self.query.");
    key.save(s, p + "attention.self.key.");
    value.save(s, p + "attention.self.value.");
    attention_out.save(s, p + "attention.output.dense.");
    attention_norm.save(s, p + "attention.output.LayerNorm.");
    intermediate.save(s, p + "intermediate.dense.");
    output.save(s, p + "output.dense.");
    output_norm.save(s, p + "output.LayerNorm.");
  }
};

struct Model {
  nn::Embedding word_embeddings, position_embeddings, token_type_embeddings;
  nn::LayerNorm embedding_norm;
  std::vector<Layer> layers;

  static Model make(const Config& c, nn::Init& init) {
    Model m{nn::Embedding::make(c.vocab, c.width, init), nn::Embedding::make(c.positions, c.width, init),
            nn::Embedding::make(c.types, c.width, init), nn::LayerNorm::make({c.width}, init, c.eps), {}};
    for (int64_t i = 0; i < c.layers; ++i) m.layers.push_back(Layer::make(c, init));
    return m;
  }
  static Model load(const StateDict& s, const Config& c) {
    const std::string e = "embeddings.";
    Model m{nn::Embedding::load(s, e + "word_embeddings.", c.vocab, c.width),
            nn::Embedding::load(s, e + "position_embeddings.", c.positions, c.width),
            nn::Embedding::load(s, e + "token_type_embeddings.", c.types, c.width),
            nn::LayerNorm::load(s, e + "LayerNorm.", {c.width}, c.eps), {}};
    for (int64_t i = 0; i < c.layers; ++i)
      m.layers.push_back(Layer::load(s, "encoder.layer." + std::to_string(i) + ".", c));
    return m;
  }
  StateDict state_dict() const {
    StateDict s;
    word_embeddings.save(s, "embeddings.word_embeddings.");
    position_embeddings.save(s, "embeddings.position_embeddings.");
    token_type_embeddings.save(s, "embeddings.token_type_embeddings.");
    embedding_norm.save(s, "embeddings.LayerNorm.");
    for (size_t i = 0; i < layers.size(); ++i) layers[i].save(s, "encoder.layer." + std::to_string(i) + ".");
    return s;
  }
  // ids [B, T] (i64) -> hidden states [B, T, width]; every token of type 0.
  Tensor operator()(const Tensor& ids) const {
    const Tensor type0 = slice(token_type_embeddings.weight, 0, 0, 1);  // [1, width]
    Tensor h = embedding_norm(word_embeddings(ids) + position_embeddings(arange(ids.shape()[1], DType::i64, ids.device())) +
                              type0);
    for (const Layer& l : layers) h = l(h);
    return h;
  }
};

}  // namespace bert

KILN_PYTREE(bert::Layer, &bert::Layer::query, &bert::Layer::key, &bert::Layer::value, &bert::Layer::attention_out,
            &bert::Layer::attention_norm, &bert::Layer::intermediate, &bert::Layer::output, &bert::Layer::output_norm,
            &bert::Layer::heads);
KILN_PYTREE(bert::Model, &bert::Model::word_embeddings, &bert::Model::position_embeddings,
            &bert::Model::token_type_embeddings, &bert::Model::embedding_norm, &bert::Model::layers);

int main(int argc, char** argv) {
  using samples::int_flag;
  bert::Config c;
  if (samples::flag(argc, argv, "--config") == "base") c = bert::Config{30522, 512, 768, 3072, 12, 12, 2};
  const int64_t batch = int_flag(argc, argv, "--batch", 2), seq = int_flag(argc, argv, "--seq", 16);
  samples::ModelSample<bert::Model> sample;
  sample.name = "bert";
  sample.summary = std::to_string(c.layers) + " layers, width " + std::to_string(c.width) + ", " +
                   std::to_string(c.heads) + " heads, MLP " + std::to_string(c.mlp) + ", vocab " +
                   std::to_string(c.vocab) + "; ids [" + std::to_string(batch) + ", " + std::to_string(seq) + "]";
  sample.make = [c](nn::Init& init) { return bert::Model::make(c, init); };
  sample.load = [c](const StateDict& s) { return bert::Model::load(s, c); };
  sample.example_input = [c, batch, seq](Device d) { return samples::example_ids(batch, seq, c.vocab, d); };
  sample.input_dtype = DType::i64;
  return samples::run(sample, argc, argv);
}
