// kiln_sgemm over OpenBLAS, or a cache-blocked loop nest when Kiln is built without it.
#include "sgemm.h"

#include <algorithm>
#include <mutex>

#include "kiln/cpu/jit.h"

#if KILN_HAVE_OPENBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
#endif

namespace kiln::cpu {

extern "C" void kiln_sgemm(int32_t trans_a, int32_t trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                           int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
#if KILN_HAVE_OPENBLAS
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), 1.0f, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), 0.0f, c, static_cast<blasint>(ldc));
#else
  auto A = [&](int64_t i, int64_t p) { return trans_a ? a[p * lda + i] : a[i * lda + p]; };
  auto B = [&](int64_t p, int64_t j) { return trans_b ? b[j * ldb + p] : b[p * ldb + j]; };
  for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
  constexpr int64_t kBlock = 256;
  for (int64_t p0 = 0; p0 < k; p0 += kBlock)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = p0; p < std::min(k, p0 + kBlock); ++p) {
        const float x = A(i, p);
        float* crow = c + i * ldc;
        if (!trans_b) {
          const float* brow = b + p * ldb;
          for (int64_t j = 0; j < n; ++j) crow[j] += x * brow[j];
        } else {
          for (int64_t j = 0; j < n; ++j) crow[j] += x * B(p, j);
        }
      }
#endif
}

void register_sgemm() {
  static std::once_flag once;
  std::call_once(once, [] {
#if KILN_HAVE_OPENBLAS
    openblas_set_num_threads(1);
#endif
    define_host_symbol("kiln_sgemm", reinterpret_cast<void*>(&kiln_sgemm));
  });
}

const char* sgemm_backend() { return KILN_HAVE_OPENBLAS ? "openblas" : "builtin"; }

}  // namespace kiln::cpu
