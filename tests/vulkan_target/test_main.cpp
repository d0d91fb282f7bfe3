// Boost.Test module for the Vulkan target: every op of the op table and the random graphs of the
// cpu target's suite (tests/cpu_target: the same cases and harness), generated as GLSL
// (targets/vulkan/codegen), compiled with shaderc and run on vulkan:0 (targets/vulkan/runtime;
// lavapipe in CI) with validation layers on, compared with the reference interpreter.
#define BOOST_TEST_MODULE vulkan_target
#include <boost/test/unit_test.hpp>

#include <cstdio>

#include "harness.h"
#include "kiln/vulkan/runtime.h"

// A device that may flush f32 subnormals (no shaderDenormPreserveFloat32, so the shaders cannot
// ask for them to be kept: NVIDIA's driver flushes them; lavapipe does not promise it either,
// though it keeps them) gets the harness's allowance for it (harness.h, flushes_f32_subnormals).
struct DenormalFixture {
  DenormalFixture() {
    if (!kiln::vulkan::available()) return;
    const kiln::vulkan::DeviceInfo d = kiln::vulkan::list_devices()[0];
    cpu_test::flushes_f32_subnormals() = !d.caps.denorm_preserve;
    if (!d.caps.denorm_preserve)
      std::fprintf(stderr, "vulkan target: %s flushes f32 subnormals: f32/bf16 inputs and results below the smallest "
                           "normal are compared as zero\n", d.name.c_str());
  }
};
BOOST_TEST_GLOBAL_FIXTURE(DenormalFixture);
