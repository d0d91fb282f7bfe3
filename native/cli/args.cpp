#include "args.h"

#include <algorithm>
#include <sstream>

namespace kiln::cli {

ParsedArgs parse_args(const CommandSpec& spec, std::span<char* const> args) {
  ParsedArgs out;
  const std::string prefix = "kiln " + spec.name + ": ";
  bool only_positional = false;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    if (only_positional || arg.size() < 2 || arg[0] != '-' ) {
      out.positional.push_back(arg);
      continue;
    }
    if (arg == "--") {
      only_positional = true;
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      out.help = true;
      continue;
    }
    std::string name = arg, value;
    bool inline_value = false;
    if (auto eq = arg.find('='); eq != std::string::npos && arg.rfind("--", 0) == 0) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      inline_value = true;
    }
    auto it = std::find_if(spec.flags.begin(), spec.flags.end(), [&](const FlagSpec& f) { return f.name == name; });
    if (it == spec.flags.end())
      throw UsageError(prefix + "unknown option '" + name + "' (see 'kiln " + spec.name + " --help')");
    if (it->value_name.empty()) {
      if (inline_value) throw UsageError(prefix + "option '" + name + "' takes no value");
    } else if (!inline_value) {
      if (i + 1 >= args.size()) throw UsageError(prefix + "option '" + name + "' needs a value (" + it->value_name + ")");
      value = args[++i];
    }
    if (out.values.count(name)) throw UsageError(prefix + "option '" + name + "' given twice");
    out.values[name] = value;
  }
  if (out.help) return out;
  if (spec.positional.empty()) {
    if (!out.positional.empty())
      throw UsageError(prefix + "unexpected argument '" + out.positional[0] + "' (see 'kiln " + spec.name + " --help')");
  } else {
    if (out.positional.empty()) throw UsageError(prefix + "missing " + spec.positional + " (see 'kiln " + spec.name + " --help')");
    if (out.positional.size() > 1)
      throw UsageError(prefix + "unexpected argument '" + out.positional[1] + "' (see 'kiln " + spec.name + " --help')");
  }
  return out;
}

std::string command_help(const CommandSpec& spec) {
  std::string s = "usage: kiln " + spec.name;
  if (!spec.positional.empty()) s += " " + spec.positional;
  s += " [options]\n\n" + spec.summary + "\n\noptions:\n";
  std::vector<std::pair<std::string, std::string>> rows;
  for (const FlagSpec& f : spec.flags) rows.push_back({f.name + (f.value_name.empty() ? "" : " " + f.value_name), f.help});
  rows.push_back({"--help", "show this help"});
  size_t width = 0;
  for (const auto& r : rows) width = std::max(width, r.first.size());
  for (const auto& r : rows) s += "  " + r.first + std::string(width - r.first.size() + 2, ' ') + r.second + "\n";
  if (!spec.details.empty()) s += "\n" + spec.details;
  if (!s.empty() && s.back() != '\n') s += '\n';
  return s;
}

std::vector<std::string> split_list(const std::string& s, char separator) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, separator))
    if (!part.empty()) out.push_back(part);
  return out;
}

}  // namespace kiln::cli
