// The Vulkan entry points the runtime uses, loaded from libvulkan.so.1 at run time (dlopen), so
// binaries linking the runtime start where there is no loader.
#pragma once

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#define KILN_VK_GLOBAL_FNS(X) \
  X(vkCreateInstance)         \
  X(vkEnumerateInstanceLayerProperties) \
  X(vkEnumerateInstanceExtensionProperties)

#define KILN_VK_INSTANCE_FNS(X)                 \
  X(vkDestroyInstance)                          \
  X(vkEnumeratePhysicalDevices)                 \
  X(vkGetPhysicalDeviceProperties)              \
  X(vkGetPhysicalDeviceProperties2)             \
  X(vkGetPhysicalDeviceFeatures2)               \
  X(vkGetPhysicalDeviceQueueFamilyProperties)   \
  X(vkGetPhysicalDeviceMemoryProperties)        \
  X(vkCreateDevice)                             \
  X(vkGetDeviceProcAddr)

#define KILN_VK_DEVICE_FNS(X)          \
  X(vkDestroyDevice)                   \
  X(vkGetDeviceQueue)                  \
  X(vkCreateBuffer)                    \
  X(vkDestroyBuffer)                   \
  X(vkGetBufferMemoryRequirements)     \
  X(vkAllocateMemory)                  \
  X(vkFreeMemory)                      \
  X(vkBindBufferMemory)                \
  X(vkMapMemory)                       \
  X(vkUnmapMemory)                     \
  X(vkCreateShaderModule)              \
  X(vkDestroyShaderModule)             \
  X(vkCreatePipelineCache)             \
  X(vkDestroyPipelineCache)            \
  X(vkCreateDescriptorSetLayout)       \
  X(vkDestroyDescriptorSetLayout)      \
  X(vkCreatePipelineLayout)            \
  X(vkDestroyPipelineLayout)           \
  X(vkCreateComputePipelines)          \
  X(vkDestroyPipeline)                 \
  X(vkCreateDescriptorPool)            \
  X(vkDestroyDescriptorPool)           \
  X(vkAllocateDescriptorSets)          \
  X(vkUpdateDescriptorSets)            \
  X(vkCreateCommandPool)               \
  X(vkDestroyCommandPool)              \
  X(vkAllocateCommandBuffers)          \
  X(vkFreeCommandBuffers)              \
  X(vkBeginCommandBuffer)              \
  X(vkEndCommandBuffer)                \
  X(vkCmdBindPipeline)                 \
  X(vkCmdBindDescriptorSets)           \
  X(vkCmdPushConstants)                \
  X(vkCmdDispatch)                     \
  X(vkCmdCopyBuffer)                   \
  X(vkGetPipelineCacheData)            \
  X(vkCmdPipelineBarrier)              \
  X(vkCmdResetQueryPool)               \
  X(vkCmdWriteTimestamp)               \
  X(vkCreateQueryPool)                 \
  X(vkDestroyQueryPool)                \
  X(vkGetQueryPoolResults)             \
  X(vkCreateFence)                     \
  X(vkDestroyFence)                    \
  X(vkResetFences)                     \
  X(vkWaitForFences)                   \
  X(vkQueueSubmit)                     \
  X(vkDeviceWaitIdle)

namespace kiln::vulkan::vk {

#define KILN_VK_DECLARE(name) extern PFN_##name name;
KILN_VK_GLOBAL_FNS(KILN_VK_DECLARE)
KILN_VK_INSTANCE_FNS(KILN_VK_DECLARE)
KILN_VK_DEVICE_FNS(KILN_VK_DECLARE)
#undef KILN_VK_DECLARE
extern PFN_vkCreateDebugUtilsMessengerEXT vkCreateDebugUtilsMessengerEXT;
extern PFN_vkDestroyDebugUtilsMessengerEXT vkDestroyDebugUtilsMessengerEXT;

// A readable name of a VkResult ("VK_ERROR_OUT_OF_DEVICE_MEMORY").
const char* result_name(VkResult r);

}  // namespace kiln::vulkan::vk

// Throws kiln::Error naming the call and the result when it fails.
#define KILN_VK(call)                                                                          \
  do {                                                                                         \
    const VkResult kiln_vk_r = (call);                                                         \
    if (kiln_vk_r != VK_SUCCESS)                                                               \
      ::kiln::fail("vulkan: ", #call, " failed: ", ::kiln::vulkan::vk::result_name(kiln_vk_r)); \
  } while (0)
