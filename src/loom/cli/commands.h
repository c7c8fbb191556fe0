// The subcommands of `loom`; each lives in its own file (train_command.cc, bench_command.cc...)
// and registers itself with the CLI11 app in commands.cc.
#pragma once

namespace loom::cli {

int run(int argc, char** argv);

}  // namespace loom::cli
