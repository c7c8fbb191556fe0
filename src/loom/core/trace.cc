#include "loom/core/trace.h"

#include <fmt/format.h>

#include <array>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

#include "loom/core/config_refusal.h"
#include "loom/core/error.h"
#include "loom/core/io/atomic_file.h"

namespace loom::trace {

namespace detail {
std::atomic<bool> g_enabled{false};
}

namespace {

constexpr int kMaxPids = 4096;  // the most workers `loom train` accepts

struct Event {
  std::string name;
  const char* cat;
  char ph;
  double ts, dur;
  int pid, tid;
  Args args;
};

struct Recorder {
  std::mutex mu;
  Options options;
  std::vector<Event> events;
  std::map<std::pair<int, int>, std::string> thread_names;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  std::atomic<int64_t> dropped{0};
  std::array<std::atomic<bool>, kMaxPids> active{};
};

Recorder& rec() {
  static Recorder r;
  return r;
}

thread_local int t_pid = -1;
thread_local int t_tid = 0;

void push(Event e) {
  Recorder& r = rec();
  std::lock_guard<std::mutex> lock(r.mu);
  if (int64_t(r.events.size()) >= r.options.max_events) {
    r.dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  r.events.push_back(std::move(e));
}

void append_escaped(std::string& out, const std::string& s) {
  out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", int(c));
    } else {
      out += c;
    }
  }
  out += '"';
}

}  // namespace

std::vector<ConfigKeySpec> trace_config_keys() {
  return {
      {"trace.file", ConfigType::kString, "\"\"",
       "write a Chrome trace (Perfetto, chrome://tracing) here; also --timeline FILE"},
      {"trace.steps", ConfigType::kInt, "20", "trace: how many steps to record"},
      {"trace.every", ConfigType::kInt, "1", "trace: record every k-th step (0, k, 2k, ...)"},
      {"trace.max_events", ConfigType::kInt, "500000", "trace: stop recording after this many"},
  };
}

Options options_from_config(const Config& cfg) {
  Options o;
  o.path = cfg.get_string("trace.file", "");
  o.steps = cfg.get_int("trace.steps", o.steps, 1, int64_t(1) << 40);
  o.every = cfg.get_int("trace.every", o.every, 1, int64_t(1) << 40);
  o.max_events = cfg.get_int("trace.max_events", o.max_events, 1, int64_t(1) << 32);
  if (o.path.empty()) {
    // Without a file nothing is recorded for these to limit.
    const Options d;
    const std::string why =
        "limits the timeline of trace.file, which is not set (loom train --timeline FILE sets it)";
    refuse_unless_default(cfg, "trace.steps", d.steps, why);
    refuse_unless_default(cfg, "trace.every", d.every, why);
    refuse_unless_default(cfg, "trace.max_events", d.max_events, why);
  }
  return o;
}

void start(const Options& options) {
  Recorder& r = rec();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    r.options = options;
    r.events.clear();
    r.thread_names.clear();
    r.dropped = 0;
    r.t0 = std::chrono::steady_clock::now();
    for (auto& a : r.active) a.store(false, std::memory_order_relaxed);
  }
  detail::g_enabled.store(true, std::memory_order_release);
}

int64_t recorded_events() {
  std::lock_guard<std::mutex> lock(rec().mu);
  return int64_t(rec().events.size());
}

int64_t dropped_events() {
  return rec().dropped.load();
}

