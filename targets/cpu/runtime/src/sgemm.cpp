// kiln_sgemm over oneDNN's sgemm (loaded with dlopen where it is installed) or OpenBLAS, or a
// cache-blocked loop nest when Kiln is built without OpenBLAS.
#include "sgemm.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>

#include "kiln/config/config.h"
#include "kiln/cpu/jit.h"
#include "kiln/graph/error.h"

#if KILN_HAVE_OPENBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
extern "C" char* openblas_get_corename(void);
extern "C" char* openblas_get_config(void);
#endif

#if KILN_HAVE_OPENBLAS
extern "C" void gotoblas_init(void);  // OpenBLAS's start-up (its constructor; a second call returns)

namespace {
// Sets an environment variable for the span of one scope and puts back what was there before.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    setenv(name, value, 1);
  }
  ~ScopedEnv() { had_ ? setenv(name_, old_.c_str(), 1) : unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

#if defined(__x86_64__)
// OpenBLAS (Debian 12's 0.3.21, linked statically) picks its kernels by CPU model when it starts and
// takes a model it does not know for its SSE3 kernels ("Prescott"): on a 16-core Emerald Rapids
// (family 6, model 207) bert-base's matmuls ran 2.6x slower than with its AVX-512 ones (880 ms a
// call against 336). A host with AVX-512 (F, BW, DQ, VL) is named by its features: Cooperlake
// where it has AVX-512 BF16 (Sapphire Rapids and later), else SkylakeX; both are in its list and
// their sgemm kernels are the same. Hosts without AVX-512 keep OpenBLAS's choice (nullptr).
const char* openblas_core_for_host() {
  __builtin_cpu_init();
  if (!(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl")))
    return nullptr;
  unsigned a = 0, b = 0, c = 0, d = 0;  // CPUID leaf 7, subleaf 1: EAX bit 5 is AVX512_BF16
  __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(1));
  return (a & (1u << 5)) ? "Cooperlake" : "SkylakeX";
}
#endif
}  // namespace

// OpenBLAS starts in a constructor of its own, which reads its settings from the environment.
// This one runs first (priority 101) and starts it on Kiln's terms, then puts the environment
// back as it was, so that nothing leaks into the program or the processes it starts:
// - one thread: Kiln calls it from its own pool, one thread per call (register_sgemm), and the
//   pthread build started with more spawns a server thread per core that spins on sched_yield
//   for about 2^28 cycles before it sleeps, in every process that links the runtime, gemms or
//   not (on the 2-core VM it took a third of a warm-cache `kiln run`'s CPU time);
// - its kernels, where the user has not chosen them (OPENBLAS_CORETYPE), named for the host.
__attribute__((constructor(101))) static void kiln_start_openblas() {
  ScopedEnv threads("OPENBLAS_NUM_THREADS", "1");
#if defined(__x86_64__)
  const char* core = std::getenv("OPENBLAS_CORETYPE") ? nullptr : openblas_core_for_host();
  std::optional<ScopedEnv> coretype;
  if (core) coretype.emplace("OPENBLAS_CORETYPE", core);
#endif
  gotoblas_init();
}
#endif

namespace kiln::cpu {

namespace {

// oneDNN's sgemm (row-major, like cblas_sgemm with alpha and beta), from Debian's libdnnl.so.2,
// opened at run time so that Kiln neither needs oneDNN to build nor to run. Per tile of rows
// and columns on one thread, as the kernels call it, it beat OpenBLAS 0.3.21's Cooperlake
// kernels on the GPU machine's 16-core Emerald Rapids by 1.2-1.4x on bert's and gpt2's shapes
// (tools/cpu/gemm_bench.cpp, 16 threads: [1024,768]x[768,768] 1.02 vs 1.31 ms, x[768,3072] 3.67
// vs 4.95, [1024,3072]x[3072,768] 4.07 vs 5.33). That build threads with OpenMP: called from a pool
// thread it would start a team of every core in each of them, so each call runs with the calling
// thread's OpenMP thread count set to 1 and restores it after (a caller's own OpenMP is kept).
struct OneDnn {
  using Sgemm = int (*)(char, char, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t,
                        float, float*, int64_t);
  struct Version {
    int major, minor, patch;
    const char* hash;
  };
  Sgemm sgemm = nullptr;
  int (*omp_get_max_threads)() = nullptr;
  void (*omp_set_num_threads)(int) = nullptr;
  std::string name;  // "oneDNN 2.6.3"
};
OneDnn g_onednn;  // set once, by register_sgemm, before any kernel can call kiln_sgemm
// Products of at most this many multiply-adds go to OpenBLAS under cpu.blas auto: there it was
// faster per call (Debian's oneDNN 2.6.3 against OpenBLAS 0.3.21, one thread, the 2-core AMD EPYC
// VM: 8x16x8 0.10 against 0.20 us, 16x16x16 0.17-0.18 against 0.24-0.31; from 8x32x32 on,
// oneDNN was as fast or up to 2x faster), and a process whose products are all that small never
// pays oneDNN's set-up on its first calls: ~35 ms generating its kernels (a warm-cache `kiln run`
// of transformer_block 66-68 ms, 25 ms with OpenBLAS).
constexpr int64_t kOneDnnMinMultiplyAdds = 4096;
int64_t g_onednn_min_multiply_adds = 0;  // kOneDnnMinMultiplyAdds under auto; 0 when cpu.blas is onednn

// Loads oneDNN (2.x, as Debian 12 has it, or 3.x: dnnl_sgemm is the same in both), or says why
// it could not.
std::string load_onednn(OneDnn& d) {
  void* h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!h) h = dlopen("libdnnl.so.3", RTLD_NOW | RTLD_LOCAL);
  if (!h) return dlerror();
  auto sym = [&](const char* name) { return dlsym(h, name); };  // libdnnl's dependencies included
  d.sgemm = reinterpret_cast<OneDnn::Sgemm>(sym("dnnl_sgemm"));
  d.omp_get_max_threads = reinterpret_cast<int (*)()>(sym("omp_get_max_threads"));
  d.omp_set_num_threads = reinterpret_cast<void (*)(int)>(sym("omp_set_num_threads"));
  auto version = reinterpret_cast<const OneDnn::Version* (*)()>(sym("dnnl_version"));
  if (!d.sgemm || !d.omp_get_max_threads || !d.omp_set_num_threads || !version) {
    d = OneDnn{};
    dlclose(h);
    return "libdnnl lacks dnnl_sgemm, dnnl_version or OpenMP's thread count functions";
  }
  const OneDnn::Version* v = version();
  d.name = "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
  return "";
}

bool onednn_sgemm(int32_t trans_a, int32_t trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                  const float* b, int64_t ldb, float* c, int64_t ldc) {
  const int threads = g_onednn.omp_get_max_threads();
  if (threads != 1) g_onednn.omp_set_num_threads(1);
  const int status = g_onednn.sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
  if (threads != 1) g_onednn.omp_set_num_threads(threads);
  return status == 0;  // dnnl_success; anything else (never seen) falls back to OpenBLAS
}

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
  if (g_onednn.sgemm && m * n * k > g_onednn_min_multiply_adds && onednn_sgemm(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc))
    return;
  gemm(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc);
}

extern "C" void kiln_dgemm(int32_t trans_a, int32_t trans_b, int64_t m, int64_t n, int64_t k, const double* a,
                           int64_t lda, const double* b, int64_t ldb, double* c, int64_t ldc) {
  gemm(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc);
}

void register_sgemm() {
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string blas = config::get<std::string>("cpu.blas");
    if (blas != "openblas") {
      OneDnn d;
      const std::string why = load_onednn(d);
      if (!why.empty() && blas == "onednn")
        fail("cpu runtime: cpu.blas is 'onednn' but oneDNN could not be loaded: ", why,
             " (Debian: libdnnl2; or set cpu.blas to auto or openblas)");
      g_onednn = d;
      g_onednn_min_multiply_adds = blas == "onednn" ? 0 : kOneDnnMinMultiplyAdds;
    }
#if KILN_HAVE_OPENBLAS
    openblas_set_num_threads(1);
#endif
    define_host_symbol("kiln_sgemm", reinterpret_cast<void*>(&kiln_sgemm));
    define_host_symbol("kiln_dgemm", reinterpret_cast<void*>(&kiln_dgemm));
  });
}

std::string matmul_library() {
  register_sgemm();  // the library is chosen there
  if (g_onednn.sgemm)
    return g_onednn.name + " sgemm" +
           (g_onednn_min_multiply_adds > 0 ? " (OpenBLAS for products of at most " + std::to_string(g_onednn_min_multiply_adds) + " multiply-adds)" : "");
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
