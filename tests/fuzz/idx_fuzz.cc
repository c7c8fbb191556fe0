// libFuzzer harness: the IDX parser (raw and gzip) must answer any bytes with a result or an
// InputError, never a crash, a hang or an allocation the input cannot back.
#include <cstddef>
#include <cstdint>

#include "loom/core/error.h"
#include "loom/data/formats/idx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    loom::data::IdxArray a = loom::data::parse_idx(data, size, "fuzz.idx");
    if (a.numel() != int64_t(a.bytes.size())) __builtin_trap();
  } catch (const loom::InputError&) {
  }
  return 0;
}
