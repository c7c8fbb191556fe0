#include "loom/experiments/sweep_runner.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "loom/core/error.h"
#include "loom/core/timer.h"
#include "loom/train/run_writer.h"

extern char** environ;

namespace loom::experiments {

namespace fs = std::filesystem;

namespace {

std::vector<int> allowed_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) out.push_back(c);
  if (out.empty())
    for (int c = 0; c < int(std::thread::hardware_concurrency()); ++c) out.push_back(c);
  return out;
}

std::string last_lines(const fs::path& file, size_t n) {
  std::ifstream in(file);
  std::deque<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    lines.push_back(line);
    if (lines.size() > n) lines.pop_front();
  }
  std::string out;
  for (const auto& l : lines) out += (out.empty() ? "" : "\n") + l;
  return out;
}

// The trial's summary.json; nullopt when it is missing or malformed. InputError when it is of
// a newer format version.
std::optional<nlohmann::json> read_summary(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  train::check_summary_version(j, file.string());
  return j;
}

// The last epoch line (step lines, "kind": "step", left out), as read_summary.
std::optional<nlohmann::json> last_metrics(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  std::optional<nlohmann::json> last;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    auto j = train::parse_metrics_line(line, fmt::format("{}:{}", file.string(), n));
    if (j && j->value("kind", "epoch") != "step") last = std::move(j);
  }
  return last;
}

// Fills the record from what the finished child left in its directory.
void collect(TrialRecord& r, const SweepSpec& spec, const fs::path& dir, int status) {
  if (WIFEXITED(status)) {
    r.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.exit_code = 128 + WTERMSIG(status);
  }
  std::optional<nlohmann::json> summary, metrics;
  std::string unreadable;  // a file of a newer format version: the trial's figures are unknown
  try {
    summary = read_summary(dir / "summary.json");
    metrics = last_metrics(dir / "metrics.jsonl");
  } catch (const InputError& e) {
    summary.reset();
    metrics.reset();
    unreadable = e.what();
  }
  if (summary) {
    // test_acc is null when the run did not evaluate (eval = false).
    const auto number = [&](const char* key, double def) {
      return summary->contains(key) && (*summary)[key].is_number() ? (*summary)[key].get<double>()
                                                                   : def;
    };
    r.test_acc = number("test_acc", -1.0);
    r.samples_per_s = number("samples_per_s", 0.0);
  }
  for (const auto& src : {summary, metrics}) {
    if (!r.metric && src && src->contains(spec.metric) && (*src)[spec.metric].is_number())
      r.metric = (*src)[spec.metric].get<double>();
  }
  // loom writes test_acc = -1 when it did not evaluate (eval = false): no metric, not a rank.
  if (r.metric && *r.metric < 0 && spec.metric.find("acc") != std::string::npos) r.metric.reset();
  if (r.exit_code != 0 && r.error.empty()) {
    r.error = WIFSIGNALED(status) ? fmt::format("killed by signal {}", WTERMSIG(status))
                                  : fmt::format("exit code {}", r.exit_code);
  }
  if (r.exit_code == 0 && !summary)
    r.error = unreadable.empty() ? "exited 0 but wrote no summary.json" : unreadable;
  if (r.exit_code == 0 && summary && !r.metric)
    r.error = fmt::format("no metric '{}' in summary.json or metrics.jsonl", spec.metric);
  if (r.exit_code != 0 || !summary) {
    r.status = TrialStatus::kFailed;
    // The last line first (loom's "error: ..." line, for the table), then the tail as context.
    const std::string tail = last_lines(dir / "stderr.log", 5);
    if (!tail.empty()) r.error += ": " + tail.substr(tail.rfind('\n') + 1) + "\n" + tail;
  } else {
    r.status = TrialStatus::kOk;
  }
}

struct Running {
  pid_t pid = -1;
  size_t record = 0;
  DeviceSlot slot;
  Stopwatch watch;
  bool term_sent = false;
  double term_at = 0;
};

