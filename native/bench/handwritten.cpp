// The practical roofline: each workload hand-written as fused single-pass loops, compiled
// with -O3 -march=native and OpenMP (see CMakeLists.txt). Rows are split across threads;
// inner loops are left to the auto-vectoriser, with inlined polynomial exp/tanh/sigmoid so
// they vectorise (sin and cos still call libm). Reductions accumulate in float per row, like
// the kernels they are compared with.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cmath>
#include <stdexcept>

#include "suite.h"

namespace kiln::bench {

namespace {

// exp with Cephes' range reduction and polynomial (about 1 ulp): unlike libm's expf it is
// inlined and vectorised by `omp simd`, which is what a fused kernel would do.
#pragma omp declare simd
inline float vexp(float x) {
  x = std::min(std::max(x, -87.33654f), 88.72283f);
  const float n = std::floor(x * 1.44269504088896341f + 0.5f);
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  return p * std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
}
#pragma omp declare simd
inline float vtanh(float x) { return 1.0f - 2.0f / (vexp(2.0f * x) + 1.0f); }
#pragma omp declare simd
inline float vsigmoid(float x) { return 1.0f / (1.0f + vexp(-x)); }

#pragma omp declare simd
inline float gelu_tanh(float v) {
  const float k = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * v * (1.0f + vtanh(k * (v + 0.044715f * v * v * v)));
}

// Normalises one row: out = (x - mean) * rstd * g + b.
void layer_norm_row(const float* x, const float* g, const float* b, float* out, int64_t n) {
  float sum = 0, sq = 0;
#pragma omp simd reduction(+ : sum, sq)
  for (int64_t c = 0; c < n; ++c) {
    sum += x[c];
    sq += x[c] * x[c];
  }
  const float mean = sum / static_cast<float>(n);
  const float var = std::max(sq / static_cast<float>(n) - mean * mean, 0.0f);
  const float rstd = 1.0f / std::sqrt(var + 1e-5f);
#pragma omp simd
  for (int64_t c = 0; c < n; ++c) out[c] = (x[c] - mean) * rstd * g[c] + b[c];
}

}  // namespace

HostImpl handwritten_impl(const std::string& name, const std::vector<std::vector<int64_t>>& shapes) {
  const int64_t rows = shapes[0].size() == 2 ? shapes[0][0] : 1;
  const int64_t n = shapes[0].back();
  if (name == "sincos")
    return [n](const auto& in, const auto& out) {
      const float* x = in[0];
      float* y = out[0];
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < n; ++i) y[i] = std::sin(x[i]) + std::cos(x[i]);
    };
  if (name == "gelu_bias")
    return [rows, n](const auto& in, const auto& out) {
#pragma omp parallel for schedule(static)
      for (int64_t r = 0; r < rows; ++r) {
        const float* x = in[0] + r * n;
        float* y = out[0] + r * n;
#pragma omp simd
        for (int64_t c = 0; c < n; ++c) y[c] = gelu_tanh(x[c] + in[1][c]);
      }
    };
  if (name == "softmax")
    return [rows, n](const auto& in, const auto& out) {
#pragma omp parallel for schedule(static)
      for (int64_t r = 0; r < rows; ++r) {
        const float* x = in[0] + r * n;
        float* y = out[0] + r * n;
        float m = -INFINITY;
#pragma omp simd reduction(max : m)
        for (int64_t c = 0; c < n; ++c) m = std::max(m, x[c]);
        float s = 0;
#pragma omp simd reduction(+ : s)
        for (int64_t c = 0; c < n; ++c) {
          y[c] = vexp(x[c] - m);
          s += y[c];
        }
        const float inv = 1.0f / s;
#pragma omp simd
        for (int64_t c = 0; c < n; ++c) y[c] *= inv;
      }
    };
  if (name == "layernorm")
    return [rows, n](const auto& in, const auto& out) {
#pragma omp parallel for schedule(static)
      for (int64_t r = 0; r < rows; ++r) layer_norm_row(in[0] + r * n, in[1], in[2], out[0] + r * n, n);
    };
  if (name == "rmsnorm")
    return [rows, n](const auto& in, const auto& out) {
#pragma omp parallel for schedule(static)
      for (int64_t r = 0; r < rows; ++r) {
        const float* x = in[0] + r * n;
        float* y = out[0] + r * n;
        float sq = 0;
#pragma omp simd reduction(+ : sq)
        for (int64_t c = 0; c < n; ++c) sq += x[c] * x[c];
        const float scale = 1.0f / std::sqrt(sq / static_cast<float>(n) + 1e-6f);
#pragma omp simd
        for (int64_t c = 0; c < n; ++c) y[c] = x[c] * scale * in[1][c];
      }
    };
  if (name == "add_layernorm")
    return [rows, n](const auto& in, const auto& out) {
#pragma omp parallel for schedule(static)
      for (int64_t r = 0; r < rows; ++r) {
        const float* x = in[0] + r * n;
        const float* y = in[1] + r * n;
        float* h = out[0] + r * n;
#pragma omp simd
        for (int64_t c = 0; c < n; ++c) h[c] = x[c] + y[c];
        layer_norm_row(h, in[2], in[3], out[1] + r * n, n);
      }
    };
  if (name == "sum_all")
    return [n](const auto& in, const auto& out) {
      // Blocks of 4096 summed in float (vectorised), blocks combined in double.
      double total = 0;
      const int64_t blocks = (n + 4095) / 4096;
      const float* x = in[0];
#pragma omp parallel for schedule(static) reduction(+ : total)
      for (int64_t blk = 0; blk < blocks; ++blk) {
        const int64_t end = std::min(n, (blk + 1) * 4096);
        float part = 0;
#pragma omp simd reduction(+ : part)
        for (int64_t i = blk * 4096; i < end; ++i) part += x[i];
        total += part;
      }
      out[0][0] = static_cast<float>(total);
    };
  if (name == "col_sum")
    return [rows, n](const auto& in, const auto& out) {
      // Columns split across threads; each thread walks its columns row by row, reading
      // contiguous memory once.
#pragma omp parallel
      {
#pragma omp for schedule(static)
        for (int64_t c = 0; c < n; ++c) out[0][c] = 0;
#pragma omp for schedule(static)
        for (int64_t block = 0; block < n; block += 256) {
          const int64_t end = std::min(block + 256, n);
          for (int64_t r = 0; r < rows; ++r) {
            const float* x = in[0] + r * n;
#pragma omp simd
            for (int64_t c = block; c < end; ++c) out[0][c] += x[c];
          }
        }
      }
    };
  if (name == "small_chain")
    return [n](const auto& in, const auto& out) {
      // 1024 elements: threads would cost more than they save.
      const float* x = in[0];
      float* y = out[0];
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) {
        float v = x[i];
        for (int k = 0; k < 5; ++k) v = vtanh(v) * 0.5f + vsigmoid(v);
        y[i] = v;
      }
    };
  return {};
}

}  // namespace kiln::bench
