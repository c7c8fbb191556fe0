// Which progress a worker draws: a bar only for a terminal that no launcher stands between,
// plain lines in a log file or under mpirun, and nothing but on rank 0.
#include "loom/train/progress.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "loom/core/error.h"
#include "loom/plan/train_settings.h"

namespace loom::train {
namespace {

ProgressSink sink(bool terminal, bool launched, int rank) {
  ProgressSink s;
  s.terminal = terminal;
  s.launched = launched;
  s.rank = rank;
  return s;
}

TEST(Progress, AutoIsABarOnATerminalAndLinesInALogFileOrUnderALauncher) {
  EXPECT_EQ(resolve_progress_mode(ProgressMode::kAuto, sink(true, false, 0)), ProgressMode::kBar);
  EXPECT_EQ(resolve_progress_mode(ProgressMode::kAuto, sink(false, false, 0)),
            ProgressMode::kLines);
  EXPECT_EQ(resolve_progress_mode(ProgressMode::kAuto, sink(true, true, 0)), ProgressMode::kLines);
  EXPECT_EQ(resolve_progress_mode(ProgressMode::kAuto, sink(false, true, 0)), ProgressMode::kLines);
}

TEST(Progress, OnlyRankZeroDrawsWhateverWasAsked) {
  for (ProgressMode m :
       {ProgressMode::kAuto, ProgressMode::kBar, ProgressMode::kLines, ProgressMode::kNone})
    for (int rank : {1, 7}) {
      EXPECT_EQ(resolve_progress_mode(m, sink(true, false, rank)), ProgressMode::kNone);
      EXPECT_EQ(resolve_progress_mode(m, sink(false, true, rank)), ProgressMode::kNone);
    }
}

TEST(Progress, AModeAskedForByNameIsKeptOnRankZero) {
  for (ProgressMode m : {ProgressMode::kBar, ProgressMode::kLines, ProgressMode::kNone})
    for (bool terminal : {false, true})
      EXPECT_EQ(resolve_progress_mode(m, sink(terminal, true, 0)), m);
}

TEST(Progress, ModeNamesAndAnUnknownOneNamingTheKey) {
  EXPECT_EQ(plan::parse_progress_mode("auto"), ProgressMode::kAuto);
  EXPECT_EQ(plan::parse_progress_mode("bar"), ProgressMode::kBar);
  EXPECT_EQ(plan::parse_progress_mode("lines"), ProgressMode::kLines);
  EXPECT_EQ(plan::parse_progress_mode("none"), ProgressMode::kNone);
  try {
    plan::parse_progress_mode("fancy");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("'progress'"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("fancy"));
  }
}

// Lines mode draws whole lines, each with the epoch, the rate and the ETA; no carriage return.
TEST(Progress, LinesAreWholeLinesWithoutCarriageReturns) {
  Progress p(ProgressMode::kLines, 2, 20, 64, 40);
  ::testing::internal::CaptureStderr();
  for (int64_t s = 0; s < 20; ++s) p.step(0, s, 0.5, 640.0);
  p.end_epoch();
  const std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(out.find('\r'), std::string::npos) << out;
  EXPECT_THAT(out, ::testing::HasSubstr("epoch 1/2 100%"));
  EXPECT_THAT(out, ::testing::HasSubstr("640 samples/s"));
  EXPECT_THAT(out, ::testing::HasSubstr("ETA"));
  EXPECT_EQ(out.back(), '\n');
}

}  // namespace
}  // namespace loom::train
