#include "loom/train/checkpoint_guard.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <mutex>

#include "loom/core/error.h"
#include "loom/core/log.h"
#include "loom/core/trace.h"

namespace loom::train {

namespace {

constexpr int64_t kBadLoss = 1, kBadGrad = 2;

int64_t bad_code(int64_t kind, int rank, int layer) {
  return (kind << 40) | (int64_t(rank + 1) << 20) | int64_t(layer + 1);
}

// True if every float is finite: an exponent of all ones means Inf or NaN. Integer lanes, so
// the compiler vectorises it (a float sum would need reassociation).
bool all_finite(const float* x, int64_t n) {
  uint32_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, x + i, 4);
    bad |= uint32_t((b & 0x7f800000u) == 0x7f800000u);
  }
  return bad == 0;
}

std::mutex fault_hook_mu;
std::atomic<bool> fault_hook_set{false};  // so a run without the hook takes no lock per range
std::function<bool(int, int64_t)>& fault_hook() {
  static std::function<bool(int, int64_t)> hook;
  return hook;
}

bool fault_hook_fires(int rank, int64_t step) {
  if (!fault_hook_set.load(std::memory_order_acquire)) return false;
  std::lock_guard<std::mutex> lock(fault_hook_mu);
  return fault_hook() && fault_hook()(rank, step);
}

}  // namespace

void set_gradient_fault_hook(std::function<bool(int rank, int64_t step)> hook) {
  std::lock_guard<std::mutex> lock(fault_hook_mu);
  fault_hook_set.store(static_cast<bool>(hook), std::memory_order_release);
  fault_hook() = std::move(hook);
}

StepGuard::StepGuard(const GuardOptions& options, std::string config_text, int64_t accumulate,
                     comm::Communicator& c, WorkerParts parts, int64_t steps_per_epoch,
                     uint64_t seed, uint64_t validation_split, uint64_t vocabulary,
                     int64_t global_batch)
    : opt_(options), config_text_(std::move(config_text)), comm_(c), parts_(parts) {
  pos_.steps_per_epoch = steps_per_epoch;
  pos_.world = c.size();
  pos_.seed = seed;
  pos_.validation_split = validation_split;
  pos_.vocabulary = vocabulary;
  pos_.global_batch = global_batch;
  pos_.accumulate = accumulate;
  if (parts_->backend.device() != Device::kCpu) opt_.check_grads = false;
  if (opt_.loss_scaling) {
    scaler_.emplace(*opt_.loss_scaling);
    overflow_ = DeviceBuffer<float>(parts_->backend, 1);
    pos_.loss_scale = scaler_->scale();
    if (c.rank() == 0) log_info("loss scaling: {}", scaler_->describe());
  }
}

int64_t StepGuard::resume() {
  if (opt_.resume.empty()) return 0;
  const int64_t world = pos_.world, global_batch = pos_.global_batch, accumulate = pos_.accumulate;
  LoadedCheckpoint ck = load_checkpoint(comm_, opt_.resume, *parts_, pos_);
  resumed_rank_files_ = std::move(ck.rank_files);
  resumed_same_world_ = ck.same_world;
  resumed_dir_ = ck.dir;
  const int64_t old_world = ck.pos.world;
  pos_ = ck.pos;
  // From here on the checkpoints are this run's: its world and global batch.
  pos_.world = world;
  pos_.global_batch = global_batch;
  pos_.accumulate = accumulate;
  step_ = pos_.step;
  restore_scaler(ck.dir);
  if (comm_.rank() == 0)
    log_info("resumed from {}: step {} (epoch {}, step {} of it), lr scale {}{}", ck.dir, pos_.step,
             pos_.epoch() + 1, pos_.step_in_epoch(), pos_.lr_scale,
             ck.same_world ? ""
                           : fmt::format("; written by {} worker{}, resharded to {} (optimizer "
                                         "state put together from every rank's)",
                                         old_world, old_world == 1 ? "" : "s", world));
  return pos_.step;
}

