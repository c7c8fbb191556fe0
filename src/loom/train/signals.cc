#include "loom/train/signals.h"

#include <atomic>
#include <csignal>
#include <mutex>
#include <utility>

namespace loom::train {
namespace {

// Written by the handler (on whichever thread takes the signal) and read by every worker
// thread: a lock-free atomic is both async-signal-safe and race-free across threads, which a
// volatile sig_atomic_t is not.
std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);
std::mutex g_mu;
int g_scopes = 0;
struct sigaction g_old_int {
}, g_old_term{};
std::function<void(int, int64_t)> g_stop_check_hook;

extern "C" void on_stop_signal(int sig) {
  if (g_signal.load() == sig) {  // second time: give up waiting for the step to end
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  g_signal.store(sig);
}

}  // namespace

StopSignalScope::StopSignalScope() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_scopes++ > 0) return;
  g_signal.store(0);
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // blocking I/O and waits resume; the loop polls the flag per step
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
}

StopSignalScope::~StopSignalScope() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (--g_scopes > 0) return;
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
}

int stop_signal() {
  return g_signal.load();
}

bool stop_handlers_installed() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_scopes > 0;
}

void clear_stop_signal() {
  g_signal.store(0);
}

void set_stop_check_hook(std::function<void(int rank, int64_t steps_done)> hook) {
  g_stop_check_hook = std::move(hook);
}

void run_stop_check_hook(int rank, int64_t steps_done) {
  if (g_stop_check_hook) g_stop_check_hook(rank, steps_done);
}

}  // namespace loom::train
