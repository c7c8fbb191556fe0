#include "loom/core/config_refusal.h"

#include <gtest/gtest.h>

#include "loom/core/error.h"

namespace loom {
namespace {

TEST(ConfigRefusal, ADefaultValueIsNotASetting) {
  const Config c = Config::from_string(
      "a = 0.9\nb = 10\nc = 10.0\nd = \"none\"\ne = true\nf = [1024, 1024]\ng = 0.5\n", "c.toml");
  EXPECT_FALSE(sets_other_than(c, "a", 0.9));
  EXPECT_FALSE(sets_other_than(c, "missing", 0.9));
  // Numbers compare by value, whichever way they are written.
  EXPECT_FALSE(sets_other_than(c, "b", 10.0));
  EXPECT_FALSE(sets_other_than(c, "c", int64_t(10)));
  EXPECT_FALSE(sets_other_than(c, "d", std::string("none")));
  EXPECT_FALSE(sets_other_than(c, "e", true));
  EXPECT_FALSE(sets_other_than(c, "f", std::vector<ConfigScalar>{int64_t(1024), int64_t(1024)}));

  EXPECT_TRUE(sets_other_than(c, "a", 0.8));
  EXPECT_TRUE(sets_other_than(c, "d", std::string("divide")));
  EXPECT_TRUE(sets_other_than(c, "e", false));
  EXPECT_TRUE(sets_other_than(c, "e", std::string("true")));  // another type differs
  EXPECT_TRUE(sets_other_than(c, "f", std::vector<ConfigScalar>{int64_t(1024)}));
  EXPECT_TRUE(sets_other_than(c, "f", 1024.0));  // an array where a scalar is the default
  EXPECT_TRUE(sets_other_than(c, "g", std::vector<ConfigScalar>{0.25}));
}

TEST(ConfigRefusal, TheRefusalNamesKeyValueWhereAndWhy) {
  const Config c = Config::from_string("x = 1\n[optim]\nbeta1 = 0.8\n", "run.toml");
  try {
    refuse_unless_default(c, "optim.beta1", 0.9, "an Adam option; optim.name is \"sgd\"");
    FAIL() << "not refused";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(),
                 "run.toml:3: key 'optim.beta1' = 0.8: an Adam option; optim.name is \"sgd\"");
  }
  EXPECT_NO_THROW(refuse_unless_default(c, "optim.beta2", 0.999, "never set"));
  EXPECT_NO_THROW(refuse_unless_default(c, "x", int64_t(1), "at its default"));
}

}  // namespace
}  // namespace loom