void StepGuard::restore_scaler(const std::string& dir) {
  if (!scaler_) {
    if (pos_.loss_scale > 0)
      throw InputError(fmt::format(
          "{}: trained with dynamic loss scaling (scale {}); this run does not scale its loss "
          "(loss_scale.mode, precision): resume with the same settings",
          dir, pos_.loss_scale));
    return;
  }
  if (pos_.loss_scale <= 0)
    throw InputError(fmt::format(
        "{}: trained without dynamic loss scaling; this run scales its loss (loss_scale.mode, "
        "precision): resume with the same settings",
        dir));
  if (!scaler_->restore(float(pos_.loss_scale), pos_.loss_scale_streak, pos_.overflow_skips))
    throw InputError(
        fmt::format("{}: loss scale {} after {} clean steps is outside this run's scaler ({})", dir,
                    pos_.loss_scale, pos_.loss_scale_streak, scaler_->describe()));
}

void StepGuard::add_loss_scale_figures(nlohmann::json& j) const {
  if (!scaler_) return;
  j["loss_scale"] = scaler_->scale();
  j["overflow_skips"] = scaler_->skipped_steps();
}

bool StepGuard::scaler_step(bool overflow) {
  const float before = scaler_->scale();
  const bool apply = scaler_->update(overflow);
  if (!apply) {
    snapshot_.restore(*parts_);
    if (comm_.rank() == 0)
      log_info(
          "step {}: the gradients overflowed at loss scale {:g}: step skipped (parameters and "
          "optimizer rolled back), loss scale now {:g}",
          step_, before, scaler_->scale());
  }
  pos_.loss_scale = scaler_->scale();
  pos_.loss_scale_streak = scaler_->clean_streak();
  pos_.overflow_skips = scaler_->skipped_steps();
  return !apply;
}

void StepGuard::replace_strategy(sync::Strategy& strategy, const std::string& config_text,
                                 int64_t steps_done) {
  parts_.emplace(
      WorkerParts{parts_->backend, parts_->model, parts_->optimizer, strategy, parts_->best});
  config_text_ = config_text;
  // Every rank took part in that write (end_step's decision is agreed), so every rank
  // writes it again.
  if (written_step_ == steps_done) write_checkpoint(steps_done);
}

void StepGuard::restore_strategy() {
  if (resumed_rank_files_.empty()) return;
  const std::string inexact =
      train::restore_strategy(*parts_, resumed_rank_files_, resumed_same_world_);
  resumed_rank_files_.clear();
  if (comm_.rank() == 0 && !inexact.empty())
    log_warn("resume from {} on another world size is not exact: {}", resumed_dir_, inexact);
}

void StepGuard::begin_step(int64_t step) {
  step_ = step;
  bad_code_ = 0;
  fault_injected_ = false;
  if (scaler_) parts_->backend.fill(overflow_.data(), 1, 0.0f);
  if (opt_.nan_policy == NanPolicy::kSkip || scaler_) snapshot_.capture(*parts_);
}

void StepGuard::check_loss(double loss_sum, int64_t step) {
  if (!std::isfinite(loss_sum) && bad_code_ == 0) bad_code_ = bad_code(kBadLoss, comm_.rank(), -1);
}

void StepGuard::check_grads(const nn::ParamRange& range) {
  float* g = parts_->model.grads() + range.offset;
  if (!fault_injected_ && range.count > 0 && fault_hook_fires(comm_.rank(), step_)) {
    parts_->backend.fill(g, 1, std::numeric_limits<float>::infinity());
    fault_injected_ = true;
  }
  if (scaler_) {
    // A non-finite scaled gradient is the scaler's overflow, not the NaN policy's business.
    parts_->backend.note_non_finite(g, range.count, overflow_.data());
    parts_->backend.scale(range.count, 1.0f / scaler_->scale(), g);
    return;
  }
  if (!opt_.check_grads || bad_code_ != 0) return;
  if (!all_finite(parts_->model.grads() + range.offset, range.count))
    bad_code_ = bad_code(kBadGrad, comm_.rank(), range.layer);
}

std::string StepGuard::describe_bad(int64_t code) const {
  const int64_t kind = code >> 40;
  const int rank = int((code >> 20) & 0xfffff) - 1;
  const int layer = int(code & 0xfffff) - 1;
  if (kind == kBadLoss)
    return fmt::format("the loss is NaN or Inf at step {} (epoch {}) on rank {}", step_,
                       step_ / std::max<int64_t>(pos_.steps_per_epoch, 1) + 1, rank);
  std::string what = fmt::format("layer {}", layer);
  const auto& layers = parts_->model.layers();
  if (layer >= 0 && size_t(layer) < layers.size())
    what += fmt::format(" ({})", layers[size_t(layer)]->describe());
  return fmt::format("the gradient of {} holds NaN or Inf at step {} (epoch {}) on rank {}", what,
                     step_, step_ / std::max<int64_t>(pos_.steps_per_epoch, 1) + 1, rank);
}

