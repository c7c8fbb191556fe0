#include "loom/train/worker.h"

#include <cmath>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <span>

#include "loom/comm/communicator.h"
#include "loom/comm/transport_registry.h"
#include "loom/config.h"
#include "loom/core/error.h"
#include "loom/core/format_version.h"
#include "loom/core/log.h"
#include "loom/core/rng.h"
#include "loom/core/timer.h"
#include "loom/core/trace.h"
#include "loom/data/formats/token_shard.h"
#include "loom/data/loader/loader.h"
#include "loom/data/loader/pipeline_config.h"
#include "loom/data/sources/dataset.h"
#include "loom/data/sources/set_checks.h"
#include "loom/data/sources/shard_source.h"
#include "loom/data/sources/token_windows.h"
#include "loom/data/sources/validation_split.h"
#include "loom/nn/graph/graph_builder.h"
#include "loom/nn/graph/model_zoo.h"
#include "loom/nn/io/model_file.h"
#include "loom/optim/lr_schedule.h"
#include "loom/optim/optimizer.h"
#include "loom/plan/run_plan.h"
#include "loom/sync/model_parallel/model_parallel_model.h"
#include "loom/sync/ps/ps_placement.h"
#include "loom/sync/strategy.h"
#include "loom/tensor/backend_registry.h"
#include "loom/tensor/buffer.h"
#include "loom/train/auto_config.h"
#include "loom/train/checkpoint_guard.h"
#include "loom/train/comm_reducer.h"
#include "loom/train/device_batch.h"
#include "loom/train/forward_settings.h"
#include "loom/train/model_histograms.h"
#include "loom/train/output_dir.h"
#include "loom/train/progress.h"
#include "loom/train/run_data.h"
#include "loom/train/run_identity.h"
#include "loom/train/run_settings.h"
#include "loom/train/run_writer.h"
#include "loom/train/trained_model.h"

namespace loom::train {
namespace {

// Sums doubles over ranks.
void allreduce_sum(comm::Communicator& c, std::span<double> v) {
  if (c.size() > 1) c.allreduce(v.data(), v.size_bytes(), comm::sum_f64());
}

// Accuracy and mean loss per sample of a held-out set (validation or test).
struct Figures {
  double acc = -1, loss = -1;
};

// One rank's share of evaluating a held-out set, summed over the ranks (every rank gets the
// figures).
// Token windows (labels_per_sample > 1): accuracy and loss per token, over count x positions.
Figures evaluate(comm::Communicator& c, nn::Model& model, const data::Dataset& test) {
  const int64_t per = test.labels_per_sample;
  const int64_t chunk = forward_chunk(per);  // as evaluate_model's, about 1000 rows of logits
  const comm::BlockRange mine = comm::block_range(size_t(test.count), c.size(), c.rank());
  const int64_t numel = test.sample_numel();
  double correct = 0, loss_sum = 0;
  Backend& be = model.backend();
  DeviceBatch on_device(be);
  const bool regression = model.loss_kind() == nn::LossKind::kMse;
  // The same number of forward calls on every rank (a model-parallel block exchanges in each):
  // as many as rank 0's share (the largest) needs, each rank splitting its own share evenly.
  const int64_t calls =
      int64_t((comm::block_range(size_t(test.count), c.size(), 0).size() + size_t(chunk) - 1) /
              size_t(chunk));
  for (int64_t k = 0; k < calls; ++k) {
    const comm::BlockRange part = comm::block_range(mine.size(), int(calls), int(k));
    if (part.size() == 0) continue;
    const int64_t i = int64_t(mine.begin + part.begin), n = int64_t(part.size());
    nn::StepInfo info;
    info.training = false;
    const DeviceBatch::View v = on_device.put(test.features.data() + i * numel,
                                              test.labels.data() + i * per, n, numel, per);
    const float* logits = model.forward(v.x, n, info);
    if (regression) {
      const int64_t k = test.target_numel;
      loss_sum +=
          model.mse_loss(on_device.put_targets(test.targets.data() + i * k, n * k), 0.0f).loss_sum;
      continue;
    }
    correct += double(be.count_correct(logits, v.y, n * per, model.num_classes()));
    loss_sum += model.loss(v.y, 0.0f).loss_sum;  // the gradient it writes is never used
  }
  double v[2] = {correct, loss_sum};
  allreduce_sum(c, v);
  // Regression has no accuracy: -1, as for a figure not evaluated.
  const double rows = double(test.count * per);
  return {regression ? -1.0 : v[0] / rows, v[1] / rows};
}

// One rank's training run: set up, start (or resume), the epochs, and rank 0's result.
class Worker {
 public:
  Worker(const plan::RunPlan& run, comm::Communicator& c,
         std::shared_ptr<const data::SampleSource> train, const data::Dataset* validation,
         uint64_t validation_split, const data::Dataset& test, TrainResult& result,
         RunWriter& writer, const TrainOptions& options, const TokenRun& tokens)
      : run_(run),
        s_(run.settings),
        comm_(c),
        train_(std::move(train)),
        validation_(validation),
        validation_split_(validation_split),
        test_set_(test),
        pipeline_(run.pipeline),
        result_(result),
        writer_(writer),
        options_(options),
        tokens_(tokens) {}

