// kiln_sgemm: the matrix multiply generated matmul kernels call (row-major, C = A @ B, beta 0),
// provided to the JIT as a host symbol. Backed by OpenBLAS (set to one thread: the kernels
// already run on the thread pool, one block of rows per call) when Kiln is built with it.
#pragma once

#include <cstdint>

namespace kiln::cpu {

extern "C" void kiln_sgemm(int32_t trans_a, int32_t trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                           int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc);
// The same in f64.
extern "C" void kiln_dgemm(int32_t trans_a, int32_t trans_b, int64_t m, int64_t n, int64_t k, const double* a,
                           int64_t lda, const double* b, int64_t ldb, double* c, int64_t ldc);
// Defines kiln_sgemm and kiln_dgemm for the JIT (once per process).
void register_sgemm();

}  // namespace kiln::cpu
