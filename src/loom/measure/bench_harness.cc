#include "loom/measure/bench_harness.h"

#include <fmt/format.h>

#include <algorithm>

#include "loom/core/error.h"
#include "loom/core/timer.h"

namespace loom::measure {

double median(std::vector<double> v) {
  LOOM_CHECK(!v.empty(), "median of no timings");
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

RepeatTiming time_repeats(const std::function<void()>& op, const RepeatOptions& o) {
  for (int i = 0; i < o.warmup; ++i) op();
  RepeatTiming t;
  t.calls = std::max(1, o.calls);
  Stopwatch spent;
  for (int rep = 0; rep < std::max(1, o.reps); ++rep) {
    if (rep > 0 && o.budget_s > 0 && spent.seconds() >= o.budget_s) break;
    if (o.before_rep) o.before_rep();
    Stopwatch w;
    for (int i = 0; i < t.calls; ++i) op();
    const double s = w.seconds();
    t.per_call.push_back((o.agree ? o.agree(s) : s) / t.calls);
  }
  t.seconds = median(t.per_call);
  return t;
}

RepeatTiming time_calls(const std::function<void()>& op, const CallOptions& o) {
  if (o.before_rep) o.before_rep();
  Stopwatch sw;
  int64_t calls = 0;
  double elapsed = 0;
  for (int64_t k = 1;; k *= 2) {
    for (int64_t i = 0; i < k; ++i) op();
    calls += k;
    elapsed = o.agree ? o.agree(sw.seconds()) : sw.seconds();
    if (elapsed > o.calibrate_s) break;
  }
  const double one = elapsed / double(calls);
  const int per_rep =
      o.calls > 0 ? o.calls : int(std::clamp(o.budget_s / 6 / std::max(one, 1e-7), 1.0, 1e4));
  RepeatOptions r;
  r.warmup = std::max(1, per_rep / 10);
  r.reps = o.reps;
  r.calls = per_rep;
  r.before_rep = o.before_rep;
  r.agree = o.agree;
  return time_repeats(op, r);
}

RoundTiming time_rounds(const std::vector<std::function<void()>>& ops, double min_seconds,
                        int min_rounds) {
  for (const auto& op : ops) op();  // warm up: page faults, caches
  RoundTiming t;
  t.fastest.assign(ops.size(), 1e30);
  Stopwatch total;
  while (t.rounds < min_rounds || total.seconds() < 3 * min_seconds) {
    for (size_t i = 0; i < ops.size(); ++i) {
      Stopwatch w;
      ops[i]();
      t.fastest[i] = std::min(t.fastest[i], w.seconds());
    }
    if (++t.rounds >= 100000) break;
  }
  return t;
}

BestOfRounds best_of_rounds(int configs, int rounds,
                            const std::function<double(int config, int round)>& run) {
  BestOfRounds b;
  b.best.assign(size_t(configs), 0.0);
  b.by_round.assign(size_t(configs), {});
  for (int round = 0; round < rounds; ++round)
    for (int k = 0; k < configs; ++k) {
      const double v = run(k, round);
      b.by_round[size_t(k)].push_back(v);
      b.best[size_t(k)] = std::max(b.best[size_t(k)], v);
    }
  return b;
}

std::vector<size_t> geometric_sizes(size_t min_bytes, size_t max_bytes, size_t factor,
                                    const std::string& what) {
  if (min_bytes < sizeof(float) || max_bytes < min_bytes || factor < 2)
    throw ConfigError(
        fmt::format("{}: need 4 <= --min-bytes <= --max-bytes and --factor >= 2 (got {}, {}, {})",
                    what, min_bytes, max_bytes, factor));
  std::vector<size_t> s;
  for (size_t b = min_bytes; b <= max_bytes; b *= factor) s.push_back(b / 4 * 4);
  return s;
}

BenchOutput::BenchOutput(bool table, const std::string& json_path, std::FILE* out)
    : table_(table), out_(out) {
  if (json_path.empty()) return;
  file_.open(json_path);
  if (!file_) throw InputError(fmt::format("{}: cannot be opened for writing", json_path));
}

void BenchOutput::note(const std::string& text) {
  if (table_) line("# " + text);
}

void BenchOutput::line(const std::string& text) {
  if (!table_) return;
  std::fprintf(out_, "%s\n", text.c_str());
  std::fflush(out_);
}

void BenchOutput::json(const nlohmann::json& j) {
  const std::string text = j.dump();
  std::fprintf(out_, "%s\n", text.c_str());
  std::fflush(out_);
  if (file_.is_open()) file_ << text << '\n' << std::flush;
}

void BenchOutput::row(const std::string& table_line, const nlohmann::json& j) {
  line(table_line);
  json(j);
}

}  // namespace loom::measure
