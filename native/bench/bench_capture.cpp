// Costs of the capture stage, measured with Google Benchmark:
// - BM_CachedCall: a cached compiled function with 4 tensor inputs, called again and again.
//   The backend's executable does no work (it hands back its first input), so the time is
//   the guard check, the cache lookup and the dispatch around the kernels, not the kernels.
// - BM_Trace10kOps: the first call of a function of 10,000 ops: tracing, guard building and
//   a backend that compiles nothing. The cache is reset before each call.
// - BM_CachedCallReference: the same 4-input call running a real (tiny) graph on the
//   reference target, for orientation.
#include <benchmark/benchmark.h>
#include <kiln/kiln.h>

using namespace kiln;

namespace {

void register_noop_backend() {
  static const bool done = [] {
    register_backend("noop", [](const Graph&, std::span<const TensorMeta>) -> Executable {
      return [](std::span<const TensorData* const> in) { return std::vector<TensorData>{*in[0]}; };
    });
    return true;
  }();
  (void)done;
}

Tensor add4(const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& d) { return a + b + c + d; }

void BM_CachedCall(benchmark::State& state) {
  register_noop_backend();
  auto f = kiln::compile(add4, CompileOptions{.backend = "noop"});
  const Tensor a = randn({64, 64}), b = randn({64, 64}, DType::f32, Device::cpu(), 1),
               c = randn({64, 64}, DType::f32, Device::cpu(), 2), d = randn({64, 64}, DType::f32, Device::cpu(), 3);
  benchmark::DoNotOptimize(f(a, b, c, d));  // compile once
  for (auto _ : state) benchmark::DoNotOptimize(f(a, b, c, d));
  if (f.stats().compiles != 1) state.SkipWithError("the cached call recompiled");
}
BENCHMARK(BM_CachedCall);

void BM_CachedCallReference(benchmark::State& state) {
  auto f = kiln::compile(add4);
  const Tensor a = randn({4}), b = randn({4}, DType::f32, Device::cpu(), 1), c = randn({4}, DType::f32, Device::cpu(), 2),
               d = randn({4}, DType::f32, Device::cpu(), 3);
  benchmark::DoNotOptimize(f(a, b, c, d));
  for (auto _ : state) benchmark::DoNotOptimize(f(a, b, c, d));
}
BENCHMARK(BM_CachedCallReference);

// 10,000 ops: alternating unary and binary pointwise ops on one small tensor.
Tensor chain(const Tensor& x, const Tensor& y) {
  Tensor h = x;
  for (int i = 0; i < 5000; ++i) h = tanh(h) * y;
  return h;
}

void BM_Trace10kOps(benchmark::State& state) {
  register_noop_backend();
  auto f = kiln::compile(chain, CompileOptions{.backend = "noop"});
  const Tensor x = randn({16}), y = randn({16}, DType::f32, Device::cpu(), 1);
  for (auto _ : state) {
    f.reset();
    benchmark::DoNotOptimize(f(x, y));
  }
  if (kiln::explain(chain, x, y).op_count != 10000) state.SkipWithError("the traced function does not have 10,000 ops");
  state.counters["ops"] = 10000;
}
BENCHMARK(BM_Trace10kOps)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
