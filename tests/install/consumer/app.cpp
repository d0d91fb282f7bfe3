#include <kiln/kiln.h>

#include <cstdio>

int main() {
  auto f = kiln::compile([](const kiln::Tensor& x) { return kiln::softmax(x * 2.0, -1); });
  const kiln::Tensor y = f(kiln::from_vector<float>({0, 0.5f, 1, 1}, {2, 2}));
  const auto v = y.to_vector<float>();
  std::printf("%.4f %.4f %.4f %.4f\n", v[0], v[1], v[2], v[3]);
  return (v[0] > 0.26f && v[0] < 0.27f && v[2] == 0.5f) ? 0 : 1;
}
