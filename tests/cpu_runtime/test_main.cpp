#define BOOST_TEST_MODULE cpu_runtime
#include <boost/test/unit_test.hpp>

#include "kiln/cpu/jit.h"
#include "kiln/cpu/thread_pool.h"

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

BOOST_AUTO_TEST_SUITE_END()
