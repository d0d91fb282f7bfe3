// The child processes of the cache tests. Configuration comes from the environment, as in any
// program (KILN_CACHE_DIR, KILN_ASSERT_NO_COMPILE, ...). Modes:
//   --child compile V            compile and run function variant V; print "stats ..." and
//                                "result ok" (exit 0), or the error (exit 2), or a wrong
//                                result (exit 3)
//   --child save FILE V          compile variant V, then write save_cache_artifacts() to FILE
//   --child load FILE V          load_cache_artifacts(FILE), print "loaded N", then compile V
//   --child write DIR MB         put entries of MB MiB into a disk store at DIR, forever
//   --child compile V W ...      variants V, W, ... one after the other (one stats line each)
//   --child pgo                  one function called on [8, 16] then [8, 24] (automatic dynamic
//                                makes dim 1 dynamic): "stats compiles=N ..." and "result ok"
//   --child autotune             a max-autotune matmul + bias + relu; prints the tuning
//                                decisions ("tuned: ...") and "result ok"
//   --child check                verify_disk_cache(remove_failed = false), as kiln cache ls runs
//                                it: "KEY ok|removed|skipped: DETAIL" per entry
#include <kiln/caches.h>
#include <kiln/kiln.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/cache/cache.h"

namespace {

using namespace kiln;

// Variant v: softmax(x * (v + 2), -1) + 1 over a [64, 96 + v] input; each variant is another
// graph (another attribute and shape).
int64_t cols_of(int v) { return 96 + v; }

std::vector<double> expected(const std::vector<float>& x, int v) {
  const int64_t cols = cols_of(v), rows = static_cast<int64_t>(x.size()) / cols;
  std::vector<double> out(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mx = -1e300, sum = 0;
    for (int64_t c = 0; c < cols; ++c) mx = std::max(mx, double(x[r * cols + c]) * (v + 2));
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(double(x[r * cols + c]) * (v + 2) - mx);
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = std::exp(double(x[r * cols + c]) * (v + 2) - mx) / sum + 1;
  }
  return out;
}

int run_variant(int v) {
  const double k = v + 2;
  auto f = kiln::compile([k](const Tensor& x) { return softmax(x * k, -1) + 1.0; });
  const Tensor x = randn({64, cols_of(v)}, DType::f32, Device::cpu(), /*seed=*/static_cast<uint64_t>(v));
  const Tensor y = f(x);
  const std::vector<double> want = expected(x.to_vector<float>(), v);
  const std::vector<double> got = y.to_vector<double>();
  const CompileStats s = f.stats();
  std::cout << "stats compiles=" << s.compiles;
  for (const char* layer : {"memory", "artifacts", "disk", "remote"}) {
    auto it = s.cache.find(layer);
    std::cout << " " << layer << "=" << (it == s.cache.end() ? 0 : it->second.hits) << "/"
              << (it == s.cache.end() ? 0 : it->second.misses);
  }
  std::cout << "\n";
  if (got.size() != want.size()) return 3;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::abs(got[i] - want[i]) > 1e-5 * (1 + std::abs(want[i]))) {
      std::cout << "wrong result at " << i << ": " << got[i] << " vs " << want[i] << "\n";
      return 3;
    }
  std::cout << "result ok\n";
  return 0;
}

// Profile-guided dynamic shapes: the same function on two sizes of dim 1.
int run_pgo() {
  auto f = kiln::compile([](const Tensor& x) { return sum(x * 3.0, {-1}); });
  int64_t compiles = 0;
  for (int64_t cols : {16, 24}) {
    const Tensor x = randn({8, cols}, DType::f32, Device::cpu(), /*seed=*/static_cast<uint64_t>(cols));
    const std::vector<float> xv = x.to_vector<float>();
    const std::vector<double> got = f(x).to_vector<double>();
    for (int64_t r = 0; r < 8; ++r) {
      double want = 0;
      for (int64_t c = 0; c < cols; ++c) want += 3.0 * xv[static_cast<size_t>(r * cols + c)];
      if (std::abs(got[static_cast<size_t>(r)] - want) > 1e-4 * (1 + std::abs(want))) {
        std::cout << "wrong result at " << r << ": " << got[static_cast<size_t>(r)] << " vs " << want << "\n";
        return 3;
      }
    }
    compiles = f.stats().compiles;
  }
  std::cout << "stats compiles=" << compiles << "\nresult ok\n";
  return 0;
}

