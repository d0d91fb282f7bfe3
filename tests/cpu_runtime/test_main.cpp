#define BOOST_TEST_MODULE cpu_runtime
#include <boost/test/unit_test.hpp>

#include <dirent.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include "kiln/cpu/executable.h"
#include "kiln/cpu/jit.h"
#include "kiln/cpu/thread_pool.h"

namespace {
// The process's threads (Linux: /proc/self/task), counted before main: OpenBLAS has started
// by then (its constructor, or the runtime's that runs first), Kiln's pool has not.
int count_threads() {
  DIR* d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}
const int threads_before_main = count_threads();

// A variable as the process was started with it (/proc/self/environ is not changed by setenv).
std::optional<std::string> environment_at_start(const std::string& name) {
  std::ifstream f("/proc/self/environ", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  for (size_t at = 0; at < all.size();) {
    const size_t end = all.find('\0', at);
    const std::string entry = all.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (entry.rfind(name + "=", 0) == 0) return entry.substr(name.size() + 1);
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return std::nullopt;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(host)

BOOST_AUTO_TEST_CASE(host_info_describes_this_machine) {
  const kiln::cpu::HostInfo h = kiln::cpu::host_info();
  BOOST_TEST_MESSAGE("host: cpu " << h.cpu_name << ", " << h.cores << " cores, " << h.vector_bits
                                  << "-bit vectors, vector math " << (h.vector_math ? "libmvec" : "off")
                                  << ", LLVM " << kiln::cpu::llvm_version() << ", "
                                  << kiln::cpu::target_triple());
  BOOST_TEST_MESSAGE("features: " << h.features);
  BOOST_TEST(h.cores >= 1);
  BOOST_TEST(!h.cpu_name.empty());
  BOOST_TEST((h.vector_bits == 128 || h.vector_bits == 256 || h.vector_bits == 512));
  BOOST_TEST(h.cores == kiln::cpu::hardware_threads());
  BOOST_TEST(kiln::cpu::llvm_version().rfind("16.", 0) == 0);
  BOOST_TEST(!kiln::cpu::target_triple().empty());
  BOOST_TEST(!kiln::cpu::data_layout().empty());
#if defined(__x86_64__)
  BOOST_TEST(h.features.find("+sse2") != std::string::npos);
  BOOST_TEST(kiln::cpu::target_triple().rfind("x86_64", 0) == 0);
#endif
}

// OpenBLAS (linked statically) is started with one thread, the runtime's setting, and the
// environment it was started with put back (ctest sets OPENBLAS_NUM_THREADS=3 for this binary).
BOOST_AUTO_TEST_CASE(openblas_starts_no_threads_and_leaves_the_environment_as_it_was) {
  BOOST_TEST_MESSAGE("matmuls through " << kiln::cpu::matmul_library());
  BOOST_TEST(threads_before_main == 1);
  for (const char* name : {"OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE"}) {
    const char* now = std::getenv(name);
    BOOST_TEST_INFO(name);
    BOOST_TEST(std::string(now ? now : "(unset)") == environment_at_start(name).value_or("(unset)"));
  }
}

BOOST_AUTO_TEST_SUITE_END()
