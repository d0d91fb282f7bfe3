// The `kiln` tool's commands. Each takes the arguments after its name and returns the exit
// status; usage mistakes throw UsageError (exit 2), bad input throws kiln::Error (exit 1).
#pragma once

#include <span>

#include "args.h"

namespace kiln::cli {

const CommandSpec& run_spec();
const CommandSpec& show_spec();
const CommandSpec& list_options_spec();
const CommandSpec& list_backends_spec();
const CommandSpec& list_devices_spec();
const CommandSpec& bench_spec();
const CommandSpec& bench_model_spec();
const CommandSpec& cache_spec();
const CommandSpec& weights_spec();
const CommandSpec& report_spec();

int cmd_run(std::span<char* const> args);
int cmd_show(std::span<char* const> args);
int cmd_list_options(std::span<char* const> args);
int cmd_list_backends(std::span<char* const> args);
int cmd_list_devices(std::span<char* const> args);
int cmd_bench(std::span<char* const> args);
int cmd_bench_model(std::span<char* const> args);
int cmd_cache(std::span<char* const> args);
int cmd_weights(std::span<char* const> args);
int cmd_report(std::span<char* const> args);

}  // namespace kiln::cli
