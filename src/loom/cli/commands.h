// The subcommands of `loom`. Each lives in its own file (train_command.cc, bench_command.cc, ...)
// and registers itself with a static CommandRegistrar; commands.cc builds the CLI11 app from
// them. (The cli sources are compiled into the executable itself, so registrars are never
// dropped by the linker.)
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

namespace loom::cli {

// Adds a subcommand to `app` and sets its callback. The callback returns the exit code through
// set_exit_code(); an exception derived from loom::Error becomes its exit code in main().
using CommandSetup = std::function<void(CLI::App& app)>;

// A name "parent child" (e.g. "bench allreduce") is added under the `parent` subcommand,
// which is created on first use; `setup` then receives the parent app.
struct CommandRegistrar {
  CommandRegistrar(const std::string& name, CommandSetup setup);
};

void set_exit_code(int code);
int run(int argc, char** argv);

}  // namespace loom::cli
