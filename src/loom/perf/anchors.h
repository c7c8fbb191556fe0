// Published anchors the model must reproduce (within 15%), each with the inputs it was run
// with: Horovod's scaling on 512 GPUs, Dettmers' 8-bit vs 32-bit prediction on 96 GPUs,
// 3.6-3.8x on 4 GPUs of one machine, and 1-bit + block momentum at 96 GPUs.
#pragma once

#include <string>
#include <vector>

namespace loom::perf {

struct AnchorResult {
  std::string name;
  std::string inputs;     // what the model was given
  std::string published;  // the figure and its source
  double target = 0;      // the published value (speedup or efficiency in %)
  double predicted = 0;
  double error() const { return target != 0 ? (predicted - target) / target : 0; }
  bool checked = true;  // false: shown for explanation, not a pass/fail figure
};

std::vector<AnchorResult> run_anchors();
std::string anchors_report();  // a table of run_anchors() with inputs and errors

}  // namespace loom::perf
