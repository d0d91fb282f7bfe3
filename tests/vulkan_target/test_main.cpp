// Boost.Test module for the Vulkan target: every op of the op table and the random graphs of the
// cpu target's suite (tests/cpu_target: the same cases and harness), generated as GLSL
// (targets/vulkan/codegen), compiled with shaderc and run on vulkan:0 (targets/vulkan/runtime;
// lavapipe in CI) with validation layers on, compared with the reference interpreter.
#define BOOST_TEST_MODULE vulkan_target
#include <boost/test/unit_test.hpp>
