// Token streams: `loom data convert --text` (bytes and characters) round trips, the vocabulary
// section, the refusals (empty file, text that is not UTF-8 under --vocab chars), the window
// source (features and labels are the shifted stream, a split by position is disjoint) and the
// loader carrying one label per position.
#include "loom/data/formats/token_shard.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>

#include "data/temp_dir.h"
#include "loom/core/error.h"
#include "loom/data/formats/convert.h"
#include "loom/data/loader/loader.h"
#include "loom/data/sources/shard_source.h"
#include "loom/data/sources/token_windows.h"

namespace loom::data {
namespace {

using testing::TempDir;

std::string write_text(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.file(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TokenShard, BytesRoundTripAnyFileEvenNotUtf8) {
  TempDir dir;
  std::string text = "caf\xc3\xa9 \xff\xfe\x00 end\n";
  text.push_back('\0');
  const std::string src = write_text(dir, "t.bin", text);
  const ShardInfo info = convert_text(src, dir.file("t.shard"), TextVocab::kBytes, 3);
  EXPECT_EQ(info.count, int64_t(text.size()));
  const TokenShard t(dir.file("t.shard"));
  EXPECT_EQ(t.vocabulary().kind, VocabKind::kBytes);
  EXPECT_EQ(t.vocabulary().size, 256);
  EXPECT_EQ(t.info().dtype, ShardDtype::kUint8);
  ASSERT_EQ(t.size(), int64_t(text.size()));
  for (int64_t i = 0; i < t.size(); ++i)
    EXPECT_EQ(t.token(i), int(static_cast<unsigned char>(text[size_t(i)]))) << i;
  // The sample reader refuses it: a stream is not a set of samples.
  EXPECT_THROW(ShardSource(dir.file("t.shard")), InputError);
  const FileSummary s = inspect_file(dir.file("t.shard"));
  EXPECT_EQ(s.vocab_kind, "bytes");
  EXPECT_EQ(s.vocab_size, 256);
  EXPECT_TRUE(s.checksum_ok);
}

// The characters decode back to the text; ids follow code point order.
TEST(TokenShard, CharsRoundTripSortedVocabulary) {
  TempDir dir;
  const std::string text = "h\xc3\xa9llo w\xc3\xb6rld \xe2\x9c\x93 \xf0\x9f\x99\x82\nhello\n";
  const std::string src = write_text(dir, "t.txt", text);
  convert_text(src, dir.file("t.shard"), TextVocab::kChars);
  const TokenShard t(dir.file("t.shard"));
  const Vocabulary& v = t.vocabulary();
  EXPECT_EQ(v.kind, VocabKind::kChars);
  const std::set<std::string> expect = {"h",
                                        "\xc3\xa9",
                                        "l",
                                        "o",
                                        " ",
                                        "w",
                                        "\xc3\xb6",
                                        "r",
                                        "d",
                                        "\xe2\x9c\x93",
                                        "\xf0\x9f\x99\x82",
                                        "\n",
                                        "e"};
  ASSERT_EQ(v.size, int64_t(expect.size()));
  EXPECT_EQ(std::vector<std::string>(expect.begin(), expect.end()), v.chars);  // sorted
  EXPECT_EQ(t.info().num_classes, v.size);
  std::string back;
  for (int64_t i = 0; i < t.size(); ++i) back += v.chars[size_t(t.token(i))];
  EXPECT_EQ(back, text);
  EXPECT_EQ(t.size(), 22);  // characters, not bytes
  EXPECT_NE(v.fingerprint(), Vocabulary{}.fingerprint());
}

// More than 256 distinct characters: uint16 ids, still a round trip.
TEST(TokenShard, LargeCharacterVocabularyUsesUint16) {
  TempDir dir;
  std::string text;
  for (uint32_t cp = 0x100; cp < 0x400; cp += 1) {  // two-byte UTF-8 sequences
    text.push_back(char(0xc0 | (cp >> 6)));
    text.push_back(char(0x80 | (cp & 0x3f)));
  }
  text += "abc";
  convert_text(write_text(dir, "t.txt", text), dir.file("t.shard"), TextVocab::kChars, 100);
  const TokenShard t(dir.file("t.shard"));
  EXPECT_EQ(t.info().dtype, ShardDtype::kUint16);
  EXPECT_EQ(t.vocabulary().size, 0x300 + 3);
  std::string back;
  for (int64_t i = 0; i < t.size(); ++i) back += t.vocabulary().chars[size_t(t.token(i))];
  EXPECT_EQ(back, text);
  // 'a' < U+0100: id 0.
  EXPECT_EQ(t.token(t.size() - 3), 0);
}

TEST(TokenShard, ErrorsNameTheFileAndOffset) {
  TempDir dir;
  const std::string empty = write_text(dir, "empty.txt", "");
  EXPECT_NE(
      error_of([&] { convert_text(empty, dir.file("e.shard"), TextVocab::kBytes); }).find("empty"),
      std::string::npos);
  // A lone continuation byte at offset 5.
  const std::string bad = write_text(dir, "bad.txt", "hello\x80world");
  const std::string msg =
      error_of([&] { convert_text(bad, dir.file("b.shard"), TextVocab::kChars); });
  EXPECT_NE(msg.find("bad.txt"), std::string::npos) << msg;
  EXPECT_NE(msg.find("byte offset 5"), std::string::npos) << msg;
  EXPECT_FALSE(std::filesystem::exists(dir.file("b.shard")));
  // The same file is fine as bytes.
  EXPECT_EQ(convert_text(bad, dir.file("b.shard"), TextVocab::kBytes).count, 11);
  // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
  const std::string overlong = "ab\xc0\x80", surrogate = "\xed\xa0\x80", big = "x\xf4\x90\x80\x80";
  EXPECT_EQ(first_invalid_utf8(reinterpret_cast<const uint8_t*>(overlong.data()), 4), 2);
  EXPECT_EQ(first_invalid_utf8(reinterpret_cast<const uint8_t*>(surrogate.data()), 3), 0);
  EXPECT_EQ(first_invalid_utf8(reinterpret_cast<const uint8_t*>(big.data()), 5), 1);
  const std::string truncated = "ok\xe2\x9c";
  EXPECT_EQ(first_invalid_utf8(reinterpret_cast<const uint8_t*>(truncated.data()), 4), 2);
}

TEST(TokenShard, VocabularySectionIsChecked) {
  Vocabulary v;
  v.kind = VocabKind::kChars;
  v.chars = {"a", "b", "\xc3\xa9"};
  v.size = 3;
  std::vector<uint8_t> bytes = encode_vocabulary(v);
  const Vocabulary back = decode_vocabulary(bytes.data(), bytes.size(), 3, "x");
  EXPECT_EQ(back.chars, v.chars);
  EXPECT_EQ(back.fingerprint(), v.fingerprint());
  // Another size in the shard header, another version, characters out of order.
  EXPECT_THROW(decode_vocabulary(bytes.data(), bytes.size(), 4, "x"), InputError);
  std::vector<uint8_t> version = bytes;
  version[4] = 9;
  EXPECT_NE(error_of([&] {
              decode_vocabulary(version.data(), version.size(), 3, "x");
            }).find("version 9"),
            std::string::npos);
  std::vector<uint8_t> order = bytes;
  std::swap(order[16], order[17]);
  EXPECT_THROW(decode_vocabulary(order.data(), order.size(), 3, "x"), InputError);
  // No section: ids without a text meaning.
  EXPECT_EQ(decode_vocabulary(nullptr, 0, 7, "x").kind, VocabKind::kIds);
}

std::shared_ptr<const TokenShard> pattern_shard(const TempDir& dir, int n) {
  std::string text;
  for (int i = 0; i < n; ++i) text.push_back(char('A' + (i * 7 + i / 13) % 26));
  convert_text(write_text(dir, "p.txt", text), dir.file("p.shard"), TextVocab::kBytes, 64);
  return std::make_shared<const TokenShard>(dir.file("p.shard"));
}

// Sample i of an epoch: tokens [s_i, s_i + c) as features, [s_i + 1, s_i + c + 1) as labels;
// the windows of an epoch do not overlap, start at one offset in [0, c), and every window's
// labels stay inside the range at every offset.
TEST(TokenWindows, FeaturesAndLabelsAreTheShiftedStream) {
  TempDir dir;
  const auto shard = pattern_shard(dir, 1000);
  for (bool random : {false, true}) {
    WindowOptions wo;
    wo.context = 7;
    wo.random_offset = random;
    wo.seed = 5;
    const TokenWindowSource src(shard, wo);
    EXPECT_EQ(src.count(), random ? 1000 / 7 - 1 : 999 / 7);
    EXPECT_EQ(src.labels_per_sample(), 7);
    EXPECT_EQ(src.sample_shape(), std::vector<int64_t>{7});
    std::set<int64_t> offsets;
    for (int64_t epoch = 0; epoch < 8; ++epoch) {
      std::vector<int64_t> idx(size_t(src.count()));
      for (int64_t i = 0; i < src.count(); ++i) idx[size_t(i)] = i;
      std::vector<float> x(size_t(src.count() * 7));
      std::vector<int32_t> y(size_t(src.count() * 7));
      src.gather_in_epoch(epoch, idx.data(), src.count(), x.data(), y.data());
      const int64_t first = src.window_start(epoch, 0);
      offsets.insert(first);
      ASSERT_GE(first, 0);
      ASSERT_LT(first, 7);
      for (int64_t i = 0; i < src.count(); ++i) {
        const int64_t s = src.window_start(epoch, i);
        EXPECT_EQ(s, first + 7 * i);  // adjacent, never overlapping
        ASSERT_LE(s + 7 + 1, 1000);
        for (int64_t j = 0; j < 7; ++j) {
          ASSERT_EQ(x[size_t(i * 7 + j)], float(shard->token(s + j))) << epoch << " " << i;
          ASSERT_EQ(y[size_t(i * 7 + j)], shard->token(s + j + 1)) << epoch << " " << i;
        }
      }
    }
    // Training windows move from epoch to epoch; evaluation windows stay at offset 0.
    if (random)
      EXPECT_GT(offsets.size(), 1u);
    else
      EXPECT_EQ(offsets, std::set<int64_t>{0});
  }
  // The same (seed, epoch) gives the same offset; gather() is epoch 0.
  WindowOptions wo;
  wo.context = 7;
  wo.random_offset = true;
  wo.seed = 5;
  const TokenWindowSource a(shard, wo), b(shard, wo);
  for (int64_t e = 0; e < 5; ++e) EXPECT_EQ(a.epoch_offset(e), b.epoch_offset(e));
}

// A split by position: the training windows read only tokens before the cut (labels
// included), the validation windows only tokens at or after it.
TEST(TokenWindows, SplitByPositionIsDisjoint) {
  TempDir dir;
  const auto shard = pattern_shard(dir, 1000);
  const int64_t cut = 900;
  WindowOptions tr;
  tr.context = 8;
  tr.end = cut;
  tr.random_offset = true;
  tr.seed = 3;
  WindowOptions va;
  va.context = 8;
  va.begin = cut;
  const TokenWindowSource train(shard, tr), val(shard, va);
  for (int64_t e = 0; e < 16; ++e) {
    EXPECT_GE(train.window_start(e, 0), 0);
    EXPECT_LE(train.window_start(e, train.count() - 1) + 8 + 1, cut) << e;  // last label
  }
  EXPECT_EQ(val.window_start(0, 0), cut);
  EXPECT_LE(val.window_start(0, val.count() - 1) + 8 + 1, 1000);
  EXPECT_EQ(val.count(), 99 / 8);
  // A range too short for one window is an error naming the shard and the context.
  WindowOptions tiny;
  tiny.context = 8;
  tiny.begin = 995;
  const std::string msg = error_of([&] { TokenWindowSource(shard, tiny); });
  EXPECT_NE(msg.find("p.shard"), std::string::npos) << msg;
  EXPECT_NE(msg.find("data.context = 8"), std::string::npos) << msg;
  EXPECT_EQ(window_count(15, 8, true), 0);
  EXPECT_EQ(window_count(16, 8, true), 1);
  EXPECT_EQ(window_count(9, 8, false), 1);
  EXPECT_EQ(window_count(8, 8, false), 0);
}

// The loader hands out labels_per_sample labels per sample; every rank's batch is the shifted
// stream, and a loader that skips k batches of an epoch continues with the same batches (how a
// resumed run finds its place).
TEST(TokenWindows, LoaderCarriesOneLabelPerPosition) {
  TempDir dir;
  const auto shard = pattern_shard(dir, 3000);
  WindowOptions wo;
  wo.context = 5;
  wo.random_offset = true;
  wo.seed = 11;
  auto src = std::make_shared<const TokenWindowSource>(shard, wo);
  for (int rank = 0; rank < 2; ++rank) {
    LoaderOptions lo;
    lo.global_batch = 8;
    lo.rank = rank;
    lo.world = 2;
    lo.seed = 11;
    lo.prefetch = 2;
    lo.workers = 2;
    Loader full(src, lo), skipped(src, lo);
    for (int64_t epoch : {0, 3}) {
      full.start_epoch(epoch);
      skipped.start_epoch(epoch);
      Batch b, c;
      for (int k = 0; k < 4; ++k) ASSERT_TRUE(skipped.next(c));
      int64_t step = 0;
      while (full.next(b)) {
        ASSERT_EQ(b.labels_per_sample, 5);
        ASSERT_EQ(b.size, 4);
        for (int64_t i = 0; i < b.size; ++i) {
          const int64_t window = full.order()[size_t(full.rank_range(b.step).first + i)];
          const int64_t s = src->window_start(epoch, window);
          for (int64_t j = 0; j < 5; ++j) {
            ASSERT_EQ(b.x[i * 5 + j], float(shard->token(s + j)));
            ASSERT_EQ(b.y[i * 5 + j], shard->token(s + j + 1));
          }
        }
        if (step >= 4) {
          ASSERT_TRUE(skipped.next(c));
          ASSERT_EQ(std::vector<float>(b.x, b.x + 20), std::vector<float>(c.x, c.x + 20));
          ASSERT_EQ(std::vector<int32_t>(b.y, b.y + 20), std::vector<int32_t>(c.y, c.y + 20));
        }
        ++step;
      }
      EXPECT_EQ(step, src->count() / 8);
    }
  }
}

}  // namespace
}  // namespace loom::data
