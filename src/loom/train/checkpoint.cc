#include "loom/train/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <regex>
#include <set>

#include "loom/core/error.h"
#include "loom/core/io/atomic_file.h"
#include "loom/core/log.h"
#include "loom/plan/saved_run.h"

namespace loom::train {

namespace fs = std::filesystem;

namespace {

constexpr const char* kTrainFile = "train.ckpt";

std::string rank_file_name(int64_t rank) {
  return fmt::format("rank-{:05d}.ckpt", rank);
}

std::vector<float> device_to_vector(Backend& be, const float* src, int64_t n) {
  std::vector<float> v(size_t(std::max<int64_t>(n, 0)));
  if (n > 0) be.copy_to_host(v.data(), src, size_t(n) * sizeof(float));
  return v;
}

void vector_to_device(Backend& be, float* dst, const std::vector<float>& v) {
  if (!v.empty()) be.copy_to_device(dst, v.data(), v.size() * sizeof(float));
}

// Where this rank's own parameters begin (Strategy::rank_local_params_offset), or -1.
int64_t local_params_offset(const WorkerParts& w) {
  const int64_t off = w.strategy.rank_local_params_offset();
  LOOM_CHECK(off <= w.model.num_params(), "local parameters from {} of {}", off,
             w.model.num_params());
  return off;
}

// Complete checkpoints (step-N) under root, newest first.
std::vector<std::pair<int64_t, fs::path>> list_complete(const fs::path& root) {
  static const std::regex re("step-([0-9]{1,18})");
  std::vector<std::pair<int64_t, fs::path>> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (e.is_directory(ec) && std::regex_match(name, m, re))
      out.emplace_back(std::stoll(m[1].str()), e.path());
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return out;
}

void prune(const fs::path& root, int keep, int64_t current_step) {
  std::error_code ec;
  auto complete = list_complete(root);
  for (size_t i = size_t(std::max(keep, 1)); i < complete.size(); ++i)
    fs::remove_all(complete[i].second, ec);
  // .partial directories older than this step were left by crashed or failed writes.
  static const std::regex re("step-([0-9]{1,18})\\.partial");
  for (const auto& e : fs::directory_iterator(root, ec)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (std::regex_match(name, m, re) && std::stoll(m[1].str()) <= current_step)
      fs::remove_all(e.path(), ec);
  }
}

// Parses train.ckpt and every rank file of a checkpoint directory; throws InputError if any is
// missing or malformed.
void validate(const fs::path& dir) {
  const CheckpointFile train = CheckpointFile::read((dir / kTrainFile).string());
  const std::vector<int64_t> pos = train.i64("position", 5);
  if (pos[2] < 1 || pos[2] > 1 << 20)
    throw InputError(fmt::format("{}: position names a world of {}", train.source(), pos[2]));
  for (int64_t r = 0; r < pos[2]; ++r) {
    const CheckpointFile rf = CheckpointFile::read((dir / rank_file_name(r)).string());
    if (rf.i64("rank", 3)[2] != pos[0])
      throw InputError(
          fmt::format("{}: written at another step than {}", rf.source(), train.source()));
  }
}

}  // namespace

std::string checkpoint_name(int64_t step) {
  return fmt::format("step-{:012d}", step);
}

CheckpointFile make_train_file(WorkerParts& w, const TrainPosition& pos,
                               const std::string& config) {
  CheckpointFile f;
  const int64_t p[5] = {pos.step, pos.steps_per_epoch, pos.world, int64_t(pos.seed), pos.nan_skips};
  f.put_i64("position", p);
  if (pos.global_batch > 0) {
    const int64_t batch[2] = {pos.global_batch, pos.accumulate};
    f.put_i64("position.batch", batch);
  }
  const double lr[1] = {pos.lr_scale};
  f.put_f64("lr_scale", lr);
  if (pos.loss_scale > 0) {
    const double scale[1] = {pos.loss_scale};
    f.put_f64("loss_scale", scale);
    const int64_t counts[2] = {pos.loss_scale_streak, pos.overflow_skips};
    f.put_i64("loss_scale.streak_skips", counts);
  }
  // Every stream is counter-based: dropout keys derive from (seed, step), the shuffle and the
  // augmentation from (seed, epoch), codecs keep their own counters in the strategy state.
  const int64_t rng[3] = {int64_t(pos.seed), pos.step, pos.epoch()};
  f.put_i64("rng.seed_step_epoch", rng);
  const int64_t loader[2] = {pos.epoch(), pos.step_in_epoch()};
  f.put_i64("loader.epoch_step", loader);
  f.put_f32("params", device_to_vector(w.backend, w.model.params(), w.model.num_params()));
  // Non-trained state (BatchNorm running statistics) is identical on every rank.
  if (w.model.num_state() > 0)
    f.put_f32("model.state", device_to_vector(w.backend, w.model.state(), w.model.num_state()));
  f.put_i64(kCheckpointInputShape, w.model.input_shape());
  const int64_t classes[1] = {w.model.num_classes()};
  f.put_i64(kCheckpointNumClasses, classes);
  if (pos.validation_split != 0) {
    const int64_t split[1] = {int64_t(pos.validation_split)};
    f.put_i64("data.validation_split", split);
  }
  if (pos.vocabulary != 0) {
    const int64_t vocab[1] = {int64_t(pos.vocabulary)};
    f.put_i64("data.vocabulary", vocab);
  }
  if (w.best && w.best->epoch > 0) {
    const int64_t epoch[1] = {w.best->epoch};
    f.put_i64("best.epoch", epoch);
    const double figures[2] = {w.best->val_acc, w.best->val_loss};
    f.put_f64("best.val_acc_loss", figures);
    f.put_f32("best.params", w.best->params);
    if (!w.best->state.empty()) f.put_f32("best.state", w.best->state);
  }
  f.put_text("config", config);
  f.put_text("describe", w.model.summary());
  return f;
}

CheckpointFile make_rank_file(WorkerParts& w, const TrainPosition& pos, int rank) {
  CheckpointFile f;
  const int64_t id[3] = {rank, pos.world, pos.step};
  f.put_i64("rank", id);
  const int64_t steps[1] = {w.optimizer.steps()};
  f.put_i64("optim.steps", steps);
  for (const optim::StateBuffer& b : w.optimizer.state())
    f.put_f32("optim." + b.name, device_to_vector(w.backend, b.data, b.size));
  // The elements of that state this rank updates (ZeRO-1 blocks), so a resume on another
  // world size knows which rank's copy of each element is the one the run used.
  std::vector<int64_t> owned;
  for (const auto& [offset, count] : w.strategy.optimizer_owned()) {
    owned.push_back(offset);
    owned.push_back(count);
  }
  if (w.strategy.optimizer_owned().empty()) owned = {0, w.model.num_params()};
  f.put_i64("optim.owned", owned);
  // Model-parallel slices differ by rank: train.ckpt holds only rank 0's.
  const int64_t local = local_params_offset(w);
  if (local >= 0)
    f.put_f32("params.local",
              device_to_vector(w.backend, w.model.params() + local, w.model.num_params() - local));
  sync::StrategyState st;
  w.strategy.save_state(st);
  for (const auto& [name, v] : st.floats) f.put_f32("strategy.f." + name, v);
  for (const auto& [name, v] : st.bytes) f.put_bytes("strategy.b." + name, v);
  return f;
}

namespace {

// Another world size: each optimizer buffer put together from the elements every rank of the
// checkpoint owned ("optim.owned"; a world of one owned all), then this rank keeps the elements
// it owns now, zero elsewhere, as a run of this world size would hold them.
void reshard_optimizer(WorkerParts& w, const std::vector<CheckpointFile>& ranks) {
  const int64_t n_params = w.model.num_params();
  std::vector<std::vector<std::pair<int64_t, int64_t>>> owned(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (!ranks[r].has("optim.owned")) {
      if (ranks.size() != 1)
        throw InputError(fmt::format(
            "{}: written without section 'optim.owned' (by an older loom), so which rank's "
            "optimizer state is the one used is unknown; resume it on {} workers",
            ranks[r].source(), ranks.size()));
      owned[r] = {{0, n_params}};
      continue;
    }
    const std::vector<int64_t> v = ranks[r].i64("optim.owned");
    if (v.size() % 2 != 0)
      throw InputError(fmt::format("{}: section 'optim.owned' holds {} numbers, not pairs",
                                   ranks[r].source(), v.size()));
    for (size_t i = 0; i < v.size(); i += 2) {
      if (v[i] < 0 || v[i + 1] < 0 || v[i] > n_params || v[i + 1] > n_params - v[i])
        throw InputError(fmt::format(
            "{}: section 'optim.owned' names elements [{}, {}) of a model of {} parameters "
            "(another model?)",
            ranks[r].source(), v[i], v[i] + v[i + 1], n_params));
      owned[r].emplace_back(v[i], v[i + 1]);
    }
  }
  const std::vector<std::pair<int64_t, int64_t>> mine_now = w.strategy.optimizer_owned();
  for (const optim::StateBuffer& b : w.optimizer.state()) {
    LOOM_CHECK(b.size == n_params, "optimizer buffer {} of {} floats for {} parameters", b.name,
               b.size, n_params);
    std::vector<float> whole(size_t(n_params), 0.0f);
    std::vector<uint8_t> seen(size_t(n_params), 0);
    for (size_t r = 0; r < ranks.size(); ++r) {
      const std::vector<float> v = ranks[r].f32("optim." + b.name, n_params);
      for (const auto& [offset, count] : owned[r])
        for (int64_t i = offset; i < offset + count; ++i)
          if (!seen[size_t(i)]) {  // unsharded, every rank owns every element: the same bits
            whole[size_t(i)] = v[size_t(i)];
            seen[size_t(i)] = 1;
          }
    }
    const auto gap = std::find(seen.begin(), seen.end(), uint8_t(0));
    if (gap != seen.end())
      throw InputError(fmt::format(
          "{}: no rank of the checkpoint owns element {} of optimizer state '{}' (section "
          "'optim.owned' of its rank files)",
          ranks[0].source(), gap - seen.begin(), b.name));
    if (!mine_now.empty()) {
      std::vector<float> kept(whole.size(), 0.0f);
      for (const auto& [offset, count] : mine_now)
        std::copy(whole.begin() + offset, whole.begin() + offset + count, kept.begin() + offset);
      whole.swap(kept);
    }
    vector_to_device(w.backend, b.data, whole);
  }
  w.optimizer.set_steps(ranks[0].i64("optim.steps", 1)[0]);
}

}  // namespace

TrainPosition restore_parts(WorkerParts& w, const CheckpointFile& train,
                            const std::vector<CheckpointFile>& ranks, const TrainPosition& expect,
                            int rank_index) {
  const std::vector<int64_t> p = train.i64("position", 5);
  TrainPosition pos;
  pos.step = p[0];
  pos.steps_per_epoch = p[1];
  pos.world = p[2];
  pos.seed = uint64_t(p[3]);
  pos.nan_skips = p[4];
  pos.lr_scale = train.f64("lr_scale", 1)[0];
  if (train.has("loss_scale")) {  // the guard checks it against this run's scaler
    pos.loss_scale = train.f64("loss_scale", 1)[0];
    const std::vector<int64_t> counts = train.i64("loss_scale.streak_skips", 2);
    pos.loss_scale_streak = counts[0];
    pos.overflow_skips = counts[1];
  }
  pos.global_batch = train.has("position.batch") ? train.i64("position.batch", 2)[0] : 0;
  const std::string& src = train.source();
  const bool same_world = pos.world == expect.world;
  if (int64_t(ranks.size()) != (same_world ? 1 : pos.world))
    throw InputError(fmt::format("{}: {} rank files for a checkpoint of {} workers", src,
                                 ranks.size(), pos.world));
  if (!same_world && pos.global_batch > 0 && expect.global_batch > 0 &&
      pos.global_batch != expect.global_batch)
    throw InputError(fmt::format(
        "{}: a global batch of {} over {} workers; this run's is {} over {}: a resume on another "
        "world size keeps the global batch",
        src, pos.global_batch, pos.world, expect.global_batch, expect.world));
  if (pos.steps_per_epoch != expect.steps_per_epoch)
    throw InputError(
        fmt::format("{}: {} steps per epoch; this run has {} (batch or data "
                    "changed?)",
                    src, pos.steps_per_epoch, expect.steps_per_epoch));
  if (pos.seed != expect.seed)
    throw InputError(fmt::format("{}: seed {}; this run has seed {}", src, pos.seed, expect.seed));
  pos.validation_split =
      train.has("data.validation_split") ? uint64_t(train.i64("data.validation_split", 1)[0]) : 0;
  if (pos.validation_split != expect.validation_split)
    throw InputError(fmt::format(
        "{}: {}: a resume must hold out the same records (data.validation)", src,
        pos.validation_split == 0 ? "trained without a validation split; this run holds one out"
        : expect.validation_split == 0 ? "trained with a validation split; this run holds none out"
                                       : "trained with another validation split than this run's "
                                         "(data.validation or the training data changed?)"));
  pos.vocabulary = train.has("data.vocabulary") ? uint64_t(train.i64("data.vocabulary", 1)[0]) : 0;
  if (pos.vocabulary != expect.vocabulary)
    throw InputError(fmt::format(
        "{}: {}: the same token ids would mean other tokens", src,
        pos.vocabulary == 0      ? "trained without a token vocabulary; this run trains on tokens"
        : expect.vocabulary == 0 ? "trained on tokens; this run's data are not a token stream"
                                 : fmt::format("trained on vocabulary {:016x}; this run's data "
                                               "have vocabulary {:016x} (another text or --vocab?)",
                                               pos.vocabulary, expect.vocabulary)));
  if (pos.step < 0 || !(pos.lr_scale > 0 && pos.lr_scale <= 1))
    throw InputError(fmt::format("{}: position out of range (step {}, lr scale {})", src, pos.step,
                                 pos.lr_scale));
  for (size_t r = 0; r < ranks.size(); ++r) {
    const int64_t expect_rank = same_world ? rank_index : int64_t(r);
    const std::vector<int64_t> id = ranks[r].i64("rank", 3);
    if (id[0] != expect_rank || id[1] != pos.world || id[2] != pos.step)
      throw InputError(
          fmt::format("{}: belongs to rank {} of {} at step {}, expected rank {} of {} "
                      "at step {}",
                      ranks[r].source(), id[0], id[1], id[2], expect_rank, pos.world, pos.step));
  }
  const CheckpointFile& rank = ranks[0];
  const int64_t local = local_params_offset(w);
  if (!same_world && (local >= 0 || rank.has("params.local")))
    throw InputError(fmt::format(
        "{}: written by {} workers with model-parallel layers, whose slices depend on the world "
        "size; it resumes on {} workers only (this run has {})",
        src, pos.world, pos.world, expect.world));
  if (local < 0) {
    vector_to_device(w.backend, w.model.params(), train.f32("params", w.model.num_params()));
  } else {  // the replicated prefix from rank 0, this rank's own slices from its file
    std::vector<float> shared = train.f32("params");
    if (int64_t(shared.size()) < local)
      throw InputError(
          fmt::format("{}: section 'params' holds {} floats, fewer than the {} replicated ones "
                      "of this run (another model or parallel layout?)",
                      src, shared.size(), local));
    shared.resize(size_t(local));
    vector_to_device(w.backend, w.model.params(), shared);
    vector_to_device(w.backend, w.model.params() + local,
                     rank.f32("params.local", w.model.num_params() - local));
  }
  if (w.model.num_state() > 0)
    vector_to_device(w.backend, w.model.state(), train.f32("model.state", w.model.num_state()));
  if (same_world) {
    for (const optim::StateBuffer& b : w.optimizer.state())
      vector_to_device(w.backend, b.data, rank.f32("optim." + b.name, b.size));
    w.optimizer.set_steps(rank.i64("optim.steps", 1)[0]);
  } else {
    reshard_optimizer(w, ranks);
  }
  if (w.best && train.has("best.epoch")) {
    w.best->epoch = train.i64("best.epoch", 1)[0];
    const std::vector<double> figures = train.f64("best.val_acc_loss", 2);
    w.best->val_acc = figures[0];
    w.best->val_loss = figures[1];
    w.best->params = train.f32("best.params", w.model.num_params());
    w.best->state = w.model.num_state() > 0 ? train.f32("best.state", w.model.num_state())
                                            : std::vector<float>{};
  }
  return pos;
}

std::string restore_strategy(WorkerParts& w, const std::vector<CheckpointFile>& ranks,
                             bool same_world) {
  std::vector<sync::StrategyState> states(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r)
    for (const auto& [name, s] : ranks[r].sections()) {
      if (name.rfind("strategy.f.", 0) == 0) states[r].floats[name.substr(11)] = ranks[r].f32(name);
      if (name.rfind("strategy.b.", 0) == 0)
        states[r].bytes[name.substr(11)] = ranks[r].bytes(name);
    }
  if (same_world) {
    w.strategy.restore_state(states.at(0));
    return "";
  }
  return w.strategy.restore_resharded(states);
}

CheckpointShape checkpoint_shape(const std::string& checkpoint_dir) {
  const CheckpointFile train =
      CheckpointFile::read((fs::path(checkpoint_dir) / kTrainFile).string());
  CheckpointShape out;
  out.world = train.i64("position", 5)[2];
  if (train.has("position.batch")) {
    const std::vector<int64_t> b = train.i64("position.batch", 2);
    out.global_batch = b[0];
    out.accumulate = b[1];
  } else {
    // An older loom recorded no batch: its config text holds batch and train.accumulate as it
    // trained, where it reads back (else unknown, 0: only a resume on another world needs it).
    try {
      const plan::SavedRun run =
          plan::read_saved_run(train.text("config"), train.source() + ":config");
      out.accumulate = run.accumulate;
      out.global_batch = run.batch * out.accumulate * out.world;
    } catch (const Error&) {
      out.global_batch = 0;
    }
    if (out.global_batch == 0) return out;
  }
  if (out.global_batch < 1 || out.accumulate < 1 || out.world < 1 ||
      out.global_batch % (out.accumulate * out.world) != 0)
    throw InputError(fmt::format("{}: a global batch of {} over {} workers x train.accumulate {}",
                                 train.source(), out.global_batch, out.world, out.accumulate));
  return out;
}

void StepSnapshot::capture(WorkerParts& w) {
  params_.resize(size_t(w.model.num_params()));
  if (!params_.empty())
    w.backend.copy_to_host(params_.data(), w.model.params(), params_.size() * sizeof(float));
  const std::vector<optim::StateBuffer> state = w.optimizer.state();
  optim_.resize(state.size());
  for (size_t i = 0; i < state.size(); ++i) {
    optim_[i].resize(size_t(state[i].size));
    if (state[i].size > 0)
      w.backend.copy_to_host(optim_[i].data(), state[i].data, optim_[i].size() * sizeof(float));
  }
  model_state_.resize(size_t(w.model.num_state()));
  if (!model_state_.empty())
    w.backend.copy_to_host(model_state_.data(), w.model.state(),
                           model_state_.size() * sizeof(float));
  optim_steps_ = w.optimizer.steps();
  strategy_ = {};
  w.strategy.save_state(strategy_);
}

void StepSnapshot::restore(WorkerParts& w) const {
  vector_to_device(w.backend, w.model.params(), params_);
  if (!model_state_.empty()) vector_to_device(w.backend, w.model.state(), model_state_);
  const std::vector<optim::StateBuffer> state = w.optimizer.state();
  for (size_t i = 0; i < state.size() && i < optim_.size(); ++i)
    vector_to_device(w.backend, state[i].data, optim_[i]);
  w.optimizer.set_steps(optim_steps_);
  w.strategy.restore_state(strategy_);
}

std::string save_checkpoint(comm::Communicator& c, const std::string& root, int keep,
                            WorkerParts& w, const TrainPosition& pos, const std::string& config) {
  const fs::path final_dir = fs::path(root) / checkpoint_name(pos.step);
  const fs::path partial = fs::path(root) / (checkpoint_name(pos.step) + ".partial");
  std::string failure;
  try {
    std::error_code ec;
    fs::create_directories(partial, ec);
    if (!fs::is_directory(partial))
      throw InputError(fmt::format("{}: cannot create: {}", partial.string(), ec.message()));
    write_checkpoint_file((partial / rank_file_name(c.rank())).string(),
                          make_rank_file(w, pos, c.rank()).serialize());
    if (c.rank() == 0)
      write_checkpoint_file((partial / kTrainFile).string(),
                            make_train_file(w, pos, config).serialize());
  } catch (const InputError& e) {
    failure = e.what();
  }
  // Every rank learns whether any rank failed, so all agree on publishing.
  int64_t failed[1] = {failure.empty() ? 0 : int64_t(c.rank()) + 1};
  if (c.size() > 1) c.allreduce(failed, sizeof(failed), comm::max_i64());
  if (failed[0] != 0) {
    const auto previous = list_complete(root);
    const std::string kept = previous.empty() ? std::string("none written yet")
                                              : previous.front().second.string() + " is intact";
    if (!failure.empty())
      log_error("checkpoint at step {} not written: {}; previous checkpoint: {}", pos.step, failure,
                kept);
    else if (c.rank() == 0)
      log_error(
          "checkpoint at step {} not written: rank {} failed to write its file; previous "
          "checkpoint: {}",
          pos.step, failed[0] - 1, kept);
    if (c.size() > 1) c.barrier();  // everyone is done with the directory before it goes
    if (c.rank() == 0) {
      std::error_code ec;
      fs::remove_all(partial, ec);
    }
    return "";
  }
  if (c.rank() == 0) {
    std::error_code ec;
    core::fsync_directory(partial.string());
    if (fs::exists(final_dir)) {  // the same step again (resumed from an older checkpoint)
      const fs::path old = final_dir.string() + ".replaced";
      fs::remove_all(old, ec);
      fs::rename(final_dir, old, ec);
      fs::rename(partial, final_dir, ec);
      fs::remove_all(old, ec);
    } else {
      fs::rename(partial, final_dir, ec);
    }
    if (ec) {
      log_error("checkpoint at step {} not published: rename {} -> {}: {}", pos.step,
                partial.string(), final_dir.string(), ec.message());
      return "";
    }
    core::fsync_directory(root);
    prune(root, keep, pos.step);
    log_info("checkpoint: step {} written to {}", pos.step, final_dir.string());
  }
  return final_dir.string();
}

std::string find_latest_checkpoint(const std::string& path) {
  const fs::path p(path);
  if (fs::exists(p / kTrainFile)) {
    validate(p);
    return p.string();
  }
  const fs::path root = fs::is_directory(p / "checkpoints") ? p / "checkpoints" : p;
  if (!fs::is_directory(root))
    throw InputError(fmt::format("{}: no such directory to resume from", path));
  std::string newest_skipped;  // why the newest checkpoint was skipped, for the error
  for (const auto& [step, dir] : list_complete(root)) {
    try {
      validate(dir);
      return dir.string();
    } catch (const InputError& e) {
      if (newest_skipped.empty()) newest_skipped = e.what();
      // `loom train --resume` looks twice (for the config, then to load): one warning.
      static std::mutex warned_mutex;
      static std::set<std::string> warned;
      std::lock_guard<std::mutex> lock(warned_mutex);
      if (warned.insert(dir.string()).second)
        log_warn("resume: skipping checkpoint {}: {}", dir.string(), e.what());
    }
  }
  throw InputError(fmt::format(
      "{}: no complete checkpoint to resume from (looked for "
      "{}/step-*/train.ckpt{})",
      path, root.string(),
      newest_skipped.empty() ? std::string() : "; the newest is incomplete: " + newest_skipped));
}

std::string checkpoint_config_text(const std::string& checkpoint_dir) {
  return CheckpointFile::read((fs::path(checkpoint_dir) / kTrainFile).string()).text("config");
}

LoadedCheckpoint load_checkpoint(comm::Communicator& c, const std::string& path, WorkerParts& w,
                                 const TrainPosition& expect) {
  // Rank 0 chooses, so all ranks load the same step even while files are being pruned.
  std::string dir, error;
  if (c.rank() == 0) {
    try {
      dir = find_latest_checkpoint(path);
    } catch (const InputError& e) {
      error = e.what();
    }
  }
  if (c.size() > 1) {
    int64_t len[1] = {error.empty() ? int64_t(dir.size()) : -1};
    c.broadcast(len, sizeof(len), 0);
    if (len[0] < 0) {
      if (c.rank() != 0)
        throw InputError(fmt::format("{}: rank 0 found no checkpoint to resume from", path));
    } else {
      dir.resize(size_t(len[0]));
      c.broadcast(dir.data(), dir.size(), 0);
    }
  }
  if (!error.empty()) throw InputError(error);

  LoadedCheckpoint out;
  out.dir = dir;
  try {
    const CheckpointFile train = CheckpointFile::read((fs::path(dir) / kTrainFile).string());
    const int64_t world = train.i64("position", 5)[2];
    out.same_world = world == expect.world;
    // Another world size: every rank reads every rank file of the checkpoint (a missing one is
    // an InputError naming it) and takes its share.
    if (out.same_world) {
      out.rank_files.push_back(
          CheckpointFile::read((fs::path(dir) / rank_file_name(c.rank())).string()));
    } else {
      if (world < 1 || world > 1 << 20)
        throw InputError(fmt::format("{}: position names a world of {}", train.source(), world));
      for (int64_t r = 0; r < world; ++r)
        out.rank_files.push_back(
            CheckpointFile::read((fs::path(dir) / rank_file_name(r)).string()));
    }
    out.pos = restore_parts(w, train, out.rank_files, expect, c.rank());
  } catch (const InputError& e) {
    error = e.what();
  }
  int64_t failed[1] = {error.empty() ? 0 : int64_t(c.rank()) + 1};
  if (c.size() > 1) c.allreduce(failed, sizeof(failed), comm::max_i64());
  if (!error.empty()) throw InputError(error);
  if (failed[0] != 0)
    throw InputError(fmt::format("{}: rank {} could not load its part", dir, failed[0] - 1));
  return out;
}

}  // namespace loom::train
