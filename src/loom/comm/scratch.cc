#include "loom/comm/scratch.h"

#include <memory>

namespace loom::comm {

namespace {
struct Slot {
  std::unique_ptr<std::byte[]> data;
  size_t bytes = 0;
};
thread_local Slot slots[2];
}  // namespace

void* scratch(size_t bytes, int slot) {
  Slot& s = slots[slot];
  if (s.bytes < bytes) {
    s.data = std::make_unique_for_overwrite<std::byte[]>(bytes);
    s.bytes = bytes;
  }
  return s.data.get();
}

}  // namespace loom::comm
