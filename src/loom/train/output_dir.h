// Where a run writes, and the rule that keeps it from destroying an earlier one:
//   - a directory that already holds a run's results (config.toml, metrics.jsonl, summary.json,
//     model.safetensors, checkpoints/ or tb/) is refused, unless the run replaces it on purpose
//     (`loom train --force`) or resumes it (train.resume: the one case that writes into an
//     existing run);
//   - an output.dir holding "{n}" takes the first n = 1, 2, ... whose directory holds no run;
//   - a resumed run writes into the run directory its checkpoint lies in.
// Nothing here writes: the trainer touches the directory only after the whole config has been
// read and checked (RunWriter::open).
#pragma once

#include <string>
#include <vector>

namespace loom::train {

// The files and folders of a run's results that `dir` holds (empty: none, or no such dir).
std::vector<std::string> run_results_in(const std::string& dir);

// "runs/mlp-{n}" -> the first "runs/mlp-1", "runs/mlp-2", ... that holds no run's results.
// A pattern without "{n}" comes back unchanged.
std::string numbered_output_dir(const std::string& pattern);

// The run directory a resume path belongs to: a run's output dir (holding checkpoints/), its
// checkpoints/ folder, or one step-N checkpoint inside it.
std::string resume_run_dir(const std::string& resume_path);

// Two paths name the same directory (after making them absolute and normal).
bool same_dir(const std::string& a, const std::string& b);

// ConfigError (exit 2) naming `dir` and what it holds, with the ways out, if it holds a run.
void refuse_existing_run(const std::string& dir, const std::string& where);

// Removes the results run_results_in() lists (for --force), so that a stale summary or an old
// run's checkpoints never sit next to the new run's files. InputError if one cannot be removed.
void clear_run_results(const std::string& dir);

}  // namespace loom::train
