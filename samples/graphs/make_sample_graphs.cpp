// Writes the sample graph files of samples/graphs/ (the committed .json files are its output):
//   make_sample_graphs OUTDIR
// Each graph is built with Graph::add, so the files are exactly what the graph format writes.
// Weights are constants with seeded normal values (kiln::eval::randn_at), scaled by
// 1/sqrt(fan_in), so the files are self-contained and `kiln run --random` needs only x.
#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <memory>

#include "kiln/format/graph_json.h"
#include "kiln/graph/error.h"
#include "kiln/eval/random.h"

namespace {

using namespace kiln;

TensorMeta f32(SymShape sizes) {
  TensorMeta m;
  m.dtype = DType::f32;
  m.sizes = std::move(sizes);
  return m;
}

// A constant f32 tensor of normal values times `scale`, seeded by `seed`.
NodeId weight(Graph& g, std::vector<int64_t> sizes, uint64_t seed, float scale) {
  auto c = std::make_shared<ConstantData>();
  c->dtype = DType::f32;
  c->sizes = std::move(sizes);
  int64_t n = 1;
  for (int64_t s : c->sizes) n *= s;
  c->bytes.resize(static_cast<size_t>(n) * 4);
  for (int64_t i = 0; i < n; ++i) {
    float v = eval::randn_at(seed, static_cast<uint64_t>(i)) * scale;
    std::memcpy(c->bytes.data() + i * 4, &v, 4);
  }
  return g.add(OpId::constant, {}, {std::shared_ptr<const ConstantData>(std::move(c))});
}

NodeId filled(Graph& g, std::vector<int64_t> sizes, float value) {
  auto c = std::make_shared<ConstantData>();
  c->dtype = DType::f32;
  c->sizes = std::move(sizes);
  int64_t n = 1;
  for (int64_t s : c->sizes) n *= s;
  c->bytes.resize(static_cast<size_t>(n) * 4);
  for (int64_t i = 0; i < n; ++i) std::memcpy(c->bytes.data() + i * 4, &value, 4);
  return g.add(OpId::constant, {}, {std::shared_ptr<const ConstantData>(std::move(c))});
}

// linear(x, w[out, in], b[out]) with seeded weights.
NodeId linear(Graph& g, NodeId x, int64_t in, int64_t out, uint64_t seed) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(in));
  NodeId w = weight(g, {out, in}, seed, scale);
  NodeId b = weight(g, {out}, seed + 1, scale);
  return g.add(OpId::linear, {x, w, b});
}

NodeId layer_norm(Graph& g, NodeId x, int64_t dim) {
  NodeId w = filled(g, {dim}, 1.0f);
  NodeId b = filled(g, {dim}, 0.0f);
  return g.add(OpId::layer_norm, {x, w, b}, {int64_t{1}, 1e-5});
}

// x[8, 16] -> linear(16 -> 32) -> gelu -> linear(32 -> 16)
Graph mlp() {
  Graph g;
  NodeId x = g.add_input(f32({8, 16}), "x");
  NodeId h = linear(g, x, 16, 32, 100);
  h = g.add(OpId::gelu, {h}, {std::string("none")});
  NodeId y = linear(g, h, 32, 16, 200);
  g.set_outputs({y});
  return g;
}

// softmax of x[4, 10] over its last dim.
Graph softmax() {
  Graph g;
  NodeId x = g.add_input(f32({4, 10}), "x");
  g.set_outputs({g.add(OpId::softmax, {x}, {int64_t{1}})});
  return g;
}

// layer_norm of x[4, 16] over its last dim, with weight and bias as inputs.
Graph layernorm() {
  Graph g;
  NodeId x = g.add_input(f32({4, 16}), "x");
  NodeId w = g.add_input(f32({16}), "weight");
  NodeId b = g.add_input(f32({16}), "bias");
  g.set_outputs({g.add(OpId::layer_norm, {x, w, b}, {int64_t{1}, 1e-5})});
  return g;
}

// A pre-norm transformer block over x[8, 16] (sequence 8, width 16, one attention head):
//   a = softmax((ln1(x) Wq)(ln1(x) Wk)^T / sqrt(16)) (ln1(x) Wv);  x2 = x + a Wo
//   y = x2 + W2 gelu(W1 ln2(x2))
Graph transformer_block() {
  constexpr int64_t seq = 8, d = 16, hidden = 32;
  Graph g;
  NodeId x = g.add_input(f32({seq, d}), "x");
  NodeId h = layer_norm(g, x, d);
  NodeId q = linear(g, h, d, d, 10);
  NodeId k = linear(g, h, d, d, 20);
  NodeId v = linear(g, h, d, d, 30);
  NodeId kt = g.add(OpId::transpose, {k}, {int64_t{0}, int64_t{1}});
  NodeId scores = g.add(OpId::matmul, {q, kt});
  NodeId scale = filled(g, {}, 1.0f / std::sqrt(static_cast<float>(d)));
  scores = g.add(OpId::mul, {scores, scale});
  NodeId p = g.add(OpId::softmax, {scores}, {int64_t{1}});
  NodeId a = g.add(OpId::matmul, {p, v});
  NodeId o = linear(g, a, d, d, 40);
  NodeId x2 = g.add(OpId::add, {x, o});
  NodeId h2 = layer_norm(g, x2, d);
  NodeId m = linear(g, h2, d, hidden, 50);
  m = g.add(OpId::gelu, {m}, {std::string("tanh")});
  m = linear(g, m, hidden, d, 60);
  NodeId y = g.add(OpId::add, {x2, m});
  g.set_outputs({y});
  return g;
}

// softmax of x[s0, 16] over its last dim, with a symbolic batch size s0 (example 8).
Graph dynamic_softmax() {
  Graph g;
  SymInt batch = g.shapes().create_symbol(8, 2, std::numeric_limits<int64_t>::max(), "input 0 (x) dim 0", false);
  NodeId x = g.add_input(f32({batch, 16}), "x");
  g.set_outputs({g.add(OpId::softmax, {x}, {int64_t{1}})});
  return g;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_sample_graphs OUTDIR\n";
    return 2;
  }
  const std::string dir = argv[1];
  try {
    const std::pair<const char*, Graph (*)()> samples[] = {
        {"mlp.json", mlp},
        {"softmax.json", softmax},
        {"layernorm.json", layernorm},
        {"transformer_block.json", transformer_block},
        {"dynamic_softmax.json", dynamic_softmax},
    };
    for (const auto& [name, make] : samples) {
      const Graph g = make();
      const std::string path = dir + "/" + name;
      format::save_graph(g, path);
      // Every sample must load back to the same graph.
      KILN_CHECK(format::load_graph(path) == g, path, " does not load back to the graph that was saved");
      std::cout << "wrote " << path << " (" << g.size() << " nodes)\n";
    }
  } catch (const kiln::Error& e) {
    std::cerr << "make_sample_graphs: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
