// Values checked where they enter the data path, and errors that name the file the user gave:
// NaN/Inf features refused by convert and inspect, arrays of no count dimension or
// of more dimensions than a shard record holds, a shard header's reserved bytes and padding,
// a write that fails at once leaving no temporary behind, the CSV delimiter.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "data/temp_dir.h"
#include "loom/core/error.h"
#include "loom/core/io/mapped_file.h"
#include "loom/data/formats/convert.h"
#include "loom/data/formats/csv.h"
#include "loom/data/formats/idx.h"
#include "loom/data/formats/npy.h"
#include "loom/data/formats/shard_format.h"
#include "loom/data/formats/shard_writer.h"
#include "loom/data/sources/shard_source.h"

namespace loom::data {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::TempDir;

template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

std::string labels_file(const TempDir& t, int64_t n) {
  const std::string y = t.file("y.npy");
  std::vector<int64_t> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) labels[size_t(i)] = i % 3;
  write_npy(y, NpyDtype::kInt64, {n}, labels.data());
  return y;
}

TEST(EntryChecks, NonFiniteNpyFeaturesAreRefusedByConvertAndInspect) {
  TempDir t;
  for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    std::vector<float> f(12, 0.5f);
    f[7] = bad;  // record 1 (4 values each), value 3
    const std::string x = t.file("x.npy");
    write_npy(x, NpyDtype::kFloat32, {3, 4}, f.data());
    ConvertOptions o;
    o.labels = labels_file(t, 3);
    const std::string dst = t.file("out.shard");
    const std::string e = message_of([&] { convert_to_shard(x, dst, o); });
    EXPECT_THAT(e, HasSubstr(x + ": record 1 value 3 is"));
    EXPECT_FALSE(std::filesystem::exists(dst));
    EXPECT_THAT(message_of([&] { inspect_file(x); }), HasSubstr(x + ": record 1 value 3 is"));
    // Regression targets take the same path.
    const std::string tg = t.file("t.npy");
    const std::vector<float> targets = {1, 2, 3};
    write_npy(tg, NpyDtype::kFloat32, {3}, targets.data());
    ConvertOptions r;
    r.targets = tg;
    EXPECT_THAT(message_of([&] { convert_to_shard(x, dst, r); }),
                HasSubstr(x + ": record 1 value 3 is"));
  }
  // float64 beyond float32 would become Inf in the shard.
  std::vector<double> d(4, 1.0);
  d[2] = 1e300;
  const std::string x = t.file("big.npy");
  write_npy(x, NpyDtype::kFloat64, {2, 2}, d.data());
  ConvertOptions o;
  o.labels = labels_file(t, 2);
  EXPECT_THAT(message_of([&] { convert_to_shard(x, t.file("o.shard"), o); }),
              HasSubstr("beyond float32"));
  EXPECT_THAT(message_of([&] { inspect_file(x); }), HasSubstr(x + ": record 1 value 0"));
}

TEST(EntryChecks, ArraysWithoutACountOrWithTooManyDimensionsNameTheirFile) {
  TempDir t;
  const float one = 1.0f;
  const std::string scalar = t.file("scalar.npy");
  write_npy(scalar, NpyDtype::kFloat32, {}, &one);
  EXPECT_THAT(message_of([&] { inspect_file(scalar); }),
              HasSubstr(scalar + ": a features array needs a first (count) dimension"));
  // 10 dimensions: 9 per record, one more than a shard record holds.
  const std::vector<int64_t> shape(10, 1);
  const std::string deep = t.file("deep.npy");
  write_npy(deep, NpyDtype::kFloat32, shape, &one);
  EXPECT_THAT(message_of([&] { inspect_file(deep); }), HasSubstr(deep + ": shape ("));
  ConvertOptions o;
  o.labels = labels_file(t, 1);
  const std::string dst = t.file("deep.shard");
  const std::string e = message_of([&] { convert_to_shard(deep, dst, o); });
  EXPECT_THAT(e, HasSubstr(deep + ": shape ("));
  EXPECT_THAT(e, HasSubstr("records of 9 dimensions"));
  EXPECT_THAT(e, Not(HasSubstr(dst)));
}

