// The Events loom writes, byte for byte as protobuf serialises the same messages: the expected
// bytes are what tensorboard 2.21's event_pb2 (protobuf 7.36) gave for Events with these fields
// set (Event.SerializeToString()).
#include "loom/train/tensorboard_event.h"

#include <gtest/gtest.h>

#include <string_view>

namespace loom::train::tensorboard {
namespace {

using namespace std::literals;

TEST(TensorBoardEvent, FileVersion) {
  EXPECT_EQ(file_version_event(1.5),
            "\x09\x00\x00\x00\x00\x00\x00\xf8\x3f\x1a\x0d"
            "brain.Event:2"sv);
}

TEST(TensorBoardEvent, Scalar) {
  EXPECT_EQ(scalar_event(1.5, 42, "epoch/train_loss", 0.25f),
            "\x09\x00\x00\x00\x00\x00\x00\xf8\x3f\x10\x2a\x2a\x19\x0a\x17\x0a\x10"
            "epoch/train_loss"
            "\x15\x00\x00\x80\x3e"sv);
}

// simple_value sits in a oneof: a zero is still written, or the value would be no scalar.
TEST(TensorBoardEvent, ZeroScalarKeepsItsValue) {
  EXPECT_EQ(scalar_event(1.5, 7, "step/zero", 0.0f),
            "\x09\x00\x00\x00\x00\x00\x00\xf8\x3f\x10\x07\x2a\x12\x0a\x10\x0a\x09"
            "step/zero"
            "\x15\x00\x00\x00\x00"sv);
}

TEST(TensorBoardEvent, Text) {
  EXPECT_EQ(text_event(1.5, 3, "config", "    a = 1\n"),
            "\x09\x00\x00\x00\x00\x00\x00\xf8\x3f\x10\x03\x2a\x26\x0a\x24\x0a\x06"
            "config"
            "\x42\x10\x08\x07\x12\x00\x42\x0a"
            "    a = 1\n"
            "\x4a\x08\x0a\x06\x0a\x04"
            "text"sv);
}

TEST(TensorBoardEvent, Histogram) {
  Histogram h;
  h.min = -1;
  h.max = 2;
  h.num = 3;
  h.sum = 1;
  h.sum_squares = 5;
  h.bucket_limit = {0.5, 2};
  h.bucket = {1, 2};
  EXPECT_EQ(histogram_event(1.5, 20, "weights/linear_0.bias", h),
            "\x09\x00\x00\x00\x00\x00\x00\xf8\x3f\x10\x14\x2a\x6c\x0a\x6a\x0a\x15"
            "weights/linear_0.bias"
            "\x2a\x51\x09\x00\x00\x00\x00\x00\x00\xf0\xbf\x11\x00\x00\x00\x00\x00\x00\x00\x40"
            "\x19\x00\x00\x00\x00\x00\x00\x08\x40\x21\x00\x00\x00\x00\x00\x00\xf0\x3f\x29\x00"
            "\x00\x00\x00\x00\x00\x14\x40\x32\x10\x00\x00\x00\x00\x00\x00\xe0\x3f\x00\x00\x00"
            "\x00\x00\x00\x00\x40\x3a\x10\x00\x00\x00\x00\x00\x00\xf0\x3f\x00\x00\x00\x00\x00"
            "\x00\x00\x40"sv);
}

TEST(TensorBoardEvent, SessionStart) {
  EXPECT_EQ(session_start_event(1.5, 40),
            "\x09\x00\x00\x00\x00\x00\x00\xf8\x3f\x10\x28\x3a\x02\x08\x01"sv);
}

// A step past 2^31 and one past 2^56 take more varint bytes: the high bits must survive.
TEST(TensorBoardEvent, LargeStepsKeepEveryBit) {
  for (int64_t step : {int64_t(1) << 31, (int64_t(1) << 56) + 3}) {
    const std::string e = scalar_event(0, step, "t", 1.0f);
    // Event: no wall_time (0 is left out), then step as a varint after key 0x10.
    ASSERT_EQ(uint8_t(e[0]), 0x10);
    uint64_t v = 0;
    size_t at = 1;
    for (int shift = 0;; shift += 7) {
      const uint8_t c = uint8_t(e[at++]);
      v |= uint64_t(c & 0x7f) << shift;
      if (!(c & 0x80)) break;
    }
    EXPECT_EQ(int64_t(v), step);
  }
}

}  // namespace
}  // namespace loom::train::tensorboard
