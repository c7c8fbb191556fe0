#include "loom/core/format_version.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "loom/core/error.h"

namespace loom {
namespace {

std::string refusal(const nlohmann::json& j, int64_t newest) {
  try {
    check_format_version(j, newest, "metrics", "runs/a/metrics.jsonl:3");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(FormatVersion, AbsentIsVersionZeroAndOlderOrEqualAreRead) {
  EXPECT_EQ(check_format_version({{"epoch", 1}}, 1, "metrics", "f"), 0);
  EXPECT_EQ(check_format_version({{"format_version", 0}}, 1, "metrics", "f"), 0);
  EXPECT_EQ(check_format_version({{"format_version", 1}}, 1, "metrics", "f"), 1);
  EXPECT_EQ(check_format_version({{"format_version", 2}}, 3, "metrics", "f"), 2);
  EXPECT_EQ(check_format_version(nlohmann::json::array({1, 2}), 1, "metrics", "f"), 0);
}

TEST(FormatVersion, NewerVersionIsRefusedNamingTheFileAndBothVersions) {
  const std::string msg = refusal({{"format_version", 7}}, 1);
  EXPECT_NE(msg.find("runs/a/metrics.jsonl:3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("metrics format version 7"), std::string::npos) << msg;
  EXPECT_NE(msg.find("reads version 1 or older"), std::string::npos) << msg;
}

TEST(FormatVersion, MalformedVersionIsRefused) {
  for (const nlohmann::json& v :
       {nlohmann::json("1"), nlohmann::json(1.5), nlohmann::json(-1), nlohmann::json(nullptr)}) {
    const std::string msg = refusal({{"format_version", v}}, 1);
    EXPECT_NE(msg.find("runs/a/metrics.jsonl:3"), std::string::npos) << v.dump();
    EXPECT_NE(msg.find("format_version"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace loom
