// The auto.* keys of a run's config: how `codec`, `sync` or `sync.bucket_kib` = "auto" decides
// (train/auto_config.h) and how it checks its choice.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loom/compress/codec_options.h"
#include "loom/core/config.h"
#include "loom/perf/auto_choice.h"
#include "loom/perf/calibration.h"

namespace loom::plan {

struct AutoOptions {
  perf::LossyPolicy lossy = perf::LossyPolicy::kMeasured;  // auto.lossy: "auto", true, false
  double max_accuracy_delta = 0.5;  // auto.max_accuracy_delta, points of test accuracy
  double max_bits_delta = 0.05;     // auto.max_bits_delta, bits per byte or token (token runs)
  // The codecs auto may weigh with the run's settings for each (codec.* keys), for the replay
  // of the run's gradients that measures their fidelity (measure/fidelity_probe.h).
  std::vector<compress::CodecOptions> codec_options;
  std::string calibration;  // auto.calibration: a file of this machine; "" = measure
  perf::MismatchPolicy calibration_mismatch = perf::MismatchPolicy::kError;
  int64_t check_after = 10;  // auto.check_after: steps before the check window
  int64_t check_steps = 20;  // auto.check_steps: the window's steps (0 = no check)
  // Test hooks (auto.test_*): the start-up link read as this many times faster than it
  // measured, and these seconds of exposed communication added to every step of the check
  // window, so that a test can force a known first choice and a measured step far from it.
  double test_probe_link_factor = 1;
  double test_window_comm_s = 0;
};

// ConfigError naming the key for a value out of range or of the wrong type.
AutoOptions read_auto_options(const Config& cfg);

// Keys: auto.* (above), and auto.machine and auto.revised, which loom writes to record the choice.
std::vector<ConfigKeySpec> auto_config_keys();

}  // namespace loom::plan
