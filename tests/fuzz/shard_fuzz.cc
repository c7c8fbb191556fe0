// libFuzzer harness: opening a shard (header, chunk table, size checks) and reading every
// record with lazy CRC checks must give records or an InputError, never a read out of bounds.
// A token stream goes through the token reader (vocabulary section, every id checked).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "loom/core/error.h"
#include "loom/core/io/mapped_file.h"
#include "loom/data/formats/token_shard.h"
#include "loom/data/sources/shard_source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace loom::data;
  try {
    if (size > 18 && data[18] == uint8_t(ShardTarget::kNone)) {
      TokenShard t(loom::core::MappedFile::borrow(data, size, "fuzz.shard"), true);
      int64_t sum = 0;
      for (int64_t i = 0; i < t.size() && i < 4096; ++i) sum += t.token(i);
      (void)t.vocabulary().fingerprint();
      return int(sum & 0);
    }
    ShardSource s(loom::core::MappedFile::borrow(data, size, "fuzz.shard"),
                  {ShardVerify::kLazy, std::nullopt});
    std::vector<float> x(size_t(s.sample_numel()));
    int32_t y;
    for (int64_t i = 0; i < s.count() && i < 4096; ++i) s.gather(&i, 1, x.data(), &y);
    s.bad_chunks();
  } catch (const loom::InputError&) {
  }
  return 0;
}
