// Boost.Test module for targets/render: what each flavour of the LLVM IR printer prints. (The
// kernels around it are checked end to end by the cpu and cuda target suites.)
#define BOOST_TEST_MODULE render
#include <boost/test/unit_test.hpp>
