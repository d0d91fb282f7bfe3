// GPT-2 (Hugging Face's GPT2LMHeadModel, inference) written with kiln::nn: token and position
// embeddings, pre-norm blocks of causal multi-head attention and a tanh-GELU MLP, a final layer
// norm and the language-model head tied to the token embeddings. Parameters carry the
// transformers state dict's names ("transformer.h.0.attn.c_attn.weight", ...), so
// `safetensors.torch.save_file(model.state_dict(), ...)` on the torch side gives weights it
// loads (GPT-2's "Conv1D" layers keep their weights [in, out], as transformers does).
//
//   gpt2 [--config small|124m] [--batch B] [--seq T] + model_sample.h's options
//
// --config small (the default): 2 layers, width 64, 2 heads, vocab 100; 124m is GPT-2's.
// Input: token ids [B, T]; output: logits [B, T, vocab].
#include <string>
#include <vector>

#include "gpt2_model.h"
#include "model_sample.h"

using namespace kiln;

int main(int argc, char** argv) {
  using samples::int_flag;
  gpt2::Config c;
  if (samples::flag(argc, argv, "--config") == "124m") c = gpt2::Config{50257, 1024, 768, 12, 12};
  const int64_t batch = int_flag(argc, argv, "--batch", 2), seq = int_flag(argc, argv, "--seq", 16);
  samples::ModelSample<gpt2::Model> sample;
  sample.name = "gpt2";
  sample.summary = std::to_string(c.layers) + " layers, width " + std::to_string(c.width) + ", " +
                   std::to_string(c.heads) + " heads, vocab " + std::to_string(c.vocab) + "; ids [" +
                   std::to_string(batch) + ", " + std::to_string(seq) + "]";
  sample.make = [c](nn::Init& init) { return gpt2::Model::make(c, init); };
  sample.load = [c](const StateDict& s) { return gpt2::Model::load(s, c); };
  sample.example_input = [c, batch, seq](Device d) { return samples::example_ids(batch, seq, c.vocab, d); };
  sample.input_dtype = DType::i64;
  return samples::run(sample, argc, argv);
}
