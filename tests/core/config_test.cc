#include "loom/core/config.h"

#include <gtest/gtest.h>

#include <cmath>

#include "loom/core/error.h"

namespace loom {
namespace {

TEST(Config, FlattensTablesAndRemembersLines) {
  Config cfg =
      Config::from_string("model = \"mlp\"\n[optim]\nlr = 0.05\nmomentum = 0.9\n", "c.toml");
  EXPECT_EQ(cfg.get_string("model", ""), "mlp");
  EXPECT_DOUBLE_EQ(cfg.get_double("optim.lr", 0), 0.05);
  EXPECT_EQ(cfg.where("optim.momentum"), "c.toml:4");
  EXPECT_EQ(cfg.get_int("batch", 128), 128);
}

// [[layer]] tables flatten to layer.0.*, layer.1.*, each value remembering its line, and the
// canonical text reads back to the same keys.
TEST(Config, ArraysOfTablesFlattenByPosition) {
  Config c =
      Config::from_string("[[layer]]\ntype = \"a\"\n[[layer]]\ntype = \"b\"\nout = 3\n", "g.toml");
  EXPECT_EQ(c.get_string("layer.0.type", ""), "a");
  EXPECT_EQ(c.get_string("layer.1.type", ""), "b");
  EXPECT_EQ(c.get_int("layer.1.out", 0), 3);
  EXPECT_EQ(c.where("layer.1.out"), "g.toml:5");
  Config back = Config::from_string(c.canonical_text());
  EXPECT_EQ(back.canonical_text(), c.canonical_text());
  EXPECT_EQ(back.get_int("layer.1.out", 0), 3);
}

TEST(Config, OverridesParseTomlValuesAndBareWords) {
  Config cfg = Config::from_string("batch = 64\n");
  cfg.set_override("batch=256");
  cfg.set_override("codec=onebit");
  cfg.set_override("optim.lr = 0.1");
  EXPECT_EQ(cfg.get_int("batch", 0), 256);
  EXPECT_EQ(cfg.get_string("codec", ""), "onebit");
  EXPECT_DOUBLE_EQ(cfg.get_double("optim.lr", 0), 0.1);
  EXPECT_THROW(cfg.set_override("=3"), ConfigError);
}

TEST(Config, WrongTypeNamesKeyAndLine) {
  Config cfg = Config::from_string("a = 1\nbatch = \"big\"\n", "c.toml");
  try {
    cfg.get_int("batch", 0);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("c.toml:2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'batch'"), std::string::npos) << e.what();
  }
}

TEST(Config, OutOfRangeAndChoices) {
  Config cfg = Config::from_string("batch = -5\ncodec = \"zip\"\n");
  EXPECT_THROW(cfg.get_int("batch", 1, 1, 1 << 20), ConfigError);
  EXPECT_THROW(cfg.get_choice("codec", "fp32", {"fp32", "fp16"}), ConfigError);
  EXPECT_EQ(cfg.get_choice("missing", "fp32", {"fp32", "fp16"}), "fp32");
}

TEST(Config, UnknownKeySuggestsClosest) {
  Config cfg = Config::from_string("[optim]\nlearning_rate = 1\nlrr = 2\n", "c.toml");
  std::vector<ConfigKeySpec> known = {{"optim.lr", ConfigType::kDouble, "0.05", ""}};
  try {
    cfg.check_known(known);
    FAIL();
  } catch (const ConfigError& e) {
    std::string w = e.what();
    EXPECT_NE(w.find("unknown config key"), std::string::npos) << w;
  }
  Config good = Config::from_string("[optim]\nlr = 1\n");
  EXPECT_NO_THROW(good.check_known(known));
}

TEST(Config, SyntaxErrorNamesLine) {
  try {
    Config::from_string("a = 1\nb = = 2\n", "bad.toml");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.toml:2"), std::string::npos) << e.what();
  }
}

TEST(Config, CanonicalTextIsOrderIndependent) {
  Config a = Config::from_string("x = 1\ny = \"s\"\n");
  Config b = Config::from_string("y = \"s\"\nx = 1\n");
  EXPECT_EQ(a.canonical_text(), b.canonical_text());
  b.set_override("x=2");
  EXPECT_NE(a.canonical_text(), b.canonical_text());
}

// canonical_text() is config.toml, the config saved in a checkpoint (parsed again by
// `loom train --resume`) and the config hash compared across ranks: it must parse back to the
// same values and types, whatever the strings hold.
// `--set sync=bmuf --set sync.bucket_kib=1024` makes "sync" a value and the start of another
// key, which TOML cannot write as a table: config.toml must still parse back (a resume reads it).
TEST(Config, CanonicalTextKeepsAKeyThatIsAlsoAPrefix) {
  Config a;
  a.set_override("sync=bmuf");
  a.set_override("sync.bucket_kib=1024");
  a.set_override("sync.bmuf.tau=8");
  a.set_override("codec=int8");
  a.set_override("codec.block=512");
  a.set_override("optim.lr=0.1");
  const std::string text = a.canonical_text();
  Config b = Config::from_string(text, "canonical.toml");
  EXPECT_EQ(b.canonical_text(), text);
  ASSERT_EQ(b.values().size(), a.values().size()) << text;
  EXPECT_EQ(b.get_string("sync", ""), "bmuf");
  EXPECT_EQ(b.get_int("sync.bucket_kib", 0, 0, 1 << 20), 1024);
  EXPECT_EQ(b.get_int("sync.bmuf.tau", 0, 0, 100), 8);
  EXPECT_EQ(b.get_string("codec", ""), "int8");
  EXPECT_EQ(b.get_int("codec.block", 0, 0, 1 << 20), 512);
  // A key under no value keeps its dotted form.
  EXPECT_NE(text.find("optim.lr = 0.1"), std::string::npos) << text;
}

TEST(Config, CanonicalTextParsesBackToTheSameValues) {
  Config a;
  a.set("output.dir", std::string("runs/it's \"quoted\" \\ back\\slash\nnew\tline\x01\x7f"));
  a.set("plain", std::string("runs/latest"));
  a.set("optim.lr", 1.0);         // integral double: stays a double
  a.set("optim.momentum", -0.0);  // would read back as the integer 0
  a.set("optim.eps", 1e-300);
  a.set("batch", int64_t(-64));
  a.set("eval", false);
  a.set_override("mlp.hidden=[32, 16]");
  a.set_override("names=[\"a\\\"b\", \"c\\\\d\"]");
  a.set("odd key.with space", std::string("x"));
  const std::string text = a.canonical_text();
  Config b = Config::from_string(text, "canonical.toml");
  EXPECT_EQ(b.canonical_text(), text);
  ASSERT_EQ(b.values().size(), a.values().size()) << text;
  for (const auto& [key, v] : a.values()) {
    ASSERT_TRUE(b.has(key)) << key << " missing from\n" << text;
    const ConfigValue& w = b.values().at(key);
    EXPECT_EQ(w.is_array, v.is_array) << key;
    if (v.is_array)
      EXPECT_EQ(w.array, v.array) << key;
    else
      EXPECT_EQ(w.value, v.value) << key;
  }
  EXPECT_TRUE(std::signbit(b.get_double("optim.momentum", 1)));
  EXPECT_EQ(b.get_string("output.dir", ""), a.get_string("output.dir", ""));
  EXPECT_NE(text.find("optim.lr = 1.0\n"), std::string::npos) << text;
}

// Found by fuzz.config (tests/fuzz/corpus/config/regression-empty-key-part.toml): the quoted
// key ".dkey" was written back as "".dkey, which read back as "dkey".
TEST(Config, EmptyKeyPartsSurviveTheRoundTrip) {
  const Config a = Config::from_string("\".dkey\" = true\n[\"\"]\nx = 1\n[\"a.b\".\"\"]\ny = 2\n");
  EXPECT_TRUE(a.has(".dkey"));
  EXPECT_TRUE(a.has(".x"));
  EXPECT_TRUE(a.has("a.b..y"));
  const Config b = Config::from_string(a.canonical_text());
  EXPECT_EQ(b.canonical_text(), a.canonical_text());
  EXPECT_TRUE(b.has(".dkey")) << a.canonical_text();
  EXPECT_EQ(b.values().size(), 3u);
}

}  // namespace
}  // namespace loom
