// Progress on the terminal: a bar redrawn in place (samples/s, ETA, loss) when stderr is a
// terminal, plain lines at ~10% steps otherwise, or nothing.
#pragma once

#include <cstdint>
#include <string>

#include "loom/plan/train_settings.h"

namespace loom::train {

using ProgressMode = plan::ProgressMode;

// Where a worker's progress would go.
struct ProgressSink {
  bool terminal = false;  // stderr is a terminal
  bool launched = false;  // started by mpirun or srun (comm::launched_by_mpi)
  int rank = 0;
};
// This process's stderr, for the worker of `rank`.
ProgressSink stderr_sink(int rank);

// What a worker draws: nothing but on rank 0, whose progress stands for the run's; "auto" is a
// bar on a terminal and plain lines in a log file or under a launcher, which forwards every
// rank's output (a bar's carriage returns garble it, and its pseudo-terminal looks like one).
ProgressMode resolve_progress_mode(ProgressMode asked, const ProgressSink& sink);

class Progress {
 public:
  // `mode` as resolve_progress_mode gives it (kAuto draws lines). `epochs` the run trains (what
  // max_steps leaves of them), `total_steps` its steps: the ETA counts what is left of those.
  Progress(ProgressMode mode, int64_t epochs, int64_t steps_per_epoch, int64_t samples_per_step,
           int64_t total_steps);
  // A run on token windows: rates in tokens/s (`tokens_per_sample` per sample) and the loss, in
  // nats per token, followed by bits per `unit` ("byte", "character", "token").
  void set_tokens(int64_t tokens_per_sample, const std::string& unit);
  void step(int64_t epoch, int64_t step_in_epoch, double loss, double samples_per_s);
  // Clears the bar; the caller prints the epoch's summary line after it.
  void end_epoch();

 private:
  ProgressMode mode_;
  int64_t epochs_, steps_, samples_per_step_, total_steps_;
  int last_decile_ = -1;
  int64_t tokens_per_sample_ = 0;  // 0: not a token run
  std::string unit_;
  double last_draw_ = 0;
};

}  // namespace loom::train
