// Where a tensor lives: the CPU, a CUDA GPU or a Vulkan GPU, by index.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

enum class DeviceType : uint8_t { cpu, cuda, vulkan };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  static Device cpu() { return {DeviceType::cpu, 0}; }
  static Device cuda(int i = 0) { return {DeviceType::cuda, i}; }
  static Device vulkan(int i = 0) { return {DeviceType::vulkan, i}; }

  bool operator==(const Device&) const = default;
  std::string str() const;  // "cpu", "cuda:0", "vulkan:1"
};

Device parse_device(std::string_view text);  // inverse of str(); throws kiln::Error

}  // namespace kiln
