#include "loom/data/formats/idx.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "data/file_bytes.h"
#include "data/temp_dir.h"
#include "loom/core/error.h"

namespace loom::data {
namespace {

using ::testing::HasSubstr;

using testing::slurp;
using testing::spit;

IdxArray sample() {
  IdxArray a;
  a.dims = {3, 2, 2};
  for (int i = 0; i < 12; ++i) a.bytes.push_back(uint8_t(i * 20));
  return a;
}

// The error message of read_idx(path), which must name the file.
std::string error_of(const std::string& path) {
  try {
    read_idx(path);
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path));
    return e.what();
  }
  ADD_FAILURE() << "no InputError for " << path;
  return "";
}

TEST(Idx, RawRoundTripAndHandWrittenHeader) {
  testing::TempDir t;
  write_idx(t.file("a.idx"), sample(), false);
  auto bytes = slurp(t.file("a.idx"));
  ASSERT_EQ(bytes.size(), 16u + 12u);
  EXPECT_EQ(std::vector<uint8_t>(bytes.begin(), bytes.begin() + 8),
            (std::vector<uint8_t>{0, 0, 8, 3, 0, 0, 0, 3}));
  IdxArray a = read_idx(t.file("a.idx"));
  EXPECT_EQ(a.dims, (std::vector<int64_t>{3, 2, 2}));
  EXPECT_EQ(a.bytes, sample().bytes);
  EXPECT_EQ(a.numel(), 12);
}

TEST(Idx, GzipRoundTrip) {
  testing::TempDir t;
  write_idx(t.file("a.idx.gz"), sample(), true);
  auto bytes = slurp(t.file("a.idx.gz"));
  EXPECT_EQ(bytes[0], 0x1f);
  EXPECT_EQ(bytes[1], 0x8b);
  IdxArray a = read_idx(t.file("a.idx.gz"));
  EXPECT_EQ(a.dims, (std::vector<int64_t>{3, 2, 2}));
  EXPECT_EQ(a.bytes, sample().bytes);
}

TEST(Idx, Missing) {
  testing::TempDir t;
  EXPECT_THAT(error_of(t.file("nope")), HasSubstr("no such file"));
}

TEST(Idx, TruncatedRaw) {
  testing::TempDir t;
  write_idx(t.file("a"), sample(), false);
  auto b = slurp(t.file("a"));
  b.resize(b.size() - 5);
  spit(t.file("a"), b);
  auto msg = error_of(t.file("a"));
  EXPECT_THAT(msg, HasSubstr("need 12 data bytes"));
  EXPECT_THAT(msg, HasSubstr("has 7"));
  // Cut inside the header.
  b.resize(6);
  spit(t.file("a"), b);
  EXPECT_THAT(error_of(t.file("a")), HasSubstr("truncated IDX header"));
  b.resize(2);
  spit(t.file("a"), b);
  EXPECT_THAT(error_of(t.file("a")), HasSubstr("truncated IDX file"));
}

TEST(Idx, TruncatedGzip) {
  testing::TempDir t;
  IdxArray big;
  big.dims = {1000};
  for (int i = 0; i < 1000; ++i) big.bytes.push_back(uint8_t(i * 7919 % 251));
  write_idx(t.file("a.gz"), big, true);
  auto b = slurp(t.file("a.gz"));
  b.resize(b.size() / 2);
  spit(t.file("a.gz"), b);
  EXPECT_THAT(error_of(t.file("a.gz")), HasSubstr("truncated gzip"));
}

TEST(Idx, GarbledGzip) {
  testing::TempDir t;
  IdxArray big;
  big.dims = {1000};
  for (int i = 0; i < 1000; ++i) big.bytes.push_back(uint8_t(i * 7919 % 251));
  write_idx(t.file("a.gz"), big, true);
  auto b = slurp(t.file("a.gz"));
  for (size_t i = 12; i < b.size() - 8; ++i) b[i] ^= 0x5a;  // keep the gzip header, wreck the rest
  spit(t.file("a.gz"), b);
  EXPECT_THAT(error_of(t.file("a.gz")), HasSubstr("gzip"));
}

TEST(Idx, WrongMagic) {
  testing::TempDir t;
  spit(t.file("a"), {'P', 'K', 3, 4, 0, 0, 0, 0});
  EXPECT_THAT(error_of(t.file("a")), HasSubstr("wrong magic 50 4b 03 04"));
}

TEST(Idx, UnsupportedType) {
  testing::TempDir t;
  spit(t.file("a"), {0, 0, 0x0D, 1, 0, 0, 0, 1, 0, 0, 0x80, 0x3f});
  auto msg = error_of(t.file("a"));
  EXPECT_THAT(msg, HasSubstr("unsupported IDX data type 0x0d"));
  EXPECT_THAT(msg, HasSubstr("float32"));
}

TEST(Idx, AbsurdDims) {
  testing::TempDir t;
  // 0xffffffff^3 bytes would overflow: a corrupt header, not an allocation request.
  spit(t.file("a"),
       {0, 0, 8, 3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff});
  EXPECT_THAT(error_of(t.file("a")), HasSubstr("absurd"));
  spit(t.file("a"), {0, 0, 8, 0});
  EXPECT_THAT(error_of(t.file("a")), HasSubstr("0 dimensions"));
}

TEST(Idx, DimsVersusSize) {
  testing::TempDir t;
  IdxArray a = sample();
  a.bytes.push_back(1);  // one byte more than 3x2x2
  write_idx(t.file("a"), a, false);
  auto msg = error_of(t.file("a"));
  EXPECT_THAT(msg, HasSubstr("3x2x2 need 12 data bytes"));
  EXPECT_THAT(msg, HasSubstr("has 13"));
  write_idx(t.file("a.gz"), a, true);
  EXPECT_THAT(error_of(t.file("a.gz")), HasSubstr("has more"));
  a.bytes.resize(10);
  write_idx(t.file("b.gz"), a, true);
  EXPECT_THAT(error_of(t.file("b.gz")), HasSubstr("need 12 data bytes"));
}

TEST(Idx, GzipBombIsNotInflatedBeyondTheHeader) {
  // A header claiming 8 bytes followed by 64 MiB of zeros: read_idx stops after 9 bytes.
  testing::TempDir t;
  IdxArray a;
  a.dims = {8};
  a.bytes.assign(64 << 20, 0);
  write_idx(t.file("bomb.gz"), a, true);
  auto b = slurp(t.file("bomb.gz"));
  ASSERT_LT(b.size(), 1u << 20);
  EXPECT_THAT(error_of(t.file("bomb.gz")), HasSubstr("need 8 data bytes"));
  EXPECT_THAT(error_of(t.file("bomb.gz")), HasSubstr("has more"));
}

}  // namespace
}  // namespace loom::data
