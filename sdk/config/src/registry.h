// Internal to sdk/config: the option and mode declarations (options.cpp) that the layer
// machinery (config.cpp) reads.
#pragma once

#include <kiln/config/config.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::config::internal {

// Returns "" when the (already well-typed) value is acceptable, else the rule it breaks,
// phrased to follow the option name: "must be at least 1".
using Validator = std::string (*)(const ConfigValue&);

struct OptionDef {
  OptionInfo info;
  Validator check = nullptr;
};

struct ModeDef {
  std::string name;
  std::vector<std::pair<std::string, ConfigValue>> values;
};

// Declaration order; built once, never changes.
const std::vector<OptionDef>& option_defs();
const std::vector<ModeDef>& mode_defs();

// Converts a value to `type` where that loses nothing (an integer to Float, an integral double
// to Int); nullopt otherwise. No constraint checks.
std::optional<ConfigValue> coerce_type(OptionType type, const ConfigValue& value);

// Parses text as `type` the way the environment layer does; nullopt when it does not parse.
std::optional<ConfigValue> parse_text(OptionType type, std::string_view text);

// "KILN_" + name upper-cased, '.' -> '_'.
std::string env_var_name(std::string_view option_name);

}  // namespace kiln::config::internal
