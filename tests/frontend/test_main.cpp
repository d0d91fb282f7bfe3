// Boost.Test module for frontends/cpp: the eager Tensor API against hand-computed values.
#define BOOST_TEST_MODULE frontend
#include <boost/test/unit_test.hpp>