// fork + exec with stdout/stderr to files, pinned to the slot. Everything the child needs is
// prepared before fork(), so the child only makes system calls.
pid_t spawn(const std::vector<std::string>& argv, const DeviceSlot& slot, const fs::path& dir) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    const std::string s = *e;
    if (slot.gpu >= 0 && s.rfind("CUDA_VISIBLE_DEVICES=", 0) == 0) continue;
    if (s.rfind("LOOM_SWEEP_SLOT=", 0) == 0) continue;
    env_strings.push_back(s);
  }
  if (slot.gpu >= 0) env_strings.push_back(fmt::format("CUDA_VISIBLE_DEVICES={}", slot.gpu));
  env_strings.push_back(fmt::format("LOOM_SWEEP_SLOT={}", slot.index));
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : slot.cores) CPU_SET(c, &set);

  const std::string out_path = (dir / "stdout.log").string(),
                    err_path = (dir / "stderr.log").string();
  const int out_fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int err_fd = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out_fd < 0 || err_fd < 0) {
    if (out_fd >= 0) ::close(out_fd);
    if (err_fd >= 0) ::close(err_fd);
    throw InputError(fmt::format("{}: cannot create the trial's log files", dir.string()));
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // the sweep dies: its trials stop too
    ::dup2(out_fd, 1);
    ::dup2(err_fd, 2);
    if (!slot.cores.empty()) ::sched_setaffinity(0, sizeof(set), &set);
    ::execve(args[0], args.data(), envp.data());
    const char msg[] = "loom sweep: cannot execute the trial command\n";
    (void)!::write(2, msg, sizeof(msg) - 1);
    ::_exit(127);
  }
  ::close(out_fd);
  ::close(err_fd);
  if (pid < 0) throw Error(fmt::format("fork failed for the trial in {}", dir.string()));
  return pid;
}

std::vector<std::string> default_command() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error("cannot find this executable (/proc/self/exe) to launch trials");
  return {self.string(), "train"};
}

}  // namespace

std::string DeviceSlot::describe() const {
  if (gpu >= 0) return fmt::format("slot {}: GPU {}", index, gpu);
  if (cores.empty()) return fmt::format("slot {}: any core", index);
  return fmt::format("slot {}: cores {}", index, fmt::join(cores, ","));
}

