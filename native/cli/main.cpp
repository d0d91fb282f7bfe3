// The `kiln` command-line tool: run and inspect graph files, list options and backends,
// run the benchmark suite.
// Exit status: 0 on success, 1 when Kiln reports an error ("kiln: error: ..." on stderr),
// 2 for a command-line mistake, 70 (EX_SOFTWARE) for a bug in Kiln ("kiln: internal error (a
// bug in Kiln, please report it): ..."); errors.h says which exception gives which.
#include <cstring>
#include <exception>
#include <iostream>
#include <string>

#include "commands.h"
#include "errors.h"
#include "kiln/graph/error.h"

namespace {

struct Command {
  const char* name;
  const kiln::cli::CommandSpec& (*spec)();
  int (*run)(std::span<char* const>);
};

const Command kCommands[] = {
    {"run", kiln::cli::run_spec, kiln::cli::cmd_run},
    {"show", kiln::cli::show_spec, kiln::cli::cmd_show},
    {"list-options", kiln::cli::list_options_spec, kiln::cli::cmd_list_options},
    {"list-backends", kiln::cli::list_backends_spec, kiln::cli::cmd_list_backends},
    {"list-devices", kiln::cli::list_devices_spec, kiln::cli::cmd_list_devices},
    {"bench", kiln::cli::bench_spec, kiln::cli::cmd_bench},
    {"bench-model", kiln::cli::bench_model_spec, kiln::cli::cmd_bench_model},
    {"cache", kiln::cli::cache_spec, kiln::cli::cmd_cache},
    {"weights", kiln::cli::weights_spec, kiln::cli::cmd_weights},
    {"report", kiln::cli::report_spec, kiln::cli::cmd_report},
};

void print_help(std::ostream& out) {
  out << "usage: kiln <command> [options]\n\n"
         "Kiln's command-line tool.\n\ncommands:\n";
  for (const Command& c : kCommands) {
    std::string summary = c.spec().summary;
    summary = summary.substr(0, summary.find('\n'));
    out << "  " << c.name << std::string(15 - std::strlen(c.name), ' ') << summary << "\n";
  }
  out << "\n'kiln <command> --help' describes a command.\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_help(std::cerr);
    return 2;
  }
  const std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    print_help(std::cout);
    return 0;
  }
  for (const Command& c : kCommands) {
    if (name != c.name) continue;
    try {
      return c.run(std::span<char* const>(argv + 2, static_cast<size_t>(argc - 2)));
    } catch (...) {
      return kiln::cli::report_exception(std::current_exception(), std::cerr);
    }
  }
  std::cerr << "kiln: unknown command '" << name << "'\n\n";
  print_help(std::cerr);
  return 2;
}
