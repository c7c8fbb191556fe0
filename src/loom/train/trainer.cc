#include "loom/train/trainer.h"

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
#include "loom/data/dataset.h"
#include "loom/data/loader.h"
#include "loom/data/pipeline_config.h"
#include "loom/data/set_checks.h"
#include "loom/data/shard_source.h"
#include "loom/data/token_shard.h"
#include "loom/data/token_windows.h"
#include "loom/data/validation_split.h"
#include "loom/nn/graph_builder.h"
#include "loom/nn/model_file.h"
#include "loom/nn/model_zoo.h"
#include "loom/optim/lr_schedule.h"
#include "loom/optim/optimizer.h"
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
#include "loom/train/run_identity.h"
#include "loom/train/run_writer.h"
#include "loom/train/train_config.h"
#include "loom/train/trained_model.h"

namespace loom::train {
namespace {

struct Settings {
  int64_t threads, batch, epochs, max_steps, prefetch;
  int64_t accumulate;  // micro-batches of `batch` per step, one synchronisation per step
  int64_t log_every;   // a "step" line in metrics.jsonl every this many steps (0 = none)
  uint64_t seed;
  bool eval, shuffle;
  bool keep_best;  // train.keep_best
  std::string data_dir;
  ProgressMode progress;
  HistogramOptions histograms;  // train.histograms
  Precision precision;  // of the layers' matrix products (docs/precision.md)
};

// `precision`: fp32, bf16 where the CPU backend can run it, fp16 with backend = "cuda" (whose
// backend answers for itself when the workers start).
Precision read_precision(const Config& cfg) {
  const std::string name = cfg.get_choice("precision", "fp32", {"fp32", "bf16", "fp16"});
  const Precision p = name == "bf16"   ? Precision::kBf16
                      : name == "fp16" ? Precision::kFp16
                                       : Precision::kFp32;
  const bool cuda = cfg.get_string("backend", "cpu") == "cuda";
  std::string why;
  if (p == Precision::kFp16 && !cuda)
    why = "fp16 runs with backend = \"cuda\" only";
  else if (!cuda)
    why = cpu_backend().matmul_precision_unsupported(p);
  if (!why.empty())
    throw ConfigError(
        fmt::format("{}: key 'precision': \"{}\": {}", cfg.where("precision"), name, why));
  return p;
}

Settings read_settings(const Config& cfg) {
  Settings s;
  s.threads = cfg.get_int("threads", 1, 1, 256);
  s.batch = cfg.get_int("batch", 128, 1, 1 << 20);
  s.accumulate = cfg.get_int("train.accumulate", 1, 1, 1 << 20);
  s.epochs = cfg.get_int("epochs", 3, 1, 100000);
  s.max_steps = cfg.get_int("max_steps", 0, 0, int64_t(1) << 40);
  s.prefetch = cfg.get_int("data.prefetch", 2, 0, 1024);
  s.log_every = cfg.get_int("train.log_every", 50, 0, int64_t(1) << 40);
  s.seed = uint64_t(cfg.get_int("seed", 0, 0, INT64_MAX));
  s.eval = cfg.get_bool("eval", true);
  s.shuffle = cfg.get_bool("data.shuffle", true);
  s.keep_best = cfg.get_bool("train.keep_best", false);
  s.data_dir = cfg.get_string("data.dir", data::kDefaultFashionMnistDir);
  s.progress = parse_progress_mode(cfg.get_string("progress", "auto"));
  s.histograms = read_histogram_options(cfg);
  s.precision = read_precision(cfg);
  return s;
}

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

// A run on a token stream (data.train_shards is a token shard, cut into windows of
// data.context tokens): the vocabulary names the unit of the bits in every output.
struct TokenRun {
  bool enabled = false;
  int64_t context = 0;
  std::shared_ptr<const data::TokenShard> shard;  // the training stream
  data::Vocabulary vocab;
  std::string unit() const { return data::vocab_unit(vocab.kind); }
  // "val_bits_per_byte", "test_bits_per_character", ...
  std::string bits_key(const char* prefix) const {
    return fmt::format("{}_bits_per_{}", prefix, unit());
  }
};
constexpr double kLn2 = 0.6931471805599453;  // nats per bit

// The windows of a token shard for evaluation (offset 0), in memory. InputError naming the file
// when its vocabulary is not the training stream's.
data::Dataset token_eval_set(const TokenRun& t, const std::string& path, const char* role) {
  auto shard = std::make_shared<const data::TokenShard>(path);
  if (shard->vocabulary().fingerprint() != t.vocab.fingerprint())
    throw InputError(fmt::format(
        "{}: the {} stream's vocabulary, {}, is not the training stream's, {} ({}): convert "
        "both with the same --vocab from text with the same characters",
        path, role, shard->vocabulary().describe(), t.vocab.describe(), t.shard->path()));
  data::WindowOptions wo;
  wo.context = t.context;
  return data::materialise(data::TokenWindowSource(shard, wo), path);
}

// The model's outputs per sample: one per class, or one per float target (regression).
int output_size(const data::SampleSource& s) {
  return s.target_numel() > 0 ? int(s.target_numel()) : s.num_classes();
}

// loss.type against what the data holds: cross-entropy needs class labels, mse float targets.
void check_loss_fits_data(const Config& cfg, nn::LossKind kind, const data::SampleSource& s,
                          const std::string& data_name) {
  const bool targets = s.target_numel() > 0;
  if (kind == nn::LossKind::kMse && !targets)
    throw ConfigError(fmt::format(
        "{}: loss.type = \"mse\" needs float targets; {} holds class labels (convert regression "
        "data with `loom data convert X.npy OUT --targets Y.npy`)",
        cfg.where("loss.type"), data_name));
  if (kind == nn::LossKind::kCrossEntropy && targets)
    throw ConfigError(fmt::format(
        "{}: {} holds {} float targets per sample (regression): set loss.type = \"mse\"",
        cfg.where("loss.type"), data_name, s.target_numel()));
}

// One rank's training run: set up, start (or resume), the epochs, and rank 0's result.
class Worker {
 public:
  Worker(const Config& cfg, const Settings& s, comm::Communicator& c,
         std::shared_ptr<const data::SampleSource> train, const data::Dataset* validation,
         uint64_t validation_split, const data::Dataset& test, const data::PipelineConfig& pipeline,
         TrainResult& result, RunWriter& writer, const TrainOptions& options,
         const TokenRun& tokens)
      : cfg_(cfg),
        s_(s),
        comm_(c),
        train_(std::move(train)),
        validation_(validation),
        validation_split_(validation_split),
        test_set_(test),
        pipeline_(pipeline),
        result_(result),
        writer_(writer),
        options_(options),
        tokens_(tokens) {}

