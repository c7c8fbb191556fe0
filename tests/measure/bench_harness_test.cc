#include "loom/measure/bench_harness.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "loom/core/error.h"

namespace loom::measure {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(BenchHarness, MedianIsTheUpperMiddleElement) {
  EXPECT_EQ(median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(median({4.0, 1.0, 3.0, 2.0}), 3.0);
  EXPECT_THROW(median({}), Error);
}

// Warm-up calls are not timed, each repetition runs `calls` calls, and the figure each
// repetition reports passes through `agree` (a collective's max over ranks).
TEST(BenchHarness, RepeatsWarmUpRepeatAndAgree) {
  int calls = 0, before = 0;
  RepeatOptions o;
  o.warmup = 2;
  o.reps = 3;
  o.calls = 4;
  o.before_rep = [&] { ++before; };
  o.agree = [](double) { return 8.0; };  // every repetition "took" 8 s
  const RepeatTiming t = time_repeats([&] { ++calls; }, o);
  EXPECT_EQ(calls, 2 + 3 * 4);
  EXPECT_EQ(before, 3);
  EXPECT_EQ(t.calls, 4);
  EXPECT_THAT(t.per_call, ElementsAre(2.0, 2.0, 2.0));
  EXPECT_EQ(t.seconds, 2.0);
}

TEST(BenchHarness, ABudgetStopsTheRepetitionsAfterTheFirst) {
  int calls = 0;
  RepeatOptions o;
  o.warmup = 0;
  o.reps = 100;
  o.budget_s = 1e-9;
  const RepeatTiming t = time_repeats([&] { ++calls; }, o);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(t.per_call.size(), 1u);
}

// Calibrated calls: a fixed count is used as given; otherwise the count follows the budget,
// between 1 and 10^4 calls a repetition.
TEST(BenchHarness, CallsPerRepetitionFollowTheBudgetWithinBounds) {
  int calls = 0;
  CallOptions fixed;
  fixed.calls = 7;
  fixed.reps = 2;
  EXPECT_EQ(time_calls([&] { ++calls; }, fixed).calls, 7);
  CallOptions slow;
  slow.budget_s = 1e-6;  // far less than one call's agreed time
  slow.reps = 1;
  slow.agree = [](double s) { return s + 1.0; };
  EXPECT_EQ(time_calls([] {}, slow).calls, 1);
  CallOptions fast;
  fast.budget_s = 1e6;
  fast.reps = 1;
  fast.calibrate_s = 1e-4;
  int n = 0;
  EXPECT_EQ(time_calls([&] { ++n; }, fast).calls, 10000);
}

TEST(BenchHarness, RoundsTimeEveryOperationInTurnAndKeepTheFastest) {
  std::vector<int> order;
  const RoundTiming t =
      time_rounds({[&] { order.push_back(0); }, [&] { order.push_back(1); }}, 0.0, 3);
  EXPECT_EQ(t.rounds, 3);
  ASSERT_EQ(t.fastest.size(), 2u);
  EXPECT_GE(t.fastest[0], 0.0);
  EXPECT_LT(t.fastest[0], 1.0);
  EXPECT_THAT(order, ElementsAre(0, 1, 0, 1, 0, 1, 0, 1));  // a warm-up call each, then rounds
}

TEST(BenchHarness, BestOfRoundsInterleavesTheConfigurations) {
  std::vector<std::pair<int, int>> calls;
  const std::vector<double> figures = {5, 1, 3, 4};  // config 0 then 1, round by round
  const BestOfRounds b = best_of_rounds(2, 2, [&](int k, int round) {
    calls.emplace_back(k, round);
    return figures[calls.size() - 1];
  });
  EXPECT_THAT(calls,
              ElementsAre(std::pair{0, 0}, std::pair{1, 0}, std::pair{0, 1}, std::pair{1, 1}));
  EXPECT_THAT(b.best, ElementsAre(5.0, 4.0));
  EXPECT_THAT(b.by_round[1], ElementsAre(1.0, 4.0));
}

TEST(BenchHarness, GeometricSizesAreWholeFloatsAndBadRangesAreNamed) {
  EXPECT_THAT(geometric_sizes(4, 64, 4, "b"), ElementsAre(4u, 16u, 64u));
  EXPECT_THAT(geometric_sizes(6, 30, 2, "b"), ElementsAre(4u, 12u, 24u));
  try {
    geometric_sizes(64, 4, 2, "bench x");
    FAIL() << "max < min accepted";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("bench x: need 4 <= --min-bytes <= --max-bytes"));
  }
  EXPECT_THROW(geometric_sizes(4, 64, 1, "b"), ConfigError);
  EXPECT_THROW(geometric_sizes(2, 64, 2, "b"), ConfigError);
}

std::string read_all(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  char buf[256];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, n);
  return s;
}

// Notes and table lines only with the table; JSON lines always, and in the file when asked.
TEST(BenchHarness, OutputWritesTheTableForPeopleAndTheJsonForScripts) {
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / "loom_bench_harness_test.jsonl";
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  {
    BenchOutput o(true, file.string(), out);
    o.note("a note");
    o.row("  row 1", {{"bench", "x"}, {"v", 1}});
    o.json({{"bench", "x"}, {"v", 2}});
  }
  EXPECT_EQ(read_all(out),
            "# a note\n  row 1\n{\"bench\":\"x\",\"v\":1}\n{\"bench\":\"x\",\"v\":2}\n");
  std::fclose(out);
  std::ifstream in(file);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(all, "{\"bench\":\"x\",\"v\":1}\n{\"bench\":\"x\",\"v\":2}\n");
  std::filesystem::remove(file);

  std::FILE* quiet = std::tmpfile();
  BenchOutput json_only(false, "", quiet);
  json_only.note("hidden");
  json_only.line("hidden");
  json_only.row("hidden", {{"v", 3}});
  EXPECT_EQ(read_all(quiet), "{\"v\":3}\n");
  std::fclose(quiet);
}

TEST(BenchHarness, AJsonFileThatCannotBeOpenedIsNamed) {
  try {
    BenchOutput o(true, "/nonexistent-dir/out.jsonl");
    FAIL() << "an unwritable file was accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent-dir/out.jsonl"));
  }
}

}  // namespace
}  // namespace loom::measure
