// What the commands that run a trained model (eval, predict, sample) share: which weights to
// load for RUN and --checkpoint. How their forward runs is train/forward_settings.h.
#pragma once

#include <string>

namespace loom::cli {

// RUN itself when `checkpoint` is empty; else --checkpoint as given, or a step-N name inside
// RUN's checkpoints/. InputError naming both places when neither exists.
std::string weights_path(const std::string& run, const std::string& checkpoint);

}  // namespace loom::cli
