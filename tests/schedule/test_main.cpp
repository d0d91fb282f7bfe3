// Boost.Test module for sdk/schedule: kernel-IR analyses the targets rely on. (Fusion itself is
// checked end to end by the cpu target's op tests and random graphs against the reference.)
#define BOOST_TEST_MODULE schedule
#include <boost/test/unit_test.hpp>