  void run() {
    check_same_run(comm_, cfg_);
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
      throw ConfigError(fmt::format("{}: key 'precision': \"{}\": {}", cfg_.where("precision"),
                                    precision_name(s_.precision), why));
    backend_->set_matmul_precision(s_.precision);
    model_ = sync::build_model(cfg_, comm_, *backend_, train_->sample_shape(),
                               output_size(*train_));  // parallel.* (model_parallel_model.h)
    nn::apply_loss_options(cfg_, *model_);
    model_->init_params(s_.seed);
    reducer_.emplace(comm_, *backend_);
    model_->set_reducer(&*reducer_);
    optimizer_ = optim::make_optimizer(cfg_, *backend_, model_->num_params());
    set_up_loader();
    // codec/sync/sync.bucket_kib = "auto": measure, decide, and set them (auto_config.h).
    auto_ = resolve_auto(cfg_, comm_, *backend_, train_->sample_shape(), output_size(*train_),
                         s_.batch, int(s_.threads), total_steps_);
    if (auto_.active && comm_.rank() == 0) {
      log_info("{}", auto_.log);
      result_.auto_choice = auto_.json;
    }
    strategy_ = sync::make_strategy(cfg_, comm_, *model_, *optimizer_, total_steps_);
    schedule_ = optim::make_lr_schedule(cfg_, steps_per_epoch_, total_steps_);
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
    progress_.emplace(resolve_progress_mode(s_.progress, stderr_sink(comm_.rank())),
                      epochs_to_run_, steps_per_epoch_, global_batch_, total_steps_);
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
    log_every_ = cfg_.get_string("output.dir", "runs/latest").empty() && !options_.keep_results
                     ? 0
                     : s_.log_every;
  }

  // Checkpoints, resume, the NaN policy and stop signals (checkpoint_guard.h); then the
  // strategy starts from step 0 or from where the checkpoint left off.
  void start_or_resume() {
    BestWeights* best = s_.keep_best && lead_ ? &best_ : nullptr;
    guard_.emplace(cfg_, comm_, WorkerParts{*backend_, *model_, *optimizer_, *strategy_, best},
                   steps_per_epoch_, s_.seed, validation_split_,
                   tokens_.enabled ? tokens_.vocab.fingerprint() : 0, global_batch_);
    step_ = guard_->resume();  // 0, or where the checkpoint left off
    strategy_->start();
    guard_->restore_strategy();
    auto_window_ = auto_check_window(cfg_, auto_, step_, total_steps_);
    if (lead_ && auto_.active && !auto_window_.active()) {
      log_info("auto: no check of the prediction: {}", auto_window_.skipped);
      note_auto_revision({{"outcome", "not checked"}, {"reason", auto_window_.skipped}});
    }
  }

