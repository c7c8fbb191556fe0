#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "data/temp_dir.h"
#include "loom/core/error.h"
#include "loom/data/convert.h"
#include "loom/data/crc32c.h"
#include "loom/data/idx.h"
#include "loom/data/loader.h"
#include "loom/data/mapped_file.h"
#include "loom/data/shard_format.h"
#include "loom/data/shard_source.h"
#include "loom/data/shard_writer.h"

namespace loom::data {
namespace {

using ::testing::HasSubstr;

std::vector<uint8_t> slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
void spit(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

// n records of 2x3 uint8 pixels (value (i*7 + j) % 256), label i % 5; chunks of 4 records.
void write_u8(const std::string& path, int n, int chunk = 4) {
  ShardWriter w(path, {ShardDtype::kUint8, {2, 3}, 5, n, chunk});
  for (int i = 0; i < n; ++i) {
    uint8_t px[6];
    for (int j = 0; j < 6; ++j) px[j] = uint8_t((i * 7 + j) % 256);
    w.append(i % 5, px);
  }
  w.finish();
}

std::string open_error(const std::string& path, ShardVerify v = ShardVerify::kAll) {
  try {
    ShardSource s(path, {v, std::nullopt});
    std::vector<float> x(6);
    int32_t y;
    for (int64_t i = 0; i < s.count(); ++i) s.gather(&i, 1, x.data(), &y);
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path));
    return e.what();
  }
  ADD_FAILURE() << "no InputError for " << path;
  return "";
}

TEST(Crc32c, KnownVectors) {
  // RFC 3720 B.4: 32 bytes of zeros -> 0x8A9136AA; "123456789" -> 0xE3069283 (the check value).
  std::vector<uint8_t> zeros(32, 0);
  EXPECT_EQ(crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c_ref("123456789", 9), 0xE3069283u);
  std::vector<uint8_t> v(1001);
  for (size_t i = 0; i < v.size(); ++i) v[i] = uint8_t(i * 131 + 7);
  EXPECT_EQ(crc32c(v.data(), v.size()), crc32c_ref(v.data(), v.size()));
  // Extending a CRC piecewise equals one pass.
  EXPECT_EQ(crc32c(v.data() + 500, 501, crc32c(v.data(), 500)), crc32c(v.data(), v.size()));
}

TEST(Shard, LayoutIsAsDocumented) {
  testing::TempDir t;
  write_u8(t.file("a.shard"), 10);
  auto b = slurp(t.file("a.shard"));
  // 10 records of 4 + 6 bytes after a 4096-byte header page.
  ASSERT_EQ(b.size(), 4096u + 100u);
  EXPECT_EQ(std::string(b.begin(), b.begin() + 8), "LOOMSHRD");
  EXPECT_EQ(b[8], 1);    // version
  EXPECT_EQ(b[16], 1);   // dtype uint8
  EXPECT_EQ(b[17], 2);   // ndims
  EXPECT_EQ(b[24], 10);  // count
  EXPECT_EQ(b[32], 10);  // record bytes
  EXPECT_EQ(b[40], 4);   // records per chunk
  EXPECT_EQ(b[48], 3);   // chunks
  // Record 3: label 3 (int32 LE) then pixels 21..26.
  const uint8_t* r = b.data() + 4096 + 3 * 10;
  EXPECT_EQ(std::vector<uint8_t>(r, r + 10),
            (std::vector<uint8_t>{3, 0, 0, 0, 21, 22, 23, 24, 25, 26}));
  // Chunk 1's CRC (table at 136 + 4) covers records 4..7.
  uint32_t stored;
  std::memcpy(&stored, b.data() + 140, 4);
  EXPECT_EQ(stored, crc32c_ref(b.data() + 4096 + 40, 40));
}

TEST(Shard, ReadsBackNormalisedWithHeaderStatistics) {
  testing::TempDir t;
  write_u8(t.file("a.shard"), 10);
  ShardSource s(t.file("a.shard"));
  EXPECT_EQ(s.count(), 10);
  EXPECT_EQ(s.sample_shape(), (std::vector<int64_t>{2, 3}));
  std::vector<uint8_t> all;
  for (int i = 0; i < 10; ++i)
    for (int j = 0; j < 6; ++j) all.push_back(uint8_t((i * 7 + j) % 256));
  Normalisation n = byte_statistics(all.data(), all.size());
  EXPECT_EQ(s.normalisation().mean, n.mean);
  EXPECT_EQ(s.normalisation().stddev, n.stddev);
  int64_t idx[2] = {7, 2};
  float x[12];
  int32_t y[2];
  s.gather(idx, 2, x, y);
  EXPECT_EQ(y[0], 2);
  EXPECT_EQ(y[1], 2);
  EXPECT_NEAR(x[1], (50 / 255.0 - n.mean) / n.stddev, 1e-5);
  EXPECT_NEAR(x[6], (14 / 255.0 - n.mean) / n.stddev, 1e-5);
  float table[256];
  byte_normalisation_table(n, table);
  EXPECT_EQ(x[1], table[50]);
  EXPECT_EQ(x[6], table[14]);
}

TEST(Shard, DecodeMatchesTheNormalisationTableForEveryByte) {
  testing::TempDir t;
  {
    ShardWriter w(t.file("a.shard"), {ShardDtype::kUint8, {256}, 1, 1, 0});
    uint8_t px[256];
    for (int v = 0; v < 256; ++v) px[v] = uint8_t(v);
    w.append(0, px);
    w.finish();
  }
  for (Normalisation n :
       {Normalisation{0.2860f, 0.3530f}, Normalisation{0, 1}, Normalisation{0.5f, 0.01f}}) {
    ShardSource s(t.file("a.shard"), {ShardVerify::kAll, n});
    float x[256], table[256];
    int32_t y;
    int64_t i = 0;
    s.gather(&i, 1, x, &y);
    byte_normalisation_table(n, table);
    EXPECT_EQ(std::memcmp(x, table, sizeof x), 0);
  }
}

TEST(Shard, WriterLeavesNothingBehindOnFailure) {
  testing::TempDir t;
  {
    ShardWriter w(t.file("a.shard"), {ShardDtype::kUint8, {2}, 5, 3, 0});
    uint8_t px[2] = {1, 2};
    w.append(1, px);
    EXPECT_THROW(w.append(9, px, "src.csv:3"), InputError);
  }
  EXPECT_TRUE(std::filesystem::is_empty(t.path()));
}

TEST(Shard, TruncatedFile) {
  testing::TempDir t;
  write_u8(t.file("a.shard"), 10);
  auto b = slurp(t.file("a.shard"));
  b.resize(b.size() - 3);
  spit(t.file("a.shard"), b);
  auto msg = open_error(t.file("a.shard"));
  EXPECT_THAT(msg, HasSubstr("truncated"));
  EXPECT_THAT(msg, HasSubstr("10 records of shape 2x3"));
  b.resize(100);
  spit(t.file("a.shard"), b);
  EXPECT_THAT(open_error(t.file("a.shard")), HasSubstr("truncated shard"));
}

TEST(Shard, CrcMismatchNamesChunkAndRecords) {
  testing::TempDir t;
  write_u8(t.file("a.shard"), 10);
  auto b = slurp(t.file("a.shard"));
  b[4096 + 5 * 10 + 6] ^= 1;  // a pixel of record 5, in chunk 1
  spit(t.file("a.shard"), b);
  EXPECT_THAT(open_error(t.file("a.shard"), ShardVerify::kAll),
              HasSubstr("CRC mismatch in chunk 1 (records 4..7)"));
  EXPECT_THAT(open_error(t.file("a.shard"), ShardVerify::kLazy), HasSubstr("chunk 1"));
  FileSummary s = inspect_file(t.file("a.shard"));
  EXPECT_FALSE(s.checksum_ok);
  EXPECT_THAT(s.checksum, HasSubstr("1 of 3 chunks: 1"));
}

TEST(Shard, HeaderThatDisagreesWithFileSize) {
  testing::TempDir t;
  write_u8(t.file("a.shard"), 10);
  auto b = slurp(t.file("a.shard"));
  b.insert(b.end(), 10, 0);  // one record more than the header says
  spit(t.file("a.shard"), b);
  EXPECT_THAT(open_error(t.file("a.shard")), HasSubstr("the file has 4206 bytes"));
}

TEST(Shard, CorruptHeaderAndWrongMagic) {
  testing::TempDir t;
  write_u8(t.file("a.shard"), 10);
  auto b = slurp(t.file("a.shard"));
  auto c = b;
  c[24] = 11;  // count, without fixing the header CRC
  spit(t.file("a.shard"), c);
  EXPECT_THAT(open_error(t.file("a.shard")), HasSubstr("header CRC mismatch"));
  c = b;
  c[0] = 'X';
  spit(t.file("a.shard"), c);
  EXPECT_THAT(open_error(t.file("a.shard")), HasSubstr("wrong magic"));
}

// A shard a newer loom wrote (version 2, its header CRC made to match) is refused by name.
TEST(Shard, NewerFormatVersionIsRefusedNamingTheFile) {
  testing::TempDir t;
  write_u8(t.file("a.shard"), 10);
  auto b = slurp(t.file("a.shard"));
  ASSERT_EQ(b[8], kShardVersion);
  b[8] = uint8_t(kShardVersion + 1);
  const uint32_t crc = crc32c(b.data(), offsetof(ShardHeader, header_crc));
  std::memcpy(b.data() + offsetof(ShardHeader, header_crc), &crc, 4);
  spit(t.file("a.shard"), b);
  EXPECT_THAT(open_error(t.file("a.shard")),
              HasSubstr("shard format version 2 (this loom reads version 1)"));
}

TEST(Shard, ConvertedFromIdxGivesBitwiseTheSameBatches) {
  testing::TempDir t;
  // A small Fashion-MNIST look-alike folder.
  IdxArray img, lab;
  const int n = 300;
  img.dims = {n, 4, 4};
  for (int i = 0; i < n * 16; ++i) img.bytes.push_back(uint8_t((i * 2654435761u) >> 24));
  lab.dims = {n};
  for (int i = 0; i < n; ++i) lab.bytes.push_back(uint8_t(i % 10));
  write_idx(t.file("train-images-idx3-ubyte.gz"), img, true);
  write_idx(t.file("train-labels-idx1-ubyte.gz"), lab, true);
  ConvertOptions co;
  co.chunk_records = 7;
  ShardInfo info = convert_to_shard(t.path(), t.file("train.shard"), co);
  EXPECT_EQ(info.count, n);
  EXPECT_EQ(info.shape, (std::vector<int64_t>{1, 4, 4}));
  EXPECT_EQ(detect_format(t.file("train.shard")), SourceFormat::kShard);

  Normalisation norm;
  Dataset ds = load_fashion_mnist(t.path(), true, std::nullopt, &norm);
  auto shard = std::make_shared<ShardSource>(t.file("train.shard"));
  EXPECT_EQ(shard->normalisation().mean, norm.mean);
  EXPECT_EQ(shard->normalisation().stddev, norm.stddev);
  LoaderOptions o{.global_batch = 32, .seed = 11, .prefetch = 3};
  Loader a(ds, o), b(shard, o);
  for (int epoch = 0; epoch < 2; ++epoch) {
    a.start_epoch(epoch);
    b.start_epoch(epoch);
    Batch ba, bb;
    int steps = 0;
    while (a.next(ba)) {
      ASSERT_TRUE(b.next(bb));
      ASSERT_EQ(ba.size, bb.size);
      EXPECT_EQ(std::memcmp(ba.x, bb.x, size_t(ba.size) * 16 * 4), 0);
      EXPECT_EQ(std::memcmp(ba.y, bb.y, size_t(ba.size) * 4), 0);
      ++steps;
    }
    EXPECT_FALSE(b.next(bb));
    EXPECT_EQ(steps, 9);
  }
  // Inspect names the label histogram and a good checksum.
  FileSummary s = inspect_file(t.file("train.shard"));
  EXPECT_EQ(s.count, n);
  EXPECT_EQ(s.label_histogram, std::vector<int64_t>(10, 30));
  EXPECT_TRUE(s.checksum_ok);
  EXPECT_THAT(s.checksum, HasSubstr("43 chunks"));
}

TEST(Shard, ConvertNeedsLabelsForIdxAndLeavesNoFile) {
  testing::TempDir t;
  IdxArray img;
  img.dims = {2, 2, 2};
  img.bytes.assign(8, 1);
  write_idx(t.file("img.idx"), img, false);
  EXPECT_THROW(convert_to_shard(t.file("img.idx"), t.file("o.shard"), {}), ConfigError);
  IdxArray lab;
  lab.dims = {2};
  lab.bytes = {1, 12};  // label 12 >= 10
  write_idx(t.file("lab.idx"), lab, false);
  ConvertOptions co;
  co.labels = t.file("lab.idx");
  try {
    convert_to_shard(t.file("img.idx"), t.file("o.shard"), co);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("lab.idx: record 1: label 12 is outside [0, 10)"));
  }
  EXPECT_FALSE(std::filesystem::exists(t.file("o.shard")));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(t.path()), {}), 2);
}

}  // namespace
}  // namespace loom::data
