// A small command-line parser for the `kiln` tool: each command declares its flags, and
// parse_args checks the command line against them. Misuse throws UsageError (exit status 2).
#pragma once

#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln::cli {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct FlagSpec {
  std::string name;        // "--seed"
  std::string value_name;  // "N"; empty for a switch
  std::string help;
};

struct CommandSpec {
  std::string name;                // "run"
  std::string positional;          // "GRAPH.json"; empty when the command takes none
  std::string summary;             // one line
  std::string details;             // paragraphs after the flags, may be empty
  std::vector<FlagSpec> flags;     // --help is implied
};

struct ParsedArgs {
  std::vector<std::string> positional;
  std::map<std::string, std::string> values;  // flag -> value ("" for switches)
  bool help = false;
  bool has(const std::string& flag) const { return values.count(flag) != 0; }
  const std::string& get(const std::string& flag) const { return values.at(flag); }
};

// Accepts "--flag value" and "--flag=value"; a flag given twice is an error. Positionals are
// counted: exactly one when spec.positional is set, none otherwise (unless --help).
ParsedArgs parse_args(const CommandSpec& spec, std::span<char* const> args);

// "usage: kiln run GRAPH.json [options]" plus the flags and details.
std::string command_help(const CommandSpec& spec);

// The non-empty items of a list option ("--only a,b", "--modes x,y"; PATH with ':').
std::vector<std::string> split_list(const std::string& s, char separator = ',');

}  // namespace kiln::cli
