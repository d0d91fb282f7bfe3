// Boost.Test module for sdk/graph: the op table, type promotion, broadcasting, shape rules,
// their errors, symbolic sizes through ops, decompositions of composites, and the two error types.
#define BOOST_TEST_MODULE graph
#include <boost/test/unit_test.hpp>