  void run() {
    check_same_run(comm_, run_.text);
    set_up();
    start_or_resume();
    reconsider_resumed_epoch();
    // Every rank has built its parts from the whole config (model, optimizer, strategy,
    // schedule, checkpoint) and loaded its checkpoint: only now may the run touch output.dir.
    if (comm_.size() > 1) comm_.barrier();
    if (lead_) open_output();
    for (int64_t epoch = step_ / steps_per_epoch_;
         epoch < s_.epochs && step_ < total_steps_ && !guard_->interrupted(); ++epoch)
      run_epoch(epoch);
    // The test set, once, on the final weights: nothing during the run was chosen by it.
    // A token run may have no test stream (data.test_shards is optional there).
    if (s_.eval && test_set_.count > 0) test_ = evaluate(comm_, *model_, test_set_);
    if (lead_) finish();
  }

 private:
  // What this rank's kept steps of one epoch add up to.
  struct EpochTotals {
    double loss_sum = 0, correct = 0, seen = 0;
  };
  // Since the last "step" line of metrics.jsonl.
  struct Interval {
    double loss_sum = 0, correct = 0, seen = 0;
    double seconds = 0;  // of training loops that ended (evaluation left out)
    Stopwatch watch;     // the running loop's part
  };

  // The backend, model, optimizer, sync strategy, loader and learning-rate schedule.
  void set_up() {
    // The nccl transport's workers compute on their communicator's GPU (nccl_world.h).
    Backend* device = comm::device_backend(comm_);
    backend_ = device ? device : &cpu_backend();
    trace::bind_thread(comm_.rank(), trace::kComputeTid, "compute", true);
    backend_->set_intra_op_threads(int(s_.threads));
    const std::string why = backend_->matmul_precision_unsupported(s_.precision);
    if (!why.empty())
      throw ConfigError(fmt::format("{}: key 'precision': \"{}\": {}", run_.precision_where,
                                    precision_name(s_.precision), why));
    backend_->set_matmul_precision(s_.precision);
    model_ = plan::build_model(run_, comm_, *backend_, train_->sample_shape(),
                               output_size(*train_));  // parallel.* (model_parallel_model.h)
    nn::apply_loss_options(run_.loss, *model_);
    model_->init_params(s_.seed);
    // An imported network's weights are in the parameters now; the copy the nodes brought would
    // hold the network's size again for the whole run.
    model_->release_initial_params();
    reducer_.emplace(comm_, *backend_);
    model_->set_reducer(&*reducer_);
    optimizer_ = optim::make_optimizer(run_.optimizer, *backend_, model_->num_params());
    set_up_loader();
    // codec/sync/sync.bucket_kib = "auto": measure, decide, and revise the plan with the choice
    // (auto_config.h).
    auto_ = resolve_auto(run_, comm_, *backend_, train_->sample_shape(), output_size(*train_),
                         total_steps_, tokens_.enabled);
    if (auto_.choice) run_ = plan::with_sync_choice(run_, *auto_.choice, auto_.choice_where);
    if (auto_.active && comm_.rank() == 0) {
      log_info("{}", auto_.log);
      result_.auto_choice = auto_.json;
    }
    strategy_ = plan::make_strategy(run_, comm_, *model_, *optimizer_, total_steps_);
    schedule_ = optim::make_lr_schedule(run_.schedule, steps_per_epoch_, total_steps_);
    if (s_.accumulate > 1) accumulated_ = DeviceBuffer<float>(*backend_, model_->num_params());
    lead_ = comm_.rank() == 0;
    if (lead_) {
      result_.describe =
          fmt::format("model:\n{}\noptimizer: {}, {}\nsync: {}", model_->summary(),
                      optimizer_->describe(), schedule_.describe(), strategy_->describe());
      log_info("{}", result_.describe);
      log_info("precision: {}", s_.precision == Precision::kFp32
                                    ? "fp32"
                                    : fmt::format("{} inputs of the matrix products (Linear, "
                                                  "Conv2d), fp32 everything else",
                                                  precision_name(s_.precision)));
    }
    progress_.emplace(resolve_progress_mode(s_.progress, stderr_sink(comm_.rank())), epochs_to_run_,
                      steps_per_epoch_, global_batch_, total_steps_);
    if (tokens_.enabled) progress_->set_tokens(tokens_.context, tokens_.unit());
  }

