// kiln list-options and kiln list-backends.
#include <iostream>

#include "commands.h"
#include "kiln/compile.h"  // kiln::list_backends(): the registry with the built-in backends
#include "kiln/config/config.h"

namespace kiln::cli {

const CommandSpec& list_options_spec() {
  static const CommandSpec spec{
      "list-options", "",
      "Lists every configuration option: its name, type, default, environment variable and doc.\n"
      "Options marked [not yet used] are declared for a stage that does not read them yet;\n"
      "[codegen] marks options that change generated code (and so cache keys).",
      "", {}};
  return spec;
}

const CommandSpec& list_backends_spec() {
  static const CommandSpec spec{"list-backends", "", "Lists the compile backends this build of Kiln knows.", "", {}};
  return spec;
}

int cmd_list_options(std::span<char* const> args) {
  const CommandSpec& spec = list_options_spec();
  ParsedArgs a = parse_args(spec, args);
  if (a.help) {
    std::cout << command_help(spec);
    return 0;
  }
  for (const config::OptionInfo& o : config::list_options()) {
    std::cout << o.name << "  (" << config::type_name(o.type) << ", default " << config::to_string(o.default_value)
              << ")  env " << o.env_var;
    if (o.affects_codegen) std::cout << "  [codegen]";
    if (!o.used) std::cout << "  [not yet used]";
    std::cout << "\n    " << o.doc << "\n";
  }
  return 0;
}

int cmd_list_backends(std::span<char* const> args) {
  const CommandSpec& spec = list_backends_spec();
  ParsedArgs a = parse_args(spec, args);
  if (a.help) {
    std::cout << command_help(spec);
    return 0;
  }
  for (const std::string& name : kiln::list_backends()) std::cout << name << "\n";
  return 0;
}

}  // namespace kiln::cli
