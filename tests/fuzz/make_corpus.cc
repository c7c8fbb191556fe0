// Writes the seed corpora under tests/fuzz/corpus/ (run once; the files are committed):
//   g++ -std=c++20 -Isrc tests/fuzz/make_corpus.cc build/libloom_data.a build/libloom_core.a \
//       -lfmt -lz -o /tmp/make_corpus && /tmp/make_corpus tests/fuzz/corpus
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "loom/data/formats/idx.h"
#include "loom/data/formats/npy.h"
#include "loom/data/formats/shard_writer.h"
#include "loom/data/formats/token_shard.h"

using namespace loom::data;

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "tests/fuzz/corpus";
  IdxArray img{{3, 4, 4}, {}}, lab{{3}, {1, 9, 0}};
  for (int i = 0; i < 48; ++i) img.bytes.push_back(uint8_t(i * 5));
  write_idx(dir + "/idx/images.idx", img, false);
  write_idx(dir + "/idx/images.idx.gz", img, true);
  write_idx(dir + "/idx/labels.idx", lab, false);
  write_idx(dir + "/idx/labels.idx.gz", lab, true);

  // The first byte selects the CSV options (see csv_fuzz.cc).
  std::ofstream(dir + "/csv/plain.csv") << '\0' << "0.5,1,2\n-3e2,4.25,0\n";
  std::ofstream(dir + "/csv/header_semicolon.csv") << '\x03' << "y;a;b\n1;2;3\r\n0;0.5;1e-3\n";
  std::ofstream(dir + "/csv/label_first.csv") << '\x0c' << "9,1,2,3\n0,4,5,6\n\n";

  float f[6] = {1, 2, 3, 4, 5, 6};
  double d[2] = {0.5, -1};
  uint8_t u[4] = {0, 1, 254, 255};
  int64_t l[3] = {0, 5, 9};
  write_npy(dir + "/npy/f4.npy", NpyDtype::kFloat32, {2, 3}, f);
  write_npy(dir + "/npy/f8.npy", NpyDtype::kFloat64, {2}, d);
  write_npy(dir + "/npy/u1.npy", NpyDtype::kUint8, {2, 2}, u);
  write_npy(dir + "/npy/i8.npy", NpyDtype::kInt64, {3}, l);

  {
    ShardWriter w(dir + "/shard/u8.shard", {ShardDtype::kUint8, {2, 2}, 10, 5, 2});
    for (int i = 0; i < 5; ++i) w.append(i, u);
    w.finish();
  }
  {
    ShardWriter w(dir + "/shard/f32.shard", {ShardDtype::kFloat32, {3}, 3, 2, 0});
    w.append(2, f);
    w.append(0, f + 3);
    w.finish();
  }
  {
    ShardSpec spec{ShardDtype::kUint8, {1}, 3, 4, 2};
    spec.target = ShardTarget::kNone;
    Vocabulary v;
    v.kind = VocabKind::kChars;
    v.chars = {"a", "b", "\xc3\xa9"};
    v.size = 3;
    spec.extra = encode_vocabulary(v);
    ShardWriter w(dir + "/shard/chars.shard", spec);
    for (uint8_t t : {0, 2, 1, 2}) w.append_features(&t);
    w.finish();
  }
  return 0;
}
