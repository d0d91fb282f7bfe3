// kiln list-devices: the devices this build of Kiln can run on, by index: one line per device of
// every registered target (cpu; cuda:<i> and vulkan:<i> for each device their drivers report),
// or a line saying why a target has none.
#include <iostream>

#include "commands.h"
#include "kiln/target/target.h"

namespace kiln::cli {

const CommandSpec& list_devices_spec() {
  static const CommandSpec spec{
      "list-devices", "",
      "Lists the devices Kiln can run on: cpu, each CUDA device (cuda:<i>) with its architecture and\n"
      "memory, and each Vulkan device by index (vulkan:<i>) with its driver, the features the shaders\n"
      "use (16/8-bit storage, f64, int64), subgroup size and timestamps; for a target without a\n"
      "device here, why.",
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
  target::ensure_builtin_targets();
  for (const std::string& name : target::runtime_names())
    for (const std::string& line : target::runtime(name).device_lines()) std::cout << line << "\n";
  return 0;
}

}  // namespace kiln::cli
