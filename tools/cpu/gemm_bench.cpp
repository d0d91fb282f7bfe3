// The sgemm libraries on transformer shapes, the way Kiln's CPU matmul kernels call them and
// otherwise: (1) Kiln's tiles (rows of 64 or 256 x columns of at most 512, one single-threaded
// OpenBLAS call each, on a spinning pool of N threads), (2) the same tiles through oneDNN's
// dnnl_sgemm (each pool thread's OpenMP count at 1), (3) threaded OpenBLAS and (4) oneDNN's
// whole-matrix sgemm and matmul primitive (OpenMP). What chose kiln_sgemm's library
// (targets/cpu/runtime/src/sgemm.cpp). Needs Debian's libdnnl-dev and libopenblas-pthread-dev:
//   g++ -O2 -std=c++17 -I/usr/include/x86_64-linux-gnu/openblas-pthread tools/cpu/gemm_bench.cpp \
//     -o gemm_bench /usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.a -ldnnl -fopenmp -lpthread
//   OPENBLAS_CORETYPE=Cooperlake ./gemm_bench 16      # threads; set the core type on AVX-512 hosts
#include <cblas.h>
#include <dnnl.hpp>
#include <omp.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>
#include <vector>
extern "C" void openblas_set_num_threads(int);
extern "C" char* openblas_get_corename(void);

struct Pool {
  int n; std::vector<std::thread> ts; std::atomic<int> gen{0}, done{0}; std::atomic<bool> stop{false};
  std::function<void(int)> job;
  explicit Pool(int n_) : n(n_) {
    for (int i = 1; i < n; ++i) ts.emplace_back([this, i] {
      int seen = 0;
      while (true) { int g; while ((g = gen.load(std::memory_order_acquire)) == seen) { if (stop) return; }
        seen = g; job(i); done.fetch_add(1); }
    });
  }
  void run(std::function<void(int)> f) { job = f; done = 0; gen.fetch_add(1, std::memory_order_release); job(0);
    while (done.load() < n - 1) {} }
  ~Pool() { stop = true; for (auto& t : ts) t.join(); }
};

double median(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }
template <class F> double timeit(F f, int reps = 15) {
  for (int i = 0; i < 3; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) { auto a = std::chrono::steady_clock::now(); f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count()); }
  return median(t);
}

int main(int argc, char** argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 16;
  printf("threads %d, openblas core %s\n", threads, openblas_get_corename());
  struct S { int64_t m, n, k; const char* what; };
  std::vector<S> shapes = {{1024, 768, 768, "qkv/out proj"}, {1024, 3072, 768, "ffn up"}, {1024, 768, 3072, "ffn down"},
                           {2048, 2304, 768, "gpt2 c_attn"}, {3152, 768, 768, "vit proj"}, {128, 128, 64, "attn scores (1 of 96)"}};
  Pool pool(threads);
  pool.run([](int) { omp_set_num_threads(1); });  // oneDNN called from a pool thread runs on that thread alone
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  for (auto s : shapes) {
    std::vector<float> A(s.m * s.k), B(s.k * s.n), C(s.m * s.n);
    for (auto& x : A) x = (rand() % 1000) / 1000.f; for (auto& x : B) x = (rand() % 1000) / 1000.f;
    double flop = 2.0 * s.m * s.n * s.k;
    // tiles: columns <= 512 (multiple of 16), rows grain 64, like Kiln's codegen
    auto tiled = [&](bool dnnl_tile, int64_t row_grain) {
      int64_t ct = (s.n + 511) / 512, w = ((s.n + ct - 1) / ct + 15) / 16 * 16; ct = (s.n + w - 1) / w;
      int64_t rt = (s.m + row_grain - 1) / row_grain; int64_t tasks = ct * rt;
      std::atomic<int64_t> next{0};
      pool.run([&](int) {
        int64_t t;
        while ((t = next.fetch_add(1)) < tasks) {
          int64_t c0 = (t % ct) * w, r0 = (t / ct) * row_grain;
          int64_t cols = std::min(w, s.n - c0), rows = std::min(row_grain, s.m - r0);
          if (dnnl_tile) dnnl_sgemm('N', 'N', rows, cols, s.k, 1.f, A.data() + r0 * s.k, s.k, B.data() + c0, s.n, 0.f, C.data() + r0 * s.n + c0, s.n);
          else cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, cols, s.k, 1.f, A.data() + r0 * s.k, s.k, B.data() + c0, s.n, 0.f, C.data() + r0 * s.n + c0, s.n);
        }
      });
    };
    openblas_set_num_threads(1);
    double t1 = timeit([&] { tiled(false, 64); });
    double t1b = timeit([&] { tiled(false, 256); });
    omp_set_num_threads(1);
    double t5 = timeit([&] { tiled(true, 64); });
    double t5b = timeit([&] { tiled(true, 256); });
    openblas_set_num_threads(threads);
    double t2 = timeit([&] { cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.m, s.n, s.k, 1.f, A.data(), s.k, B.data(), s.n, 0.f, C.data(), s.n); });
    openblas_set_num_threads(1);
    omp_set_num_threads(threads);
    double t3 = timeit([&] { dnnl_sgemm('N', 'N', s.m, s.n, s.k, 1.f, A.data(), s.k, B.data(), s.n, 0.f, C.data(), s.n); });
    using tag = dnnl::memory::format_tag; using dt = dnnl::memory::data_type;
    dnnl::memory::desc ad({s.m, s.k}, dt::f32, tag::ab), bd({s.k, s.n}, dt::f32, tag::ab), cd({s.m, s.n}, dt::f32, tag::ab);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, bd, cd), eng);
    dnnl::matmul mm(pd);
    dnnl::memory am(ad, eng, A.data()), bm(bd, eng, B.data()), cm(cd, eng, C.data());
    double t4 = timeit([&] { mm.execute(strm, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}}); strm.wait(); });
    // oneDNN with weights pre-packed (format any)
    dnnl::memory::desc bany({s.k, s.n}, dt::f32, tag::any);
    dnnl::matmul::primitive_desc pd2(dnnl::matmul::desc(ad, bany, cd), eng);
    dnnl::matmul mm2(pd2);
    dnnl::memory bm2(pd2.weights_desc(), eng);
    dnnl::reorder(bm, bm2).execute(strm, bm, bm2); strm.wait();
    double t6 = timeit([&] { mm2.execute(strm, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm2}, {DNNL_ARG_DST, cm}}); strm.wait(); });
    omp_set_num_threads(1);
    auto g = [&](double ms) { return flop / ms / 1e6; };
    printf("%-22s m%5ld n%5ld k%5ld | kiln-tiles/openblas r64 %.3f (%.0f GF/s) r256 %.3f (%.0f) | kiln-tiles/dnnl r64 %.3f (%.0f) r256 %.3f (%.0f) | openblas-mt %.3f (%.0f) | dnnl_sgemm-omp %.3f (%.0f) | dnnl matmul %.3f (%.0f) packedB %.3f (%.0f) impl %s\n",
           s.what, s.m, s.n, s.k, t1, g(t1), t1b, g(t1b), t5, g(t5), t5b, g(t5b), t2, g(t2), t3, g(t3), t4, g(t4), t6, g(t6), pd2.impl_info_str());
    fflush(stdout);
  }
}