StepGuard::Outcome StepGuard::end_step(int64_t steps_done) {
  const bool time_due = opt_.every_minutes > 0 && comm_.rank() == 0 &&
                        since_checkpoint_.seconds() >= 60.0 * opt_.every_minutes;
  run_stop_check_hook(comm_.rank(), steps_done);
  float overflow = 0;
  if (scaler_) parts_->backend.copy_to_host(&overflow, overflow_.data(), sizeof(float));
  int64_t flags[4] = {bad_code_, int64_t(stop_signal()), time_due ? 1 : 0, overflow != 0 ? 1 : 0};
  // The performance model charges this collective as perf::kLoomStepAgreementBytes (32): keep
  // the two equal.
  if (comm_.size() > 1) {
    trace::Span agree("step agreement", "comm");  // timeline: every step's small collective
    comm_.allreduce(flags, sizeof(flags), comm::max_i64());
  }
  pos_.step = steps_done;

  if (flags[0] != 0) {
    const std::string what = describe_bad(flags[0]);
    if (opt_.nan_policy == NanPolicy::kAbort)
      throw NumericError(
          fmt::format("{} (train.nan_policy = \"abort\"): lower optim.lr or check "
                      "the data, or set train.nan_policy = \"skip\"",
                      what));
    snapshot_.restore(*parts_);
    ++pos_.nan_skips;
    if (pos_.nan_skips > opt_.nan_max_skips)
      throw NumericError(
          fmt::format("{}: {} consecutive steps skipped (train.nan_max_skips = {}); "
                      "giving up",
                      what, pos_.nan_skips, opt_.nan_max_skips));
    // A skipped step leaves the parameters as they were, and the loss is computed before the
    // learning rate is used: a second NaN loss in a row on the same parameters says that they
    // had diverged before the first NaN. A lower rate cannot bring them back, so stop now
    // rather than after train.nan_max_skips more steps.
    const bool loss_bad = (flags[0] >> 40) == kBadLoss;
    if (loss_bad && previous_skip_loss_bad_)
      throw NumericError(fmt::format(
          "{}: {} consecutive steps skipped, the loss NaN or Inf each time on the same "
          "rolled-back parameters: they diverged before the first NaN, and no learning rate "
          "scale brings them back (the skip policy recovers from a bad batch, not from "
          "divergence). Resume from an earlier checkpoint with a lower optim.lr",
          what, pos_.nan_skips));
    previous_skip_loss_bad_ = loss_bad;
    pos_.lr_scale *= opt_.nan_lr_factor;
    if (comm_.rank() == 0)
      log_warn(
          "{}: step skipped (parameters and optimizer rolled back), learning rate scale "
          "now {:g}",
          what, pos_.lr_scale);
    return Outcome::kSkipped;
  }
  pos_.nan_skips = 0;
  previous_skip_loss_bad_ = false;
  // An overflowed step is rolled back before a checkpoint or a stop, which then keep the
  // state from before it and the halved scale.
  const bool overflow_skip = scaler_ && scaler_step(flags[3] != 0);

  if (flags[1] != 0) {
    interrupted_ = true;
    if (comm_.rank() == 0)
      log_warn("signal {} received: stopping after step {}", int(flags[1]), steps_done);
    if (!opt_.checkpoint_root.empty())
      write_checkpoint(steps_done);
    else if (comm_.rank() == 0)
      log_warn("no checkpoint written on stop: output.dir is \"\"");
    return Outcome::kStop;
  }
  if (opt_.checkpoints() &&
      ((opt_.every_steps > 0 && steps_done % opt_.every_steps == 0) || flags[2] != 0))
    write_checkpoint(steps_done);
  return overflow_skip ? Outcome::kSkipped : Outcome::kDone;
}

std::string StepGuard::write_checkpoint(int64_t steps_done) {
  pos_.step = steps_done;
  written_step_ = steps_done;
  const std::string dir =
      save_checkpoint(comm_, opt_.checkpoint_root, opt_.keep, *parts_, pos_, config_text_);
  if (!dir.empty()) last_checkpoint_ = dir;
  since_checkpoint_.reset();
  return dir;
}

}  // namespace loom::train
