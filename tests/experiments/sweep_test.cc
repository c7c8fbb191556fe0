#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "loom/core/error.h"
#include "loom/experiments/sweep_results.h"
#include "loom/experiments/sweep_runner.h"
#include "loom/experiments/sweep_spec.h"
#include "loom/experiments/sweep_state.h"

namespace loom::experiments {
namespace {
namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path d =
      fs::temp_directory_path() / ("loom_sweep_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

SweepSpec spec_of(const std::string& text, const fs::path& dir) {
  SweepSpec s = parse_sweep(text, (dir / "sweep.toml").string());
  s.dir = (dir / "out").string();
  return s;
}

std::string error_of(const std::string& text) {
  try {
    parse_sweep(text, "sweep.toml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

int lines_in(const fs::path& p) {
  std::ifstream in(p);
  std::string l;
  int n = 0;
  while (std::getline(in, l)) ++n;
  return n;
}

TEST(SweepSpec, GridIsTheProductWithTheLastKeyFastest) {
  const SweepSpec s = spec_of(R"(
[set]
epochs = 1
[grid]
codec = ["fp32", "int8"]
"optim.lr" = [0.05, 0.1, 0.2]
)",
                              fresh_dir("grid"));
  // epochs, and the validation split the default metric (val_acc) needs.
  ASSERT_EQ(s.fixed.size(), 2u);
  EXPECT_EQ(s.fixed[1], (std::pair<std::string, std::string>("data.validation", "0.1")));
  const auto trials = expand_trials(s);
  ASSERT_EQ(trials.size(), 6u);
  EXPECT_EQ(trials[0].name, "t000");
  EXPECT_EQ(trials[5].name, "t005");
  EXPECT_EQ(trials[0].key(), "codec=\"fp32\" optim.lr=0.05");
  EXPECT_EQ(trials[1].key(), "codec=\"fp32\" optim.lr=0.1");
  EXPECT_EQ(trials[3].key(), "codec=\"int8\" optim.lr=0.05");
  EXPECT_EQ(trials[5].key(), "codec=\"int8\" optim.lr=0.2");
}

TEST(SweepSpec, RandomDrawsAreSeededAndInsideTheirRanges) {
  const std::string text = R"(
mode = "random"
trials = 20
seed = 7
[grid]
workers = [1, 2]
[log_uniform]
"optim.lr" = [0.001, 0.1]
[uniform]
batch = [16, 64]
)";
  const fs::path d = fresh_dir("random");
  const auto a = expand_trials(spec_of(text, d)), b = expand_trials(spec_of(text, d));
  ASSERT_EQ(a.size(), 20u);
  std::set<std::string> distinct;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].key(), b[i].key());
    distinct.insert(a[i].key());
    ASSERT_EQ(a[i].overrides.size(), 3u);
    const int64_t w = std::get<int64_t>(a[i].overrides[0].second);
    EXPECT_TRUE(w == 1 || w == 2);
    // Grid keys first, then [uniform], then [log_uniform].
    EXPECT_EQ(a[i].overrides[1].first, "batch");
    const double lr = std::get<double>(a[i].overrides[2].second);
    EXPECT_GE(lr, 0.001);
    EXPECT_LE(lr, 0.1);
    const int64_t batch = std::get<int64_t>(a[i].overrides[1].second);  // integer range
    EXPECT_GE(batch, 16);
    EXPECT_LE(batch, 64);
  }
  EXPECT_GT(distinct.size(), 15u);
}

TEST(SweepSpec, BadInputIsNamed) {
  // An unknown train key under [grid], with the closest known key.
  std::string e = error_of("[grid]\n\"optim.lrr\" = [0.1]\n");
  EXPECT_NE(e.find("optim.lrr"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'optim.lr'"), std::string::npos) << e;
  EXPECT_NE(e.find("sweep.toml:2"), std::string::npos) << e;
  // An unknown key of the sweep file itself.
  e = error_of("slotz = 2\n[grid]\nworkers = [1]\n");
  EXPECT_NE(e.find("slotz"), std::string::npos) << e;
  // An empty list, and no grid at all.
  e = error_of("[grid]\nworkers = []\n");
  EXPECT_NE(e.find("empty list"), std::string::npos) << e;
  e = error_of("metric = \"val_acc\"\n");
  EXPECT_NE(e.find("grid is empty"), std::string::npos) << e;
  // Ranking by the test set is refused, naming the key.
  e = error_of("metric = \"test_acc\"\n[grid]\nworkers = [1]\n");
  EXPECT_NE(e.find("sweep.toml:1"), std::string::npos) << e;
  EXPECT_NE(e.find("val_acc"), std::string::npos) << e;
  e = error_of("metric = \"test_loss\"\n[grid]\nworkers = [1]\n");
  EXPECT_NE(e.find("test set"), std::string::npos) << e;
  // A validation metric with data.validation = 0 would leave every trial without it.
  e = error_of("[set]\n\"data.validation\" = 0\n[grid]\nworkers = [1]\n");
  EXPECT_NE(e.find("data.validation = 0"), std::string::npos) << e;
  e = error_of("[grid]\n\"data.validation\" = [0.1, 0]\n");
  EXPECT_NE(e.find("data.validation"), std::string::npos) << e;
  // Keys the sweep owns, and ranges in grid mode.
  e = error_of("[grid]\n\"output.dir\" = [\"a\"]\n");
  EXPECT_NE(e.find("output.dir"), std::string::npos) << e;
  e = error_of("[log_uniform]\n\"optim.lr\" = [0.0, 1.0]\n[grid]\nworkers=[1]\n");
  EXPECT_FALSE(e.empty());
  e = error_of("mode = \"random\"\ntrials = 0\n[grid]\nworkers=[1]\n");
  EXPECT_NE(e.find("trials"), std::string::npos) << e;
}

TEST(SweepSpec, DefaultGoalMinimisesLossesAndTimes) {
  EXPECT_TRUE(default_maximize("test_acc"));
  EXPECT_TRUE(default_maximize("samples_per_s"));
  EXPECT_FALSE(default_maximize("train_loss"));
  EXPECT_FALSE(default_maximize("seconds"));
  EXPECT_FALSE(default_maximize("exposed_comm_s"));
}

// A stand-in for `loom train`: reads optim.lr, data.validation and output.dir from the --set
// arguments, logs each run to a counter file, fails like loom does for lr = 0.5, else writes a
// summary whose val_acc is the lr and whose test_acc orders the trials the other way round (so
// a ranking by the test set would be seen), and records the data.validation it was given.
fs::path fake_trainer(const fs::path& dir) {
  const fs::path script = dir / "fake_train.sh";
  std::ofstream f(script);
  f << "out=''; lr=''\n"
       "while [ $# -gt 0 ]; do\n"
       "  if [ \"$1\" = --set ]; then shift; case \"$1\" in\n"
       "    output.dir=*) out=\"${1#output.dir=}\";; optim.lr=*) lr=\"${1#optim.lr=}\";;\n"
       "    data.validation=*) val=\"${1#data.validation=}\";; esac; fi\n"
       "  shift\n"
       "done\n"
       "out=$(echo \"$out\" | tr -d '\"')\n"
       "echo \"$lr\" >> \""
    << (dir / "runs.log").string()
    << "\"\n"
       "if [ \"$lr\" = 0.5 ]; then echo 'epoch 1/1 ...' >&2; "
       "echo \"loom: error: --set optim.lr: 0.5 diverges\" >&2; exit 2; fi\n"
       "mkdir -p \"$out\"\n"
       "echo \"{\\\"epoch\\\":1,\\\"train_loss\\\":1.5}\" > \"$out/metrics.jsonl\"\n"
       "test=$(awk \"BEGIN { print 1 - $lr }\")\n"
       "echo \"{\\\"val_acc\\\":$lr,\\\"test_acc\\\":$test,\\\"samples_per_s\\\":100}\" > "
       "\"$out/summary.json\"\n"
       "echo \"$val\" > \"$out/validation.txt\"\n";
  return script;
}

TEST(SweepRunner, RecordsFailuresRanksAndResumesWithoutRerunning) {
  const fs::path d = fresh_dir("runner");
  SweepSpec spec = spec_of("[grid]\n\"optim.lr\" = [0.1, 0.5, 0.3, 0.2]\n", d);
  spec.slots = 2;
  SweepRunOptions opts;
  opts.command = {"/bin/sh", fake_trainer(d).string()};
  std::string logged;
  opts.log = [&](const std::string& line) { logged += line + "\n"; };
  SweepOutcome out = run_sweep(spec, opts);
  ASSERT_EQ(out.records.size(), 4u);
  EXPECT_EQ(out.ran, 4);
  EXPECT_EQ(out.slots, 2);
  EXPECT_EQ(lines_in(d / "runs.log"), 4);
  // Which trial starts, numbered among all of them with its values, and how each one ended.
  const char* lrs[] = {"0.1", "0.5", "0.3", "0.2"};
  for (int k = 0; k < 4; ++k)
    EXPECT_NE(logged.find(fmt::format("trial {}/4 t00{}: optim.lr={} on slot", k + 1, k, lrs[k])),
              std::string::npos)
        << logged;
  EXPECT_NE(logged.find("trial 2/4 t001 failed in"), std::string::npos) << logged;
  EXPECT_NE(logged.find("trial 3/4 t002 ok in"), std::string::npos) << logged;

  const TrialRecord& bad = out.records[1];
  EXPECT_EQ(bad.status, TrialStatus::kFailed);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.error.find("exit code 2"), std::string::npos) << bad.error;
  EXPECT_NE(bad.error.find("0.5 diverges"), std::string::npos) << bad.error;
  EXPECT_EQ(out.records[0].status, TrialStatus::kOk);
  ASSERT_TRUE(out.records[2].metric.has_value());
  EXPECT_DOUBLE_EQ(*out.records[2].metric, 0.3);

  // Ranked best first by val_acc (maximised), not by test_acc (the reverse order), the failed
  // trial last.
  const auto ranked = rank_trials(spec, out.records);
  EXPECT_EQ(ranked[0].trial.name, "t002");
  EXPECT_EQ(ranked[1].trial.name, "t003");
  EXPECT_EQ(ranked[2].trial.name, "t000");
  EXPECT_EQ(ranked[3].trial.name, "t001");
  const std::string table = results_table(spec, ranked);
  EXPECT_NE(table.find("t002"), std::string::npos);
  EXPECT_LT(table.find("t002"), table.find("t003"));
  write_results_csv(spec, ranked, (d / "results.csv").string());
  std::ifstream csv(d / "results.csv");
  std::string header, first;
  std::getline(csv, header);
  std::getline(csv, first);
  EXPECT_EQ(header.rfind("rank,trial,status,optim.lr,val_acc,test_acc", 0), 0u) << header;
  EXPECT_EQ(first.rfind("1,t002,ok,0.3,0.3,0.7", 0), 0u) << first;
  EXPECT_NE(table.find("ranked by val_acc"), std::string::npos) << table;
  EXPECT_NE(table.find("test_acc (not used)"), std::string::npos) << table;
  // Nothing set data.validation: every trial held out the sweep's default fraction.
  EXPECT_TRUE(spec.validation_added);
  std::ifstream given(fs::path(spec.dir) / "trials" / "t002" / "validation.txt");
  std::string fraction;
  std::getline(given, fraction);
  EXPECT_EQ(fraction, kSweepValidation);

  // Run again: every trial finished, nothing runs.
  out = run_sweep(spec, opts);
  EXPECT_EQ(out.ran, 0);
  EXPECT_EQ(out.skipped, 4);
  EXPECT_EQ(lines_in(d / "runs.log"), 4);

  // An interruption leaves a trial "running" in the state: only that one runs again.
  std::vector<TrialRecord> state = load_sweep_state(spec.dir);
  state[2].status = TrialStatus::kRunning;
  save_sweep_state(spec.dir, spec.metric, state);
  out = run_sweep(spec, opts);
  EXPECT_EQ(out.ran, 1);
  EXPECT_EQ(lines_in(d / "runs.log"), 5);
  EXPECT_EQ(out.records[2].status, TrialStatus::kOk);

  // --retry-failed reruns the failed one only.
  opts.retry_failed = true;
  out = run_sweep(spec, opts);
  EXPECT_EQ(out.ran, 1);
  EXPECT_EQ(lines_in(d / "runs.log"), 6);
  fs::remove_all(d);
}

std::string state_error(const std::string& dir) {
  try {
    load_sweep_state(dir);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// state.json carries format_version; a state of an older loom (its "version": 1, no
// format_version) is read, one of a newer version is refused naming the file.
TEST(SweepState, CarriesTheFormatVersionAndRefusesANewerOne) {
  const fs::path d = fresh_dir("state_version");
  TrialRecord r;
  r.trial.index = 0;
  r.trial.name = "t000";
  r.trial.overrides = {{"optim.lr", 0.1}};
  r.status = TrialStatus::kOk;
  r.metric = 0.5;
  save_sweep_state(d.string(), "test_acc", {r});
  std::ifstream in(d / "state.json");
  nlohmann::json state = nlohmann::json::parse(in);
  EXPECT_EQ(state.at("format_version"), kSweepStateFormatVersion);
  EXPECT_EQ(kSweepStateFormatVersion, 1);

  nlohmann::json older = state;
  older.erase("format_version");
  older["version"] = 1;
  std::ofstream(d / "state.json") << older.dump();
  const auto records = load_sweep_state(d.string());
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].trial.name, "t000");
  EXPECT_EQ(records[0].metric, 0.5);

  state["format_version"] = 4;
  std::ofstream(d / "state.json") << state.dump();
  const std::string msg = state_error(d.string());
  EXPECT_NE(msg.find((d / "state.json").string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("sweep state format version 4"), std::string::npos) << msg;
  fs::remove_all(d);
}

// A sweep directory whose state was ranked by another metric (an older sweep, ranked by
// test_acc) is refused rather than its figures ranked as validation figures.
TEST(SweepRunner, AStateRankedByAnotherMetricIsRefused) {
  const fs::path d = fresh_dir("other_metric");
  SweepSpec spec = spec_of("[grid]\n\"optim.lr\" = [0.1]\n", d);
  TrialRecord r;
  r.trial = expand_trials(spec)[0];
  r.status = TrialStatus::kOk;
  r.metric = 0.9;
  fs::create_directories(spec.dir);
  save_sweep_state(spec.dir, "test_acc", {r});
  SweepRunOptions opts;
  opts.command = {"/bin/false"};
  try {
    run_sweep(spec, opts);
    ADD_FAILURE() << "a state ranked by test_acc was reused";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("state.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'test_acc'"), std::string::npos) << msg;
  }
  fs::remove_all(d);
}

// A trial whose summary.json is of a newer format version fails with the reason.
TEST(SweepRunner, ATrialSummaryOfANewerVersionFailsTheTrialNamingIt) {
  const fs::path d = fresh_dir("summary_version");
  SweepSpec spec = spec_of("[grid]\n\"optim.lr\" = [0.1]\n", d);
  const fs::path script = d / "newer_train.sh";
  std::ofstream(script)
      << "while [ $# -gt 0 ]; do\n"
         "  if [ \"$1\" = --set ]; then shift; case \"$1\" in output.dir=*) "
         "out=\"${1#output.dir=}\";; esac; fi\n"
         "  shift\n"
         "done\n"
         "out=$(echo \"$out\" | tr -d '\"')\n"
         "mkdir -p \"$out\"\n"
         "echo '{\"format_version\":3,\"test_acc\":0.9}' > \"$out/summary.json\"\n";
  SweepRunOptions opts;
  opts.command = {"/bin/sh", script.string()};
  const SweepOutcome out = run_sweep(spec, opts);
  ASSERT_EQ(out.records.size(), 1u);
  const TrialRecord& r = out.records[0];
  EXPECT_EQ(r.status, TrialStatus::kFailed);
  EXPECT_NE(r.error.find("summary.json"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("summary format version 3"), std::string::npos) << r.error;
  fs::remove_all(d);
}

TEST(SweepRunner, CpuSlotsPinDistinctCores) {
  SweepSpec spec;
  spec.slots = 2;
  spec.cores_per_slot = 1;
  const auto slots = plan_slots(spec, 0);
  ASSERT_EQ(slots.size(), 2u);
  ASSERT_EQ(slots[0].cores.size(), 1u);
  if (std::thread::hardware_concurrency() >= 2) {
    EXPECT_NE(slots[0].cores[0], slots[1].cores[0]);
  }
  spec.gpus = {0, 1, 2};
  spec.slots = 0;
  const auto gpu_slots = plan_slots(spec, 0);
  ASSERT_EQ(gpu_slots.size(), 3u);
  EXPECT_EQ(gpu_slots[2].gpu, 2);
  EXPECT_TRUE(gpu_slots[2].cores.empty());
}

TEST(SweepRunner, TrialArgvCarriesOverridesAndItsOwnOutputDir) {
  SweepSpec spec;
  spec.base = "base.toml";
  spec.fixed = {{"epochs", "1"}, {"mlp.hidden", "[256, 64]"}};
  Trial t;
  t.overrides = {{"codec", ConfigScalar(std::string("int8"))}, {"optim.lr", ConfigScalar(0.05)}};
  const auto argv = trial_argv(spec, t, {"loom", "train"}, "sw/trials/t000");
  const std::vector<std::string> want = {"loom",
                                         "train",
                                         "base.toml",
                                         "--set",
                                         "progress=\"lines\"",
                                         "--set",
                                         "epochs=1",
                                         "--set",
                                         "mlp.hidden=[256, 64]",
                                         "--set",
                                         "codec=\"int8\"",
                                         "--set",
                                         "optim.lr=0.05",
                                         "--set",
                                         "output.dir=\"sw/trials/t000\"",
                                         "--force"};  // the trial's directory is the sweep's
  EXPECT_EQ(argv, want);
}

// The real `loom train` as the trial command, when the executable is built: a bad value fails
// fast with its message recorded, the other trial trains.
TEST(SweepRunner, RealLoomTrialWithABadValueIsRecorded) {
  const fs::path loom = fs::path(LOOM_BINARY_DIR) / "loom";
  if (!fs::exists(loom)) GTEST_SKIP() << loom << " not built";
  const fs::path d = fresh_dir("real");
  SweepSpec spec = spec_of(R"(
metric = "train_loss"
[set]
max_steps = 3
epochs = 1
eval = false
"mlp.hidden" = 16
[grid]
batch = [0, 16]
)",
                           d);
  SweepRunOptions opts;
  opts.command = {loom.string(), "train"};
  const SweepOutcome out = run_sweep(spec, opts);
  ASSERT_EQ(out.records.size(), 2u);
  EXPECT_EQ(out.records[0].status, TrialStatus::kFailed);
  EXPECT_EQ(out.records[0].exit_code, 2);
  EXPECT_NE(out.records[0].error.find("batch"), std::string::npos) << out.records[0].error;
  EXPECT_EQ(out.records[1].status, TrialStatus::kOk) << out.records[1].error;
  EXPECT_TRUE(out.records[1].metric.has_value());
  fs::remove_all(d);
}

// The real `loom train` ranked by the default metric: each trial's summary.json has val_acc
// from the split the sweep held out, and that is the trial's metric, not its test_acc.
TEST(SweepRunner, RealLoomTrialsAreRankedByValidationAccuracy) {
  const fs::path loom = fs::path(LOOM_BINARY_DIR) / "loom";
  if (!fs::exists(loom)) GTEST_SKIP() << loom << " not built";
  const fs::path d = fresh_dir("real_val");
  SweepSpec spec = spec_of(R"(
[set]
max_steps = 20
epochs = 1
batch = 64
"mlp.hidden" = 16
[grid]
"optim.lr" = [0.05, 0.1]
)",
                           d);
  EXPECT_EQ(spec.metric, "val_acc");
  SweepRunOptions opts;
  opts.command = {loom.string(), "train"};
  const SweepOutcome out = run_sweep(spec, opts);
  ASSERT_EQ(out.records.size(), 2u);
  for (const auto& r : out.records) {
    ASSERT_EQ(r.status, TrialStatus::kOk) << r.error;
    std::ifstream in(fs::path(spec.dir) / "trials" / r.trial.name / "summary.json");
    const nlohmann::json summary = nlohmann::json::parse(in);
    EXPECT_EQ(summary["val_samples"], 6000);
    ASSERT_TRUE(r.metric.has_value());
    EXPECT_EQ(*r.metric, summary["val_acc"].get<double>());
  }
  fs::remove_all(d);
}

}  // namespace
}  // namespace loom::experiments
