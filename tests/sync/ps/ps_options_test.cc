// sync = "ps" pushes and pulls fp32: a lossy codec is refused by name, never ignored.
#include "loom/sync/ps/ps_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "loom/compress/registry.h"
#include "loom/core/config.h"
#include "loom/core/error.h"
#include "loom/plan/sync_reader.h"

namespace loom::sync {
namespace {

using ::testing::HasSubstr;

std::string error_of(const std::string& toml) {
  try {
    plan::read_ps_options(Config::from_string(toml, "run.toml"));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(PsOptions, EveryLossyCodecIsRefusedNamingBothKeys) {
  for (const compress::CodecKind* k : compress::codec_kinds()) {
    for (const char* key : {"codec", "codec.name"}) {
      const std::string e = error_of(fmt::format("sync = \"ps\"\n{} = \"{}\"\n", key, k->name));
      if (!k->lossy) {
        EXPECT_EQ(e, "") << k->name;
        continue;
      }
      EXPECT_THAT(e, HasSubstr(fmt::format("key '{}'", key))) << k->name;
      EXPECT_THAT(e, HasSubstr("codec " + k->name)) << e;
      EXPECT_THAT(e, HasSubstr("sync = \"ps\"")) << e;
      EXPECT_THAT(e, HasSubstr("run.toml")) << e;  // where each key was set
    }
  }
  EXPECT_EQ(error_of("sync = \"ps\"\n"), "");
  EXPECT_EQ(error_of("sync = \"ps\"\ncodec = \"auto\"\n"), "");  // auto's to decide
}

}  // namespace
}  // namespace loom::sync