  // This rank's share of each global batch, and how many steps the run takes.
  void set_up_loader() {
    data::LoaderOptions lo;
    // With accumulation the loader hands out the whole step's batch (accumulate x batch per
    // rank): the same samples, shuffle and sample offsets as a run with the larger batch.
    lo.global_batch = s_.batch * s_.accumulate * comm_.size();
    lo.rank = comm_.rank();
    lo.world = comm_.size();
    lo.seed = s_.seed;
    lo.shuffle = s_.shuffle;
    lo.prefetch = int(s_.prefetch);
    data::apply_pipeline(pipeline_, lo);
    loader_.emplace(train_, lo);
    global_batch_ = lo.global_batch;
    steps_per_epoch_ = loader_->steps_per_epoch();
    if (steps_per_epoch_ == 0)
      throw ConfigError(
          fmt::format("a global batch of {} ({} workers x batch {}{}) is larger than "
                      "the {} training samples",
                      lo.global_batch, comm_.size(), s_.batch,
                      s_.accumulate > 1 ? fmt::format(" x train.accumulate {}", s_.accumulate) : "",
                      train_->count()));
    total_steps_ = steps_per_epoch_ * s_.epochs;
    if (s_.max_steps > 0) total_steps_ = std::min(total_steps_, s_.max_steps);
    epochs_to_run_ = (total_steps_ + steps_per_epoch_ - 1) / steps_per_epoch_;
    // The same decision on every rank: the step lines' figures are summed over the ranks.
    log_every_ = run_.output_dir.empty() && !options_.keep_results ? 0 : s_.log_every;
  }

  // Checkpoints, resume, the NaN policy and stop signals (checkpoint_guard.h); then the
  // strategy starts from step 0 or from where the checkpoint left off.
  void start_or_resume() {
    BestWeights* best = s_.keep_best && lead_ ? &best_ : nullptr;
    guard_.emplace(run_.guard, run_.text, s_.accumulate, comm_,
                   WorkerParts{*backend_, *model_, *optimizer_, *strategy_, best}, steps_per_epoch_,
                   s_.seed, validation_split_, tokens_.enabled ? tokens_.vocab.fingerprint() : 0,
                   global_batch_);
    step_ = guard_->resume();  // 0, or where the checkpoint left off
    strategy_->start();
    guard_->restore_strategy();
    auto_window_ = auto_check_window(run_.auto_options, auto_, step_, total_steps_);
    if (lead_ && auto_.active && !auto_window_.active()) {
      log_info("auto: no check of the prediction: {}", auto_window_.skipped);
      note_auto_revision({{"outcome", "not checked"}, {"reason", auto_window_.skipped}});
    }
    fidelity_ = make_fidelity_probe(auto_, run_, auto_window_, *model_, *backend_);
    if (fidelity_) {
      fidelity_grad_.assign(size_t(model_->num_params()), 0.0f);
      if (lead_)
        log_info(
            "auto: measuring the lossy codecs' fidelity on the gradients of steps {}-{} ({} of "
            "the {} parameters)",
            step_, auto_window_.end() - 1, fidelity_->sampled(), model_->num_params());
    }
  }

  // Rank 0, once every check passed: the output directory, config.toml and metrics.jsonl. A
  // resumed run keeps the lines of what its checkpoint had trained; the rest is trained again.
  void open_output() {
    if (!writer_.enabled()) return;
    if (options_.force && !guard_->resumed()) clear_run_results(writer_.dir());
    writer_.open();
    writer_.write_config(run_.text);
    if (guard_->resumed()) writer_.keep_epochs_through(step_ / steps_per_epoch_, step_);
    log_info(
        "output: {} (config.toml, metrics.jsonl{}; summary.json and model.safetensors at the end)",
        writer_.dir(), guard_->writes_checkpoints() ? ", checkpoints/" : "");
  }

  // The epoch's steps from where step_ stands, then its figures, evaluation and report.
  void run_epoch(int64_t epoch) {
    EpochMetrics m;
    m.epoch = epoch + 1;
    EpochTotals totals;
    loader_->start_epoch(epoch);
    data::Batch batch;
    DeviceBatch on_device(*backend_);
    skip_trained_batches(epoch, batch);
    Stopwatch epoch_watch;
    interval_.watch.reset();
    while (step_ < total_steps_ && loader_->next(batch)) {
      m.loader_wait_s += batch.wait_seconds;
      trace::Span step_span;  // timeline (trace.file): the step and the loader wait before it
      trace_step(batch, step_span);
      Stopwatch step_watch;
      const std::optional<nn::LossResult> r = train_step(batch, on_device, m.compute_s);
      // The fidelity replay is auto's own cost, not the step's: the check compares the step.
      const double step_seconds = batch.wait_seconds + step_watch.seconds() - fidelity_step_s_;
      fidelity_step_s_ = 0;
      const double forward_seconds = forward_s_;
      forward_s_ = 0;
      ++step_;
      ++m.steps;
      if (auto_window_.active()) check_auto(step_seconds, forward_seconds);
      // Figures per label: per sample, or per token of token windows.
      const double labels = double(batch.size * batch.labels_per_sample);
      if (r) {
        totals.loss_sum += r->loss_sum;
        totals.correct += double(r->correct);
        totals.seen += labels;
        interval_.loss_sum += r->loss_sum;
        interval_.correct += double(r->correct);
        interval_.seen += labels;
      }
      if (log_every_ > 0 && step_ % log_every_ == 0) log_step(epoch);
      if (!r) continue;  // rolled back: left out of the epoch's loss and accuracy
      if (lead_) {
        const double el = epoch_watch.seconds();
        progress_->step(epoch, batch.step, r->loss_sum / labels,
                        el > 0 ? double(m.steps * global_batch_) / el : 0);
      }
      if (lead_ && s_.histograms.due(step_) && writer_.tensorboard())
        write_model_histograms(*writer_.tensorboard(), *model_, step_);
      if (guard_->interrupted()) break;  // a stop signal: checkpoint written, leave
    }
    interval_.seconds += interval_.watch.seconds();
    interval_.watch.reset();
    // After the last step, before the last evaluation: block momentum folds in its last
    // partial block here, so the final figures are those of the global model.
    if (step_ >= total_steps_ || epoch + 1 == s_.epochs) strategy_->finish();
    m.seconds = epoch_watch.seconds();
    close_epoch(m, totals);
    if (s_.eval && validation_) {
      const Figures v = evaluate(comm_, *model_, *validation_);
      m.val_acc = v.acc;
      m.val_loss = v.loss;
      if (lead_ && s_.keep_best) keep_if_best(m);
    }
    if (lead_) report_epoch(m);
  }

