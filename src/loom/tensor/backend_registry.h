// The one place that knows which backends were built.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "loom/tensor/backend.h"
#include "loom/tensor/cpu/cpu_backend.h"

namespace loom {

// "cpu" always; "cuda" when built with LOOM_CUDA and a GPU is present. An unknown name, or a
// backend that was not built, throws ConfigError naming the build option.
std::unique_ptr<Backend> make_backend(const std::string& name);
std::vector<std::string> built_backends();

}  // namespace loom