std::vector<DeviceSlot> plan_slots(const SweepSpec& spec, int64_t slots_override) {
  std::vector<DeviceSlot> out;
  if (!spec.gpus.empty()) {
    int64_t n = slots_override > 0 ? slots_override
                : spec.slots > 0   ? spec.slots
                                   : int64_t(spec.gpus.size());
    for (int64_t i = 0; i < n; ++i)
      out.push_back({int(i), {}, spec.gpus[size_t(i) % spec.gpus.size()]});
    return out;
  }
  const std::vector<int> cores = allowed_cores();
  const int64_t cps = spec.cores_per_slot;
  int64_t n = slots_override > 0 ? slots_override
              : spec.slots > 0   ? spec.slots
                                 : std::max<int64_t>(1, int64_t(cores.size()) / cps);
  for (int64_t i = 0; i < n; ++i) {
    DeviceSlot s;
    s.index = int(i);
    // More slots than cores: slots share cores round-robin (still pinned, so they spread).
    for (int64_t j = 0; j < cps; ++j) s.cores.push_back(cores[size_t(i * cps + j) % cores.size()]);
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<std::string> trial_argv(const SweepSpec& spec, const Trial& trial,
                                    const std::vector<std::string>& command,
                                    const std::string& trial_dir) {
  std::vector<std::string> argv = command;
  if (!spec.base.empty()) argv.push_back(spec.base);
  auto add = [&](const std::string& k, const std::string& v) {
    argv.push_back("--set");
    argv.push_back(k + "=" + v);
  };
  add("progress", "\"lines\"");
  for (const auto& [k, v] : spec.fixed) add(k, v);
  for (const auto& [k, v] : trial.overrides) add(k, config_scalar_text(v));
  add("output.dir", config_scalar_text(ConfigScalar(trial_dir)));
  // The sweep owns its trial directories: a trial run again (a retried failure) replaces what
  // the earlier attempt left there.
  argv.push_back("--force");
  return argv;
}

std::string trial_start_line(const Trial& trial, size_t trials, const DeviceSlot& slot) {
  return fmt::format("trial {}/{} {}: {} on {}", trial.index + 1, trials, trial.name,
                     trial.key().empty() ? "the base config" : trial.key(), slot.describe());
}

std::string trial_end_line(const TrialRecord& r, size_t trials, const std::string& metric) {
  return fmt::format("trial {}/{} {} {} in {:.1f} s{}", r.trial.index + 1, trials, r.trial.name,
                     trial_status_name(r.status), r.seconds,
                     r.status == TrialStatus::kOk
                         ? (r.metric ? fmt::format(": {} = {:.4g}", metric, *r.metric) : "")
                         : ": " + r.error.substr(0, r.error.find('\n')));
}

SweepOutcome run_sweep(const SweepSpec& spec, const SweepRunOptions& options) {
  Stopwatch total;
  auto log = [&](const std::string& s) {
    if (options.log) options.log(s);
  };
  const std::vector<std::string> command =
      options.command.empty() ? default_command() : options.command;
  std::error_code ec;
  fs::create_directories(fs::path(spec.dir) / "trials", ec);
  if (ec)
    throw InputError(
        fmt::format("{}: cannot create the sweep directory: {}", spec.dir, ec.message()));

  SweepOutcome out;
  const std::vector<Trial> trials = expand_trials(spec);
  std::map<std::string, TrialRecord> previous;
  std::string recorded_metric;
  std::vector<TrialRecord> recorded = load_sweep_state(spec.dir, &recorded_metric);
  // Figures recorded under another metric (an older sweep ranked by test_acc) would be ranked
  // as this one's.
  if (!recorded.empty() && !recorded_metric.empty() && recorded_metric != spec.metric)
    throw InputError(fmt::format(
        "{}/state.json: its trials were ranked by '{}', this sweep ranks by '{}' (the default "
        "is val_acc, on a validation split): their figures cannot be reused; give the sweep "
        "another dir, or delete the state file to run the trials again",
        spec.dir, recorded_metric, spec.metric));
  for (auto& r : recorded) previous[r.trial.name + " " + r.trial.key()] = r;
  std::vector<size_t> queue;
  for (const Trial& t : trials) {
    TrialRecord r;
    r.trial = t;
    auto it = previous.find(t.name + " " + t.key());
    if (it != previous.end() && it->second.finished() &&
        !(options.retry_failed && it->second.status == TrialStatus::kFailed)) {
      r = it->second;
      ++out.skipped;
    } else {
      queue.push_back(out.records.size());
    }
    out.records.push_back(std::move(r));
  }
  const std::vector<DeviceSlot> slots = plan_slots(spec, options.slots);
  out.slots = int64_t(slots.size());
  log(fmt::format("sweep {}: {} trials ({} done earlier, {} to run) on {} slots; {}", spec.dir,
                  trials.size(), out.skipped, queue.size(), slots.size(),
                  slots.empty() ? "" : slots[0].describe() + (slots.size() > 1 ? ", ..." : "")));
  save_sweep_state(spec.dir, spec.metric, out.records);

  std::vector<bool> busy(slots.size(), false);
  std::vector<Running> running;
  size_t next = 0;
  while (next < queue.size() || !running.empty()) {
    // Launch on every free slot.
    for (size_t s = 0; s < slots.size() && next < queue.size(); ++s) {
      if (busy[s]) continue;
      TrialRecord& r = out.records[queue[next++]];
      const fs::path dir = fs::path(spec.dir) / "trials" / r.trial.name;
      fs::create_directories(dir, ec);
      TrialRecord fresh;
      fresh.trial = r.trial;
      r = std::move(fresh);
      r.status = TrialStatus::kRunning;
      r.slot = slots[s].index;
      const std::vector<std::string> argv = trial_argv(spec, r.trial, command, dir.string());
      {
        std::ofstream cmd(dir / "command.txt", std::ios::trunc);
        cmd << fmt::format("{}\n", fmt::join(argv, " "));
      }
      Running run;
      run.pid = spawn(argv, slots[s], dir);
      run.record = size_t(&r - out.records.data());
      run.slot = slots[s];
      running.push_back(std::move(run));
      busy[s] = true;
      log("  " + trial_start_line(r.trial, trials.size(), slots[s]));
      save_sweep_state(spec.dir, spec.metric, out.records);
    }
    // Reap whichever finished; kill those over their time.
    bool reaped = false;
    for (size_t i = 0; i < running.size();) {
      Running& run = running[i];
      int status = 0;
      const pid_t got = ::waitpid(run.pid, &status, WNOHANG);
      if (got == 0) {
        const double t = run.watch.seconds();
        if (spec.timeout_s > 0 && t > spec.timeout_s && !run.term_sent) {
          ::kill(run.pid, SIGTERM);
          run.term_sent = true;
          run.term_at = t;
        } else if (run.term_sent && t > run.term_at + 5) {
          ::kill(run.pid, SIGKILL);
        }
        ++i;
        continue;
      }
      TrialRecord& r = out.records[run.record];
      r.seconds = run.watch.seconds();
      if (run.term_sent)
        r.error = fmt::format("timed out after {:.0f} s (timeout_s)", spec.timeout_s);
      const fs::path dir = fs::path(spec.dir) / "trials" / r.trial.name;
      collect(r, spec, dir, got < 0 ? (127 << 8) : status);
      ++out.ran;
      busy[size_t(run.slot.index)] = false;
      log("  " + trial_end_line(r, trials.size(), spec.metric));
      save_sweep_state(spec.dir, spec.metric, out.records);
      running.erase(running.begin() + long(i));
      reaped = true;
    }
    if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  out.seconds = total.seconds();
  return out;
}

}  // namespace loom::experiments
