// libFuzzer harness: the safetensors reader on arbitrary bytes. Whatever the bytes, it must end
// in a parsed file whose every tensor lies inside the data, or in InputError: no crash, no other
// exception, no allocation of a size the header claims rather than the bytes hold. The metadata
// then goes through the reader of a trained model's keys (steps, input normalisation, loss):
// InputError, or values a model can use (a finite normalisation with stddev > 0).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "loom/core/error.h"
#include "loom/nn/io/safetensors.h"
#include "loom/train/trained_model_metadata.h"

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
    const loom::train::TrainedModelMetadata m =
        loom::train::read_trained_model_metadata(f.metadata(), "fuzz.safetensors");
    if (m.input_normalisation) {
      const float mean = m.input_normalisation->mean, sd = m.input_normalisation->stddev;
      if (!std::isfinite(mean) || !std::isfinite(sd) || !(sd > 0.0f) ||
          !std::isfinite(1.0f / (255.0f * sd)) || !std::isfinite(mean / sd))
        std::abort();
    }
    if (m.steps < -1) std::abort();
  } catch (const loom::InputError&) {
  }
  return 0;
}
