// Boost.Test module for sdk/passes: each pass where it must fire and where it must not, every
// test graph run through the reference interpreter before and after, and random graphs through
// the default pipeline and decompose.
#define BOOST_TEST_MODULE passes
#include <boost/test/unit_test.hpp>
