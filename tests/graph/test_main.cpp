// Boost.Test module for sdk/graph: the op table, type promotion, broadcasting, shape rules,
// their errors, symbolic sizes through ops, and decompositions of composites.
#define BOOST_TEST_MODULE graph
#include <boost/test/unit_test.hpp>