  // Rank 0, train.keep_best: the epoch's weights when its validation figure beats the best so
  // far (accuracy, then loss; an equal one keeps the earlier epoch). An epoch cut short by a
  // stop signal is not a candidate (a resume trains the rest of it); the last one max_steps
  // leaves is, as it ends the run.
  void keep_if_best(EpochMetrics& m) {
    const bool whole = m.steps > 0 && (step_ % steps_per_epoch_ == 0 || step_ >= total_steps_);
    const bool better = best_.epoch == 0 || m.val_acc > best_.val_acc ||
                        (m.val_acc == best_.val_acc && m.val_loss < best_.val_loss);
    if (whole && better) {
      best_.epoch = m.epoch;
      best_.val_acc = m.val_acc;
      best_.val_loss = m.val_loss;
      best_.params.resize(size_t(model_->num_params()));
      backend_->copy_to_host(best_.params.data(), model_->params(),
                             best_.params.size() * sizeof(float));
      best_.state.resize(size_t(model_->num_state()));
      if (!best_.state.empty())
        backend_->copy_to_host(best_.state.data(), model_->state(),
                               best_.state.size() * sizeof(float));
    }
    m.best_epoch = best_.epoch;
  }

  // A checkpoint written at an epoch's last step precedes that epoch's evaluation, so the
  // checkpoint's best weights cannot include it. With train.keep_best, a run resumed there
  // evaluates the restored weights -- the epoch's final ones, the same bits -- so the epoch
  // stays a candidate. The same decision on every rank: evaluation is collective.
  void reconsider_resumed_epoch() {
    if (!guard_->resumed() || !s_.keep_best || !s_.eval || !validation_ || step_ == 0 ||
        step_ % steps_per_epoch_ != 0)
      return;
    const Figures v = evaluate(comm_, *model_, *validation_);
    if (!lead_ || best_.epoch >= step_ / steps_per_epoch_) return;
    EpochMetrics m;
    m.epoch = step_ / steps_per_epoch_;
    m.steps = steps_per_epoch_;
    m.val_acc = v.acc;
    m.val_loss = v.loss;
    keep_if_best(m);
  }

  // A resumed epoch: the shuffle is a function of (seed, epoch), so skipping the batches
  // already trained on puts the loader where the checkpoint left it.
  void skip_trained_batches(int64_t epoch, data::Batch& batch) {
    for (int64_t k = step_ - epoch * steps_per_epoch_; k > 0 && loader_->next(batch); --k) {
    }
  }

  // A "step" line of metrics.jsonl: the steps since the last one, summed over the ranks (a
  // collective: every rank reaches it at the same step).
  void log_step(int64_t epoch) {
    double sums[3] = {interval_.loss_sum, interval_.correct, interval_.seen};
    allreduce_sum(comm_, sums);
    const double seconds = interval_.seconds + interval_.watch.seconds();
    if (lead_) {
      nlohmann::json j = {
          {"kind", "step"},
          {"epoch", epoch + 1},
          {"step", step_},
          {"train_loss", sums[2] > 0 ? nlohmann::json(sums[0] / sums[2]) : nullptr},
          {"train_acc", sums[2] > 0 ? nlohmann::json(sums[1] / sums[2]) : nullptr},
          {"samples_per_s",
           seconds > 0 ? sums[2] / double(train_->labels_per_sample()) / seconds : 0},
          {"lr", schedule_.at(step_ - 1) * double(guard_->lr_scale())},
          {"seconds", seconds}};
      guard_->add_loss_scale_figures(j);
      if (tokens_.enabled)
        add_token_figures(j, sums[2] > 0 ? sums[0] / sums[2] : -1, -1,
                          seconds > 0 ? sums[2] / seconds : 0);
      emit_metrics(j);
    }
    interval_ = Interval();
  }

