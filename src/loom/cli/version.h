#pragma once

namespace loom::cli {

// `loom --version`: version, git revision and the features built in (GEMM library, CUDA, MPI).
void print_version();

}  // namespace loom::cli
