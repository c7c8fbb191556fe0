// libFuzzer harness: the checkpoint reader (src/loom/train/checkpoint_format.h). Any input is
// either parsed into sections whose sizes match their headers or rejected with an InputError;
// allocations never exceed the input's size.
#include <cstddef>
#include <cstdint>

#include "loom/core/error.h"
#include "loom/train/checkpoint_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    loom::train::CheckpointFile f = loom::train::CheckpointFile::parse({data, size}, "fuzz.ckpt");
    size_t total = 0;
    for (const auto& [name, s] : f.sections()) total += s.data.size() + name.size();
    if (total > size) __builtin_trap();  // more bytes than the file held
    // A parsed file must serialize back to the same bytes.
    if (f.serialize() != std::vector<uint8_t>(data, data + size)) __builtin_trap();
  } catch (const loom::InputError&) {
  }
  return 0;
}