  // The timeline (trace.file): the step about to run, and the loader's wait before it.
  void trace_step(const data::Batch& batch, trace::Span& step_span) const {
    trace::begin_step(comm_.rank(), step_);
    if (!trace::enabled()) return;
    trace::complete("loader wait", "loader", trace::now_us() - 1e6 * batch.wait_seconds,
                    1e6 * batch.wait_seconds);
    step_span.begin(fmt::format("step {}", step_), "step");
  }

  // Step step_ on `batch`: forward, loss, backward handing gradients to the strategy, its
  // exchange and update. nullopt when the guard rolled the step back. With train.accumulate
  // = k the batch runs as k micro-batches: the first k - 1 backward passes add their gradients
  // into accumulated_, and the last one adds that sum into each range as it becomes ready and
  // only then hands it to the strategy, so the strategy sees one step with the whole batch's
  // gradient and exchanges once. Each micro-batch keeps its samples' global offsets, so
  // dropout draws the masks the larger batch would.
  std::optional<nn::LossResult> train_step(const data::Batch& batch, DeviceBatch& on_device,
                                           double& compute_s) {
    nn::StepInfo info;
    info.training = true;
    info.dropout_key = derive_key(s_.seed, 0, RngPurpose::kDropout, uint64_t(step_));
    guard_->begin_step(step_);
    const float lr = float(schedule_.at(step_)) * guard_->lr_scale();
    strategy_->begin_step(step_, lr);
    const int64_t numel = train_->sample_numel();
    const int64_t per = batch.labels_per_sample;
    const int64_t k = s_.accumulate;
    Stopwatch compute;
    nn::LossResult total;
    for (int64_t j = 0; j < k; ++j) {
      const comm::BlockRange part = comm::block_range(size_t(batch.size), int(k), int(j));
      const int64_t first = int64_t(part.begin), n = int64_t(part.size());
      info.sample_offset = batch.global_offset + first;
      const DeviceBatch::View in =
          on_device.put(batch.x + first * numel, batch.y + first * per, n, numel, per);
      const int64_t targets = train_->target_numel();
      const float* t =
          batch.t ? on_device.put_targets(batch.t + first * targets, n * targets) : nullptr;
      Stopwatch forward;
      model_->forward(in.x, n, info);
      // The mean over the batch's labels: its samples, or every position of its windows,
      // times the loss scale (1 without loss_scale.*; the guard unscales each range).
      const nn::LossResult r =
          model_->loss(in.y, t, strategy_->grad_scale(batch.size * per) * guard_->loss_scale());
      forward_s_ += forward.seconds();
      guard_->check_loss(r.loss_sum, step_);
      total.loss_sum += r.loss_sum;
      total.correct += r.correct;
      if (k == 1) {
        model_->backward([&](const nn::ParamRange& range) {
          guard_->check_grads(range);
          keep_for_fidelity(range);
          strategy_->on_gradients_ready(range);
        });
      } else {
        model_->backward([&](const nn::ParamRange& range) {
          guard_->check_grads(range);
          float* g = model_->grads() + range.offset;
          float* acc = accumulated_.data() + range.offset;
          if (j == 0) {
            backend_->copy(acc, g, size_t(range.count) * sizeof(float));
          } else if (j + 1 < k) {
            backend_->axpy(range.count, 1.0f, g, acc);
          } else {
            backend_->axpy(range.count, 1.0f, acc, g);
            keep_for_fidelity(range);
            strategy_->on_gradients_ready(range);
          }
        });
      }
    }
    compute_s += compute.seconds();
    strategy_->end_step();
    replay_for_fidelity(lr);
    average_model_state();
    if (guard_->end_step(step_ + 1) == StepGuard::Outcome::kSkipped) return std::nullopt;
    return total;
  }

  // codec = "auto" before its check: this rank's gradient of `range`, copied before the strategy
  // exchanges it in place, for the fidelity replay.
  void keep_for_fidelity(const nn::ParamRange& range) {
    if (!fidelity_) return;
    Stopwatch w;
    backend_->copy_to_host(fidelity_grad_.data() + range.offset, model_->grads() + range.offset,
                           size_t(range.count) * sizeof(float));
    fidelity_step_s_ += w.seconds();
  }

  // The step's gradient through each codec's replay. The strategy's gradients are this rank's
  // share of the sum over the ranks; times the ranks, they are at the scale of one mean
  // gradient, which the optimizers' constants (Adam's eps) expect.
  void replay_for_fidelity(float lr) {
    if (!fidelity_) return;
    Stopwatch w;
    fidelity_->record(fidelity_grad_, lr, float(comm_.size()));
    fidelity_step_s_ += w.seconds();
    fidelity_total_s_ += w.seconds();
  }

