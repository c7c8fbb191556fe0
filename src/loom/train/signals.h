// SIGINT/SIGTERM during training: the handler only sets a flag; the training loop finishes its
// step, agrees with the other ranks through a collective flag (so none is left waiting in a
// collective), writes a checkpoint and returns, and `loom` exits 0. A second signal of the
// same kind while the first is pending restores the default action and re-raises it, so a
// second Ctrl-C still kills a run that is stuck.
#pragma once

namespace loom::train {

// Installs the handlers while alive (nested scopes share one installation: the thread
// transport runs every worker in this process). Restores the previous handlers at the end.
class StopSignalScope {
 public:
  StopSignalScope();
  ~StopSignalScope();
  StopSignalScope(const StopSignalScope&) = delete;
  StopSignalScope& operator=(const StopSignalScope&) = delete;
};

// The signal number received since the scope was installed (0 = none).
int stop_signal();
bool stop_handlers_installed();
// Clears the flag (tests; a new run).
void clear_stop_signal();

}  // namespace loom::train
