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
#include "loom/data/formats/token_shard.h"
#include "loom/data/loader/loader.h"
#include "loom/data/loader/pipeline_config.h"
#include "loom/data/sources/dataset.h"
#include "loom/data/sources/set_checks.h"
#include "loom/data/sources/shard_source.h"
#include "loom/data/sources/token_windows.h"
#include "loom/data/sources/validation_split.h"
#include "loom/git_rev.h"
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
#include "loom/train/output_dir.h"
#include "loom/train/progress.h"
#include "loom/train/run_data.h"
#include "loom/train/run_identity.h"
#include "loom/train/run_settings.h"
#include "loom/train/run_writer.h"
#include "loom/train/token_run.h"
#include "loom/train/trained_model.h"
#include "loom/train/worker.h"

namespace loom::train {
namespace {

// output.dir with "{n}" resolved, after checking that the run may write there (output_dir.h).
// Every rank decides the same: nothing is created before every rank has passed this.
std::string choose_output_dir(const plan::RunPlan& run, const TrainOptions& options) {
  const std::string& given = run.output_dir;
  const std::string& resume = run.guard.resume;
  if (given.empty()) return given;
  if (!resume.empty()) {
    const std::string resumed = resume_run_dir(resume);
    if (!same_dir(resumed, given))
      throw ConfigError(fmt::format(
          "{}: output.dir \"{}\" is not the run being resumed ({}): a resumed run writes into "
          "the run it resumes; to continue elsewhere, copy the run there and resume the copy",
          run.output_dir_where, given, resumed));
    return given;
  }
  const std::string dir = numbered_output_dir(given);
  if (!options.force) refuse_existing_run(dir, run.output_dir_where);
  return dir;
}

// Rank 0, at the end: <dir>/model.safetensors with the final parameters and state, written
// atomically (a reader sees the previous file or the whole new one). Returns its path, or ""
// when rank 0's parameters are not the whole model (model-parallel layers hold slices).
std::string write_model_file(const plan::RunPlan& run, const TrainResult& r,
                             const nn::Model& layout, const nn::GraphSpec& graph,
                             const std::optional<data::Normalisation>& input_norm,
                             const std::string& dir) {
  if ((run.parallel_mode != "data" && r.world > 1) ||
      int64_t(r.final_params.size()) != layout.num_params() ||
      int64_t(r.final_state.size()) != layout.num_state()) {
    log_warn(
        "{} not written: with parallel = \"{}\" over {} workers rank 0 holds only its slices of "
        "the dense layers, not the whole model",
        nn::kModelFileName, run.parallel_mode, r.world);
    return "";
  }
  const std::string path = (std::filesystem::path(dir) / nn::kModelFileName).string();
  write_checkpoint_file(
      path, nn::model_file_bytes(layout, graph, r.final_params, r.final_state,
                                 trained_model_metadata(r.steps, input_norm, layout.loss_kind())));
  // train.keep_best: the best epoch's weights beside the final ones, in the same format.
  if (r.best_epoch > 0 && int64_t(r.best_params.size()) == layout.num_params() &&
      int64_t(r.best_state.size()) == layout.num_state()) {
    std::map<std::string, std::string> meta =
        trained_model_metadata(-1, input_norm, layout.loss_kind());
    meta["epoch"] = std::to_string(r.best_epoch);
    write_checkpoint_file((std::filesystem::path(dir) / nn::kBestModelFileName).string(),
                          nn::model_file_bytes(layout, graph, r.best_params, r.best_state, meta));
  }
  return path;
}

// A resume on another world size keeps the checkpoint's global batch (docs/checkpoint.md,
// "Another world size"): `batch`, per worker, becomes the global batch over this run's
// `trainers` and train.accumulate, or the run stops when it does not divide. A `batch` given for
// the resume that is neither the checkpoint's per-worker batch nor the one that keeps the
// global batch would change it: refused.
plan::RunPlan keep_global_batch(const plan::RunPlan& run, int trainers, bool lead) {
  const std::string& resume = run.guard.resume;
  if (resume.empty()) return run;
  const std::string dir = find_latest_checkpoint(resume);
  const CheckpointShape ck = checkpoint_shape(dir);
  if (ck.world == trainers) return run;  // the config's batch, checked against the steps per epoch
  if (ck.global_batch == 0)
    throw InputError(fmt::format(
        "{}/train.ckpt: records no global batch (an older loom) and its config does not read "
        "back; it resumes on {} workers only",
        dir, ck.world));
  const int64_t accumulate = run.settings.accumulate;
  const int64_t batch = run.settings.batch;
  const int64_t per_step = int64_t(trainers) * accumulate;
  if (ck.global_batch % per_step != 0)
    throw ConfigError(fmt::format(
        "{}: the checkpoint's global batch of {} ({} workers) does not divide over {} workers{}: "
        "a resume keeps the global batch; resume on a world size that divides it",
        dir, ck.global_batch, ck.world, trainers,
        accumulate > 1 ? fmt::format(" x train.accumulate {}", accumulate) : ""));
  const int64_t wanted = ck.global_batch / per_step;
  if (batch == wanted) return run;
  const int64_t old_batch = ck.global_batch / (ck.world * ck.accumulate);
  if (batch != old_batch)
    throw ConfigError(fmt::format(
        "{}: batch {} over {} workers{} makes a global batch of {}; the checkpoint's is {}: a "
        "resume keeps it (batch {}, or leave batch as the checkpoint has it)",
        run.batch_where, batch, trainers,
        accumulate > 1 ? fmt::format(" x train.accumulate {}", accumulate) : "", batch * per_step,
        ck.global_batch, wanted));
  if (lead)
    log_info(
        "resume: {} worker{} instead of the checkpoint's {}: batch {} per worker (was {}), the "
        "global batch of {} kept",
        trainers, trainers == 1 ? "" : "s", ck.world, wanted, old_batch, ck.global_batch);
  return plan::with_batch(run, wanted,
                          fmt::format("resume: the global batch {} of {} over {} workers",
                                      ck.global_batch, dir, trainers));
}

// TrainOptions::keep_results: rank 0's final weights as the model load_trained_model() makes
// of model.safetensors (the same graph, parameters, state and metadata); null when rank 0's
// parameters are not the whole model.
std::shared_ptr<TrainedModel> kept_model(const plan::RunPlan& run, const TrainResult& r,
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
  m->run = plan::saved_run(run);
  m->weights = r.model_file;
  m->steps = r.steps;
  m->input_normalisation = input_norm;
  return m;
}

// summary.json: the run's final figures (docs/formats.md).
nlohmann::json run_summary(const TrainResult& result, const Settings& s, const TokenRun& tokens) {
  // A figure not evaluated (no validation split, regression's accuracy) is null.
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
  return summary;
}

}  // namespace

TrainResult run_training(const plan::RunPlan& given, const TrainOptions& options) {
  Stopwatch wall;
  plan::RunPlan run = plan::with_output_dir(given, choose_output_dir(given, options));
  set_log_level(run.log_level);
  std::unique_ptr<comm::World> world = comm::create_world(run.transport, run.workers, run.comm);
  const bool lead = world->local(0).rank() == 0;
  run = keep_global_batch(
      run, run.ps_on_ranks ? sync::ps_training_ranks(run.ps, world->local(0)) : world->size(),
      lead);
  const Settings s = run.settings;
  const data::PipelineConfig pipeline = run.pipeline;
  Stopwatch load_watch;
  const bool in_memory = options.train_data != nullptr;
  if (in_memory) plan::refuse_data_files(run);  // before any of them is opened
  const TokenRun tokens = open_token_run(pipeline);
  RunSets sets = open_run_sets(s, pipeline, options, tokens);
  std::shared_ptr<const data::SampleSource> train_source = sets.train;
  const std::optional<data::Normalisation>& input_norm = sets.input_norm;
  const std::string& train_name = sets.train_name;
  // In-memory data: the caller's test set, used in place (no test set: no test figures).
  const data::Dataset& test = options.test_data ? *options.test_data : sets.test;
  data::check_data_sets(*train_source, train_name, s.eval && sets.has_test ? &test : nullptr,
                        sets.test_name, pipeline.max_classes, run.max_classes_where);
  const HeldOut held_out = hold_out_validation(s, pipeline, world->size(), train_source, tokens);
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
  nn::GraphSpec graph =
      nn::model_graph(run.model, train_source->sample_shape(), output_size(*train_source));
  const std::unique_ptr<nn::Model> layout = std::make_unique<nn::Model>(
      cpu_backend(), train_source->sample_shape(), output_size(*train_source),
      nn::build_nodes(graph, train_source->sample_shape()), nn::Model::StructureOnly{});
  // An imported network's weights, checked against its layers above, are the workers' to load
  // (each builds its own model); these two copies would only hold its size twice more.
  layout->release_initial_params();
  for (auto& l : graph.layers) {
    std::vector<float>().swap(l.init_params);
    std::vector<float>().swap(l.init_state);
  }
  nn::apply_loss_options(run.loss, *layout);  // checks loss.* here too
  if (tokens.enabled) check_model_fits_windows(pipeline, *layout, tokens);
  check_loss_fits_data(run.loss, *train_source, train_name);
  if (options.print_model) {
    if (lead) fmt::print("{}\n", layout->summary());
    return TrainResult{};
  }
  if (layout->reduces_across_replicas() && world->size() > 1)
    run = plan::with_inline_combine(run, "BatchNorm with sync = true");

  trace::Session timeline(run.trace, world->local(0).rank());
  RunWriter writer(lead ? run.output_dir : "", !run.guard.resume.empty());
  TrainResult result;
  result.output_dir = run.output_dir;
  // The CPU backend is shared by the process: later runs (tests, sweeps, benches) start in fp32.
  struct Fp32Again {
    ~Fp32Again() { cpu_backend().set_matmul_precision(Precision::kFp32); }
  } fp32_again;
  world->run([&](comm::Communicator& c) {
    // sync = "ps", ps.placement = "ranks": the last ps.servers ranks run the server loop
    // instead of training; the others train over a communicator of their own.
    std::unique_ptr<comm::Communicator> trainers;
    if (run.ps_on_ranks) {
      check_same_run(c, run.text);  // the servers' too: they skip train_worker
      if (sync::ps_server_rank(run.ps, c)) return sync::run_ps_server(run.ps, c);
      trainers = sync::ps_training_comm(run.ps, c);
    }
    train_worker(run, trainers ? *trainers : c, train_source,
                 held_out.set ? &*held_out.set : nullptr, held_out.fingerprint, test, result,
                 writer, options, tokens);
  });
  result.wall_s = wall.seconds();
  // A failed write of the weights (a full disk) still leaves the summary of what was trained,
  // then stops with the error: the run's figures are not lost with its weights.
  std::string model_error;
  if (writer.enabled()) {
    try {
      result.model_file = write_model_file(run, result, *layout, graph, input_norm, writer.dir());
    } catch (const InputError& e) {
      model_error = e.what();
    }
  }
  if (lead) {
    nlohmann::json summary = run_summary(result, s, tokens);
    writer.write_summary(summary);
    if (options.keep_results) {
      summary[kFormatVersionKey] = kSummaryFormatVersion;
      result.summary_json = summary.dump();
      result.model = kept_model(run, result, *layout, graph, input_norm);
    }
  }
  timeline.write();
  if (!model_error.empty())
    throw InputError(fmt::format("the run trained {} steps, but its weights were not saved: {}",
                                 result.steps, model_error));
  return result;
}

}  // namespace loom::train