  // Each replica normalises with its own share of the batch, so BatchNorm's running
  // statistics drift apart; their mean after every step keeps one model on every rank (and
  // estimates the global batch's statistics better than any one rank's). It is a few
  // floats per BatchNorm layer: one small allreduce, on the compute thread after end_step,
  // when no other collective is in flight.
  void average_model_state() {
    const int64_t n = model_->num_state();
    if (comm_.size() == 1 || n == 0) return;
    reducer_->sum(model_->state(), n);
    backend_->scale(n, 1.0f / float(comm_.size()), model_->state());
  }

  // The strategy's communication figures for the epoch; loss, accuracy and throughput summed
  // over the ranks.
  void close_epoch(EpochMetrics& m, const EpochTotals& t) {
    sync::SyncStats st = strategy_->take_stats();
    st.add(pending_stats_);  // what the auto check took step by step, or a replaced strategy
    pending_stats_ = {};
    m.comm_s = st.comm_seconds;
    m.exposed_comm_s = st.exposed_seconds;
    m.compute_s -= st.exposed_in_compute;  // counted once, as communication
    m.bytes_sent = st.bytes_sent;
    m.exchanges = st.exchanges;
    double sums[3] = {t.loss_sum, t.correct, t.seen};
    allreduce_sum(comm_, sums);
    m.train_loss = sums[2] > 0 ? sums[0] / sums[2] : 0;
    m.train_acc = sums[2] > 0 ? sums[1] / sums[2] : 0;
    // seen counts labels: a token window's are its positions.
    const double samples = sums[2] / double(train_->labels_per_sample());
    m.samples_per_s = m.seconds > 0 ? samples / m.seconds : 0;
    total_seconds_ += m.seconds;
    total_samples_ += int64_t(samples);
  }

  // codec/sync = "auto": after each step until the check window closes. The window's steps
  // add their time (loader wait included), their exposed communication and their forward; the
  // strategy's figures taken here count in the epoch's too.
  void check_auto(double step_seconds, double forward_seconds) {
    const sync::SyncStats st = strategy_->take_stats();
    pending_stats_.add(st);
    if (auto_window_.holds(step_ - 1)) {
      auto_seconds_ += step_seconds;
      auto_exposed_s_ += st.exposed_seconds;
      auto_forward_s_ += forward_seconds;
    }
    if (step_ == auto_window_.end()) revise_auto_choice();
  }

  // The check, once, on every rank at the same step boundary: the window's mean step against
  // the prediction (perf::revise_auto), and a switch when the corrected model says so.
  void revise_auto_choice() {
    Stopwatch cost;  // the check's own time, a cost of auto like the start-up measuring
    double sums[3] = {auto_seconds_, auto_exposed_s_, auto_forward_s_};
    allreduce_sum(comm_, sums);
    // Rank 0's sums on every rank, bit for bit: the ranks must reach the same decision.
    if (comm_.size() > 1) comm_.broadcast(sums, sizeof(sums), 0);
    perf::AutoObservation o;
    o.first_step = auto_window_.first;
    o.steps = auto_window_.steps;
    const double per = double(comm_.size()) * double(auto_window_.steps);
    o.step_s = sums[0] / per;
    o.exposed_comm_s = sums[1] / per;
    // A device backend queues the forward and returns: a stopwatch around it times launches.
    if (backend_->device() == Device::kCpu) o.forward_s = sums[2] / per;
    // The test hook auto.test_window_comm_s: a measured step far from the prediction.
    const double added = run_.auto_options.test_window_comm_s;
    o.step_s += added;
    o.exposed_comm_s += added;
    auto_window_ = {};  // once
    perf::AutoMeasurements measured = auto_.measured;
    if (fidelity_) {
      measured.fidelity = gather_fidelity(comm_, *fidelity_);
      measured.fidelity_pending.clear();
      if (lead_)
        log_info("auto: the fidelity replay of {} steps took {:.2f} s", fidelity_->steps(),
                 fidelity_total_s_);
      fidelity_.reset();
      fidelity_grad_ = {};
    }
    const perf::AutoRevision v = perf::revise_auto(
        auto_.request, measured, perf::builtin_accuracy_table(), auto_.decision.chosen, o);
    if (lead_) log_info("{}", perf::describe_revision(v));
    if (v.switched()) switch_strategy(v);
    if (lead_) {
      const double seconds = cost.seconds();
      log_info("auto: the check took {:.1f} ms", 1e3 * seconds);
      nlohmann::json j = perf::revision_json(v);
      j["seconds"] = seconds;
      note_auto_revision(j);
    }
  }

  // Rank 0: summary.json's "auto.revision".
  void note_auto_revision(const nlohmann::json& revision) {
    if (result_.auto_choice.empty()) return;
    nlohmann::json j = nlohmann::json::parse(result_.auto_choice);
    j["revision"] = revision;
    result_.auto_choice = j.dump();
  }

