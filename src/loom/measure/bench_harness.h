// What every `loom bench` mode and every probe of this machine share, in the manner of
// nccl-tests' common harness (testColl): a mode says what one call, one round or one run is,
// and the harness sizes, warms up, repeats, times and writes the rows. Each mode fills it in:
// allreduce (time_calls over geometric_sizes, the max over ranks), codec (time_rounds against
// memcpy), calibrate and auto's start-up probe (time_repeats), train and precision
// (best_of_rounds over whole runs), loader; every mode writes through BenchOutput.
#pragma once

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace loom::measure {

// The upper median of `v` (the middle element after sorting), the figure of repeated timings:
// robust to the odd repetition slowed by another process. `v` must not be empty.
double median(std::vector<double> v);

// Timed repetitions of `op` after `warmup` untimed calls.
struct RepeatOptions {
  int warmup = 1;
  int reps = 5;
  int calls = 1;        // calls of `op` per timed repetition
  double budget_s = 0;  // > 0: no repetition starts after this (at least one runs)
  // Before each repetition (a barrier between ranks), and the figure every rank reports for one
  // repetition's seconds (the max over ranks for a collective); none: this process's own.
  std::function<void()> before_rep;
  std::function<double(double)> agree;
};
struct RepeatTiming {
  double seconds = 0;  // per call, the median repetition
  std::vector<double> per_call;
  int calls = 1;
};
RepeatTiming time_repeats(const std::function<void()>& op, const RepeatOptions& o);

// As the OSU and nccl-tests harnesses do: calls in doubling batches until at least
// `calibrate_s` passed (one slow call on a busy machine must not decide), then as many calls
// per repetition as fit a sixth of `budget_s` (between 1 and 10^4), a tenth of those to warm
// up, and the median of `reps` repetitions. `calls` > 0 fixes the calls per repetition.
struct CallOptions {
  double budget_s = 0.6;
  int calls = 0;
  int reps = 5;
  double calibrate_s = 0.005;
  std::function<void()> before_rep;
  std::function<double(double)> agree;
};
RepeatTiming time_calls(const std::function<void()>& op, const CallOptions& o);

// Interleaved rounds of several operations (each once a round, in order) until at least
// `min_rounds` and 3 x `min_seconds` passed, after one warm-up call of each: the fastest time of
// each. Timed in the same rounds, their ratios hold on a shared machine whose speed drifts.
struct RoundTiming {
  std::vector<double> fastest;
  int rounds = 0;
};
RoundTiming time_rounds(const std::vector<std::function<void()>>& ops, double min_seconds,
                        int min_rounds = 5);

// Whole runs of several configurations in interleaved rounds (1, 2, 1, 2, ...): `run(config,
// round)` returns a figure where higher is better, and each configuration's best counts. One run
// per configuration would put a slow spell of the machine on one side of a ratio.
struct BestOfRounds {
  std::vector<double> best;                   // by configuration
  std::vector<std::vector<double>> by_round;  // [configuration][round]
};
BestOfRounds best_of_rounds(int configs, int rounds,
                            const std::function<double(int config, int round)>& run);

// min, min x factor, ... up to max, each a whole number of floats. ConfigError naming the
// options for min < 4 bytes, max < min or factor < 2.
std::vector<size_t> geometric_sizes(size_t min_bytes, size_t max_bytes, size_t factor,
                                    const std::string& what);

// A benchmark's rows: a table for people (notes, a heading line, one line per row) and one JSON
// line per row for scripts, on stdout and, when asked, in a file of its own.
class BenchOutput {
 public:
  // table = false: the JSON lines only. json_path: also write every JSON line there ("" = none;
  // InputError naming it when it cannot be opened).
  explicit BenchOutput(bool table = true, const std::string& json_path = "",
                       std::FILE* out = stdout);

  bool table() const { return table_; }
  // "# text", table only.
  void note(const std::string& text);
  // A table line as given (a heading, a summary line), table only.
  void line(const std::string& text);
  // One JSON line (stdout and the file).
  void json(const nlohmann::json& j);
  // A table line and its JSON line.
  void row(const std::string& table_line, const nlohmann::json& j);

 private:
  bool table_;
  std::FILE* out_;
  std::ofstream file_;
};

}  // namespace loom::measure
