#include "kiln/graph/device.h"

#include <charconv>

#include "kiln/graph/error.h"

namespace kiln {

std::string Device::str() const {
  switch (type) {
    case DeviceType::cpu:
      return "cpu";
    case DeviceType::cuda:
      return "cuda:" + std::to_string(index);
    case DeviceType::vulkan:
      return "vulkan:" + std::to_string(index);
  }
  return "?";
}

Device parse_device(std::string_view text) {
  if (text == "cpu") return Device::cpu();
  const auto colon = text.find(':');
  const std::string_view kind = text.substr(0, colon);
  int index = 0;
  if (colon != std::string_view::npos) {
    const std::string_view digits = text.substr(colon + 1);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec != std::errc() || end != digits.data() + digits.size() || index < 0 || digits.empty())
      fail("bad device '", text, "': the index after ':' must be a non-negative integer");
  }
  if (kind == "cuda") return Device::cuda(index);
  if (kind == "vulkan") return Device::vulkan(index);
  fail("unknown device '", text, "'; devices are written cpu, cuda:N or vulkan:N");
}

}  // namespace kiln
