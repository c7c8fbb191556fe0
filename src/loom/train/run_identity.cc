#include "loom/train/run_identity.h"

#include <fstream>
#include <vector>

#include "loom/core/error.h"

namespace loom::train {

uint64_t fnv1a64(const void* data, size_t bytes, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

uint64_t executable_hash() {
  static const uint64_t hash = [] {
    std::ifstream in("/proc/self/exe", std::ios::binary);
    if (!in) return uint64_t(0);
    std::vector<char> buf(1 << 16);
    uint64_t h = 0xcbf29ce484222325ull;
    while (in) {
      in.read(buf.data(), std::streamsize(buf.size()));
      h = fnv1a64(buf.data(), size_t(in.gcount()), h);
    }
    return h;
  }();
  return hash;
}

void check_same_run(comm::Communicator& c, const std::string& text) {
  if (c.size() == 1) return;
  // Per rank: [config hash, binary hash].
  std::vector<uint64_t> all(size_t(2 * c.size()), 0);
  all[size_t(2 * c.rank())] = fnv1a64(text.data(), text.size());
  all[size_t(2 * c.rank() + 1)] = executable_hash();
  c.allgather(all.data(), all.size() * sizeof(uint64_t), 2 * sizeof(uint64_t));
  for (int r = 1; r < c.size(); ++r) {
    if (all[size_t(2 * r)] != all[0])
      throw ConfigError(
          fmt::format("rank {} was started with a different config than rank 0 "
                      "(config hash {:016x} vs {:016x}): every rank must run the "
                      "same config file and --set options",
                      r, all[size_t(2 * r)], all[0]));
    if (all[size_t(2 * r + 1)] != all[1])
      throw ConfigError(
          fmt::format("rank {} runs a different loom binary than rank 0 (hash "
                      "{:016x} vs {:016x})",
                      r, all[size_t(2 * r + 1)], all[1]));
  }
}

}  // namespace loom::train
