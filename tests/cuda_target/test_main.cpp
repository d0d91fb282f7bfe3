// Boost.Test module for the CUDA target: every op of the op table and the random graphs of the
// cpu target's suite (tests/cpu_target: the same cases and harness), generated as CUDA C
// (targets/cuda/codegen) and compiled with NVRTC for sm_80 and sm_90. Where a CUDA device is
// present the plans also run on it (targets/cuda/runtime) and are compared with the reference
// interpreter; without one (CI) only the compile is checked, and the suite says so.
#define BOOST_TEST_MODULE cuda_target
#include <boost/test/unit_test.hpp>
