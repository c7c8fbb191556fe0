// What the commands that run a trained model (eval, predict, sample) share: which weights to
// load for RUN and --checkpoint, and how many threads their forward uses.
#pragma once

#include <string>

#include "loom/tensor/backend.h"

namespace loom::cli {

// RUN itself when `checkpoint` is empty; else --checkpoint as given, or a step-N name inside
// RUN's checkpoints/. InputError naming both places when neither exists.
std::string weights_path(const std::string& run, const std::string& checkpoint);

// Sets `requested` intra-op threads on `backend` (0: every core) and returns the count.
int use_forward_threads(Backend& backend, int requested);

}  // namespace loom::cli
