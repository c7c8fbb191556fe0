// Timeline recorder: spans of work (forward and backward per layer, bucket combines, optimizer
// steps, loader waits) written as Chrome trace events, a JSON array of
// {"name","cat","ph":"X","ts","dur","pid","tid","args"} that Perfetto and chrome://tracing open.
// pid is the worker's rank, tid its thread (compute, comm); ts and dur are microseconds.
//
// Cheap when disabled: every emitting site starts with `if (trace::enabled())`, one relaxed
// atomic load. When enabled, a thread records only while its worker's current step is inside
// the window (trace.steps / trace.every), and the whole trace stops at trace.max_events, so a
// long run gives a bounded file.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "loom/core/config.h"

namespace loom::trace {

// Thread ids inside a worker's track group.
inline constexpr int kComputeTid = 0;
inline constexpr int kCommTid = 1;

struct Options {
  std::string path;             // trace.file ("" = off)
  int64_t steps = 20;           // trace.steps: how many steps to record
  int64_t every = 1;            // trace.every: record steps whose index is a multiple of this
  int64_t max_events = 500000;  // trace.max_events: hard cap (about 60 MB of JSON)
};

std::vector<ConfigKeySpec> trace_config_keys();
Options options_from_config(const Config& cfg);

namespace detail {
extern std::atomic<bool> g_enabled;
}

inline bool enabled() {
  return detail::g_enabled.load(std::memory_order_relaxed);
}

// Starts recording (clears earlier events). Not reentrant: one recording per process at a time.
void start(const Options& options);
// Stops recording; returns the events as Chrome trace JSON text and forgets them.
std::string stop_to_json();
// Events recorded and dropped (after max_events) so far.
int64_t recorded_events();
int64_t dropped_events();

// Names the calling thread: it belongs to worker `pid`'s group as thread `tid`. The first call
// on a thread wins unless `force` (a worker thread re-bound for a new run).
void bind_thread(int pid, int tid, const char* thread_name, bool force = false);
// A worker thread tells the recorder which step it starts: whether its group records follows.
void begin_step(int pid, int64_t step);
// Whether the calling thread records now (bound, and its worker's step inside the window).
bool active();

using Args = std::vector<std::pair<std::string, int64_t>>;

// Microseconds since start() on the recorder's clock.
double now_us();
// A complete event that already happened: [start_us, start_us + dur_us) on the calling thread.
void complete(std::string name, const char* cat, double start_us, double dur_us, Args args = {});
// An instant event ("ph":"i") now, on the calling thread.
void instant(std::string name, const char* cat, Args args = {});

// A span from construction (or begin()) to destruction. The default constructor records
// nothing, so a site builds its name only when enabled():
//   trace::Span s;  if (trace::enabled()) s.begin(fmt::format("fwd {}", i), "forward");
class Span {
 public:
  Span() = default;
  Span(const char* name, const char* cat) {
    if (enabled()) begin(name, cat);
  }
  ~Span() { end(); }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

  void begin(std::string name, const char* cat, Args args = {});
  void end();
  // Ends the open span, if any, and begins the next phase: one line per phase at a call site.
  void next(const char* name, const char* cat) {
    if (open_ || enabled()) {
      end();
      begin(name, cat);
    }
  }

 private:
  bool open_ = false;
  double start_us_ = 0;
  std::string name_;
  const char* cat_ = "";
  Args args_;
};

// Records from construction to destruction when options.path is set; the destructor writes the
// file (also when training threw, so the trace shows what happened up to the error). Under MPI
// each process writes its own file: rank r > 0 appends ".rank<r>" to the path.
class Session {
 public:
  Session(const Options& options, int process_rank);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  // Writes now (idempotent); InputError if the file cannot be written.
  void write();

 private:
  std::string path_;
  bool written_ = true;
};

}  // namespace loom::trace