  // Replaces the strategy at this step boundary with the revised choice, as a run started
  // on it would build it, from the current parameters and optimizer state. Nothing is pending
  // then: the step's exchange has completed (end_step), block momentum folds in its partial
  // block (finish, as at the run's end), and the sharded optimizer's state is put together on
  // every rank before the new strategy takes the share it owns. What starts afresh is state
  // only the old strategy had: codec residuals (error feedback) and block momentum, as at
  // step 0 of a run on the new choice.
  void switch_strategy(const perf::AutoRevision& v) {
    const plan::SyncChoice revised = revision_choice(auto_, v, step_);
    run_ = plan::with_sync_choice(run_, revised, fmt::format("auto (revised at step {})", step_));
    strategy_->finish();
    pending_stats_.add(strategy_->take_stats());
    gather_optimizer_state(comm_, *backend_, *optimizer_, strategy_->optimizer_owned());
    strategy_.reset();
    strategy_ = plan::make_strategy(run_, comm_, *model_, *optimizer_, total_steps_);
    strategy_->start();
    guard_->replace_strategy(*strategy_, run_.text, step_);
    if (lead_) {
      log_info("auto: switched: {}\nsync: {}", revised.revised, strategy_->describe());
      writer_.write_config(run_.text);
    }
  }

  // Rank 0: the run's figures and its final parameters for the caller.
  void finish() {
    result_.world = comm_.size();
    result_.interrupted = guard_->interrupted();
    result_.checkpoint = guard_->last_checkpoint();
    result_.steps = step_;
    result_.samples_per_s = total_seconds_ > 0 ? double(total_samples_) / total_seconds_ : 0;
    result_.test_acc = test_.acc;
    result_.test_loss = test_.loss;
    result_.val_samples = validation_ ? validation_->count : 0;
    if (!result_.epochs.empty()) {
      result_.val_acc = result_.epochs.back().val_acc;
      result_.val_loss = result_.epochs.back().val_loss;
    }
    if (best_.epoch > 0) {
      result_.best_epoch = best_.epoch;
      result_.best_val_acc = best_.val_acc;
      result_.best_val_loss = best_.val_loss;
      result_.best_params = std::move(best_.params);
      result_.best_state = std::move(best_.state);
    }
    result_.train_loss = result_.epochs.empty() ? 0 : result_.epochs.back().train_loss;
    result_.epochs_done = result_.epochs.empty() ? (step_ + steps_per_epoch_ - 1) / steps_per_epoch_
                                                 : result_.epochs.back().epoch;
    result_.final_params.resize(size_t(model_->num_params()));
    backend_->copy_to_host(result_.final_params.data(), model_->params(),
                           result_.final_params.size() * sizeof(float));
    result_.final_state.resize(size_t(model_->num_state()));
    if (!result_.final_state.empty())
      backend_->copy_to_host(result_.final_state.data(), model_->state(),
                             result_.final_state.size() * sizeof(float));
  }

  void report_epoch(const EpochMetrics& m) {
    progress_->end_epoch();
    const double step_ms = m.steps ? 1e3 * m.seconds / double(m.steps) : 0;
    log_info(
        "epoch {}/{}: loss {:.4f}  train acc {:.4f}  {}  {:.0f} samples/s  "
        "step {:.2f} ms (compute {:.2f}, exposed comm {:.2f}, loader wait {:.2f} = {:.1f}% "
        "stall)",
        m.epoch, epochs_to_run_, m.train_loss, m.train_acc,
        m.val_acc >= 0 ? fmt::format("val loss {:.4f}  val acc {:.4f}{}", m.val_loss, m.val_acc,
                                     m.best_epoch == 0 ? ""
                                     : m.best_epoch == m.epoch
                                         ? " (best)"
                                         : fmt::format(" (best: epoch {})", m.best_epoch))
                       : std::string("val -"),
        m.samples_per_s, step_ms, m.steps ? 1e3 * m.compute_s / double(m.steps) : 0,
        m.steps ? 1e3 * m.exposed_comm_s / double(m.steps) : 0,
        m.steps ? 1e3 * m.loader_wait_s / double(m.steps) : 0,
        m.seconds > 0 ? 100.0 * m.loader_wait_s / m.seconds : 0);
    nlohmann::json j = {{"kind", "epoch"},
                        {"epoch", m.epoch},
                        {"step", step_},
                        {"steps", m.steps},
                        {"train_loss", m.train_loss},
                        {"train_acc", m.train_acc},
                        {"val_loss", m.val_acc >= 0 ? nlohmann::json(m.val_loss) : nullptr},
                        {"val_acc", m.val_acc >= 0 ? nlohmann::json(m.val_acc) : nullptr},
                        {"seconds", m.seconds},
                        {"samples_per_s", m.samples_per_s},
                        {"compute_s", m.compute_s},
                        {"comm_s", m.comm_s},
                        {"exposed_comm_s", m.exposed_comm_s},
                        {"loader_wait_s", m.loader_wait_s},
                        {"stall_share", m.seconds > 0 ? m.loader_wait_s / m.seconds : 0},
                        {"bytes_sent", m.bytes_sent},
                        {"exchanges", m.exchanges},
                        {"exchanges_per_sample",
                         m.steps > 0 ? double(m.exchanges) / double(m.steps * global_batch_) : 0},
                        {"workers", comm_.size()}};
    if (s_.keep_best) j["best_epoch"] = m.best_epoch > 0 ? nlohmann::json(m.best_epoch) : nullptr;
    guard_->add_loss_scale_figures(j);
    if (tokens_.enabled) {
      add_token_figures(j, m.train_loss, m.val_acc >= 0 ? m.val_loss : -1,
                        m.samples_per_s * double(tokens_.context));
      log_info("epoch {}/{}: {} tokens/s, train {:.4f} bits/{}{}", m.epoch, epochs_to_run_,
               fmt::format("{:.0f}", m.samples_per_s * double(tokens_.context)),
               m.train_loss / kLn2, tokens_.unit(),
               m.val_acc >= 0 ? fmt::format(", val {:.4f} nats/token = {:.4f} bits/{}", m.val_loss,
                                            m.val_loss / kLn2, tokens_.unit())
                              : std::string());
    }
    emit_metrics(j);
    result_.epochs.push_back(m);
  }

