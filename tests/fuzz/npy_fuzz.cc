// libFuzzer harness: the .npy header parser; a header it accepts must describe exactly the
// bytes that follow it, so reading every value stays in bounds.
#include <cstddef>
#include <cstdint>

#include "loom/core/error.h"
#include "loom/data/formats/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    loom::data::NpyHeader h = loom::data::parse_npy_header(data, size, "fuzz.npy");
    volatile double sum = 0;
    for (int64_t i = 0; i < h.numel(); ++i) sum = sum + loom::data::npy_value(h, data, i);
  } catch (const loom::InputError&) {
  }
  return 0;
}
