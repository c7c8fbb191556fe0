// The TFRecord framing of event files, against bytes TensorBoard's own RecordWriter wrote
// (tensorboard 2.21, tensorboard/summary/writer/record_writer.py, for the payload
// "123456789") and against the framing read apart by the tests' reader.
#include "loom/train/tensorboard_record.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "train/event_file_reader.h"

namespace loom::train {
namespace {

using namespace std::literals;

TEST(TensorBoardRecord, FrameIsTensorBoardsRecordWritersBytes) {
  const std::string_view tensorboard =
      "\x09\x00\x00\x00\x00\x00\x00\x00\x37\xf9\x71\x39"
      "123456789"
      "\xe5\xb0\x8a\xc7"sv;
  EXPECT_EQ(frame_record("123456789"), tensorboard);
}

TEST(TensorBoardRecord, MaskedCrcIsTensorFlowsMaskOfTheCrc32c) {
  const std::string check = "123456789";  // CRC-32C 0xe3069283, its published check value
  EXPECT_EQ(core::crc32c(check.data(), check.size()), 0xe3069283u);
  EXPECT_EQ(masked_crc32c(check.data(), check.size()), testing::mask_crc(0xe3069283u));
  EXPECT_NE(masked_crc32c(check.data(), check.size()), 0xe3069283u);
}

TEST(TensorBoardRecord, RecordsOfEveryLengthReadBackOneAfterAnother) {
  std::string file;
  std::vector<std::string> payloads = {"", "a", std::string(300, '\0'), std::string(70000, 'x')};
  payloads[2][17] = '\x7f';
  for (const std::string& p : payloads) file += frame_record(p);
  EXPECT_EQ(testing::read_records(file), payloads);
}

TEST(TensorBoardRecord, AFlippedBitFailsTheReadersCheck) {
  const std::string good = frame_record("brain.Event:2");
  for (size_t at : {size_t(0), size_t(9), size_t(14), good.size() - 1}) {
    std::string bad = good;
    bad[at] = char(bad[at] ^ 0x10);
    EXPECT_THROW(testing::read_records(bad), std::runtime_error) << "byte " << at;
  }
}

}  // namespace
}  // namespace loom::train