TEST(EntryChecks, AnIdxImagesFileOfTooManyDimensionsIsNamedNotTheShard) {
  TempDir t;
  IdxArray img{{2, 1, 1, 1, 1, 1, 1, 1, 1, 2}, std::vector<uint8_t>(4, 7)};
  IdxArray lab{{2}, {1, 0}};
  std::filesystem::create_directories(t.file("fm"));
  const std::string images = t.file("fm/train-images-idx3-ubyte");
  write_idx(images, img, false);
  write_idx(t.file("fm/train-labels-idx1-ubyte"), lab, false);
  const std::string dst = t.file("o.shard");
  const std::string e = message_of([&] { convert_to_shard(t.file("fm"), dst, ConvertOptions{}); });
  EXPECT_THAT(e, HasSubstr(images + ": records of 9 dimensions"));
}

std::string small_shard(const TempDir& t) {
  const std::string p = t.file("s.shard");
  ShardWriter w(p, {ShardDtype::kUint8, {2, 2}, 3, 2});
  const uint8_t rec[4] = {1, 2, 3, 4};
  w.append(0, rec);
  w.append(2, rec);
  w.finish();
  return p;
}

void flip(const std::string& path, size_t at, uint8_t value) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(std::streamoff(at));
  f.put(char(value));
}

TEST(EntryChecks, ShardReservedBytesAndPaddingMustBeZero) {
  TempDir t;
  {
    const std::string p = small_shard(t);
    EXPECT_NO_THROW(ShardSource(p, {ShardVerify::kAll, std::nullopt}));
    flip(p, offsetof(ShardHeader, reserved2), 0x01);  // outside the header CRC
    EXPECT_THAT(message_of([&] {
                  ShardSource(p, {ShardVerify::kAll, std::nullopt});
                }),
                HasSubstr(p + ": reserved header bytes are not zero"));
  }
  {
    const std::string p = small_shard(t);
    flip(p, 1000, 0x20);  // between the chunk table and the first record
    EXPECT_THAT(message_of([&] {
                  ShardSource(p, {ShardVerify::kAll, std::nullopt});
                }),
                HasSubstr(p + ": byte 1000 of the padding before the records is not zero"));
  }
}

// A write that fails at once (no space at all; here: a file size limit of 0) leaves no
// temporary beside the output.
TEST(EntryChecks, AShardWriteThatFailsAtOnceLeavesNoTemporary) {
  TempDir t;
  const std::string dst = t.file("o.shard");
  struct rlimit old;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of the signal
  struct rlimit none = old;
  none.rlim_cur = 0;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &none), 0);
  const std::string e = message_of([&] { ShardWriter w(dst, {ShardDtype::kUint8, {2}, 3, 1}); });
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_THAT(e, HasSubstr(dst + ": write failed"));
  for (const auto& entry : std::filesystem::directory_iterator(t.path()))
    ADD_FAILURE() << "left behind: " << entry.path();
}

TEST(EntryChecks, CsvDelimitersThatCannotSeparateNumbersAreRefused) {
  EXPECT_EQ(parse_csv_delimiter(","), ',');
  EXPECT_EQ(parse_csv_delimiter(";"), ';');
  EXPECT_EQ(parse_csv_delimiter("tab"), '\t');
  EXPECT_EQ(parse_csv_delimiter("\\t"), '\t');
  const std::vector<std::string> bad = {"",  ",,", "\n", "\r", std::string(1, '\0'), "\"", ".", "-",
                                        "+", "e",  "E",  "7"};
  for (const std::string& d : bad) {
    try {
      parse_csv_delimiter(d);
      ADD_FAILURE() << "accepted delimiter of " << d.size() << " bytes";
    } catch (const ConfigError& e) {
      EXPECT_THAT(e.what(), HasSubstr("--delimiter"));
    }
  }
}

}  // namespace
}  // namespace loom::data
