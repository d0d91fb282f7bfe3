// kiln list-devices: the devices this build of Kiln can run on, by index (cpu; vulkan:<i> for
// every device the Vulkan loader reports, or why there is none).
#include <iostream>

#include "commands.h"
#if KILN_HAVE_VULKAN_TARGET
#include "kiln/vulkan/runtime.h"
#endif

namespace kiln::cli {

const CommandSpec& list_devices_spec() {
  static const CommandSpec spec{
      "list-devices", "",
      "Lists the devices Kiln can run on: cpu, and each Vulkan device by index (vulkan:<i>) with its\n"
      "driver, the features the shaders use (16/8-bit storage, f64, int64), subgroup size and timestamps.",
      "", {}};
  return spec;
}

int cmd_list_devices(std::span<char* const> args) {
  const CommandSpec& spec = list_devices_spec();
  ParsedArgs a = parse_args(spec, args);
  if (a.help) {
    std::cout << command_help(spec);
    return 0;
  }
  std::cout << "cpu\n";
#if KILN_HAVE_VULKAN_TARGET
  std::string why;
  const std::vector<vulkan::DeviceInfo> devices = vulkan::list_devices(&why);
  for (const vulkan::DeviceInfo& d : devices) std::cout << d.str() << "\n";
  if (devices.empty()) std::cout << "vulkan: " << why << "\n";
#else
  std::cout << "vulkan: not built (KILN_WITH_VULKAN=OFF)\n";
#endif
  return 0;
}

}  // namespace kiln::cli
