// The program `kiln report`'s test reports (report_test.sh runs it with KILN_DEBUG_DIR): one
// function compiled for a batch of 32 and recompiled for 48 (a size guard fails; the batch dim
// becomes dynamic), and one that breaks its graph on item(), compiled as two segments, with a
// weight it captures (a constant of its graph).
#include <kiln/kiln.h>

#include <cstdio>

using namespace kiln;

int main() {
  const Tensor w = randn({16, 8}, DType::f32, Device::cpu(), /*seed=*/1);
  auto head = kiln::compile([](const Tensor& x, const Tensor& w) { return softmax(matmul(x, w), -1); },
                            CompileOptions{.arg_names = {"x", "w"}});
  for (int64_t batch : {32, 32, 48}) head(randn({batch, 16}, DType::f32, Device::cpu(), 2), w);

  // `proj` is captured, so it is a constant of the graph (4 KB: the report leaves its bytes out).
  const Tensor proj = randn({8, 128}, DType::f32, Device::cpu(), 4) * 0.1;
  auto gated = kiln::compile([&proj](const Tensor& x) {
    const Tensor y = exp(matmul(x, proj)) * 2;
    const double total = sum(y).item<double>();  // a graph break: the value decides the next op
    return total > 0 ? y / total : y;
  });
  gated(randn({4, 8}, DType::f32, Device::cpu(), 3));
  std::printf("head: %s\ngated: %s\n", head.stats().str().c_str(), gated.stats().str().c_str());
  return 0;
}