std::string stop_to_json() {
  detail::g_enabled.store(false, std::memory_order_release);
  Recorder& r = rec();
  std::lock_guard<std::mutex> lock(r.mu);
  std::string out = "[\n";
  bool first = true;
  auto sep = [&] {
    if (!first) out += ",\n";
    first = false;
  };
  // Metadata first: names and order of the tracks ("worker 0": compute, comm).
  std::map<int, bool> pids;
  for (const auto& [key, name] : r.thread_names) {
    pids[key.first] = true;
    sep();
    out += fmt::format(R"({{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":)",
                       key.first, key.second);
    append_escaped(out, name);
    out += "}}";
    sep();
    out += fmt::format(R"({{"name":"thread_sort_index","ph":"M","pid":{},"tid":{},)"
                       R"("args":{{"sort_index":{}}}}})",
                       key.first, key.second, key.second);
  }
  for (const auto& [pid, unused] : pids) {
    sep();
    out += fmt::format(R"({{"name":"process_name","ph":"M","pid":{},"tid":0,)"
                       R"("args":{{"name":"worker {}"}}}})",
                       pid, pid);
    sep();
    out += fmt::format(R"({{"name":"process_sort_index","ph":"M","pid":{},"tid":0,)"
                       R"("args":{{"sort_index":{}}}}})",
                       pid, pid);
  }
  for (const Event& e : r.events) {
    sep();
    out += R"({"name":)";
    append_escaped(out, e.name);
    out += fmt::format(R"(,"cat":"{}","ph":"{}","ts":{:.3f},)", e.cat, e.ph, e.ts);
    if (e.ph == 'X') out += fmt::format(R"("dur":{:.3f},)", e.dur);
    if (e.ph == 'i') out += R"("s":"t",)";
    out += fmt::format(R"("pid":{},"tid":{},"args":{{)", e.pid, e.tid);
    for (size_t i = 0; i < e.args.size(); ++i) {
      if (i) out += ',';
      append_escaped(out, e.args[i].first);
      out += fmt::format(":{}", e.args[i].second);
    }
    out += "}}";
  }
  if (r.dropped > 0) {
    sep();
    out += fmt::format(R"({{"name":"trace truncated: {} events dropped after trace.max_events = )"
                       R"({}","ph":"i","s":"g","ts":0,"pid":0,"tid":0,"args":{{}}}})",
                       r.dropped.load(), r.options.max_events);
  }
  out += "\n]\n";
  r.events.clear();
  r.events.shrink_to_fit();
  return out;
}

void bind_thread(int pid, int tid, const char* thread_name, bool force) {
  if (t_pid >= 0 && !force) return;
  t_pid = pid;
  t_tid = tid;
  if (!enabled()) return;
  Recorder& r = rec();
  std::lock_guard<std::mutex> lock(r.mu);
  r.thread_names[{pid, tid}] = thread_name;
}

void begin_step(int pid, int64_t step) {
  if (!enabled() || pid < 0 || pid >= kMaxPids) return;
  const Options& o = rec().options;  // written only by start(), before recording begins
  const bool on = step % o.every == 0 && step / o.every < o.steps;
  rec().active[size_t(pid)].store(on, std::memory_order_relaxed);
}

bool active() {
  if (!enabled() || t_pid < 0 || t_pid >= kMaxPids) return false;
  return rec().active[size_t(t_pid)].load(std::memory_order_relaxed);
}

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - rec().t0)
      .count();
}

void complete(std::string name, const char* cat, double start_us, double dur_us, Args args) {
  if (!active()) return;
  push({std::move(name), cat, 'X', start_us, dur_us, t_pid, t_tid, std::move(args)});
}

void instant(std::string name, const char* cat, Args args) {
  if (!active()) return;
  push({std::move(name), cat, 'i', now_us(), 0, t_pid, t_tid, std::move(args)});
}

void Span::begin(std::string name, const char* cat, Args args) {
  if (!active()) return;
  open_ = true;
  name_ = std::move(name);
  cat_ = cat;
  args_ = std::move(args);
  start_us_ = now_us();
}

void Span::end() {
  if (!open_) return;
  open_ = false;
  // Pushed even if the window closed meanwhile: a span begun inside it ends inside the file.
  if (!enabled()) return;
  push({std::move(name_), cat_, 'X', start_us_, now_us() - start_us_, t_pid, t_tid,
        std::move(args_)});
}

Session::Session(const Options& options, int process_rank) {
  if (options.path.empty()) return;
  path_ = process_rank == 0 ? options.path : fmt::format("{}.rank{}", options.path, process_rank);
  written_ = false;
  start(options);
}

Session::~Session() {
  try {
    write();
  } catch (...) {
    // A destructor must not throw; write() is called explicitly on the normal path.
  }
}

void Session::write() {
  if (written_) return;
  written_ = true;
  const std::string text = stop_to_json();
  std::filesystem::path p(path_);
  std::error_code ec;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  core::write_file_atomically(p.string(), text);
}

}  // namespace loom::trace
