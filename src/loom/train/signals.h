// SIGINT/SIGTERM during training: the handler only sets a flag; the training loop finishes its
// step, agrees with the other ranks through a collective flag (so none is left waiting in a
// collective), writes a checkpoint and returns, and `loom` exits 0. A second signal of the
// same kind while the first is pending restores the default action and re-raises it, so a
// second Ctrl-C still kills a run that is stuck.
#pragma once

#include <cstdint>
#include <functional>

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

// Test hook: the training loop calls it on every rank's thread at the end of each step, with
// the rank and the steps done, just before the ranks agree on whether a stop signal arrived. A
// test raises a signal there to stop a run after a known step, through the real handler. An
// empty function (the default) removes it; set it only while no training runs.
void set_stop_check_hook(std::function<void(int rank, int64_t steps_done)> hook);
// The training loop's call of that hook (nothing when none is set).
void run_stop_check_hook(int rank, int64_t steps_done);

}  // namespace loom::train
