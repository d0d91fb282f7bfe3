#define BOOST_TEST_MODULE reference
#include <boost/test/unit_test.hpp>
