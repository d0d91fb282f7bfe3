// A 3-layer MLP (linear + gelu, linear + gelu, linear, softmax) over a batch of 256 rows of
// width 1024, written against the C++ Tensor API, compiled with kiln::compile and run on the
// CPU, or with `--device cuda` on the GPU (inputs moved to cuda:0, so the CUDA target compiles
// it; eager then runs op by op on the GPU too, and the comparisons are made with the CPU's
// eager and reference results). It prints how many ops were traced and how many kernels the CPU compiler fused them
// into (kiln::explain), the kernels, the largest difference from eager execution (the same
// function called without compile: one kernel or interpreter call per op) and from the
// reference interpreter, and the median time per call of compiled and eager, measured side by
// side. Exits non-zero when the results disagree.
#include <kiln/kiln.h>

#include "sample_util.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace kiln;
using kiln::samples::device_from_args;
using kiln::samples::median;
using kiln::samples::time_ms;

namespace {

constexpr int64_t kBatch = 256, kIn = 1024, kHidden = 1024, kOut = 1024;
constexpr int kWarmup = 3, kReps = 20;
constexpr double kTolerance = 1e-5;  // on softmax probabilities (about 1 / kOut each)

// A weight [out, in] (linear's layout) scaled so activations keep unit variance.
Tensor weight(int64_t out, int64_t in, uint64_t seed) {
  return randn({out, in}, DType::f32, Device::cpu(), seed) * (1.0 / std::sqrt(static_cast<double>(in)));
}

}  // namespace

int main(int argc, char** argv) {
  const Device dev = device_from_args(argc, argv);
  const bool gpu = dev.type != DeviceType::cpu;
  const Tensor x = randn({kBatch, kIn}, DType::f32, Device::cpu(), /*seed=*/0);
  const Tensor w1 = weight(kHidden, kIn, 1), b1 = randn({kHidden}, DType::f32, Device::cpu(), 2) * 0.1;
  const Tensor w2 = weight(kHidden, kHidden, 3), b2 = randn({kHidden}, DType::f32, Device::cpu(), 4) * 0.1;
  const Tensor w3 = weight(kOut, kHidden, 5), b3 = randn({kOut}, DType::f32, Device::cpu(), 6) * 0.1;

  auto mlp = [](const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2, const Tensor& b2,
                const Tensor& w3, const Tensor& b3) {
    Tensor h = gelu(linear(x, w1, b1));
    h = gelu(linear(h, w2, b2));
    return softmax(linear(h, w3, b3), -1);
  };
  // The inputs on the device (a no-op for the CPU); the host ones stay for the comparisons.
  auto on = [&](const Tensor& t) { return gpu ? t.to(dev) : t; };
  const Tensor dx = on(x), dw1 = on(w1), db1 = on(b1), dw2 = on(w2), db2 = on(b2), dw3 = on(w3), db3 = on(b3);
  auto compiled = kiln::compile(mlp, CompileOptions{.fullgraph = true,
                                                    .arg_names = {"x", "w1", "b1", "w2", "b2", "w3", "b3"}});

  std::printf("device: %s\n", dev.str().c_str());
  std::printf("mlp: x %s -> linear %lld + gelu -> linear %lld + gelu -> linear %lld -> softmax\n",
              shape_str(x.shape()).c_str(), static_cast<long long>(kHidden), static_cast<long long>(kHidden),
              static_cast<long long>(kOut));
  const ExplainOutput e = kiln::explain(mlp, x, w1, b1, w2, b2, w3, b3);
  std::printf("ops traced: %lld, kernels after fusion (CPU compiler): %lld\n", static_cast<long long>(e.op_count),
              static_cast<long long>(e.kernel_count));
  for (const std::string& k : e.kernels) std::printf("  %s\n", k.c_str());

  const Tensor y = compiled(dx, dw1, db1, dw2, db2, dw3, db3).to(Device::cpu());
  const Tensor expected = mlp(x, w1, b1, w2, b2, w3, b3);  // eager
  const double err = max(abs(y - expected)).item<double>();
  const double row_sum = sum(y, {1}).to_vector<double>()[0];
  std::printf("output %s, row 0 sums to %.6f\n", shape_str(y.shape()).c_str(), row_sum);
  std::printf("max |compiled - eager| = %.3g (tolerance %.0e)\n", err, kTolerance);
  double ref_err = 0;
  {
    // Eager with no compiled single-op kernels: every op on the reference interpreter, the
    // oracle that shares no code with the CPU compiler.
    config::Patch all_reference({{"cpu.eager_compile_threshold", int64_t{-1}}});
    const Tensor reference = mlp(x, w1, b1, w2, b2, w3, b3);
    ref_err = max(abs(y - reference)).item<double>();
  }
  std::printf("max |compiled - reference interpreter| = %.3g (tolerance %.0e)\n", ref_err, kTolerance);

  // Side by side: warm-up calls of both, then each rep times one compiled and one eager call.
  // (A build without the CPU target runs everything on the reference interpreter: one call each.)
  const bool cpu = e.kernel_count > 0 || gpu;
  if (!cpu) std::printf("this build has no CPU target (KILN_WITH_LLVM=OFF): timing one call on the reference target\n");
  const int warmup = cpu ? kWarmup : 0, reps = cpu ? kReps : 1;
  // On the GPU each timed call waits for its kernels (synchronize).
  for (int i = 0; i < warmup; ++i) {
    compiled(dx, dw1, db1, dw2, db2, dw3, db3);
    mlp(dx, dw1, db1, dw2, db2, dw3, db3);
  }
  synchronize(dev);
  std::vector<double> t_compiled, t_eager;
  for (int i = 0; i < reps; ++i) {
    t_compiled.push_back(time_ms([&] {
      compiled(dx, dw1, db1, dw2, db2, dw3, db3);
      synchronize(dev);
    }));
    t_eager.push_back(time_ms([&] {
      mlp(dx, dw1, db1, dw2, db2, dw3, db3);
      synchronize(dev);
    }));
  }
  const double mc = median(t_compiled), me = median(t_eager);
  std::printf("median time per call (%d calls after %d warm-up): compiled %.2f ms, eager %.2f ms (%.2fx)\n", reps,
              warmup, mc, me, me / mc);

  const CompileStats s = compiled.stats();
  std::printf("compiles %lld, recompiles %lld, cache hits %lld\n", static_cast<long long>(s.compiles),
              static_cast<long long>(s.recompiles), static_cast<long long>(s.cache_hits));
  if (!(err <= kTolerance) || !(ref_err <= kTolerance) || s.compiles != 1) {
    std::printf("FAILED: expected agreement with eager and the reference within %.0e and exactly 1 compile\n",
                kTolerance);
    return 1;
  }
  std::printf("OK\n");
  return 0;
}
