#include "kiln/cuda/gemm.h"

#include <cublasLt.h>

#include <map>
#include <mutex>

#include "kiln/graph/error.h"

namespace kiln::cuda {

namespace {

void check_lt(cublasStatus_t s, const char* call, const std::string& kernel) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  fail("cuBLASLt: ", call, " failed: ", cublasLtGetStatusName(s), " (", cublasLtGetStatusString(s), ") in kernel ", kernel);
}

struct Handle {
  cublasLtHandle_t h = nullptr;
  DevicePtr workspace = 0;
  size_t workspace_bytes = size_t{32} << 20;
};

Handle& handle_of(Context& ctx) {
  static std::mutex mu;
  static std::map<Context*, Handle> handles;
  std::lock_guard<std::mutex> lock(mu);
  Handle& h = handles[&ctx];
  if (!h.h) {
    check_lt(cublasLtCreate(&h.h), "cublasLtCreate", "(handle)");
    h.workspace = ctx.alloc(h.workspace_bytes);
  }
  return h;
}

struct Layout {
  cublasLtMatrixLayout_t l = nullptr;
  ~Layout() {
    if (l) cublasLtMatrixLayoutDestroy(l);
  }
};

// A row-major view with strides (rs over rows, cs over cols) of a rows x cols matrix, as cuBLASLt
// sees it (column-major): its transpose (cols x rows, ld rs, op N) when cs is 1, else the matrix
// itself (rows x cols, ld cs) with op T. `ok` is false when neither stride is unit.
struct Operand {
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  cublasOperation_t op = CUBLAS_OP_N;
  bool ok = true;
};
Operand as_column_major(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  Operand o;
  if (cols == 1) cs = 1;
  if (rows == 1) rs = std::max<int64_t>(cols, 1);
  if (cs == 1 && rs >= std::max<int64_t>(cols, 1)) {
    o.rows = static_cast<uint64_t>(cols);
    o.cols = static_cast<uint64_t>(rows);
    o.ld = rs;
    o.op = CUBLAS_OP_N;
    return o;
  }
  if (rows == 1) rs = 1;
  if (rs == 1 && cs >= std::max<int64_t>(rows, 1)) {
    o.rows = static_cast<uint64_t>(rows);
    o.cols = static_cast<uint64_t>(cols);
    o.ld = cs;
    o.op = CUBLAS_OP_T;
    return o;
  }
  o.ok = false;
  return o;
}

}  // namespace

