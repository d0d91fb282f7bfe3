// Boost.Test module for frontends/graph: lossless round trips of every op, symbols, facts and
// constants; byte-identical re-serialisation; the errors malformed files give; sample graphs.
#define BOOST_TEST_MODULE format
#include <boost/test/unit_test.hpp>
