// Boost.Test module for sdk/config: options, layers, environment, modes, logging.
#define BOOST_TEST_MODULE config
#include <boost/test/unit_test.hpp>