void run_gemm(Context& ctx, const plan::PlanGemm& g, const std::vector<DevicePtr>& ptrs, const std::vector<int64_t>& syms,
              bool allow_tf32, const std::string& kernel, void* stream) {
  const int64_t m = g.m.evaluate(syms), n = g.n.evaluate(syms), k = g.k.evaluate(syms);
  std::vector<int64_t> batch, sa, sb;
  int64_t batches = 1;
  for (size_t d = 0; d < g.batch.size(); ++d) {
    batch.push_back(g.batch[d].evaluate(syms));
    sa.push_back(g.a_batch_strides[d].evaluate(syms));
    sb.push_back(g.b_batch_strides[d].evaluate(syms));
    batches *= batch.back();
  }
  const int64_t es = dtype_size(g.dtype);
  const DevicePtr c_base = ptrs[static_cast<size_t>(g.c)];
  if (m == 0 || n == 0 || batches == 0) return;
  if (k == 0) {  // empty sum: zeros
    ctx.memset(c_base, 0, static_cast<size_t>(batches * m * n * es));
    return;
  }
  cudaDataType_t t;
  cublasComputeType_t compute;
  cudaDataType_t scale = CUDA_R_32F;
  switch (g.dtype) {
    case DType::f32: t = CUDA_R_32F; compute = allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F; break;
    case DType::f16: t = CUDA_R_16F; compute = CUBLAS_COMPUTE_32F; break;
    case DType::bf16: t = CUDA_R_16BF; compute = CUBLAS_COMPUTE_32F; break;
    case DType::f64: t = CUDA_R_64F; compute = CUBLAS_COMPUTE_64F; scale = CUDA_R_64F; break;
    default: fail("cuda runtime: kernel ", kernel, ": matmul of ", dtype_name(g.dtype), " is not supported by cuBLASLt");
  }
  const Operand B = as_column_major(k, n, g.b_row_stride.evaluate(syms), g.b_col_stride.evaluate(syms));
  const Operand A = as_column_major(m, k, g.a_row_stride.evaluate(syms), g.a_col_stride.evaluate(syms));
  KILN_CHECK(A.ok && B.ok, "cuda runtime: kernel ", kernel, ": a gemm operand has no unit stride (A strides ",
             g.a_row_stride.evaluate(syms), ", ", g.a_col_stride.evaluate(syms), "; B strides ", g.b_row_stride.evaluate(syms),
             ", ", g.b_col_stride.evaluate(syms), "): the schedule should have copied it");
  Handle& h = handle_of(ctx);
  cublasLtMatmulDesc_t desc = nullptr;
  check_lt(cublasLtMatmulDescCreate(&desc, compute, scale), "cublasLtMatmulDescCreate", kernel);
  struct DescGuard {
    cublasLtMatmulDesc_t d;
    ~DescGuard() { cublasLtMatmulDescDestroy(d); }
  } dg{desc};
  // Column-major: C^T (n x m) = op(B^T) (n x k) * op(A^T) (k x m): the first operand is B.
  check_lt(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &B.op, sizeof B.op), "set TRANSA", kernel);
  check_lt(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &A.op, sizeof A.op), "set TRANSB", kernel);
  if (!g.epilogue.empty()) {
    // The bias runs along the product's last dim: the rows of the column-major C^T.
    KILN_CHECK(g.batch.empty() && g.bias >= 0, "cuda runtime: kernel ", kernel, ": a gemm epilogue needs a 2-D gemm and a bias");
    const cublasLtEpilogue_t ep = g.epilogue == "gelu_bias" ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    const void* bias = reinterpret_cast<const void*>(ptrs[static_cast<size_t>(g.bias)]);
    check_lt(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep), "set EPILOGUE", kernel);
    check_lt(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias), "set BIAS_POINTER", kernel);
  }
  Layout lb, la, lc;
  check_lt(cublasLtMatrixLayoutCreate(&lb.l, t, B.rows, B.cols, B.ld), "cublasLtMatrixLayoutCreate (B)", kernel);
  check_lt(cublasLtMatrixLayoutCreate(&la.l, t, A.rows, A.cols, A.ld), "cublasLtMatrixLayoutCreate (A)", kernel);
  check_lt(cublasLtMatrixLayoutCreate(&lc.l, t, static_cast<uint64_t>(n), static_cast<uint64_t>(m), n),
           "cublasLtMatrixLayoutCreate (C)", kernel);
  // The last batch dim is strided-batched; the outer ones loop.
  int32_t inner_count = 1;
  int64_t inner_sa = 0, inner_sb = 0, inner_sc = m * n;
  if (!batch.empty()) {
    inner_count = static_cast<int32_t>(batch.back());
    inner_sa = sa.back();
    inner_sb = sb.back();
    for (cublasLtMatrixLayout_t l : {lb.l, la.l, lc.l})
      check_lt(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &inner_count, sizeof inner_count),
               "set BATCH_COUNT", kernel);
    check_lt(cublasLtMatrixLayoutSetAttribute(lb.l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &inner_sb, sizeof inner_sb),
             "set STRIDED_BATCH_OFFSET (B)", kernel);
    check_lt(cublasLtMatrixLayoutSetAttribute(la.l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &inner_sa, sizeof inner_sa),
             "set STRIDED_BATCH_OFFSET (A)", kernel);
    check_lt(cublasLtMatrixLayoutSetAttribute(lc.l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &inner_sc, sizeof inner_sc),
             "set STRIDED_BATCH_OFFSET (C)", kernel);
  }
  cublasLtMatmulPreference_t pref = nullptr;
  check_lt(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate", kernel);
  struct PrefGuard {
    cublasLtMatmulPreference_t p;
    ~PrefGuard() { cublasLtMatmulPreferenceDestroy(p); }
  } pg{pref};
  check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &h.workspace_bytes,
                                                sizeof h.workspace_bytes),
           "set MAX_WORKSPACE_BYTES", kernel);
  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  check_lt(cublasLtMatmulAlgoGetHeuristic(h.h, desc, lb.l, la.l, lc.l, lc.l, pref, 1, &heur, &found),
           "cublasLtMatmulAlgoGetHeuristic", kernel);
  KILN_CHECK(found > 0, "cuBLASLt: no algorithm for the ", dtype_name(g.dtype), " gemm of kernel ", kernel, " (m ", m,
             ", n ", n, ", k ", k, ")");
  const float alpha32 = static_cast<float>(g.alpha), beta32 = 0;
  const double alpha64 = g.alpha, beta64 = 0;
  const void* alpha = scale == CUDA_R_64F ? static_cast<const void*>(&alpha64) : &alpha32;
  const void* beta = scale == CUDA_R_64F ? static_cast<const void*>(&beta64) : &beta32;
  // Outer batch dims: every index but the last dim's.
  const int64_t outer = batches / std::max<int64_t>(1, batch.empty() ? 1 : batch.back());
  std::vector<int64_t> idx(batch.empty() ? 0 : batch.size() - 1, 0);
  ctx.make_current();
  for (int64_t o = 0; o < outer; ++o) {
    int64_t oa = g.a_offset.evaluate(syms), ob = g.b_offset.evaluate(syms);
    for (size_t d = 0; d < idx.size(); ++d) {
      oa += idx[d] * sa[d];
      ob += idx[d] * sb[d];
    }
    const DevicePtr a = ptrs[static_cast<size_t>(g.a)] + static_cast<DevicePtr>(oa * es);
    const DevicePtr b = ptrs[static_cast<size_t>(g.b)] + static_cast<DevicePtr>(ob * es);
    const DevicePtr c = c_base + static_cast<DevicePtr>(o * inner_count * m * n * es);
    check_lt(cublasLtMatmul(h.h, desc, alpha, reinterpret_cast<const void*>(b), lb.l, reinterpret_cast<const void*>(a),
                            la.l, beta, reinterpret_cast<void*>(c), lc.l, reinterpret_cast<void*>(c), lc.l, &heur.algo,
                            reinterpret_cast<void*>(h.workspace), h.workspace_bytes, static_cast<cudaStream_t>(stream ? stream : ctx.stream())),
             "cublasLtMatmul", kernel);
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < batch[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace kiln::cuda
