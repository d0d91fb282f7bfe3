// kiln_sgemm over OpenBLAS, or a cache-blocked loop nest when Kiln is built without it.
#include "sgemm.h"

#include <algorithm>
#include <cstdlib>
#include <type_traits>
#include <mutex>

#include "kiln/cpu/jit.h"

#if KILN_HAVE_OPENBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
extern "C" char* openblas_get_corename(void);
extern "C" char* openblas_get_config(void);
#endif

#if KILN_HAVE_OPENBLAS && defined(__x86_64__)
// OpenBLAS (Debian 12's 0.3.21, linked statically) picks its kernels by CPU model when it starts and
// takes a model it does not know for its SSE3 kernels ("Prescott"): on a 16-core Emerald Rapids
// (family 6, model 207) bert-base's matmuls ran 2.6x slower than with its AVX-512 ones (880 ms a
// call against 336). Where the user has not chosen (OPENBLAS_CORETYPE), a host with AVX-512 (F,
// BW, DQ, VL) is named by its features, before OpenBLAS's own constructor reads the variable:
// Cooperlake where it has AVX-512 BF16 (Sapphire Rapids and later), else SkylakeX; both are in
// its list and their sgemm kernels are the same. Hosts without AVX-512 keep OpenBLAS's choice.
__attribute__((constructor(101))) static void kiln_choose_openblas_core() {
  if (std::getenv("OPENBLAS_CORETYPE")) return;
  __builtin_cpu_init();
  if (!(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl")))
    return;
  unsigned a = 0, b = 0, c = 0, d = 0;  // CPUID leaf 7, subleaf 1: EAX bit 5 is AVX512_BF16
  __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(1));
  setenv("OPENBLAS_CORETYPE", (a & (1u << 5)) ? "Cooperlake" : "SkylakeX", 0);
}
#endif

namespace kiln::cpu {

namespace {

// C = A @ B, row-major, through the BLAS when there is one, else a cache-blocked loop nest.
template <class T>
void gemm(int32_t trans_a, int32_t trans_b, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
          int64_t ldb, T* c, int64_t ldc) {
#if KILN_HAVE_OPENBLAS
  const auto ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ta, tb, static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), 1.0f,
                a, static_cast<blasint>(lda), b, static_cast<blasint>(ldb), 0.0f, c, static_cast<blasint>(ldc));
  else
    cblas_dgemm(CblasRowMajor, ta, tb, static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), 1.0,
                a, static_cast<blasint>(lda), b, static_cast<blasint>(ldb), 0.0, c, static_cast<blasint>(ldc));
#else
  auto A = [&](int64_t i, int64_t p) { return trans_a ? a[p * lda + i] : a[i * lda + p]; };
  auto B = [&](int64_t p, int64_t j) { return trans_b ? b[j * ldb + p] : b[p * ldb + j]; };
  for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, T(0));
  constexpr int64_t kBlock = 256;
  for (int64_t p0 = 0; p0 < k; p0 += kBlock)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = p0; p < std::min(k, p0 + kBlock); ++p) {
        const T x = A(i, p);
        T* crow = c + i * ldc;
        for (int64_t j = 0; j < n; ++j) crow[j] += x * B(p, j);
      }
#endif
}

}  // namespace

extern "C" void kiln_sgemm(int32_t trans_a, int32_t trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                           int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
  gemm(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc);
}

extern "C" void kiln_dgemm(int32_t trans_a, int32_t trans_b, int64_t m, int64_t n, int64_t k, const double* a,
                           int64_t lda, const double* b, int64_t ldb, double* c, int64_t ldc) {
  gemm(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc);
}

void register_sgemm() {
  static std::once_flag once;
  std::call_once(once, [] {
#if KILN_HAVE_OPENBLAS
    openblas_set_num_threads(1);
#endif
    define_host_symbol("kiln_sgemm", reinterpret_cast<void*>(&kiln_sgemm));
    define_host_symbol("kiln_dgemm", reinterpret_cast<void*>(&kiln_dgemm));
  });
}

std::string matmul_library() {
#if KILN_HAVE_OPENBLAS
  // openblas_get_config(): "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Prescott MAX_THREADS=64"
  std::string config = openblas_get_config();
  const size_t version_end = config.find(' ', config.find(' ') + 1);
  return config.substr(0, version_end) + " (" + openblas_get_corename() + " kernels)";
#else
  return "Kiln's cache-blocked loop nest (built without OpenBLAS)";
#endif
}

}  // namespace kiln::cpu
