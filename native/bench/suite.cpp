#include "suite.h"

#include <cmath>
#include <utility>

namespace kiln::bench {

namespace {

Tensor normal(const Shape& shape, uint64_t seed) { return randn(shape, DType::f32, Device::cpu(), seed); }

// Builds a Workload from a function of N tensors returning a Tensor or a tuple of them.
template <size_t N, class F>
Workload make(std::string name, std::function<Tensors(bool)> inputs, F fn, bool launch_bound = false) {
  auto call = [fn](const auto& f, const Tensors& t) {
    return [&]<size_t... I>(std::index_sequence<I...>) { return detail::flatten(f(t.at(I)...)); }(
        std::make_index_sequence<N>{});
  };
  Workload w;
  w.name = std::move(name);
  w.launch_bound = launch_bound;
  w.make_inputs = std::move(inputs);
  w.eager = [fn, call](const Tensors& t) { return call(fn, t); };
  w.compiled = [fn, call](const CompileOptions& options) -> std::function<Tensors(const Tensors&)> {
    auto f = std::make_shared<decltype(kiln::compile(fn, options))>(kiln::compile(fn, options));
    return [f, call](const Tensors& t) { return call(*f, t); };
  };
  return w;
}

std::vector<Workload> build() {
  std::vector<Workload> w;
  // The CPU suite (--small) divides the big dimension by 8, as torch_anchor.py does.
  auto rows = [](bool small) -> int64_t { return small ? 1024 : 8192; };
  constexpr int64_t N = 8192;

  w.push_back(make<1>(
      "sincos", [rows](bool s) { return Tensors{normal({rows(s) * N / 4}, 1)}; },
      [](const Tensor& x) { return sin(x) + cos(x); }));
  w.push_back(make<2>(
      "gelu_bias", [rows](bool s) { return Tensors{normal({rows(s), N}, 1), normal({N}, 2)}; },
      [](const Tensor& x, const Tensor& b) { return gelu(x + b, "tanh"); }));
  w.push_back(make<1>(
      "softmax", [rows](bool s) { return Tensors{normal({rows(s), N}, 1)}; },
      [](const Tensor& x) { return softmax(x, -1); }));
  w.push_back(make<3>(
      "layernorm", [rows](bool s) { return Tensors{normal({rows(s), N}, 1), normal({N}, 2), normal({N}, 3)}; },
      [](const Tensor& x, const Tensor& g, const Tensor& b) { return layer_norm(x, {N}, g, b, 1e-5); }));
  w.push_back(make<2>(
      "rmsnorm", [rows](bool s) { return Tensors{normal({rows(s), N}, 1), normal({N}, 2)}; },
      [](const Tensor& x, const Tensor& g) { return x * rsqrt(mean(x * x, {-1}, true) + 1e-6) * g; }));
  w.push_back(make<4>(
      "add_layernorm",
      [rows](bool s) {
        return Tensors{normal({rows(s), N}, 1), normal({rows(s), N}, 2), normal({N}, 3), normal({N}, 4)};
      },
      [](const Tensor& x, const Tensor& y, const Tensor& g, const Tensor& b) {
        const Tensor h = x + y;
        return std::make_tuple(h, layer_norm(h, {N}, g, b, 1e-5));
      }));
  w.push_back(make<1>(
      "sum_all", [rows](bool s) { return Tensors{normal({rows(s) * N}, 1)}; },
      [](const Tensor& x) { return sum(x); }));
  w.push_back(make<1>(
      "col_sum", [rows](bool s) { return Tensors{normal({rows(s), N}, 1)}; },
      [](const Tensor& x) { return sum(x, {0}); }));
  w.push_back(make<5>(
      "mlp_bf16",
      [rows](bool s) {
        const int64_t m = rows(s), k = s ? 512 : 4096;
        return Tensors{normal({m, k}, 1).to(DType::bf16), (normal({k, k}, 2) * (1.0 / 64)).to(DType::bf16),
                       normal({k}, 3).to(DType::bf16), (normal({k, k}, 4) * (1.0 / 64)).to(DType::bf16),
                       normal({k}, 5).to(DType::bf16)};
      },
      [](const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2, const Tensor& b2) {
        return matmul(gelu(matmul(x, w1) + b1, "tanh"), w2) + b2;
      }));
  w.push_back(make<3>(
      "attention_bf16",
      [](bool s) {
        const int64_t seq = s ? 256 : 2048;
        return Tensors{normal({4, 16, seq, 64}, 1).to(DType::bf16), normal({4, 16, seq, 64}, 2).to(DType::bf16),
                       normal({4, 16, seq, 64}, 3).to(DType::bf16)};
      },
      [](const Tensor& q, const Tensor& k, const Tensor& v) {
        return matmul(softmax(matmul(q, transpose(k, -1, -2)) * (1.0 / std::sqrt(64.0)), -1), v);
      }));
  w.push_back(make<1>(
      "small_chain", [](bool) { return Tensors{normal({1024}, 1)}; },
      [](const Tensor& x0) {
        Tensor x = x0;
        for (int i = 0; i < 5; ++i) x = tanh(x) * 0.5 + sigmoid(x);
        return x;
      },
      /*launch_bound=*/true));
  return w;
}

}  // namespace

const std::vector<Workload>& suite() {
  static const std::vector<Workload> s = build();
  return s;
}

}  // namespace kiln::bench
