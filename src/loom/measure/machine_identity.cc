#include "loom/measure/machine_identity.h"

#include <fmt/format.h>

#include <fstream>

namespace loom::measure {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, name = "unknown CPU", family, model;
  const auto value = [&line] {
    const auto colon = line.find(':');
    return colon == std::string::npos || colon + 2 > line.size() ? std::string()
                                                                 : line.substr(colon + 2);
  };
  // The first processor's block is enough: a machine has one CPU model.
  while (std::getline(in, line) && line.find_first_not_of(" \t") != std::string::npos) {
    if (line.rfind("model name", 0) == 0) name = value();
    if (line.rfind("cpu family", 0) == 0) family = value();
    if (line.rfind("model\t", 0) == 0) model = value();
  }
  if (family.empty()) return name;
  return fmt::format("{} (family {}, model {})", name, family, model);
}

}  // namespace loom::measure
