#include "loom/experiments/report_html.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "loom/core/error.h"
#include "loom/core/io/atomic_file.h"
#include "loom/core/svg_plot.h"

namespace loom::experiments {

namespace {

using svg::escape;

constexpr const char* kCss = R"(
:root { --ink:#1f2937; --muted:#6b7280; --line:#e5e7eb; --bg:#f4f5f8; --card:#fff; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--ink);
  font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif; }
header { background:linear-gradient(120deg,#243b55,#3f6b9a); color:#fff; padding:26px 36px 22px; }
header h1 { margin:0; font-size:24px; font-weight:650; letter-spacing:.2px; }
header .sub { opacity:.8; margin-top:4px; font-size:13px; }
main { max-width:1240px; margin:0 auto; padding:22px 28px 40px; }
h2 { font-size:15px; font-weight:650; margin:26px 0 10px; color:#374151;
  text-transform:uppercase; letter-spacing:.6px; }
.legend { display:flex; flex-wrap:wrap; gap:8px 18px; margin:4px 0 6px; }
.chip { display:flex; align-items:center; gap:7px; font-size:13px; }
.chip i { width:12px; height:12px; border-radius:3px; display:inline-block; }
.chip small { color:var(--muted); }
.grid { display:grid; grid-template-columns:repeat(auto-fit,minmax(560px,1fr)); gap:18px; }
.card { background:var(--card); border-radius:10px; padding:16px 18px 12px;
  box-shadow:0 1px 2px rgba(0,0,0,.06),0 2px 10px rgba(0,0,0,.04); overflow-x:auto; }
.card svg { display:block; max-width:100%; height:auto; }
.note { color:var(--muted); font-size:12px; margin:6px 0 0; }
table { border-collapse:collapse; width:100%; font-size:13px; }
th, td { padding:7px 8px; text-align:right; border-bottom:1px solid var(--line); white-space:nowrap; }
th { color:var(--muted); font-weight:600; font-size:11.5px; white-space:normal; vertical-align:bottom; }
th:first-child, td:first-child { text-align:left; }
td.run { display:flex; align-items:center; gap:8px; white-space:normal; text-align:left;
  max-width:420px; }
td.run i { width:10px; height:10px; border-radius:2px; flex:none; }
td.keys { white-space:normal; text-align:left; color:var(--muted); font-size:12px;
  max-width:320px; }
.badge { display:inline-block; padding:1px 8px; border-radius:9px; font-size:11.5px; font-weight:600; }
.ok { background:#e7f6ec; color:#217a3c; } .warn { background:#fff4de; color:#9a6200; }
.problems { background:#fff8e6; border:1px solid #f5d78e; border-radius:10px; padding:12px 16px; }
.problems h3 { margin:0 0 6px; font-size:14px; color:#8a5a00; }
.problems li { margin:2px 0; } .problems code { font-size:12.5px; }
footer { color:var(--muted); font-size:12px; margin-top:28px; }
)";

std::string color_of(size_t i) {
  return svg::palette()[i % svg::palette().size()];
}

double num_or(const nlohmann::json& j, const char* key, double def) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : def;
}

// Per-epoch series of one metric for every run (points with value < `min_valid` skipped).
std::vector<svg::Series> curves(const std::vector<RunData>& runs, const char* key,
                                double min_valid = -1e300) {
  std::vector<svg::Series> out;
  for (size_t i = 0; i < runs.size(); ++i) {
    svg::Series s{runs[i].display(), color_of(i), {}, false};
    for (const auto& e : runs[i].epochs) {
      const double v = num_or(e, key, -1e301);
      if (v >= min_valid && v > -1e300) s.points.emplace_back(num_or(e, "epoch", 0), v);
    }
    out.push_back(std::move(s));
  }
  return out;
}

// Training loss against the step: from the step lines (train.log_every) where a run has them,
// else one point per epoch at the steps done by its end.
std::vector<svg::Series> loss_curves(const std::vector<RunData>& runs) {
  std::vector<svg::Series> out;
  for (size_t i = 0; i < runs.size(); ++i) {
    svg::Series s{runs[i].display(), color_of(i), {}, false};
    if (!runs[i].steps.empty()) {
      for (const auto& e : runs[i].steps)
        if (e.contains("train_loss") && e["train_loss"].is_number())
          s.points.emplace_back(num_or(e, "step", 0), e["train_loss"].get<double>());
    } else {
      double done = 0;
      for (const auto& e : runs[i].epochs) {
        done += num_or(e, "steps", 0);
        if (e.contains("train_loss") && e["train_loss"].is_number())
          s.points.emplace_back(done, e["train_loss"].get<double>());
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

struct StepTimes {
  double step_ms = 0, compute_ms = 0, exposed_ms = 0, loader_ms = 0, other_ms = 0;
  double samples_per_s = 0, bytes_per_step = 0;
  int64_t steps = 0, workers = 0;
};

StepTimes step_times(const RunData& r) {
  StepTimes t;
  double seconds = 0, compute = 0, exposed = 0, loader = 0, bytes = 0, samples = 0;
  for (const auto& e : r.epochs) {
    t.steps += int64_t(num_or(e, "steps", 0));
    seconds += num_or(e, "seconds", 0);
    compute += num_or(e, "compute_s", 0);
    exposed += num_or(e, "exposed_comm_s", 0);
    loader += num_or(e, "loader_wait_s", 0);
    bytes += num_or(e, "bytes_sent", 0);
    samples += num_or(e, "samples_per_s", 0) * num_or(e, "seconds", 0);
    t.workers = int64_t(num_or(e, "workers", double(t.workers)));
  }
  if (t.steps > 0) {
    const double k = 1e3 / double(t.steps);
    t.step_ms = seconds * k, t.compute_ms = compute * k, t.exposed_ms = exposed * k;
    t.loader_ms = loader * k;
    t.other_ms = std::max(0.0, t.step_ms - t.compute_ms - t.exposed_ms - t.loader_ms);
    t.bytes_per_step = bytes / double(t.steps);
  }
  t.samples_per_s = seconds > 0 ? samples / seconds : 0;
  if (r.summary) t.samples_per_s = num_or(*r.summary, "samples_per_s", t.samples_per_s);
  return t;
}

std::string card(const std::string& body, const std::string& note = "") {
  return "<div class=\"card\">" + body +
         (note.empty() ? "" : "<p class=\"note\">" + escape(note) + "</p>") + "</div>\n";
}

std::string fmt_or_dash(double v, const char* f, bool valid) {
  return valid ? fmt::format(fmt::runtime(f), v) : "&ndash;";
}

// The test accuracy of the final weights: summary.json's; a run without one (cut short) of
// metrics format 1 has its last epoch's per-epoch test figure, which was the same thing.
double final_test_acc(const RunData& r) {
  const double legacy = r.last("test_acc", -1);
  return r.summary ? num_or(*r.summary, "test_acc", legacy) : legacy;
}

std::string summary_table(const std::vector<RunData>& runs, const std::vector<StepTimes>& st) {
  std::string h =
      "<div class=\"card\"><table><thead><tr><th>run</th><th>differs in</th><th>status</th>"
      "<th>epochs</th>"
      "<th>steps</th><th>workers</th><th>train loss</th><th>val acc (last epoch)</th>"
      "<th>test acc (final weights)</th><th>samples/s</th>"
      "<th>step ms</th><th>compute ms</th><th>exposed comm ms</th><th>loader wait ms</th>"
      "<th>MB sent / step</th></tr></thead><tbody>\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunData& r = runs[i];
    const StepTimes& t = st[i];
    const bool has = !r.epochs.empty();
    const double test_acc = final_test_acc(r);
    const double val_acc = r.last("val_acc", -1);
    const bool complete = r.summary.has_value() && r.problems.empty();
    h += fmt::format(
        "<tr><td class=\"run\"><i style=\"background:{}\"></i><span title=\"{}\">{}</span></td>"
        "<td class=\"keys\">{}</td>"
        "<td><span class=\"badge {}\">{}</span></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "</tr>\n",
        color_of(i), escape(r.dir), escape(r.display()),
        r.label.empty() ? "&ndash;" : escape(r.label), complete ? "ok" : "warn",
        complete    ? "complete"
        : r.summary ? "see notes"
                    : "incomplete",
        r.epochs.size(), t.steps, t.workers > 0 ? std::to_string(t.workers) : "&ndash;",
        fmt_or_dash(r.last("train_loss"), "{:.4f}", has),
        fmt_or_dash(val_acc, "{:.4f}", val_acc >= 0),
        fmt_or_dash(test_acc, "{:.4f}", test_acc >= 0),
        fmt_or_dash(t.samples_per_s, "{:.0f}", t.samples_per_s > 0),
        fmt_or_dash(t.step_ms, "{:.2f}", t.steps > 0),
        fmt_or_dash(t.compute_ms, "{:.2f}", t.steps > 0),
        fmt_or_dash(t.exposed_ms, "{:.2f}", t.steps > 0),
        fmt_or_dash(t.loader_ms, "{:.2f}", t.steps > 0),
        fmt_or_dash(t.bytes_per_step / 1e6, "{:.3f}", t.steps > 0));
  }
  return h + "</tbody></table></div>\n";
}

// Runs on token windows (summary.json has token_unit): their figures in bits per byte,
// character or token -- the unit each run's vocabulary names -- and tokens/s. Empty when none.
std::string token_table(const std::vector<RunData>& runs) {
  std::string rows;
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunData& r = runs[i];
    if (!r.summary || !r.summary->contains("token_unit") || !(*r.summary)["token_unit"].is_string())
      continue;
    const nlohmann::json& s = *r.summary;
    const std::string unit = s["token_unit"].get<std::string>();
    const auto bits = [&](const char* split) {
      const double v = num_or(s, fmt::format("{}_bits_per_{}", split, unit).c_str(), -1);
      return fmt_or_dash(v, "{:.4f}", v >= 0);
    };
    const std::string vocab = s.contains("vocab") && s["vocab"].is_object()
                                  ? fmt::format("{} {}", num_or(s["vocab"], "size", 0),
                                                s["vocab"].value("kind", std::string("?")))
                                  : std::string("?");
    rows += fmt::format(
        "<tr><td class=\"run\"><i style=\"background:{}\"></i>{}</td><td>{}</td><td>{}</td>"
        "<td>bits per {}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
        color_of(i), escape(r.display()), escape(vocab),
        fmt_or_dash(num_or(s, "context", 0), "{:.0f}", num_or(s, "context", 0) > 0), escape(unit),
        bits("train"), bits("val"), bits("test"),
        fmt_or_dash(num_or(s, "tokens_per_s", 0), "{:.0f}", num_or(s, "tokens_per_s", 0) > 0));
  }
  if (rows.empty()) return "";
  return "<div class=\"card\"><table><thead><tr><th>token run</th><th>vocabulary</th>"
         "<th>context</th><th>unit</th><th>train</th><th>val</th><th>test</th>"
         "<th>tokens/s</th></tr></thead><tbody>\n" +
         rows +
         "</tbody></table><p class=\"note\">losses of the token runs in bits (nats / ln 2) per "
         "unit of their vocabulary: bytes, characters or token ids</p></div>\n";
}

// Runs that chose their codec and strategy (codec/sync = "auto", summary.json's "auto"): the
// choice, the runner-up, the predicted and measured samples/s, the start-up cost, and the
// check after the warm-up window. Empty when none.
std::string auto_table(const std::vector<RunData>& runs) {
  const auto label = [](const nlohmann::json& c) {
    if (!c.is_object()) return std::string("-");
    std::string l = c.value("codec", std::string("?")) + ", " + c.value("sync", std::string("?"));
    if (c.contains("tau")) l += fmt::format(" tau {}", num_or(c, "tau", 0));
    if (c.contains("bucket_kib")) l += fmt::format(", {} KiB", num_or(c, "bucket_kib", 0));
    return l;
  };
  std::string rows;
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunData& r = runs[i];
    if (!r.summary || !r.summary->contains("auto") || !(*r.summary)["auto"].is_object()) continue;
    const nlohmann::json& a = (*r.summary)["auto"];
    const nlohmann::json none;
    const nlohmann::json& chosen = a.contains("chosen") ? a["chosen"] : none;
    const nlohmann::json& runner = a.contains("runner_up") ? a["runner_up"] : none;
    const double predicted = chosen.is_object() ? num_or(chosen, "predicted_samples_per_s", 0) : 0;
    const double measured = num_or(*r.summary, "samples_per_s", 0);
    const double share = a.contains("measured") && a["measured"].is_object()
                             ? num_or(a["measured"], "cost_share_of_1000_steps", -1)
                             : -1;
    // The check after the warm-up window (auto.revision): the window's step against the
    // prediction, and what the one re-decision did.
    std::string check = "-";
    if (a.contains("revision") && a["revision"].is_object()) {
      const nlohmann::json& v = a["revision"];
      const std::string outcome = v.value("outcome", std::string("?"));
      const double m = v.contains("measured") ? num_or(v["measured"], "step_s", 0) : 0;
      const double p = v.contains("predicted") ? num_or(v["predicted"], "step_s", 0) : 0;
      const std::string off = m > 0 && p > 0 ? fmt::format("step {:+.0f}%", 100 * (m / p - 1)) : "";
      if (outcome == "switched")
        check = fmt::format("{}: switched at step {} to {}", off,
                            v.contains("window") ? num_or(v["window"], "first_step", 0) +
                                                       num_or(v["window"], "steps", 0)
                                                 : 0,
                            label(v.contains("after") ? v["after"] : none));
      else if (outcome == "kept")
        check = off + ": re-decided, kept";
      else if (outcome == "agrees")
        check = off + ": within the model's error";
      else
        check = outcome;
    }
    // The lossy codecs' fidelity on the run's gradients and its verdict, from the check's
    // candidates (the start has none yet).
    std::vector<std::string> fidelity;
    if (a.contains("revision") && a["revision"].is_object() &&
        a["revision"].contains("candidates") && a["revision"]["candidates"].is_array())
      for (const nlohmann::json& c : a["revision"]["candidates"])
        if (c.is_object() && c.contains("fidelity") && c.contains("fidelity_verdict") &&
            c.value("sync", std::string()) == "allreduce" && c.value("bucket_kib", 0) == 4096)
          fidelity.push_back(fmt::format("{}: {} (drift {:.3f})",
                                         c.value("codec", std::string("?")),
                                         c["fidelity_verdict"].value("risk", std::string("?")),
                                         num_or(c["fidelity"], "drift", 0)));
    rows += fmt::format(
        "<tr><td class=\"run\"><i style=\"background:{}\"></i>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
        color_of(i), escape(r.display()), escape(label(chosen)), escape(label(runner)),
        fmt_or_dash(predicted, "{:.0f}", predicted > 0),
        fmt_or_dash(measured, "{:.0f}", measured > 0),
        fmt_or_dash(100 * share, "{:.1f}%", share >= 0), escape(check),
        fidelity.empty() ? std::string("-") : escape(fmt::format("{}", fmt::join(fidelity, "; "))));
  }
  if (rows.empty()) return "";
  return "<div class=\"card\"><table><thead><tr><th>auto run</th><th>chosen</th>"
         "<th>runner-up</th><th>predicted samples/s</th><th>measured samples/s</th>"
         "<th>start-up cost (of 1,000 steps)</th><th>check after warm-up</th>"
         "<th>fidelity of the lossy codecs</th></tr></thead>"
         "<tbody>\n" +
         rows +
         "</tbody></table><p class=\"note\">codec/sync = \"auto\": what the run measured "
         "at start and chose; the fidelity verdict (within, over or unknown the accuracy "
         "budget) and drift each lossy codec showed on the run's gradients before the check "
         "(docs/perf.md)</p></div>\n";
}

}  // namespace

std::string render_report(const std::vector<RunData>& runs, const ReportOptions& options) {
  std::vector<StepTimes> st;
  for (const auto& r : runs) st.push_back(step_times(r));

  std::string body;
  body += "<h2>Runs</h2><div class=\"legend\">";
  for (size_t i = 0; i < runs.size(); ++i)
    body +=
        fmt::format("<span class=\"chip\" title=\"{}\"><i style=\"background:{}\"></i>{}</span>",
                    escape(runs[i].dir + (runs[i].label.empty() ? "" : ": " + runs[i].label)),
                    color_of(i), escape(runs[i].display()));
  body += "</div>\n";

  std::string problems;
  for (const auto& r : runs)
    for (const auto& p : r.problems)
      problems += fmt::format("<li><code>{}</code>: {}</li>", escape(r.dir), escape(p));
  if (!problems.empty())
    body +=
        "<div class=\"problems\"><h3>Missing or damaged files: drawn from what could be "
        "read</h3><ul>" +
        problems + "</ul></div>\n";
  body += summary_table(runs, st);
  body += token_table(runs);
  body += auto_table(runs);

  body += "<h2>Training</h2><div class=\"grid\">\n";
  svg::LineChart loss{"Training loss", "step", "mean loss", loss_curves(runs)};
  body += card(svg::line_chart(loss),
               "mean over each train.log_every steps (the step lines of metrics.jsonl), else "
               "over each epoch");
  std::vector<svg::Series> acc = curves(runs, "val_acc", 0.0);
  // Metrics format 1 evaluated the test set after every epoch; those curves stay drawn, named
  // for what they are.
  bool legacy_test = false;
  for (auto s : curves(runs, "test_acc", 0.0)) {
    if (s.points.empty()) continue;
    s.name += " (test, per epoch: metrics format 1)";
    acc.push_back(std::move(s));
    legacy_test = true;
  }
  for (auto s : curves(runs, "train_acc", 0.0)) {
    s.name += " (train)";
    s.dashed = true;
    acc.push_back(std::move(s));
  }
  svg::LineChart accuracy{"Accuracy", "epoch", "accuracy", acc};
  body += card(svg::line_chart(accuracy),
               std::string("solid: accuracy on the validation split (data.validation) after each "
                           "epoch; dashed: training accuracy during the epoch. The test set is "
                           "evaluated once, on the final weights (the table)") +
                   (legacy_test ? "; runs of an older loom evaluated it after every epoch" : ""));
  std::vector<svg::Series> val_loss = curves(runs, "val_loss", 0.0);
  bool any_val_loss = false;
  for (const auto& s : val_loss) any_val_loss |= !s.points.empty();
  if (any_val_loss) {
    svg::LineChart vl{"Validation loss", "epoch", "mean loss", val_loss};
    body += card(svg::line_chart(vl), "on the validation split after each epoch");
  }
  svg::LineChart speed{"Throughput", "epoch", "samples/s", curves(runs, "samples_per_s", 0.0)};
  speed.y_from_zero = true;
  body += card(svg::line_chart(speed));

  svg::BarChart steps;
  steps.title = "Where a step's time goes";
  steps.unit = "ms";
  steps.segment_names = {"compute", "exposed comm", "loader wait", "other"};
  steps.segment_colors = {"#4e79a7", "#e15759", "#edc948", "#c7c9cf"};
  for (size_t i = 0; i < runs.size(); ++i) {
    steps.rows.push_back(runs[i].display());
    steps.values.push_back({st[i].compute_ms, st[i].exposed_ms, st[i].loader_ms, st[i].other_ms});
  }
  body += card(svg::bar_chart(steps),
               "per step, averaged over the run: forward + backward, communication the loop "
               "waited for (the rest overlapped backward), waiting for the next batch");
  body += "</div>\n";

  if (runs.size() > 1) {
    body += "<h2>Comparison</h2><div class=\"grid\">\n";
    svg::BarChart acc_bars;
    acc_bars.title = "Test accuracy of the final weights";
    acc_bars.segment_names = {""};
    acc_bars.segment_colors = {color_of(0)};
    svg::BarChart speed_bars = acc_bars;
    speed_bars.title = "Throughput";
    speed_bars.unit = "samples/s";
    for (size_t i = 0; i < runs.size(); ++i) {
      const double ta = final_test_acc(runs[i]);
      acc_bars.rows.push_back(runs[i].display());
      acc_bars.values.push_back({std::max(0.0, ta)});
      acc_bars.row_colors.push_back(color_of(i));
      speed_bars.rows.push_back(runs[i].display());
      speed_bars.values.push_back({st[i].samples_per_s});
      speed_bars.row_colors.push_back(color_of(i));
    }
    bool any_acc = false;
    for (const auto& v : acc_bars.values) any_acc |= v[0] > 0;
    if (any_acc) body += card(svg::bar_chart(acc_bars));  // eval = false runs have none
    body += card(svg::bar_chart(speed_bars));

    // Scaling: throughput against workers, one line per group of runs that differ in their
    // worker count alone (a codec or a transport changes more than the workers), with its
    // ideal from the fewest workers.
    std::map<std::string, std::vector<size_t>> groups;
    for (size_t i = 0; i < runs.size(); ++i)
      if (st[i].workers > 0 && st[i].samples_per_s > 0) groups[scaling_group(runs[i])].push_back(i);
    svg::LineChart scaling{"Scaling with workers", "workers", "samples/s", {}};
    scaling.y_from_zero = true;
    for (const auto& [key, members] : groups) {
      std::map<int64_t, double> best;
      for (size_t i : members)
        best[st[i].workers] = std::max(best[st[i].workers], st[i].samples_per_s);
      if (best.size() < 2) continue;
      std::string name;
      for (size_t i : members) name += (name.empty() ? "" : ", ") + runs[i].display();
      const std::string color = color_of(members.front());
      svg::Series measured{name, color, {}, false};
      for (const auto& [w, s] : best) measured.points.emplace_back(double(w), s);
      const double w0 = measured.points.front().first, s0 = measured.points.front().second;
      svg::Series ideal{"ideal for " + name, color, {}, true};
      for (const auto& [w, s] : measured.points) ideal.points.emplace_back(w, s0 * w / w0);
      scaling.series.push_back(std::move(ideal));
      scaling.series.push_back(std::move(measured));
    }
    if (!scaling.series.empty())
      body += card(svg::line_chart(scaling),
                   "one line per set of runs whose configs differ only in workers (best run "
                   "per worker count); dashed: linear scaling from its fewest workers");
    body += "</div>\n";
  }

  std::string page =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      "<title>" +
      escape(options.title) + "</title><style>" + kCss + "</style></head><body>\n";
  page += "<header><h1>" + escape(options.title) + "</h1><div class=\"sub\">" +
          fmt::format("{} run{}", runs.size(), runs.size() == 1 ? "" : "s") +
          (options.generated.empty() ? "" : " &middot; generated " + escape(options.generated)) +
          "</div></header>\n<main>\n" + body +
          "<footer>Made by <code>loom report</code>. Hover a point or a bar for its value."
          "</footer>\n</main></body></html>\n";
  return page;
}

ReportOutcome write_report(const std::vector<std::string>& dirs, const std::string& out_path,
                           const ReportOptions& options) {
  const std::vector<RunData> runs = load_runs(dirs);
  ReportOutcome out;
  out.runs = int64_t(runs.size());
  for (const auto& r : runs)
    for (const auto& p : r.problems) out.problems.push_back(r.dir + ": " + p);
  const std::string html = render_report(runs, options);
  namespace fs = std::filesystem;
  const fs::path path(out_path);
  std::error_code ec;
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  core::write_file_atomically(path.string(), html);
  return out;
}

}  // namespace loom::experiments
