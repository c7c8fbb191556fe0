// Which machine this process runs on, as calibration files record it (perf/calibration.h
// MachineIdentity): a file measured elsewhere must not pass for this machine's figures.
#pragma once

#include <string>

namespace loom::measure {

// "model name" of /proc/cpuinfo with its family and model numbers (a VM may show a bare
// name); "unknown CPU" where the file is missing.
std::string cpu_model();

}  // namespace loom::measure
