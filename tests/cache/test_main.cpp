// Boost.Test module for the compile caches (sdk/cache and its use by the cpu target). The
// binary is also its own child process: `test_cache --child MODE ...` runs one compile (or one
// cache write) and reports on stdout, so the tests can run several processes against one cache
// directory, kill one mid-write, and check what a fresh process finds (child.cpp).
#define BOOST_TEST_MODULE cache
#define BOOST_TEST_NO_MAIN
#define BOOST_TEST_ALTERNATIVE_INIT_API
#include <boost/test/unit_test.hpp>

#include <cstring>

int child_main(int argc, char** argv);

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "--child") == 0) return child_main(argc, argv);
  return boost::unit_test::unit_test_main(init_unit_test, argc, argv);
}
