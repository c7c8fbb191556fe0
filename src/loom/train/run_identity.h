// Ranks of one run must run the same binary with the same config: each rank hashes both, the
// hashes are all-gathered, and a rank that differs stops the run at start with its number.
#pragma once

#include <cstdint>
#include <string>

#include "loom/comm/communicator.h"

namespace loom::train {

// FNV-1a 64 of the bytes.
uint64_t fnv1a64(const void* data, size_t bytes, uint64_t h = 0xcbf29ce484222325ull);
// Hash of this process's executable file (/proc/self/exe); 0 if it cannot be read.
uint64_t executable_hash();
// Throws ConfigError naming the first rank whose config (its Config::canonical_text) or binary
// differs from rank 0's.
void check_same_run(comm::Communicator& c, const std::string& config_text);

}  // namespace loom::train
