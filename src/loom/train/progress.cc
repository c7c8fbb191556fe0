#include "loom/train/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "loom/comm/launcher_env.h"
#include "loom/core/error.h"
#include "loom/core/timer.h"

namespace loom::train {

ProgressSink stderr_sink(int rank) {
  return {isatty(fileno(stderr)) != 0, comm::launched_by_mpi(), rank};
}

ProgressMode resolve_progress_mode(ProgressMode asked, const ProgressSink& sink) {
  if (sink.rank != 0) return ProgressMode::kNone;
  if (asked != ProgressMode::kAuto) return asked;
  return sink.terminal && !sink.launched ? ProgressMode::kBar : ProgressMode::kLines;
}

Progress::Progress(ProgressMode mode, int64_t epochs, int64_t steps_per_epoch,
                   int64_t samples_per_step, int64_t total_steps)
    : mode_(mode == ProgressMode::kAuto ? ProgressMode::kLines : mode),
      epochs_(epochs),
      steps_(steps_per_epoch < 1 ? 1 : steps_per_epoch),
      samples_per_step_(samples_per_step),
      total_steps_(total_steps) {}

namespace {
std::string clock_text(double seconds) {
  const int64_t s = int64_t(seconds + 0.5);
  return s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
                   : fmt::format("{}:{:02}", s / 60, s % 60);
}
}  // namespace

void Progress::set_tokens(int64_t tokens_per_sample, const std::string& unit) {
  tokens_per_sample_ = tokens_per_sample;
  unit_ = unit;
}

void Progress::step(int64_t epoch, int64_t step_in_epoch, double loss, double samples_per_s) {
  if (mode_ == ProgressMode::kNone) return;
  // "samples/s ... loss 0.1234", or for tokens "tokens/s ... loss 1.2345 (1.7810 bits/byte)".
  const bool tokens = tokens_per_sample_ > 0;
  const double rate = tokens ? samples_per_s * double(tokens_per_sample_) : samples_per_s;
  const char* rate_unit = tokens ? "tokens/s" : "samples/s";
  const std::string bits =
      tokens ? fmt::format(" ({:.4f} bits/{})", loss / 0.6931471805599453, unit_) : "";
  // The last epoch under max_steps ends early: its bar fills at the run's last step.
  const int64_t epoch_steps = std::min(steps_, total_steps_ - epoch * steps_);
  const double frac = double(step_in_epoch + 1) / double(std::max<int64_t>(epoch_steps, 1));
  const double steps_left =
      double(std::max<int64_t>(0, total_steps_ - (epoch * steps_ + step_in_epoch + 1)));
  const double eta = samples_per_s > 0 ? steps_left * double(samples_per_step_) / samples_per_s : 0;
  if (mode_ == ProgressMode::kBar) {
    const double now = now_seconds();
    if (now - last_draw_ < 0.1 && step_in_epoch + 1 < epoch_steps) return;
    last_draw_ = now;
    const int width = 28, filled = int(frac * width);
    std::string bar(size_t(filled), '=');
    if (filled < width) bar += '>' + std::string(size_t(width - filled - 1), ' ');
    std::fprintf(stderr, "\repoch %lld/%lld [%s] %3d%%  %.0f %s  ETA %s  loss %.4f%s  ",
                 (long long)epoch + 1, (long long)epochs_, bar.c_str(), int(frac * 100), rate,
                 rate_unit, clock_text(eta).c_str(), loss, bits.c_str());
    std::fflush(stderr);
    return;
  }
  const int decile = int(frac * 10);
  if (decile == last_decile_ || decile == 0) return;
  last_decile_ = decile;
  std::fprintf(stderr, "epoch %lld/%lld %3d%%  %.0f %s  ETA %s  loss %.4f%s\n",
               (long long)epoch + 1, (long long)epochs_, decile * 10, rate, rate_unit,
               clock_text(eta).c_str(), loss, bits.c_str());
}

void Progress::end_epoch() {
  if (mode_ == ProgressMode::kBar) std::fprintf(stderr, "\r%80s\r", "");
  last_decile_ = -1;
}

}  // namespace loom::train
