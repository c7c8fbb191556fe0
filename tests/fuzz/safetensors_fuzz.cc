// libFuzzer harness: the safetensors reader on arbitrary bytes. Whatever the bytes, it must end
// in a parsed file whose every tensor lies inside the data, or in InputError: no crash, no other
// exception, no allocation of a size the header claims rather than the bytes hold.
#include <cstddef>
#include <cstdint>

#include "loom/core/error.h"
#include "loom/nn/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const loom::nn::SafetensorsFile f =
        loom::nn::SafetensorsFile::parse({data, size}, "fuzz.safetensors");
    volatile uint64_t sum = 0;
    for (const auto& t : f.tensors()) {
      for (uint8_t b : f.bytes(t)) sum = sum + b;  // touches every byte ASan can check
      if (t.dtype == "F32") sum = sum + f.f32(t).size();
    }
    for (const auto& [k, v] : f.metadata()) sum = sum + k.size() + v.size();
  } catch (const loom::InputError&) {
  }
  return 0;
}
