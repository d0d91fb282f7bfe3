#include "kiln/cuda/gemm.h"

#include <cublasLt.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <vector>

#include "background.h"
#include "kiln/graph/error.h"
#include "toolkit_api.h"

namespace kiln::cuda {

namespace {

void check_lt(cublasStatus_t s, const char* call, const std::string& kernel) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  fail("cuBLASLt: ", call, " failed: ", detail::cublaslt_api().cublasLtGetStatusName(s), " (", detail::cublaslt_api().cublasLtGetStatusString(s), ") in kernel ", kernel);
}

struct Handle {
  cublasLtHandle_t h = nullptr;
  DevicePtr workspace = 0;
  size_t workspace_bytes = size_t{32} << 20;
  // Held while one gemm's calls are queued: an algorithm may be several kernels sharing the
  // workspace (split-K partials, then their reduction), and two threads queueing on the same
  // stream at once would interleave them and read each other's partials (seen on the H100:
  // 3 threads, a 1x1x1 product with another call's value).
  std::mutex queue_mu;
};

Handle& handle_of(Context& ctx) {
  // Never destroyed, as the contexts: executables in static storage may run a gemm while the
  // process exits.
  static std::mutex& mu = *new std::mutex;
  static std::map<Context*, Handle>& handles = *new std::map<Context*, Handle>;
  std::lock_guard<std::mutex> lock(mu);
  Handle& h = handles[&ctx];
  if (!h.h) {
    check_lt(detail::cublaslt_api().cublasLtCreate(&h.h), "cublasLtCreate", "(handle)");
    h.workspace = ctx.alloc(h.workspace_bytes);
  }
  return h;
}

// Loads cuBLASLt (once per process) and makes ctx's handle.
void start_handle(Context& ctx) {
  ctx.make_current();
  handle_of(ctx);
}

struct Layout {
  cublasLtMatrixLayout_t l = nullptr;
  ~Layout() {
    if (l) detail::cublaslt_api().cublasLtMatrixLayoutDestroy(l);
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

// One gemm problem (shapes, strides, dtype, epilogue; not the addresses) set up for cuBLASLt:
// the matmul descriptor, the three layouts and up to kMaxAlgorithms algorithms of its heuristic,
// best first. Made once per thread and problem (a descriptor is not shared between threads: the
// bias pointer is set on it per call).
constexpr int kMaxAlgorithms = 8;
struct Prepared {
  cublasLtMatmulDesc_t desc = nullptr;
  Layout lb, la, lc;
  std::vector<cublasLtMatmulHeuristicResult_t> algorithms;
  cudaDataType_t scale = CUDA_R_32F;
  Prepared() = default;
  Prepared(const Prepared&) = delete;
  Prepared& operator=(const Prepared&) = delete;
  ~Prepared() {
    if (desc) detail::cublaslt_api().cublasLtMatmulDescDestroy(desc);
  }
};

// The heuristic's algorithms of each problem met so far, by its key, for every thread (they are
// plain data; the descriptors they go with are per thread). Never destroyed, as the handles.
using Heuristics = detail::ProblemTable<std::vector<cublasLtMatmulHeuristicResult_t>>;
Heuristics& heuristics() {
  static Heuristics& h = *new Heuristics;
  return h;
}

// What one call needs besides the prepared problem: sizes, batch loop, operands.
struct Problem {
  int64_t m = 0, n = 0, batches = 1, es = 0;
  std::vector<int64_t> batch, sa, sb;
  int32_t inner_count = 1;
  Prepared* prepared = nullptr;  // null when there is nothing to multiply (an empty product)
};

Problem prepare(Context& ctx, const plan::PlanGemm& g, const std::vector<int64_t>& syms, bool allow_tf32,
                const std::string& kernel) {
  Problem pr;
  pr.m = g.m.evaluate(syms);
  pr.n = g.n.evaluate(syms);
  const int64_t m = pr.m, n = pr.n, k = g.k.evaluate(syms);
  for (size_t d = 0; d < g.batch.size(); ++d) {
    pr.batch.push_back(g.batch[d].evaluate(syms));
    pr.sa.push_back(g.a_batch_strides[d].evaluate(syms));
    pr.sb.push_back(g.b_batch_strides[d].evaluate(syms));
    pr.batches *= pr.batch.back();
  }
  pr.es = dtype_size(g.dtype);
  if (m == 0 || n == 0 || k == 0 || pr.batches == 0) return pr;
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
  if (!g.epilogue.empty())
    KILN_CHECK(g.batch.empty() && (g.bias >= 0) == plan::gemm_epilogue_has_bias(g.epilogue), "cuda runtime: kernel ", kernel,
               ": a gemm epilogue needs a 2-D gemm, and a bias exactly where it adds one");
  // The last batch dim is strided-batched; the outer ones loop.
  int64_t inner_sa = 0, inner_sb = 0, inner_sc = m * n;
  if (!pr.batch.empty()) {
    pr.inner_count = static_cast<int32_t>(pr.batch.back());
    inner_sa = pr.sa.back();
    inner_sb = pr.sb.back();
  }
  std::ostringstream key;
  key << &ctx << ' ' << static_cast<int>(t) << ' ' << static_cast<int>(compute) << ' ' << B.rows << ' ' << B.cols << ' ' << B.ld
      << ' ' << static_cast<int>(B.op) << ' ' << A.rows << ' ' << A.cols << ' ' << A.ld << ' ' << static_cast<int>(A.op) << ' '
      << m << ' ' << n << ' ' << pr.inner_count << ' ' << inner_sa << ' ' << inner_sb << ' ' << g.epilogue;
  thread_local std::map<std::string, std::unique_ptr<Prepared>> problems;
  std::unique_ptr<Prepared>& slot = problems[key.str()];
  if (slot) {
    pr.prepared = slot.get();
    return pr;
  }
  if (problems.size() > 512) {  // many shapes (dynamic sizes): start again rather than grow
    problems.clear();
    return prepare(ctx, g, syms, allow_tf32, kernel);
  }
  const detail::LibrarySetupClock clock;
  auto p = std::make_unique<Prepared>();
  p->scale = scale;
  check_lt(detail::cublaslt_api().cublasLtMatmulDescCreate(&p->desc, compute, scale), "cublasLtMatmulDescCreate", kernel);
  // Column-major: C^T (n x m) = op(B^T) (n x k) * op(A^T) (k x m): the first operand is B.
  check_lt(detail::cublaslt_api().cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &B.op, sizeof B.op), "set TRANSA", kernel);
  check_lt(detail::cublaslt_api().cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &A.op, sizeof A.op), "set TRANSB", kernel);
  if (!g.epilogue.empty()) {
    // The bias runs along the product's last dim: the rows of the column-major C^T.
    const cublasLtEpilogue_t ep = g.epilogue == "gelu_bias" ? CUBLASLT_EPILOGUE_GELU_BIAS
                                  : g.epilogue == "gelu"    ? CUBLASLT_EPILOGUE_GELU
                                                            : CUBLASLT_EPILOGUE_BIAS;
    check_lt(detail::cublaslt_api().cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep), "set EPILOGUE", kernel);
  }
  check_lt(detail::cublaslt_api().cublasLtMatrixLayoutCreate(&p->lb.l, t, B.rows, B.cols, B.ld), "cublasLtMatrixLayoutCreate (B)", kernel);
  check_lt(detail::cublaslt_api().cublasLtMatrixLayoutCreate(&p->la.l, t, A.rows, A.cols, A.ld), "cublasLtMatrixLayoutCreate (A)", kernel);
  check_lt(detail::cublaslt_api().cublasLtMatrixLayoutCreate(&p->lc.l, t, static_cast<uint64_t>(n), static_cast<uint64_t>(m), n),
           "cublasLtMatrixLayoutCreate (C)", kernel);
  if (!pr.batch.empty()) {
    for (cublasLtMatrixLayout_t l : {p->lb.l, p->la.l, p->lc.l})
      check_lt(detail::cublaslt_api().cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &pr.inner_count, sizeof pr.inner_count),
               "set BATCH_COUNT", kernel);
    check_lt(detail::cublaslt_api().cublasLtMatrixLayoutSetAttribute(p->lb.l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &inner_sb, sizeof inner_sb),
             "set STRIDED_BATCH_OFFSET (B)", kernel);
    check_lt(detail::cublaslt_api().cublasLtMatrixLayoutSetAttribute(p->la.l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &inner_sa, sizeof inner_sa),
             "set STRIDED_BATCH_OFFSET (A)", kernel);
    check_lt(detail::cublaslt_api().cublasLtMatrixLayoutSetAttribute(p->lc.l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &inner_sc, sizeof inner_sc),
             "set STRIDED_BATCH_OFFSET (C)", kernel);
  }
  {
    std::lock_guard<std::mutex> lock(heuristics().mu);
    auto it = heuristics().by_key.find(key.str());
    if (it != heuristics().by_key.end()) {
      p->algorithms = it->second;
      slot = std::move(p);
      pr.prepared = slot.get();
      return pr;
    }
  }
  Handle& h = handle_of(ctx);
  cublasLtMatmulPreference_t pref = nullptr;
  check_lt(detail::cublaslt_api().cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate", kernel);
  struct PrefGuard {
    cublasLtMatmulPreference_t p;
    ~PrefGuard() { detail::cublaslt_api().cublasLtMatmulPreferenceDestroy(p); }
  } pg{pref};
  check_lt(detail::cublaslt_api().cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &h.workspace_bytes,
                                                sizeof h.workspace_bytes),
           "set MAX_WORKSPACE_BYTES", kernel);
  p->algorithms.resize(kMaxAlgorithms);
  int found = 0;
  check_lt(detail::cublaslt_api().cublasLtMatmulAlgoGetHeuristic(h.h, p->desc, p->lb.l, p->la.l, p->lc.l, p->lc.l, pref, kMaxAlgorithms,
                                          p->algorithms.data(), &found),
           "cublasLtMatmulAlgoGetHeuristic", kernel);
  KILN_CHECK(found > 0, "cuBLASLt: no algorithm for the ", dtype_name(g.dtype), " gemm of kernel ", kernel, " (m ", m,
             ", n ", n, ", k ", k, ")");
  p->algorithms.resize(static_cast<size_t>(found));
  {
    std::lock_guard<std::mutex> lock(heuristics().mu);
    if (heuristics().by_key.size() > 4096) heuristics().by_key.clear();  // many shapes (dynamic sizes)
    heuristics().by_key.emplace(key.str(), p->algorithms);
  }
  slot = std::move(p);
  pr.prepared = slot.get();
  return pr;
}

}  // namespace