// max-autotune: a matmul with an epilogue, so the BLAS call and the generated tiles are timed.
int run_autotune() {
  CompileOptions o;
  o.mode = "max-autotune-no-cudagraphs";
  auto f = kiln::compile([](const Tensor& a, const Tensor& b) { return relu(matmul(a, b) + 1.0); }, o);
  const Tensor a = randn({96, 64}, DType::f32, Device::cpu(), 1), b = randn({64, 80}, DType::f32, Device::cpu(), 2);
  const std::vector<float> av = a.to_vector<float>(), bv = b.to_vector<float>();
  const std::vector<double> got = f(a, b).to_vector<double>();
  for (int64_t i = 0; i < 96; ++i)
    for (int64_t j = 0; j < 80; ++j) {
      double want = 1;
      for (int64_t k = 0; k < 64; ++k) want += double(av[static_cast<size_t>(i * 64 + k)]) * bv[static_cast<size_t>(k * 80 + j)];
      want = std::max(want, 0.0);
      if (std::abs(got[static_cast<size_t>(i * 80 + j)] - want) > 1e-3 * (1 + std::abs(want))) {
        std::cout << "wrong result at " << i << "," << j << "\n";
        return 3;
      }
    }
  std::cout << "result ok\n";
  return 0;
}

}  // namespace

int child_main(int argc, char** argv) {
  try {
    const std::string mode = argc >= 3 ? argv[2] : "";
    if (mode == "compile" && argc >= 4) {
      for (int i = 3; i < argc; ++i)
        if (const int rc = run_variant(std::stoi(argv[i])); rc != 0) return rc;
      return 0;
    }
    if (mode == "pgo" && argc == 3) return run_pgo();
    if (mode == "autotune" && argc == 3) return run_autotune();
    if (mode == "check" && argc == 3) {
      for (const kiln::CacheEntryCheck& c : kiln::verify_disk_cache(/*remove_failed=*/false))
        std::cout << c.key << " " << (c.verdict == c.ok ? "ok" : c.verdict == c.removed ? "removed" : "skipped") << ": "
                  << c.detail << "\n";
      return 0;
    }
    if (mode == "save" && argc == 5) {
      const int rc = run_variant(std::stoi(argv[4]));
      std::ofstream(argv[3], std::ios::binary) << kiln::save_cache_artifacts();
      return rc;
    }
    if (mode == "load" && argc == 5) {
      std::ifstream in(argv[3], std::ios::binary);
      std::stringstream bytes;
      bytes << in.rdbuf();
      const kiln::CacheLoadResult r = kiln::load_cache_artifacts(bytes.str());
      std::cout << "loaded " << r.loaded << (r.reason.empty() ? "" : " because " + r.reason) << "\n";
      return run_variant(std::stoi(argv[4]));
    }
    if (mode == "write" && argc == 5) {
      kiln::cache::DiskStore store(argv[3], uint64_t{1} << 40);
      const std::string bytes(static_cast<size_t>(std::stoll(argv[4])) << 20, 'x');
      for (uint64_t i = 0;; ++i) store.put(kiln::cache::hash_hex(std::to_string(i)), bytes);
    }
    std::cerr << "test_cache --child: bad arguments\n";
    return 64;
  } catch (const std::exception& e) {
    std::cout << "error: " << e.what() << "\n";
    return 2;
  }
}
