// libFuzzer harness: the CSV parser. The first byte picks the options (delimiter, header,
// label column, class count) so they are fuzzed too.
#include <cstddef>
#include <cstdint>

#include "loom/core/error.h"
#include "loom/data/formats/csv.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  loom::data::CsvOptions o;
  o.delimiter = (data[0] & 1) ? ';' : ',';
  o.header = data[0] & 2;
  o.label_column = (data[0] & 4) ? 0 : -1;
  o.num_classes = (data[0] & 8) ? 10 : 0;
  try {
    loom::data::Dataset d =
        loom::data::parse_csv(reinterpret_cast<const char*>(data + 1), size - 1, "fuzz.csv", o);
    if (int64_t(d.features.size()) != d.count * d.sample_numel()) __builtin_trap();
    for (int32_t y : d.labels)
      if (y < 0 || y >= d.num_classes) __builtin_trap();
  } catch (const loom::InputError&) {
  }
  return 0;
}