std::thread start_gemm(Context& ctx, std::vector<plan::PlanGemm> gemms, bool allow_tf32, bool ahead_of_plan) {
  // The heuristics go in the table that every thread's set-up of the same problem reads.
  return detail::start_library(
      "cuBLASLt", ahead_of_plan, std::move(gemms), [&ctx] { start_handle(ctx); },
      [&ctx, allow_tf32](const plan::PlanGemm& g) { gemm_algorithms(ctx, g, {}, allow_tf32, "(start-up)"); });
}

int gemm_algorithms(Context& ctx, const plan::PlanGemm& g, const std::vector<int64_t>& syms, bool allow_tf32,
                    const std::string& kernel) {
  const Problem pr = prepare(ctx, g, syms, allow_tf32, kernel);
  return pr.prepared ? static_cast<int>(pr.prepared->algorithms.size()) : 0;
}

void run_gemm(Context& ctx, const plan::PlanGemm& g, const std::vector<DevicePtr>& ptrs, const std::vector<int64_t>& syms,
              bool allow_tf32, const std::string& kernel, void* stream, int algorithm) {
  const Problem pr = prepare(ctx, g, syms, allow_tf32, kernel);
  const int64_t m = pr.m, n = pr.n, es = pr.es;
  const DevicePtr c_base = ptrs[static_cast<size_t>(g.c)];
  if (m == 0 || n == 0 || pr.batches == 0) return;
  if (!pr.prepared) {  // k == 0, an empty sum: zeros
    ctx.memset(c_base, 0, static_cast<size_t>(pr.batches * m * n * es));
    return;
  }
  Prepared& p = *pr.prepared;
  if (g.bias >= 0) {
    const void* bias = reinterpret_cast<const void*>(ptrs[static_cast<size_t>(g.bias)]);
    check_lt(detail::cublaslt_api().cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias), "set BIAS_POINTER", kernel);
  }
  const cublasLtMatmulAlgo_t& algo =
      p.algorithms[static_cast<size_t>(std::clamp(algorithm, 0, static_cast<int>(p.algorithms.size()) - 1))].algo;
  Handle& h = handle_of(ctx);
  const float alpha32 = static_cast<float>(g.alpha), beta32 = 0;
  const double alpha64 = g.alpha, beta64 = 0;
  const void* alpha = p.scale == CUDA_R_64F ? static_cast<const void*>(&alpha64) : &alpha32;
  const void* beta = p.scale == CUDA_R_64F ? static_cast<const void*>(&beta64) : &beta32;
  // Outer batch dims: every index but the last dim's.
  const int64_t outer = pr.batches / std::max<int64_t>(1, pr.batch.empty() ? 1 : pr.batch.back());
  std::vector<int64_t> idx(pr.batch.empty() ? 0 : pr.batch.size() - 1, 0);
  ctx.make_current();
  std::lock_guard<std::mutex> queue(h.queue_mu);
  for (int64_t o = 0; o < outer; ++o) {
    int64_t oa = g.a_offset.evaluate(syms), ob = g.b_offset.evaluate(syms);
    for (size_t d = 0; d < idx.size(); ++d) {
      oa += idx[d] * pr.sa[d];
      ob += idx[d] * pr.sb[d];
    }
    const DevicePtr a = ptrs[static_cast<size_t>(g.a)] + static_cast<DevicePtr>(oa * es);
    const DevicePtr b = ptrs[static_cast<size_t>(g.b)] + static_cast<DevicePtr>(ob * es);
    const DevicePtr c = c_base + static_cast<DevicePtr>(o * pr.inner_count * m * n * es);
    check_lt(detail::cublaslt_api().cublasLtMatmul(h.h, p.desc, alpha, reinterpret_cast<const void*>(b), p.lb.l, reinterpret_cast<const void*>(a),
                            p.la.l, beta, reinterpret_cast<void*>(c), p.lc.l, reinterpret_cast<void*>(c), p.lc.l, &algo,
                            reinterpret_cast<void*>(h.workspace), h.workspace_bytes,
                            static_cast<cudaStream_t>(stream ? stream : ctx.stream())),
             "cublasLtMatmul", kernel);
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < pr.batch[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace kiln::cuda
