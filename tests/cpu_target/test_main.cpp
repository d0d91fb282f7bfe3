// Boost.Test module for the CPU target: every op of the op table and random graphs, compiled on
// the CPU (schedule, LLVM IR codegen, JIT) and compared with the reference interpreter.
#define BOOST_TEST_MODULE cpu_target
#include <boost/test/unit_test.hpp>