  // Rank 0, once every check passed: the output directory, config.toml and metrics.jsonl. A
  // resumed run keeps the lines of what its checkpoint had trained; the rest is trained again.
  void open_output() {
    if (!writer_.enabled()) return;
    if (options_.force && !guard_->resumed()) clear_run_results(writer_.dir());
    writer_.open();
    writer_.write_config(cfg_.canonical_text());
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
      const double step_seconds = batch.wait_seconds + step_watch.seconds();
      ++step_;
      ++m.steps;
      if (auto_window_.active()) check_auto(step_seconds);
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
      model_->forward(in.x, n, info);
      // The mean over the batch's labels: its samples, or every position of its windows,
      // times the loss scale (1 without loss_scale.*; the guard unscales each range).
      const nn::LossResult r =
          model_->loss(in.y, t, strategy_->grad_scale(batch.size * per) * guard_->loss_scale());
      guard_->check_loss(r.loss_sum, step_);
      total.loss_sum += r.loss_sum;
      total.correct += r.correct;
      if (k == 1) {
        model_->backward([&](const nn::ParamRange& range) {
          guard_->check_grads(range);
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
            strategy_->on_gradients_ready(range);
          }
        });
      }
    }
    compute_s += compute.seconds();
    strategy_->end_step();
    average_model_state();
    if (guard_->end_step(step_ + 1) == StepGuard::Outcome::kSkipped) return std::nullopt;
    return total;
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
  // add their time (loader wait included) and their exposed communication; the strategy's
  // figures taken here count in the epoch's too.
  void check_auto(double step_seconds) {
    const sync::SyncStats st = strategy_->take_stats();
    pending_stats_.add(st);
    if (auto_window_.holds(step_ - 1)) {
      auto_seconds_ += step_seconds;
      auto_exposed_s_ += st.exposed_seconds;
    }
    if (step_ == auto_window_.end()) revise_auto_choice();
  }