  // Rank 0: a line of metrics.jsonl, and of TrainResult::metrics_lines when they are kept.
  void emit_metrics(const nlohmann::json& j) {
    writer_.append_metrics(j);
    if (!options_.keep_results) return;
    nlohmann::json versioned = j;
    versioned[kFormatVersionKey] = kMetricsFormatVersion;
    result_.metrics_lines.push_back(versioned.dump());
  }

  // A token run's lines of metrics.jsonl: the losses (nats per token) in bits per byte,
  // character or token as well, named by the unit. A figure < 0 is not evaluated.
  void add_token_figures(nlohmann::json& j, double train_loss, double val_loss,
                         double tokens_per_s) const {
    j["token_unit"] = tokens_.unit();
    j["tokens_per_s"] = tokens_per_s;
    j[tokens_.bits_key("train")] = train_loss >= 0 ? nlohmann::json(train_loss / kLn2) : nullptr;
    if (j.contains("val_loss"))
      j[tokens_.bits_key("val")] = val_loss >= 0 ? nlohmann::json(val_loss / kLn2) : nullptr;
  }

  plan::RunPlan run_;  // this rank's copy: codec/sync = "auto" revises it with its choice
  const Settings s_;
  comm::Communicator& comm_;
  std::shared_ptr<const data::SampleSource> train_;
  const data::Dataset* validation_;  // nullptr: no validation split
  uint64_t validation_split_;        // TrainPosition::validation_split
  const data::Dataset& test_set_;
  const data::PipelineConfig pipeline_;
  TrainResult& result_;
  RunWriter& writer_;
  const TrainOptions& options_;
  const TokenRun& tokens_;

  // Built by set_up() and start_or_resume() in this order, destroyed in reverse.
  Backend* backend_ = nullptr;
  std::unique_ptr<nn::Model> model_;
  std::optional<CommReducer> reducer_;  // BatchNorm with sync = true
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<sync::Strategy> strategy_;
  std::optional<data::Loader> loader_;
  DeviceBuffer<float> accumulated_;  // the step's gradient so far (train.accumulate > 1)
  int64_t global_batch_ = 0, steps_per_epoch_ = 0, total_steps_ = 0;
  int64_t epochs_to_run_ = 0;  // the epochs max_steps leaves (all of them without it)
  int64_t log_every_ = 0;      // a step line every this many steps (0 = none)
  Interval interval_;
  optim::LrSchedule schedule_;
  bool lead_ = false;
  std::optional<Progress> progress_;
  std::optional<StepGuard> guard_;

  // codec/sync = "auto": the choice, its check window and what the window measured.
  AutoResolution auto_;
  AutoCheckWindow auto_window_;
  double auto_seconds_ = 0, auto_exposed_s_ = 0, auto_forward_s_ = 0;
  double forward_s_ = 0;  // the step's forward and loss, for auto's check
  // The lossy codecs' fidelity replay until the check (make_fidelity_probe), and the step's
  // gradient on the host for it.
  std::unique_ptr<measure::FidelityProbe> fidelity_;
  std::vector<float> fidelity_grad_;
  // The replay's time in this step (taken out of the step's), and in all.
  double fidelity_step_s_ = 0, fidelity_total_s_ = 0;
  sync::SyncStats pending_stats_;  // taken from the strategy before close_epoch

  int64_t step_ = 0;          // global steps done
  double total_seconds_ = 0;  // all epochs' training loops
  int64_t total_samples_ = 0;
  Figures test_;      // the final weights on the test set (eval = true)
  BestWeights best_;  // rank 0, train.keep_best
};

}  // namespace

void train_worker(const plan::RunPlan& run, comm::Communicator& c,
                  std::shared_ptr<const data::SampleSource> train, const data::Dataset* validation,
                  uint64_t validation_split, const data::Dataset& test, TrainResult& result,
                  RunWriter& writer, const TrainOptions& options, const TokenRun& tokens) {
  Worker(run, c, std::move(train), validation, validation_split, test, result, writer, options,
         tokens)
      .run();
}

}  // namespace loom::train
