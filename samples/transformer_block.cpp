// A pre-norm transformer block written against the C++ Tensor API, compiled with
// kiln::compile and run on the CPU, or with `--device cuda` on the GPU (inputs and parameters on
// cuda:0, so the CUDA target compiles it; results are compared with the CPU's eager and
// reference results):
//   h = layer_norm(x); q, k, v = h Wq + bq, h Wk + bk, h Wv + bv  (split into heads:
//   [batch, heads, seq, head_dim]); a = softmax(q k^T / sqrt(head_dim)) v; x = x + a Wo + bo;
//   x = x + linear(gelu(linear(layer_norm(x))))
// It prints how many ops were traced and how many kernels the CPU compiler fused them into
// (kiln::explain), the kernels, the largest difference from eager execution (the same function
// called without compile) and from the reference interpreter, and the median time per call of
// compiled and eager, measured side by side. Then it calls the compiled block with other
// sequence lengths: the first new length recompiles once with a dynamic sequence dim, later
// lengths reuse that graph. Exits non-zero when the results disagree or it recompiled more
// than once.
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

constexpr int64_t kBatch = 4, kSeq = 128, kModel = 256, kHeads = 8, kHeadDim = kModel / kHeads, kFf = 4 * kModel;
constexpr int kWarmup = 3, kReps = 20;
constexpr double kTolerance = 1e-4;  // on activations of order 1

Tensor weight(int64_t in, int64_t out, uint64_t seed) {  // [in, out], for x @ w
  return randn({in, out}, DType::f32, Device::cpu(), seed) * (1.0 / std::sqrt(static_cast<double>(in)));
}
Tensor bias(int64_t n, uint64_t seed) { return randn({n}, DType::f32, Device::cpu(), seed) * 0.1; }

// The block's parameters. The compiled function takes them as arguments (a tensor captured
// from outside would become a constant of the graph).
struct Params {
  Tensor ln1_w = ones({kModel}), ln1_b = zeros({kModel});
  Tensor wq = weight(kModel, kModel, 11), bq = bias(kModel, 12);
  Tensor wk = weight(kModel, kModel, 13), bk = bias(kModel, 14);
  Tensor wv = weight(kModel, kModel, 15), bv = bias(kModel, 16);
  Tensor wo = weight(kModel, kModel, 17), bo = bias(kModel, 18);
  Tensor ln2_w = ones({kModel}), ln2_b = zeros({kModel});
  Tensor w1 = randn({kFf, kModel}, DType::f32, Device::cpu(), 19) * (1.0 / 16), b1 = bias(kFf, 20);  // linear: [out, in]
  Tensor w2 = randn({kModel, kFf}, DType::f32, Device::cpu(), 21) * (1.0 / 32), b2 = bias(kModel, 22);
};

// [batch, seq, model] -> [batch, heads, seq, head_dim]. Sizes come from the tensor's shape, so
// a symbolic sequence length stays symbolic.
Tensor split_heads(const Tensor& t) {
  const SymInt b = t.shape()[0], s = t.shape()[1];
  return transpose(reshape(t, {b, s, kHeads, kHeadDim}), 1, 2);
}

Tensor block(const Tensor& x, const Tensor& ln1_w, const Tensor& ln1_b, const Tensor& wq, const Tensor& bq,
             const Tensor& wk, const Tensor& bk, const Tensor& wv, const Tensor& bv, const Tensor& wo,
             const Tensor& bo, const Tensor& ln2_w, const Tensor& ln2_b, const Tensor& w1, const Tensor& b1,
             const Tensor& w2, const Tensor& b2) {
  const SymInt b = x.shape()[0], s = x.shape()[1];
  const Tensor h = layer_norm(x, {kModel}, ln1_w, ln1_b);
  const Tensor q = split_heads(matmul(h, wq) + bq);
  const Tensor k = split_heads(matmul(h, wk) + bk);
  const Tensor v = split_heads(matmul(h, wv) + bv);
  const Tensor scores = matmul(q, transpose(k, -2, -1)) * (1.0 / std::sqrt(static_cast<double>(kHeadDim)));
  const Tensor attn = matmul(softmax(scores, -1), v);                        // [b, heads, s, head_dim]
  const Tensor merged = reshape(transpose(attn, 1, 2), {b, s, kModel});      // [b, s, model]
  const Tensor x1 = x + (matmul(merged, wo) + bo);
  const Tensor h2 = layer_norm(x1, {kModel}, ln2_w, ln2_b);
  return x1 + linear(gelu(linear(h2, w1, b1)), w2, b2);
}

}  // namespace

