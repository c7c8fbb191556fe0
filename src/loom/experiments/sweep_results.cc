#include "loom/experiments/sweep_results.h"

#include <algorithm>
#include <fstream>

#include "loom/core/error.h"

namespace loom::experiments {

namespace {

std::vector<std::string> swept_keys(const std::vector<TrialRecord>& records) {
  std::vector<std::string> keys;
  for (const auto& r : records)
    for (const auto& [k, v] : r.trial.overrides)
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  return keys;
}

std::string value_of(const TrialRecord& r, const std::string& key) {
  for (const auto& [k, v] : r.trial.overrides)
    if (k == key) return v.index() == 3 ? std::get<std::string>(v) : config_scalar_text(v);
  return "";
}

std::string csv_cell(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string num(double v, const char* f = "{:.4f}") {
  return fmt::format(fmt::runtime(f), v);
}

}  // namespace

std::vector<TrialRecord> rank_trials(const SweepSpec& spec, std::vector<TrialRecord> records) {
  std::stable_sort(records.begin(), records.end(), [&](const TrialRecord& a, const TrialRecord& b) {
    const bool ra = a.status == TrialStatus::kOk && a.metric.has_value();
    const bool rb = b.status == TrialStatus::kOk && b.metric.has_value();
    if (ra != rb) return ra;
    if (!ra) return a.trial.index < b.trial.index;
    if (*a.metric != *b.metric)
      return spec.maximize ? *a.metric > *b.metric : *a.metric < *b.metric;
    return a.trial.index < b.trial.index;
  });
  return records;
}

std::string results_table(const SweepSpec& spec, const std::vector<TrialRecord>& ranked) {
  const std::vector<std::string> keys = swept_keys(ranked);
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> head = {"rank", "trial", "status"};
  head.insert(head.end(), keys.begin(), keys.end());
  head.push_back(spec.metric + (spec.maximize ? " (max, ranks)" : " (min, ranks)"));
  for (const char* h : {"test_acc (not used)", "samples/s", "seconds", "note"}) head.push_back(h);
  rows.push_back(head);
  int rank = 0;
  for (const auto& r : ranked) {
    const bool ranked_ok = r.status == TrialStatus::kOk && r.metric;
    std::vector<std::string> row = {ranked_ok ? std::to_string(++rank) : "-", r.trial.name,
                                    trial_status_name(r.status)};
    for (const auto& k : keys) row.push_back(value_of(r, k));
    row.push_back(r.metric ? fmt::format("{:.4g}", *r.metric) : "-");
    row.push_back(r.test_acc >= 0 ? num(r.test_acc) : "-");
    row.push_back(r.samples_per_s > 0 ? num(r.samples_per_s, "{:.0f}") : "-");
    row.push_back(r.finished() ? num(r.seconds, "{:.1f}") : "-");
    std::string note = r.error.substr(0, r.error.find('\n'));
    if (note.size() > 60) note = note.substr(0, 57) + "...";
    row.push_back(note);
    rows.push_back(std::move(row));
  }
  std::vector<size_t> width(head.size(), 0);
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  std::string out = fmt::format(
      "ranked by {} ({}){}; test_acc is each trial's final weights on the test set, shown "
      "and never used to choose\n",
      spec.metric, spec.maximize ? "highest first" : "lowest first",
      ranks_by_validation(spec.metric)
          ? spec.validation_added
                ? fmt::format(" on a validation split of data.validation = {} of each trial's "
                              "training data",
                              kSweepValidation)
                : std::string(" on each trial's validation split (data.validation)")
          : std::string(""));
  for (size_t ri = 0; ri < rows.size(); ++ri) {
    std::string line;
    for (size_t i = 0; i < rows[ri].size(); ++i)
      line += fmt::format("{:<{}}", rows[ri][i], i + 1 < rows[ri].size() ? width[i] + 2 : 0);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
    if (ri == 0) {
      size_t total = 0;
      for (size_t w : width) total += w + 2;
      out += std::string(total - 2, '-') + "\n";
    }
  }
  return out;
}

void write_results_csv(const SweepSpec& spec, const std::vector<TrialRecord>& ranked,
                       const std::string& path) {
  const std::vector<std::string> keys = swept_keys(ranked);
  std::ofstream out(path, std::ios::trunc);
  if (!out) throw InputError(fmt::format("{}: cannot write the results", path));
  out << "rank,trial,status";
  for (const auto& k : keys) out << ',' << csv_cell(k);
  out << ',' << csv_cell(spec.metric) << ",test_acc,samples_per_s,seconds,exit_code,slot,error\n";
  int rank = 0;
  for (const auto& r : ranked) {
    const bool ranked_ok = r.status == TrialStatus::kOk && r.metric;
    out << (ranked_ok ? std::to_string(++rank) : "") << ',' << r.trial.name << ','
        << trial_status_name(r.status);
    for (const auto& k : keys) out << ',' << csv_cell(value_of(r, k));
    out << ',' << (r.metric ? fmt::format("{}", *r.metric) : "") << ','
        << (r.test_acc >= 0 ? fmt::format("{}", r.test_acc) : "") << ','
        << fmt::format("{}", r.samples_per_s) << ',' << fmt::format("{:.3f}", r.seconds) << ','
        << r.exit_code << ',' << r.slot << ',' << csv_cell(r.error) << '\n';
  }
}

}  // namespace loom::experiments
