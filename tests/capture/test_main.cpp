// Boost.Test module for sdk/capture through kiln::compile: guards, recompiles, stances,
// dynamic shapes, graph breaks, backends, logging.
#define BOOST_TEST_MODULE capture
#include <boost/test/unit_test.hpp>
