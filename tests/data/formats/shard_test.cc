#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "data/file_bytes.h"
#include "data/temp_dir.h"
#include "loom/core/error.h"
#include "loom/core/io/crc32c.h"
#include "loom/core/io/mapped_file.h"
#include "loom/data/formats/convert.h"
#include "loom/data/formats/idx.h"
#include "loom/data/formats/shard_format.h"
#include "loom/data/formats/shard_writer.h"
#include "loom/data/loader/loader.h"
#include "loom/data/sources/shard_source.h"

namespace loom::data {
namespace {

using ::testing::HasSubstr;

using testing::slurp;
using testing::spit;

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

TEST(Shard, LayoutIsAsDocumented) {
  testing::TempDir t;
  write_u8(t.file("a.shard"), 10);
  auto b = slurp(t.file("a.shard"));
  // 10 records of 4 + 6 bytes after a 4096-byte header page.
  ASSERT_EQ(b.size(), 4096u + 100u);
  EXPECT_EQ(std::string(b.begin(), b.begin() + 8), "LOOMSHRD");
  EXPECT_EQ(b[8], 2);    // version
  EXPECT_EQ(b[16], 1);   // dtype uint8
  EXPECT_EQ(b[17], 2);   // ndims
  EXPECT_EQ(b[18], 0);   // target: class label
  EXPECT_EQ(b[24], 10);  // count
  EXPECT_EQ(b[32], 10);  // record bytes
  EXPECT_EQ(b[40], 4);   // records per chunk
  EXPECT_EQ(b[48], 3);   // chunks
  // Record 3: label 3 (int32 LE) then pixels 21..26.
  const uint8_t* r = b.data() + 4096 + 3 * 10;
  EXPECT_EQ(std::vector<uint8_t>(r, r + 10),
            (std::vector<uint8_t>{3, 0, 0, 0, 21, 22, 23, 24, 25, 26}));
  // Chunk 1's CRC (table at 152 + 4) covers records 4..7.
  uint32_t stored;
  std::memcpy(&stored, b.data() + 156, 4);
  EXPECT_EQ(stored, core::crc32c_ref(b.data() + 4096 + 40, 40));
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

// A shard a newer loom wrote (version 3, its header CRC made to match) is refused by name.
TEST(Shard, NewerFormatVersionIsRefusedNamingTheFile) {
  testing::TempDir t;
  write_u8(t.file("a.shard"), 10);
  auto b = slurp(t.file("a.shard"));
  ASSERT_EQ(b[8], kShardVersion);
  b[8] = uint8_t(kShardVersion + 1);
  const uint32_t crc = core::crc32c(b.data(), offsetof(ShardHeader, header_crc));
  std::memcpy(b.data() + offsetof(ShardHeader, header_crc), &crc, 4);
  spit(t.file("a.shard"), b);
  EXPECT_THAT(open_error(t.file("a.shard")),
              HasSubstr("shard format version 3 (this loom reads versions 1 to 2)"));
}

// A version 1 file, laid out by hand as the format's first documentation gives it (136-byte
// header, labels only), reads back as the same records.
TEST(Shard, Version1FilesAreStillRead) {
  testing::TempDir t;
  const int n = 6;
  std::vector<uint8_t> records;
  for (int i = 0; i < n; ++i) {
    const int32_t label = i % 3;
    const uint8_t* l = reinterpret_cast<const uint8_t*>(&label);
    records.insert(records.end(), l, l + 4);
    for (int j = 0; j < 2; ++j) records.push_back(uint8_t(10 * i + j));
  }
  ShardHeaderV1 h{};
  std::memcpy(h.magic, kShardMagic, 8);
  h.version = 1;
  h.data_offset = 4096;
  h.dtype = uint8_t(ShardDtype::kUint8);
  h.ndims = 1;
  h.num_classes = 3;
  h.count = n;
  h.record_bytes = 6;
  h.chunk_records = n;
  h.num_chunks = 1;
  h.shape[0] = 2;
  h.mean = 0.5f;
  h.stddev = 0.25f;
  const uint32_t chunk = core::crc32c_ref(records.data(), records.size());
  h.table_crc = core::crc32c_ref(&chunk, 4);
  h.header_crc = core::crc32c_ref(&h, offsetof(ShardHeaderV1, header_crc));
  std::vector<uint8_t> file(4096, 0);
  std::memcpy(file.data(), &h, sizeof h);
  std::memcpy(file.data() + sizeof h, &chunk, 4);
  file.insert(file.end(), records.begin(), records.end());
  spit(t.file("v1.shard"), file);
  ShardSource s(t.file("v1.shard"), {ShardVerify::kAll, std::nullopt});
  EXPECT_EQ(s.info().version, 1);
  EXPECT_EQ(s.info().target, ShardTarget::kClassLabel);
  EXPECT_EQ(s.count(), n);
  int64_t idx[2] = {4, 5};
  float x[4];
  int32_t y[2];
  s.gather(idx, 2, x, y);
  EXPECT_EQ(y[0], 1);
  EXPECT_EQ(y[1], 2);
  EXPECT_EQ(x[1], normalise_byte(41, byte_affine({0.5f, 0.25f})));
}

// Regression data: float targets before float features, read back by gather_targets and
// carried by the loader's batches next to the features.
TEST(Shard, FloatTargetsRoundTripThroughTheLoader) {
  testing::TempDir t;
  const int n = 12;
  ShardSpec spec{ShardDtype::kFloat32, {3}, 0, n, 5};
  spec.target = ShardTarget::kFloat;
  spec.target_numel = 2;
  {
    ShardWriter w(t.file("r.shard"), spec);
    for (int i = 0; i < n; ++i) {
      const float x[3] = {float(i), float(i) + 0.5f, -float(i)};
      const float tg[2] = {float(i) * 0.25f, 100.0f - float(i)};
      w.append_targets(tg, x);
    }
    w.finish();
  }
  auto src = std::make_shared<ShardSource>(t.file("r.shard"),
                                           ShardOpenOptions{ShardVerify::kAll, std::nullopt});
  EXPECT_EQ(src->info().record_bytes, 8 + 12);
  EXPECT_EQ(src->target_numel(), 2);
  EXPECT_EQ(src->num_classes(), 0);
  Loader loader(src, {.global_batch = 4, .shuffle = true, .prefetch = 2});
  loader.start_epoch(0);
  Batch b;
  int seen = 0;
  while (loader.next(b)) {
    ASSERT_NE(b.t, nullptr);
    for (int64_t k = 0; k < b.size; ++k) {
      const float i = b.x[k * 3];  // the record's index, as written
      EXPECT_EQ(b.x[k * 3 + 1], i + 0.5f);
      EXPECT_EQ(b.t[k * 2], i * 0.25f);
      EXPECT_EQ(b.t[k * 2 + 1], 100.0f - i);
      ++seen;
    }
  }
  EXPECT_EQ(seen, n);
  // A shard of class labels has no float targets to give.
  write_u8(t.file("a.shard"), 4);
  ShardSource labels(t.file("a.shard"));
  int64_t i0 = 0;
  float tg[2];
  EXPECT_THROW(labels.gather_targets(&i0, 1, tg), Error);
}

TEST(Shard, NonFiniteTargetIsRefusedNamingTheRecord) {
  testing::TempDir t;
  ShardSpec spec{ShardDtype::kFloat32, {1}, 0, 2, 0};
  spec.target = ShardTarget::kFloat;
  spec.target_numel = 1;
  ShardWriter w(t.file("r.shard"), spec);
  const float x = 1, ok = 2, bad = std::nanf("");
  w.append_targets(&ok, &x, "y.npy: record 0");
  try {
    w.append_targets(&bad, &x, "y.npy: record 1");
    ADD_FAILURE() << "a NaN target was written";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("y.npy: record 1"));
  }
}

// A token stream keeps its vocabulary in the extra section, under a CRC of its own; the
// sample reader refuses the stream by name rather than read tokens as labelled samples.
TEST(Shard, TokenStreamKeepsItsVocabularyUnderACrc) {
  testing::TempDir t;
  ShardSpec spec{ShardDtype::kUint16, {1}, 300, 5, 0};
  spec.target = ShardTarget::kNone;
  const std::string vocab = "abc\ndef";
  spec.extra.assign(vocab.begin(), vocab.end());
  {
    ShardWriter w(t.file("tok.shard"), spec);
    for (uint16_t tok : {1, 299, 7, 0, 42}) w.append_features(&tok);
    w.finish();
  }
  auto b = slurp(t.file("tok.shard"));
  std::vector<uint32_t> crcs;
  ShardInfo info = parse_shard_header(b.data(), b.size(), b.size(), "tok.shard", &crcs);
  EXPECT_EQ(info.target, ShardTarget::kNone);
  EXPECT_EQ(info.num_classes, 300);
  EXPECT_EQ(info.record_bytes, 2);
  ASSERT_EQ(info.extra_bytes, int64_t(vocab.size()));
  EXPECT_EQ(
      std::string(b.begin() + info.extra_offset, b.begin() + info.extra_offset + info.extra_bytes),
      vocab);
  uint16_t second;
  std::memcpy(&second, b.data() + info.data_offset + 2, 2);
  EXPECT_EQ(second, 299);
  EXPECT_THAT(open_error(t.file("tok.shard")), HasSubstr("token stream"));
  b[size_t(info.extra_offset) + 1] ^= 0x20;
  spit(t.file("tok.shard"), b);
  EXPECT_THAT(open_error(t.file("tok.shard")), HasSubstr("vocabulary is corrupt"));
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
