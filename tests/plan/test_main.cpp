// Boost.Test module for sdk/plan's validate and bind: what every runtime checks before it runs a
// plan, on real plans and on edited copies of them.
#define BOOST_TEST_MODULE plan
#include <boost/test/unit_test.hpp>
