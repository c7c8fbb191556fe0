// Progress on the terminal: a bar redrawn in place (samples/s, ETA, loss) when stderr is a
// terminal, plain lines at ~10% steps otherwise, or nothing.
#pragma once

#include <cstdint>
#include <string>

namespace loom::train {

enum class ProgressMode { kBar, kLines, kNone };

// "auto" -> kBar when stderr is a terminal, else kLines.
ProgressMode parse_progress_mode(const std::string& name);

class Progress {
 public:
  // `epochs` the run trains (what max_steps leaves of them), `total_steps` its steps: the ETA
  // counts what is left of those.
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