  // The check, once, on every rank at the same step boundary: the window's mean step against
  // the prediction (perf::revise_auto), and a switch when the corrected model says so.
  void revise_auto_choice() {
    Stopwatch cost;  // the check's own time, a cost of auto like the start-up measuring
    double sums[2] = {auto_seconds_, auto_exposed_s_};
    allreduce_sum(comm_, sums);
    // Rank 0's sums on every rank, bit for bit: the ranks must reach the same decision.
    if (comm_.size() > 1) comm_.broadcast(sums, sizeof(sums), 0);
    perf::AutoObservation o;
    o.first_step = auto_window_.first;
    o.steps = auto_window_.steps;
    const double per = double(comm_.size()) * double(auto_window_.steps);
    o.step_s = sums[0] / per;
    o.exposed_comm_s = sums[1] / per;
    const AutoTestHooks hooks = auto_test_hooks(cfg_);
    o.step_s += hooks.window_comm_s;
    o.exposed_comm_s += hooks.window_comm_s;
    auto_window_ = {};  // once
    const perf::AutoRevision v = perf::revise_auto(
        auto_.request, auto_.measured, perf::builtin_accuracy_table(), auto_.decision.chosen, o);
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
    const std::string what = apply_revision(cfg_, auto_, v, step_);
    strategy_->finish();
    pending_stats_.add(strategy_->take_stats());
    gather_optimizer_state(comm_, *backend_, *optimizer_, strategy_->optimizer_owned());
    strategy_.reset();
    strategy_ = sync::make_strategy(cfg_, comm_, *model_, *optimizer_, total_steps_);
    strategy_->start();
    guard_->replace_strategy(*strategy_, cfg_.canonical_text(), step_);
    if (lead_) {
      log_info("auto: switched: {}\nsync: {}", what, strategy_->describe());
      writer_.write_config(cfg_.canonical_text());
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

  Config cfg_;  // this rank's copy: codec/sync = "auto" writes its choice into it
  const Settings& s_;
  comm::Communicator& comm_;
  std::shared_ptr<const data::SampleSource> train_;
  const data::Dataset* validation_;  // nullptr: no validation split
  uint64_t validation_split_;        // TrainPosition::validation_split
  const data::Dataset& test_set_;
  const data::PipelineConfig& pipeline_;
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
  double auto_seconds_ = 0, auto_exposed_s_ = 0;
  sync::SyncStats pending_stats_;  // taken from the strategy before close_epoch

  int64_t step_ = 0;          // global steps done
  double total_seconds_ = 0;  // all epochs' training loops
  int64_t total_samples_ = 0;
  Figures test_;      // the final weights on the test set (eval = true)
  BestWeights best_;  // rank 0, train.keep_best
};

}  // namespace

namespace {

// output.dir with "{n}" resolved, after checking that the run may write there (output_dir.h).
// Every rank decides the same: nothing is created before every rank has passed this.
std::string choose_output_dir(const Config& cfg, const TrainOptions& options) {
  const std::string given = cfg.get_string("output.dir", "runs/latest");
  const std::string resume = cfg.get_string("train.resume", "");
  if (given.empty()) return given;
  if (!resume.empty()) {
    const std::string run = resume_run_dir(resume);
    if (!same_dir(run, given))
      throw ConfigError(fmt::format(
          "{}: output.dir \"{}\" is not the run being resumed ({}): a resumed run writes into "
          "the run it resumes; to continue elsewhere, copy the run there and resume the copy",
          cfg.where("output.dir"), given, run));
    return given;
  }
  const std::string dir = numbered_output_dir(given);
  if (!options.force) refuse_existing_run(dir, cfg.where("output.dir"));
  return dir;
}

// Rank 0, at the end: <dir>/model.safetensors with the final parameters and state, written
// atomically (a reader sees the previous file or the whole new one). Returns its path, or ""
// when rank 0's parameters are not the whole model (model-parallel layers hold slices).
std::string write_model_file(const Config& cfg, const TrainResult& r, const nn::Model& layout,
                             const nn::GraphSpec& graph,
                             const std::optional<data::Normalisation>& input_norm,
                             const std::string& dir) {
  if ((sync::parallel_options(cfg).mode != "data" && r.world > 1) ||
      int64_t(r.final_params.size()) != layout.num_params() ||
      int64_t(r.final_state.size()) != layout.num_state()) {
    log_warn(
        "{} not written: with parallel = \"{}\" over {} workers rank 0 holds only its slices of "
        "the dense layers, not the whole model",
        nn::kModelFileName, sync::parallel_options(cfg).mode, r.world);
    return "";
  }
  const std::string path = (std::filesystem::path(dir) / nn::kModelFileName).string();
  write_file_atomically(
      path, nn::model_file_bytes(layout, graph, r.final_params, r.final_state,
                                 trained_model_metadata(r.steps, input_norm, layout.loss_kind())));
  // train.keep_best: the best epoch's weights beside the final ones, in the same format.
  if (r.best_epoch > 0 && int64_t(r.best_params.size()) == layout.num_params() &&
      int64_t(r.best_state.size()) == layout.num_state()) {
    std::map<std::string, std::string> meta =
        trained_model_metadata(-1, input_norm, layout.loss_kind());
    meta["epoch"] = std::to_string(r.best_epoch);
    write_file_atomically((std::filesystem::path(dir) / nn::kBestModelFileName).string(),
                          nn::model_file_bytes(layout, graph, r.best_params, r.best_state, meta));
  }
  return path;
}

// The validation split (data.validation), in memory for evaluation after each epoch.
struct HeldOut {
  std::optional<data::Dataset> set;  // none: no validation split
  uint64_t fingerprint = 0;          // TrainPosition::validation_split
  std::string describe;              // for the log: "10% held out" or the file
};

// data.train_shards a token stream: a token run, with data.context. ConfigError for
// data.context without a token stream or a token stream without it.
TokenRun open_token_run(const Config& cfg, const data::PipelineConfig& pipeline) {
  TokenRun t;
  t.enabled = !pipeline.train_shards.empty() && data::is_token_shard(pipeline.train_shards);
  if (!t.enabled) {
    if (cfg.has("data.context"))
      throw ConfigError(fmt::format(
          "{}: data.context cuts a token stream into windows; data.train_shards is {} (convert "
          "text with `loom data convert --text FILE DST`)",
          cfg.where("data.context"),
          pipeline.train_shards.empty()
              ? std::string("not set")
              : fmt::format("\"{}\", not a token stream", pipeline.train_shards)));
    return t;
  }
  if (!cfg.has("data.context"))
    throw ConfigError(fmt::format(
        "{}: data.train_shards \"{}\" is a token stream: set data.context, the tokens per "
        "window",
        cfg.where("data.train_shards"), pipeline.train_shards));
  t.context = cfg.get_int("data.context", 0, 1, int64_t(1) << 20);
  t.shard = std::make_shared<const data::TokenShard>(pipeline.train_shards);
  t.vocab = t.shard->vocabulary();
  return t;
}

// The model predicts one token per position of a window: its output must be [context, vocab].
void check_model_fits_windows(const Config& cfg, const nn::Model& m, const TokenRun& t) {
  if (m.output_positions() != t.context)
    throw ConfigError(fmt::format(
        "{}: the model's output has {} position(s) of {} classes; windows of data.context = {} "
        "need one prediction per position ([{}, {}])",
        cfg.where("data.context"), m.output_positions(), m.num_classes(), t.context, t.context,
        t.vocab.size));
}

// summary.json of a token run: the vocabulary, the rate in tokens/s, and every loss (nats per
// token) as bits per byte, character or token, named by the unit.
void add_token_summary(nlohmann::json& j, const TrainResult& r, const TokenRun& t) {
  const auto bits = [](double v) { return v >= 0 ? nlohmann::json(v / kLn2) : nullptr; };
  j["token_unit"] = t.unit();
  j["vocab"] = {{"kind", data::vocab_kind_name(t.vocab.kind)},
                {"size", t.vocab.size},
                {"fingerprint", fmt::format("{:016x}", t.vocab.fingerprint())}};
  j["context"] = t.context;
  j["tokens_per_s"] = r.samples_per_s * double(t.context);
  j[t.bits_key("train")] = bits(r.train_loss);
  j[t.bits_key("val")] = bits(r.val_loss);
  j[t.bits_key("test")] = bits(r.test_loss);
}

// A token run's data.validation fraction: the last round(fraction x tokens) tokens of the stream
// are the validation windows (offset 0), the tokens before them the training windows -- a split
// by position, so no validation token is ever trained on, not even as a label.
HeldOut hold_out_token_tail(const Config& cfg, const Settings& s, double fraction, int workers,
                            std::shared_ptr<const data::SampleSource>& train,
                            const TokenRun& tokens) {
  const std::string where = cfg.where("data.validation");
  const int64_t n = tokens.shard->size();
  const int64_t held = std::min<int64_t>(n, std::llround(fraction * double(n)));
  const int64_t cut = n - held;
  data::WindowOptions val;
  val.context = tokens.context;
  val.begin = cut;
  data::WindowOptions tr = val;
  tr.begin = 0;
  tr.end = cut;
  tr.random_offset = s.shuffle;
  tr.seed = s.seed;
  const int64_t val_windows = data::window_count(held, tokens.context, false);
  const int64_t train_windows = data::window_count(cut, tokens.context, tr.random_offset);
  const int64_t per_worker = s.batch * s.accumulate;
  if (val_windows < 1)
    throw ConfigError(fmt::format(
        "{}: data.validation = {} holds out the last {} of {} tokens, fewer than one window of "
        "data.context = {} and the token after it: raise it",
        where, fraction, held, n, tokens.context));
  if (train_windows < per_worker * workers)
    throw ConfigError(fmt::format(
        "{}: data.validation = {} leaves {} tokens to train on, {} windows of data.context = {}, "
        "fewer than one global batch ({} workers x {}): lower it",
        where, fraction, cut, train_windows, tokens.context, workers, per_worker));
  HeldOut h;
  h.set = data::materialise(data::TokenWindowSource(tokens.shard, val),
                            fmt::format("tokens [{}, {})", cut, n));
  const int64_t range[2] = {cut, n};
  h.fingerprint = fnv1a64(range, sizeof range);
  if (h.fingerprint == 0) h.fingerprint = 1;
  h.describe = fmt::format("the last {:g}% of the tokens, [{}, {}), as {} windows", 100 * fraction,
                           cut, n, val_windows);
  train = std::make_shared<data::TokenWindowSource>(tokens.shard, tr);
  return h;
}

// data.validation: a fraction of the training source held out (`train` becomes the rest), or a
// shard file. ConfigError/InputError naming the key or the file when the split leaves too few
// samples to train on or to evaluate, or the file does not fit the training data. Before any
// worker starts, so a bad split never touches output.dir.
HeldOut hold_out_validation(const Config& cfg, const Settings& s,
                            const data::PipelineConfig& pipeline, int workers,
                            std::shared_ptr<const data::SampleSource>& train,
                            const TokenRun& tokens) {
  const data::ValidationChoice choice = data::read_validation_choice(cfg);
  HeldOut h;
  const std::string where = cfg.where("data.validation");
  if (s.keep_best && !choice.enabled())
    throw ConfigError(
        fmt::format("{}: train.keep_best keeps the weights of the best validation figure: set "
                    "data.validation (a fraction of the training data, or a shard file) too",
                    cfg.where("train.keep_best")));
  if (s.keep_best && !s.eval)
    throw ConfigError(
        fmt::format("{}: train.keep_best needs the validation figures that eval = false turns off",
                    cfg.where("train.keep_best")));
  if (!choice.enabled()) return h;
  const int64_t per_worker = s.batch * s.accumulate;
  if (!choice.shards.empty()) {
    if (pipeline.train_shards.empty())
      throw ConfigError(fmt::format(
          "{}: data.validation = \"{}\" (a shard file) needs data.train_shards too: the "
          "validation set must be normalised like the training shards (or give a fraction)",
          where, choice.shards));
    if (tokens.enabled) {
      h.set = token_eval_set(tokens, choice.shards, "validation");
    } else {
      h.set = data::materialise(data::ShardSource(choice.shards), choice.shards);
      data::check_held_out_set(*train, pipeline.train_shards, *h.set, choice.shards, "validation");
    }
    h.describe = choice.shards;
    // A file is its own split: the training records stay as they are. Its contents tell a
    // resume whether it validates on the same set.
    h.fingerprint = fnv1a64(h.set->features.data(), h.set->features.size() * sizeof(float),
                            fnv1a64(h.set->labels.data(), h.set->labels.size() * sizeof(int32_t)));
    if (h.fingerprint == 0) h.fingerprint = 1;
  } else if (tokens.enabled) {
    return hold_out_token_tail(cfg, s, choice.fraction, workers, train, tokens);
  } else {
    const int64_t count = train->count();
    data::ValidationSplit split = data::split_for_validation(count, choice.fraction, s.seed);
    const int64_t held = int64_t(split.validation.size());
    if (held < per_worker * workers)
      throw ConfigError(fmt::format(
          "{}: data.validation = {} holds out {} of the {} training samples, fewer than one "
          "batch per worker ({} workers x {}): too few to give a validation figure; raise it",
          where, choice.fraction, held, count, workers, per_worker));
    if (int64_t(split.train.size()) < per_worker * workers)
      throw ConfigError(fmt::format(
          "{}: data.validation = {} holds out {} of the {} training samples and leaves {}, "
          "fewer than one global batch ({} workers x {}): nothing left to train on; lower it",
          where, choice.fraction, held, count, split.train.size(), workers, per_worker));
    h.fingerprint = fnv1a64(split.validation.data(), split.validation.size() * sizeof(int64_t));
    if (h.fingerprint == 0) h.fingerprint = 1;
    h.set = data::materialise(data::SubsetSource(train, split.validation),
                              fmt::format("validation split of {}", held));
    h.describe = fmt::format("{:g}% of the training data held out", 100 * choice.fraction);
    train = std::make_shared<data::SubsetSource>(train, std::move(split.train));
  }
  return h;
}

// A resume on another world size keeps the checkpoint's global batch (docs/checkpoint.md,
// "Another world size"): `batch`, per worker, becomes the global batch over this run's
// `trainers` and train.accumulate, or the run stops when it does not divide. A `batch` given for
// the resume that is neither the checkpoint's per-worker batch nor the one that keeps the
// global batch would change it: refused.
void keep_global_batch(Config& cfg, int trainers, bool lead) {
  const std::string resume = cfg.get_string("train.resume", "");
  if (resume.empty()) return;
  const std::string dir = find_latest_checkpoint(resume);
  const CheckpointShape ck = checkpoint_shape(dir);
  if (ck.world == trainers) return;  // the config's batch, checked against the steps per epoch
  if (ck.global_batch == 0)
    throw InputError(fmt::format(
        "{}/train.ckpt: records no global batch (an older loom) and its config does not read "
        "back; it resumes on {} workers only",
        dir, ck.world));
  const int64_t accumulate = cfg.get_int("train.accumulate", 1, 1, 1 << 20);
  const int64_t batch = cfg.get_int("batch", 128, 1, 1 << 20);
  const int64_t per_step = int64_t(trainers) * accumulate;
  if (ck.global_batch % per_step != 0)
    throw ConfigError(fmt::format(
        "{}: the checkpoint's global batch of {} ({} workers) does not divide over {} workers{}: "
        "a resume keeps the global batch; resume on a world size that divides it",
        dir, ck.global_batch, ck.world, trainers,
        accumulate > 1 ? fmt::format(" x train.accumulate {}", accumulate) : ""));
  const int64_t wanted = ck.global_batch / per_step;
  if (batch == wanted) return;
  const int64_t old_batch = ck.global_batch / (ck.world * ck.accumulate);
  if (batch != old_batch)
    throw ConfigError(fmt::format(
        "{}: batch {} over {} workers{} makes a global batch of {}; the checkpoint's is {}: a "
        "resume keeps it (batch {}, or leave batch as the checkpoint has it)",
        cfg.where("batch"), batch, trainers,
        accumulate > 1 ? fmt::format(" x train.accumulate {}", accumulate) : "", batch * per_step,
        ck.global_batch, wanted));
  cfg.set("batch", wanted,
          fmt::format("resume: the global batch {} of {} over {} workers", ck.global_batch, dir,
                      trainers));
  if (lead)
    log_info(
        "resume: {} worker{} instead of the checkpoint's {}: batch {} per worker (was {}), the "
        "global batch of {} kept",
        trainers, trainers == 1 ? "" : "s", ck.world, wanted, old_batch, ck.global_batch);
}

// With data given in memory (TrainOptions::train_data), the keys that name data files would be
// silently ignored: ConfigError naming the key instead.
void refuse_data_files(const Config& cfg) {
  for (const char* key : {"data.dir", "data.train_shards", "data.test_shards"})
    if (cfg.has(key))
      throw ConfigError(fmt::format(
          "{}: key '{}': the training data is given in memory, so no data file is read; leave "
          "the key out",
          cfg.where(key), key));
}

// TrainOptions::keep_results: rank 0's final weights as the model load_trained_model() makes
// of model.safetensors (the same graph, parameters, state and metadata); null when rank 0's
// parameters are not the whole model.
std::shared_ptr<TrainedModel> kept_model(const Config& cfg, const TrainResult& r,
                                         const nn::Model& layout, const nn::GraphSpec& graph,
                                         const std::optional<data::Normalisation>& input_norm) {
  if (int64_t(r.final_params.size()) != layout.num_params() ||
      int64_t(r.final_state.size()) != layout.num_state())
    return nullptr;
  auto m = std::make_shared<TrainedModel>();
  m->graph = graph;
  m->input_shape = layout.input_shape();
  m->num_classes = layout.num_classes();
  m->model = std::make_unique<nn::Model>(cpu_backend(), m->input_shape, m->num_classes,
                                         nn::build_nodes(graph, m->input_shape));
  m->loss = layout.loss_kind();
  m->model->set_loss_kind(m->loss);
  if (!r.final_params.empty())
    cpu_backend().copy_to_device(m->model->params(), r.final_params.data(),
                                 r.final_params.size() * sizeof(float));
  if (!r.final_state.empty())
    cpu_backend().copy_to_device(m->model->state(), r.final_state.data(),
                                 r.final_state.size() * sizeof(float));
  m->config = cfg;
  m->has_config = true;
  m->weights = r.model_file;
  m->steps = r.steps;
  m->input_normalisation = input_norm;
  return m;
}

}  // namespace

TrainResult run_training(const Config& given, const TrainOptions& options) {
  Stopwatch wall;
  given.check_known(train_config_keys());
  Config cfg = given;
  const std::string output_dir = choose_output_dir(cfg, options);
  if (output_dir != cfg.get_string("output.dir", "runs/latest"))
    cfg.set("output.dir", output_dir, cfg.where("output.dir"));
  set_log_level(parse_log_level(cfg.get_string("log.level", "info")));
  const std::string transport = comm::resolve_transport(cfg.get_string("transport", "auto"));
  // backend = "cuda" computes on device memory, which only the nccl transport carries; the
  // nccl transport's workers compute on their GPUs.
  const std::string backend = cfg.get_choice("backend", "cpu", {"cpu", "cuda"});
  if (backend == "cuda" && transport != "nccl")
    throw ConfigError(fmt::format(
        "{}: key 'backend': \"cuda\" trains on device memory, which only the nccl transport "
        "carries: set transport = \"nccl\" (transport is \"{}\")",
        cfg.where("backend"), transport));
  if (transport == "nccl") {
    if (backend != "cuda")
      throw ConfigError(
          fmt::format("{}: key 'transport': \"nccl\" carries device memory: set backend = "
                      "\"cuda\"",
                      cfg.where("transport")));
    sync::check_device_sync(cfg);
  }
  // Under MPI the launcher sets the world size; `workers`, when given, must agree with it.
  const bool launched = comm::transport_uses_launcher(transport);
  const int workers = int(cfg.get_int("workers", launched ? 0 : 1, launched ? 0 : 1, 4096));
  std::unique_ptr<comm::World> world =
      comm::create_world(transport, workers, comm::comm_options_from_config(cfg));
  keep_global_batch(
      cfg, sync::ps_on_ranks(cfg) ? sync::ps_training_ranks(cfg, world->local(0)) : world->size(),
      world->local(0).rank() == 0);
  const Settings s = read_settings(cfg);
  const bool lead = world->local(0).rank() == 0;

  const data::PipelineConfig pipeline = data::read_pipeline_config(cfg);
  Stopwatch load_watch;
  // Training samples come from the IDX files (in memory) or from a shard file (memory mapped,
  // for sets larger than memory); the test set is always materialised for evaluation.
  std::optional<data::Dataset> train_set;
  data::Dataset test_set;
  std::shared_ptr<const data::SampleSource> train_source;
  std::optional<data::Normalisation> input_norm;  // IDX pixels: recorded in model.safetensors
  const bool in_memory = options.train_data != nullptr;
  if (in_memory) refuse_data_files(cfg);  // before any of them is opened
  const TokenRun tokens = open_token_run(cfg, pipeline);
  // What the messages call the training and test data.
  const std::string train_name = in_memory                       ? options.data_name
                                 : pipeline.train_shards.empty() ? s.data_dir
                                                                 : pipeline.train_shards;
  const std::string test_name = in_memory                      ? options.data_name
                                : pipeline.test_shards.empty() ? s.data_dir
                                                               : pipeline.test_shards;
  if (in_memory) {
    train_source = options.train_data;
  } else if (tokens.enabled) {
    // The whole stream until data.validation takes its tail; the test stream is optional.
    data::WindowOptions wo;
    wo.context = tokens.context;
    wo.random_offset = s.shuffle;
    wo.seed = s.seed;
    train_source = std::make_shared<data::TokenWindowSource>(tokens.shard, wo);
    if (s.eval && !pipeline.test_shards.empty())
      test_set = token_eval_set(tokens, pipeline.test_shards, "test");
  } else if (!pipeline.train_shards.empty()) {
    if (s.eval && pipeline.test_shards.empty())
      throw ConfigError(
          fmt::format("{}: data.train_shards needs data.test_shards too (or eval = "
                      "false): the test set must be normalised like the shards",
                      cfg.where("data.train_shards")));
    train_source = std::make_shared<data::ShardSource>(pipeline.train_shards);
    if (!pipeline.test_shards.empty())
      test_set = data::materialise(data::ShardSource(pipeline.test_shards), "shards");
  } else {
    data::Normalisation norm;
    train_set = data::load_fashion_mnist(s.data_dir, true, std::nullopt, &norm);
    test_set = data::load_fashion_mnist(s.data_dir, false, norm, nullptr);
    input_norm = norm;
    train_source = std::make_shared<data::DatasetSource>(*train_set);
  }
  // In-memory data: the caller's test set, used in place (no test set: no test figures).
  const data::Dataset& test = options.test_data ? *options.test_data : test_set;
  const bool has_test =
      in_memory ? options.test_data != nullptr : !(tokens.enabled && pipeline.test_shards.empty());
  data::check_data_sets(*train_source, train_name, s.eval && has_test ? &test : nullptr, test_name,
                        pipeline.max_classes, cfg.where("data.max_classes"));
  const HeldOut held_out =
      hold_out_validation(cfg, s, pipeline, world->size(), train_source, tokens);
  train_source = data::maybe_throttle(train_source, pipeline);
  if (lead)
    log_info("data: {} training{} and {} test samples from {} ({:.2f} s){}", train_source->count(),
             held_out.set
                 ? fmt::format(", {} validation ({})", held_out.set->count, held_out.describe)
                 : "",
             test.count, train_name, load_watch.seconds(),
             pipeline.throttle_mbps > 0
                 ? fmt::format(", read throttled to {} MB/s", pipeline.throttle_mbps)
                 : "");

  // The model graph is built once here, on the data's shapes, so that a bad graph stops the
  // run before any worker starts or output.dir is touched. The graph and this host copy of the
  // model's layout name the tensors of model.safetensors at the end.
  const nn::GraphSpec graph =
      nn::model_graph(cfg, train_source->sample_shape(), output_size(*train_source));
  const std::unique_ptr<nn::Model> layout = std::make_unique<nn::Model>(
      cpu_backend(), train_source->sample_shape(), output_size(*train_source),
      nn::build_nodes(graph, train_source->sample_shape()));
  nn::apply_loss_options(cfg, *layout);  // checks loss.* here too
  if (tokens.enabled) check_model_fits_windows(cfg, *layout, tokens);
  check_loss_fits_data(cfg, layout->loss_kind(), *train_source, train_name);
  {
    const std::unique_ptr<nn::Model>& model = layout;
    if (options.print_model) {
      if (lead) fmt::print("{}\n", model->summary());
      return TrainResult{};
    }
    // A layer that sums statistics across workers in forward and backward (BatchNorm with
    // sync) does so on the compute thread, so no collective of the sync strategy may run on
    // another thread meanwhile: allreduce combines inline, in the order backward makes
    // gradients, which is the same on every rank.
    if (model->reduces_across_replicas() && world->size() > 1) {
      const std::string sync_kind = cfg.get_string("sync", "allreduce");
      if (sync_kind != "allreduce")
        throw ConfigError(
            fmt::format("{}: key 'sync': BatchNorm with sync = true runs with sync = "
                        "\"allreduce\" only, not \"{}\"",
                        cfg.where("sync"), sync_kind));
      if (cfg.get_string("parallel", "data") != "data")
        throw ConfigError("BatchNorm with sync = true runs with parallel = \"data\" only");
      if (!cfg.has("sync.overlap") || cfg.values().at("sync.overlap").value != ConfigScalar(false))
        cfg.set("sync.overlap", std::string("inline"), "BatchNorm sync = true");
    }
  }

  trace::Session timeline(trace::options_from_config(cfg), world->local(0).rank());
  RunWriter writer(lead ? output_dir : "", !cfg.get_string("train.resume", "").empty());
  TrainResult result;
  result.output_dir = output_dir;
  // The CPU backend is shared by the process: later runs (tests, sweeps, benches) start in fp32.
  struct Fp32Again {
    ~Fp32Again() { cpu_backend().set_matmul_precision(Precision::kFp32); }
  } fp32_again;
  world->run([&](comm::Communicator& c) {
    // sync = "ps", ps.placement = "ranks": the last ps.servers ranks run the server loop
    // instead of training; the others train over a communicator of their own.
    std::unique_ptr<comm::Communicator> trainers;
    if (sync::ps_on_ranks(cfg)) {
      check_same_run(c, cfg);  // the servers' too: they skip Worker::run
      if (sync::ps_server_rank(cfg, c)) return sync::run_ps_server(cfg, c);
      trainers = sync::ps_training_comm(cfg, c);
    }
    Worker(cfg, s, trainers ? *trainers : c, train_source, held_out.set ? &*held_out.set : nullptr,
           held_out.fingerprint, test, pipeline, result, writer, options, tokens)
        .run();
  });
  result.wall_s = wall.seconds();
  // A failed write of the weights (a full disk) still leaves the summary of what was trained,
  // then stops with the error: the run's figures are not lost with its weights.
  std::string model_error;
  if (writer.enabled()) {
    try {
      result.model_file = write_model_file(cfg, result, *layout, graph, input_norm, writer.dir());
    } catch (const InputError& e) {
      model_error = e.what();
    }
  }
  if (lead) {
    const auto figure = [](double v) { return v >= 0 ? nlohmann::json(v) : nullptr; };
    nlohmann::json summary = {
        {"test_acc", figure(result.test_acc)},
        {"test_loss", figure(result.test_loss)},
        {"val_acc", figure(result.val_acc)},
        {"val_loss", figure(result.val_loss)},
        {"val_samples", result.val_samples},
        {"train_loss", result.train_loss},
        {"samples_per_s", result.samples_per_s},
        {"workers", result.world},
        {"threads", s.threads},
        {"steps", result.steps},
        {"epochs", result.epochs_done},
        {"wall_s", result.wall_s},
        {"loom_version", fmt::format("{} ({})", LOOM_VERSION, LOOM_GIT_REV)},
        {"interrupted", result.interrupted},
        {"params_fnv1a64", fmt::format("{:016x}", fnv1a64(result.final_params.data(),
                                                          result.final_params.size() * 4))}};
    summary["model_file"] = result.model_file.empty()
                                ? nlohmann::json(nullptr)
                                : nlohmann::json(std::string(nn::kModelFileName));
    if (tokens.enabled) add_token_summary(summary, result, tokens);
    if (!result.auto_choice.empty())
      summary["auto"] = auto_summary(result.auto_choice, result.samples_per_s);
    if (s.keep_best) {
      summary["best_epoch"] = result.best_epoch > 0 ? nlohmann::json(result.best_epoch) : nullptr;
      summary["best_val_acc"] = result.best_epoch > 0 ? figure(result.best_val_acc) : nullptr;
      summary["best_val_loss"] = result.best_epoch > 0 ? figure(result.best_val_loss) : nullptr;
    }
    writer.write_summary(summary);
    if (options.keep_results) {
      summary[kFormatVersionKey] = kSummaryFormatVersion;
      result.summary_json = summary.dump();
      result.model = kept_model(cfg, result, *layout, graph, input_norm);
    }
  }
  timeline.write();
  if (!model_error.empty())
    throw InputError(fmt::format("the run trained {} steps, but its weights were not saved: {}",
                                 result.steps, model_error));
  return result;
}

}  // namespace loom::train
