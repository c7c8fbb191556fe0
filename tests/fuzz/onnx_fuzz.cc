// libFuzzer harness: the ONNX importer on arbitrary bytes. Whatever the bytes, it must end in a
// graph or in InputError / ConfigError: no crash, no other exception, no huge allocation from
// a size the file claims.
#include <cstddef>
#include <cstdint>

#include "loom/core/error.h"
#include "loom/nn/io/onnx_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The input shapes of the seed corpus (tests/data/onnx), so mutations get past the input check.
  for (const loom::nn::Shape& shape :
       {loom::nn::Shape{1, 8, 8}, loom::nn::Shape{2, 8, 8}, loom::nn::Shape{3, 8, 8}}) {
    try {
      loom::nn::GraphSpec g = loom::nn::graph_from_onnx_bytes(data, size, "fuzz.onnx", shape);
      volatile size_t floats = 0;
      for (const auto& l : g.layers) floats = floats + l.init_params.size() + l.init_state.size();
    } catch (const loom::InputError&) {
    } catch (const loom::ConfigError&) {
    }
  }
  return 0;
}
