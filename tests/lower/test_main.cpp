// Boost.Test module for sdk/lower: the rules of reductions, evaluated here on sequences with
// NaN, infinities and ties, folded in every order a target combines partial states. (What the
// targets print from them is checked end to end by the cpu, cuda and vulkan target suites.)
#define BOOST_TEST_MODULE lower
#include <boost/test/unit_test.hpp>
