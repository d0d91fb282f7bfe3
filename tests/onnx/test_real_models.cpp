// Small versions of the real models (tests/onnx/real_models/<model>/: ViT, Swin, BERT,
// DistilBERT, GPT-2, a Llama decoder, and ResNet-50's and MobileNetV3's structures, one or two
// layers or blocks each with narrow widths and random weights) exported by torch.onnx.export(dynamo=True) as tools/models/bench_models.py exports the
// full ones (tools/models/export_small_models.py wrote them, PyTorch 2.11), with an input and
// torch's fp32 output. Each runs through kiln::onnx::compile on the cpu target (and on Vulkan
// and CUDA where there is a device: tools/gpu/pack.sh carries this test to the GPU machine) and
// matches torch; and the graph patterns the full models rely on for speed are found in the
// exports as the exporter writes them (attention for the fused kernel).
#define BOOST_TEST_MODULE onnx_real_models
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "kiln/eval/interpreter.h"
#include "kiln/graph/error.h"
#include "kiln/npy/npy.h"
#include "kiln/onnx/onnx.h"
#include "kiln/passes/passes.h"
#include "kiln/tensor.h"
#include "model_helpers.h"

namespace fs = std::filesystem;
namespace konnx = kiln::onnx;
using kiln::Tensor;
using kiln::TensorData;

using onnx_test::available;
using onnx_test::values;

namespace {

// The source tree's folder, or (a binary carried to another machine, run from the repository
// root there) the same folder under the working directory.
const fs::path kModels = fs::exists(KILN_REAL_MODELS) ? fs::path(KILN_REAL_MODELS) : fs::path("tests/onnx/real_models");
const std::vector<std::string> kNames = {"vit", "swin", "bert", "distilbert", "gpt2", "llama", "resnet", "mobilenet"};

// The model's output on `device` against torch's: relative L2 within 1e-5 (fp32 both sides).
void check_model(const std::string& name, kiln::Device device) {
  const fs::path dir = kModels / name;
  const std::string at = name + " on " + device.str();
  const konnx::CompiledModel f = konnx::compile((dir / "model.onnx").string());
  const TensorData x = kiln::npy::load_npy((dir / "in_0.npy").string());
  const TensorData want = kiln::npy::load_npy((dir / "out.npy").string());
  const std::vector<Tensor> out = f({Tensor::from_data(x).to(device)});
  BOOST_REQUIRE_EQUAL(out.size(), 1u);
  const TensorData got = out[0].to(kiln::Device::cpu()).data();
  BOOST_REQUIRE_MESSAGE(got.sizes == want.sizes, at << ": output shape differs from torch's");
  const std::vector<double> g = values(got), w = values(want);
  double diff = 0, norm = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    diff += (g[i] - w[i]) * (g[i] - w[i]);
    norm += w[i] * w[i];
  }
  BOOST_TEST(norm > 0, at << ": torch's output is all zeros");
  BOOST_TEST(std::sqrt(diff / norm) < 1e-5, at << ": relative L2 " << std::sqrt(diff / norm));
}

int count(const kiln::Graph& g, kiln::OpId op) {
  int c = 0;
  for (kiln::NodeId id = 0; id < static_cast<kiln::NodeId>(g.size()); ++id) c += g.node(id).op == op;
  return c;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(real_models)

BOOST_AUTO_TEST_CASE(small_real_models_match_torch) {
  std::vector<kiln::Device> devices{kiln::Device::cpu()};
  for (kiln::Device d : {kiln::Device::vulkan(0), kiln::Device::cuda(0)})
    if (available(d)) devices.push_back(d);
  for (const std::string& name : kNames)
    for (kiln::Device d : devices) check_model(name, d);
}

// What a target with a fused attention kernel gets (the default pipeline, then
// recognize_attention, as schedule::prepare runs it): one attention per layer where the export's
// scores take no mask. Those with a mask (BERT's padding, GPT-2's and Llama's causal masks,
// Swin's position bias) and torch's zeroing of NaN rows after the softmax are not matched yet.
// Off the CPU the import makes constants parameters; one-element ones that elementwise ops read
// (the scale torch's decomposition multiplies q and k^T by) stay constants, so the pattern is
// found there too.
BOOST_AUTO_TEST_CASE(attention_is_recognised_in_the_exports) {
  const std::map<std::string, int> layers = {{"vit", 1}, {"bert", 1}, {"distilbert", 1}, {"gpt2", 1}, {"llama", 1}};
  for (const auto& [name, want] : layers)
    for (kiln::Device device : {kiln::Device::cpu(), kiln::Device::cuda(0)}) {
      konnx::LoadOptions options;
      options.device = device;
      const konnx::Model m = konnx::load((kModels / name / "model.onnx").string(), options);
      // The import leaves nothing unread behind (no 0-d copy of a constant it did not use).
      BOOST_TEST(kiln::passes::eliminate_dead_code(m.graph).size() == m.graph.size(), name << " on " << device.str());
      const kiln::Graph g = kiln::passes::eliminate_dead_code(
          kiln::passes::recognize_attention(kiln::passes::run_default_pipeline(m.graph)));
      BOOST_TEST(count(g, kiln::OpId::scaled_dot_product_attention) == want, name << " on " << device.str() << "\n" << g.str());
    }
}

// PyTorch's exporter records each node's module scopes: the imported nodes are named by them
// ("inner/encoder/layer.0/attention/self/node_..."), which the inspector groups by.
BOOST_AUTO_TEST_CASE(imported_nodes_are_named_by_module_scope) {
  const konnx::Model m = konnx::load((kModels / "bert" / "model.onnx").string());
  size_t in_attention = 0, computing = 0;
  for (const kiln::Node& n : m.graph.nodes()) {
    if (n.op == kiln::OpId::input) continue;
    ++computing;
    in_attention += n.name.rfind("inner/encoder/layer.0/attention/", 0) == 0;
  }
  BOOST_TEST(in_attention > 5u, m.graph.str());
  BOOST_TEST(in_attention < computing);
}

BOOST_AUTO_TEST_SUITE_END()
