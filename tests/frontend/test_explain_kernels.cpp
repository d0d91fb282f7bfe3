// kiln::explain's report of what the CPU compiler makes of the traced graphs: kernel_count and
// one line per fused kernel (name, kind, ops, composites).
#include "helpers.h"

#include <sstream>

using namespace kiln;
using namespace frontend_test;

namespace {

// True when this build has the CPU target (explain then reports kernels; without it, none).
bool have_cpu_target() {
  const ExplainOutput e = kiln::explain([](const Tensor& x) { return exp(x); }, randn({4, 4}));
  return e.kernel_count > 0;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& l : lines) s += l + "\n";
  return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(explain_kernels)

BOOST_AUTO_TEST_CASE(fields_are_consistent) {
  const ExplainOutput e = kiln::explain([](const Tensor& x) { return exp(x) + 1; }, randn({8, 64}));
  BOOST_TEST(e.kernel_count == static_cast<int64_t>(e.kernels.size()));
  const std::string text = e.str();
  BOOST_TEST(contains(text, "kernels (CPU, after fusion): " + std::to_string(e.kernel_count)), text);
  std::ostringstream streamed;
  streamed << e;
  BOOST_TEST(streamed.str() == text);
}

BOOST_AUTO_TEST_CASE(softmax_is_one_kernel) {
  if (!have_cpu_target()) return;
  const ExplainOutput e = kiln::explain([](const Tensor& x) { return softmax(x, -1); }, randn({8, 64}));
  BOOST_TEST_MESSAGE(e.str());
  BOOST_TEST(e.op_count == 1);
  BOOST_TEST(e.kernel_count == 1, joined(e.kernels));
  BOOST_REQUIRE_EQUAL(e.kernels.size(), 1u);
  const std::string& k = e.kernels[0];
  BOOST_TEST(k.rfind("k0 reduction: ", 0) == 0, k);
  BOOST_TEST(contains(k, "max"), k);
  BOOST_TEST(contains(k, "exp"), k);
  BOOST_TEST(contains(k, "sum"), k);
  BOOST_TEST(contains(k, "(softmax)"), k);
  BOOST_TEST(contains(e.str(), "  k0 reduction: "), e.str());
}

BOOST_AUTO_TEST_CASE(layer_norm_is_one_kernel) {
  if (!have_cpu_target()) return;
  const Tensor w = randn({64}, DType::f32, Device::cpu(), 1), b = randn({64}, DType::f32, Device::cpu(), 2);
  auto ln = [](const Tensor& x, const Tensor& w, const Tensor& b) { return layer_norm(x, {64}, w, b); };
  const ExplainOutput e = kiln::explain(ln, randn({8, 64}), w, b);
  BOOST_TEST_MESSAGE(e.str());
  BOOST_TEST(e.kernel_count == 1, joined(e.kernels));
  BOOST_REQUIRE_EQUAL(e.kernels.size(), 1u);
  BOOST_TEST(contains(e.kernels[0], "reduction"), e.kernels[0]);
  BOOST_TEST(contains(e.kernels[0], "rsqrt"), e.kernels[0]);
  BOOST_TEST(contains(e.kernels[0], "(layer_norm)"), e.kernels[0]);
}

BOOST_AUTO_TEST_CASE(hand_written_softmax_is_recognised) {
  if (!have_cpu_target()) return;
  auto f = [](const Tensor& x) {
    const Tensor e = exp(x - max(x, {-1}, true));
    return e / sum(e, {-1}, true);
  };
  const ExplainOutput e = kiln::explain(f, randn({8, 64}));
  BOOST_TEST_MESSAGE(e.str());
  BOOST_TEST(e.op_count > 1);
  BOOST_TEST(e.kernel_count == 1, joined(e.kernels));
  BOOST_REQUIRE_EQUAL(e.kernels.size(), 1u);
  BOOST_TEST(contains(e.kernels[0], "(softmax)"), e.kernels[0]);
}

BOOST_AUTO_TEST_CASE(pointwise_chain_is_one_kernel) {
  if (!have_cpu_target()) return;
  const ExplainOutput e =
      kiln::explain([](const Tensor& x, const Tensor& y, const Tensor& z) { return tanh(x * y + z); }, randn({8, 64}),
                    randn({8, 64}, DType::f32, Device::cpu(), 1), randn({8, 64}, DType::f32, Device::cpu(), 2));
  BOOST_TEST_MESSAGE(e.str());
  BOOST_TEST(e.op_count == 3);
  BOOST_TEST(e.kernel_count == 1, joined(e.kernels));
  BOOST_REQUIRE_EQUAL(e.kernels.size(), 1u);
  BOOST_TEST(e.kernels[0] == "k0 pointwise: mul, add, tanh");
}

BOOST_AUTO_TEST_CASE(long_chains_are_listed_in_short) {
  if (!have_cpu_target()) return;
  auto chain = [](const Tensor& x, const Tensor& y) {
    Tensor h = x;
    for (int i = 0; i < 50; ++i) h = tanh(h) * y;
    return h;
  };
  const ExplainOutput e = kiln::explain(chain, randn({8, 64}), randn({8, 64}, DType::f32, Device::cpu(), 1));
  BOOST_TEST(e.op_count == 100);
  BOOST_TEST(e.kernel_count == 1, joined(e.kernels));
  BOOST_REQUIRE_EQUAL(e.kernels.size(), 1u);
  BOOST_TEST(e.kernels[0].rfind("k0 pointwise: tanh, mul, tanh, ", 0) == 0, e.kernels[0]);
  BOOST_TEST(contains(e.kernels[0], ", ... (100 ops)"), e.kernels[0]);
  BOOST_TEST(e.kernels[0].size() < 300u, e.kernels[0]);
}

BOOST_AUTO_TEST_CASE(mlp_fuses_ops_into_fewer_kernels) {
  if (!have_cpu_target()) return;
  const Tensor w1 = randn({64, 32}, DType::f32, Device::cpu(), 1), b1 = randn({32}, DType::f32, Device::cpu(), 2);
  const Tensor w2 = randn({32, 10}, DType::f32, Device::cpu(), 3), b2 = randn({10}, DType::f32, Device::cpu(), 4);
  auto mlp = [](const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2, const Tensor& b2) {
    const Tensor h = gelu(matmul(x, w1) + b1);
    return softmax(matmul(h, w2) + b2, -1);
  };
  const ExplainOutput e = kiln::explain(mlp, randn({16, 64}), w1, b1, w2, b2);
  BOOST_TEST_MESSAGE(e.str());
  BOOST_TEST(e.op_count == 6);
  BOOST_TEST(e.kernel_count >= 2, joined(e.kernels));
  BOOST_TEST(e.op_count > e.kernel_count, joined(e.kernels));
  BOOST_REQUIRE(!e.kernels.empty());
  BOOST_TEST(contains(e.kernels[0], "k0 matmul: matmul, add, gelu"), e.kernels[0]);
}

BOOST_AUTO_TEST_CASE(graph_breaks_list_kernels_per_graph) {
  if (!have_cpu_target()) return;
  auto f = [](const Tensor& x) {
    const double s = sum(x).item<double>();  // a graph break
    return exp(x) * s;
  };
  const ExplainOutput e = kiln::explain(f, randn({8, 64}));
  BOOST_TEST_MESSAGE(e.str());
  BOOST_TEST(e.graph_count == 2);
  BOOST_TEST(e.kernel_count >= 2, joined(e.kernels));
  BOOST_REQUIRE(!e.kernels.empty());
  BOOST_TEST(e.kernels.front().rfind("graph 0: k0 ", 0) == 0, e.kernels.front());
  BOOST_TEST(e.kernels.back().rfind("graph 1: k0 ", 0) == 0, e.kernels.back());
}

BOOST_AUTO_TEST_CASE(empty_tensors_have_no_cpu_kernels) {
  // Graphs over empty tensors run on the reference target: no CPU kernels.
  const ExplainOutput e = kiln::explain([](const Tensor& x) { return exp(x); }, zeros({0, 4}));
  BOOST_TEST(e.op_count == 1);
  BOOST_TEST(e.kernel_count == 0);
  BOOST_TEST(e.kernels.empty());
}

BOOST_AUTO_TEST_SUITE_END()