int main(int argc, char** argv) {
  const Device dev = device_from_args(argc, argv);
  const bool gpu = dev.type != DeviceType::cpu;
  const Params p;
  // The parameters on the device (the compiled block's), and on the host (the comparisons').
  Params dp = p;
  if (gpu)
    for (Tensor* t : {&dp.ln1_w, &dp.ln1_b, &dp.wq, &dp.bq, &dp.wk, &dp.bk, &dp.wv, &dp.bv, &dp.wo, &dp.bo, &dp.ln2_w,
                      &dp.ln2_b, &dp.w1, &dp.b1, &dp.w2, &dp.b2})
      *t = t->to(dev);
  // Calls fn(x, every parameter).
  auto run_with = [](const Params& p, auto&& fn, const Tensor& x) {
    return fn(x, p.ln1_w, p.ln1_b, p.wq, p.bq, p.wk, p.bk, p.wv, p.bv, p.wo, p.bo, p.ln2_w, p.ln2_b, p.w1, p.b1, p.w2,
              p.b2);
  };
  auto run = [&](auto&& fn, const Tensor& x) { return run_with(p, fn, x); };              // on the host
  auto run_dev = [&](auto&& fn, const Tensor& x) { return run_with(dp, fn, gpu ? x.to(dev) : x); };  // on `dev`
  auto eager = [](auto&&... a) { return block(a...); };
  auto compiled = kiln::compile(eager, CompileOptions{.fullgraph = true, .arg_names = {"x"}});

  const Tensor x = randn({kBatch, kSeq, kModel}, DType::f32, Device::cpu(), /*seed=*/0);
  std::printf("device: %s\n", dev.str().c_str());
  std::printf("transformer block: x %s, %lld heads of %lld, mlp %lld\n", shape_str(x.shape()).c_str(),
              static_cast<long long>(kHeads), static_cast<long long>(kHeadDim), static_cast<long long>(kFf));
  const ExplainOutput e = run([&](const auto&... a) { return kiln::explain(eager, a...); }, x);
  std::printf("ops traced: %lld, kernels after fusion (CPU compiler): %lld\n", static_cast<long long>(e.op_count),
              static_cast<long long>(e.kernel_count));
  for (const std::string& k : e.kernels) std::printf("  %s\n", k.c_str());

  bool ok = true;
  auto check = [&](const Tensor& in, const char* what) {
    const Tensor y = run_dev(compiled, in).to(Device::cpu());
    const Tensor expected = run(eager, in);
    const double err = max(abs(y - expected)).item<double>();
    double ref_err = 0;
    {
      // Eager with no compiled single-op kernels: every op on the reference interpreter, the
      // oracle that shares no code with the CPU compiler.
      config::Patch all_reference({{"cpu.eager_compile_threshold", int64_t{-1}}});
      ref_err = max(abs(y - run(eager, in))).item<double>();
    }
    std::printf("%s: output %s, max |compiled - eager| = %.3g, max |compiled - reference| = %.3g (tol %.0e)\n", what,
                shape_str(y.shape()).c_str(), err, ref_err, kTolerance);
    if (!(err <= kTolerance) || !(ref_err <= kTolerance)) ok = false;
  };
  check(x, "seq 128");

  // Side by side: warm-up calls of both, then each rep times one compiled and one eager call.
  // (A build without the CPU target runs everything on the reference interpreter: one call each.)
  const bool cpu = e.kernel_count > 0 || gpu;
  if (!cpu) std::printf("this build has no CPU target (KILN_WITH_LLVM=OFF): timing one call on the reference target\n");
  const int warmup = cpu ? kWarmup : 0, reps = cpu ? kReps : 1;
  // On the GPU each timed call waits for its kernels (synchronize).
  const Tensor xd = gpu ? x.to(dev) : x;
  for (int i = 0; i < warmup; ++i) {
    run_with(dp, compiled, xd);
    run_with(dp, eager, xd);
  }
  synchronize(dev);
  std::vector<double> t_compiled, t_eager;
  for (int i = 0; i < reps; ++i) {
    t_compiled.push_back(time_ms([&] {
      run_with(dp, compiled, xd);
      synchronize(dev);
    }));
    t_eager.push_back(time_ms([&] {
      run_with(dp, eager, xd);
      synchronize(dev);
    }));
  }
  const double mc = median(t_compiled), me = median(t_eager);
  std::printf("median time per call (%d calls after %d warm-up): compiled %.2f ms, eager %.2f ms (%.2fx)\n", reps,
              warmup, mc, me, me / mc);

  // Dynamic shapes: a new sequence length recompiles once (the sequence dim becomes a symbol);
  // a third length reuses that graph.
  check(randn({kBatch, 64, kModel}, DType::f32, Device::cpu(), 1), "seq  64");
  check(randn({kBatch, 96, kModel}, DType::f32, Device::cpu(), 2), "seq  96");
  const CompileStats s = compiled.stats();
  std::printf("compiles %lld, recompiles %lld, cache hits %lld, guard failures %lld\n",
              static_cast<long long>(s.compiles), static_cast<long long>(s.recompiles),
              static_cast<long long>(s.cache_hits), static_cast<long long>(s.guard_failures));
  for (const std::string& r : s.recompile_reasons) std::printf("recompiled because %s\n", r.c_str());
  if (!ok || s.recompiles > 1) {
    std::printf("FAILED: expected agreement with eager and the reference within %.0e and at most 1 recompile\n",
                kTolerance);
    return 1;
  }
  std::printf("OK\n");
  return 0;
}
