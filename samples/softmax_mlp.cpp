// The main sample: a small MLP with a softmax head, compiled with kiln::compile and run
// on the CPU. It checks the compiled result against eager execution, then shows the
// cache at work: a second call hits the cache, a new batch size recompiles once with a
// dynamic batch dim, and a third batch size reuses that dynamic graph.
#include <kiln/kiln.h>

#include <cmath>
#include <cstdio>

using namespace kiln;

int main() {
  const Tensor w1 = randn({64, 128}, DType::f32, Device::cpu(), /*seed=*/1) * (1.0 / 8);
  const Tensor b1 = zeros({128});
  const Tensor w2 = randn({128, 10}, DType::f32, Device::cpu(), /*seed=*/2) * (1.0 / 11);

  auto mlp = [](const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2) {
    const Tensor h = gelu(matmul(x, w1) + b1, "tanh");
    return softmax(matmul(h, w2), -1);
  };
  auto f = kiln::compile(mlp, CompileOptions{.fullgraph = true, .arg_names = {"x", "w1", "b1", "w2"}});

  double worst = 0;
  for (int64_t batch : {32, 32, 48, 96}) {
    const Tensor x = randn({batch, 64}, DType::f32, Device::cpu(), static_cast<uint64_t>(batch));
    const Tensor y = f(x, w1, b1, w2);
    const Tensor expected = mlp(x, w1, b1, w2);  // eager, op by op
    const double err = max(abs(y - expected)).item<double>();
    worst = std::max(worst, err);
    const double row_sum = sum(y, {1}).to_vector<double>()[0];
    std::printf("batch %3lld: output %s, row 0 sums to %.6f, max |compiled - eager| = %.3g\n",
                static_cast<long long>(batch), shape_str(y.shape()).c_str(), row_sum, err);
  }
  const CompileStats s = f.stats();
  std::printf("compiles %lld, recompiles %lld, cache hits %lld, guard failures %lld\n",
              static_cast<long long>(s.compiles), static_cast<long long>(s.recompiles),
              static_cast<long long>(s.cache_hits), static_cast<long long>(s.guard_failures));
  for (const std::string& r : s.recompile_reasons) std::printf("recompiled because %s\n", r.c_str());
  if (worst > 1e-5 || s.compiles != 2) {
    std::printf("FAILED: expected agreement with eager and exactly 2 compiles\n");
    return 1;
  }
  std::printf("OK\n");
  return 0;
}
