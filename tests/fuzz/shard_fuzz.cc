// libFuzzer harness: opening a shard (header, chunk table, size checks) and reading every
// record with lazy CRC checks must give records or an InputError, never a read out of bounds.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "loom/core/error.h"
#include "loom/data/mapped_file.h"
#include "loom/data/shard_source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace loom::data;
  try {
    ShardSource s(MappedFile::borrow(data, size, "fuzz.shard"), {ShardVerify::kLazy, std::nullopt});
    std::vector<float> x(size_t(s.sample_numel()));
    int32_t y;
    for (int64_t i = 0; i < s.count() && i < 4096; ++i) s.gather(&i, 1, x.data(), &y);
    s.bad_chunks();
  } catch (const loom::InputError&) {
  }
  return 0;
}
