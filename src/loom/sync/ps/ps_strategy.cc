#include "loom/sync/ps/ps_strategy.h"

#include <algorithm>
#include <cstring>

#include "loom/core/error.h"
#include "loom/core/log.h"
#include "loom/core/timer.h"
#include "loom/sync/ps/ps_thread_servers.h"

namespace loom::sync {

PsStrategy::PsStrategy(comm::Communicator& ps, int num_workers, nn::Model& model, PsOptions options,
                       std::shared_ptr<PsThreadServers> servers)
    : ps_(ps),
      workers_(num_workers),
      model_(model),
      options_(options),
      servers_(std::move(servers)),
      buckets_(plan_buckets(model.param_ranges(), options.bucket_bytes)),
      tracker_(model.param_ranges(), buckets_),
      layout_(plan_ps_layout(model.num_params(), buckets_, options.servers)),
      slots_(options.staleness + 1) {
  LOOM_CHECK(model.backend().device() == Device::kCpu,
             "the parameter server keeps its shards in host memory");
  LOOM_CHECK(ps.size() == num_workers + options.servers && ps.rank() < num_workers,
             "rank {} of a parameter-server world of {} with {} workers and {} servers", ps.rank(),
             ps.size(), num_workers, options.servers);
  for (const auto& pieces : layout_.by_server)
    if (int(pieces.size()) > kPsMaxPieces)
      throw ConfigError(
          fmt::format("sync.bucket_kib = {} cuts a server's key range into {} "
                      "pieces, more than the {} the message tags allow: use "
                      "larger buckets",
                      options.bucket_bytes >> 10, pieces.size(), kPsMaxPieces));
  if (options_.staleness > 0) {
    const size_t n = size_t(model.num_params());
    push_copy_.assign(size_t(slots_), std::vector<float>(n));
    pull_.assign(size_t(slots_), std::vector<float>(n));
  }
  in_flight_.resize(size_t(slots_));
  control_.resize(size_t(slots_ * options_.servers));
  if (options_.staleness > 0) queue_ = std::make_unique<BackgroundQueue>();
}

PsStrategy::~PsStrategy() {
  if (!finished_) {
    // Wakes the communication thread and every peer blocked on this worker.
    ps_.abort(fmt::format("worker {} stopped before the end of training", ps_.rank()));
  }
  queue_.reset();
}

std::string PsStrategy::describe() const {
  return fmt::format(
      "parameter server: {} server shard{} as {}, {} worker{}, {} bucket{} of <= {} KiB pushed "
      "{}, {}",
      options_.servers, options_.servers == 1 ? "" : "s",
      options_.placement == PsPlacement::kThreads ? "threads of this process" : "dedicated ranks",
      workers_, workers_ == 1 ? "" : "s", buckets_.size(), buckets_.size() == 1 ? "" : "s",
      options_.bucket_bytes >> 10, options_.overlap ? "during backward" : "after backward",
      options_.staleness == 0 ? std::string("synchronous")
                              : fmt::format("bounded staleness {}", options_.staleness));
}

void PsStrategy::wait(std::vector<comm::Request>& requests, const char* what) const {
  try {
    ps_.wait_all(requests);
  } catch (const CommError& e) {
    throw CommError(
        fmt::format("parameter server ({} servers at ranks {}..{} after {} workers), "
                    "worker {} waiting for {}: {}",
                    options_.servers, workers_, workers_ + options_.servers - 1, workers_,
                    ps_.rank(), what, e.what()));
  }
  requests.clear();
}

void PsStrategy::start() {
  started_ = true;
  float* params = model_.params();
  if (ps_.rank() == 0) {
    // Rank 0's initial parameters seed the servers; every worker then pulls version 0.
    std::vector<PsHello> hellos(size_t(options_.servers));
    std::vector<std::vector<int64_t>> pieces(size_t(options_.servers));
    std::vector<comm::Request> sends;
    for (int s = 0; s < options_.servers; ++s) {
      const PsShard& sh = layout_.shards[size_t(s)];
      PsHello& h = hellos[size_t(s)];
      h.num_params = layout_.num_params;
      h.num_workers = workers_;
      h.shard_begin = sh.begin;
      h.shard_end = sh.end;
      h.num_pieces = int64_t(layout_.by_server[size_t(s)].size());
      for (const PsPiece& p : layout_.by_server[size_t(s)]) {
        pieces[size_t(s)].push_back(p.offset);
        pieces[size_t(s)].push_back(p.count);
      }
      sends.push_back(ps_.isend(server_rank(s), &h, sizeof h, kPsTagHello));
      sends.push_back(ps_.isend(server_rank(s), pieces[size_t(s)].data(),
                                pieces[size_t(s)].size() * sizeof(int64_t), kPsTagPieces));
      sends.push_back(ps_.isend(server_rank(s), params + sh.begin,
                                size_t(sh.size()) * sizeof(float), kPsTagInit));
    }
    wait(sends, "the servers to take the initial parameters");
  }
  std::vector<comm::Request> pulls;
  for (int s = 0; s < options_.servers; ++s) {
    const PsShard& sh = layout_.shards[size_t(s)];
    pulls.push_back(ps_.irecv(server_rank(s), params + sh.begin, size_t(sh.size()) * sizeof(float),
                              kPsTagInit));
  }
  wait(pulls, "the initial parameters");
  if (options_.staleness > 0 && options_.lookahead)
    base_.assign(params, params + model_.num_params());  // version 0
}

double PsStrategy::server_lr(float lr) const {
  // Staleness-aware learning rate (Zhang et al., IJCAI 2016: alpha_0 / tau), with tau the
  // staleness bound k: the same for every worker and step, so exact_delay stays deterministic.
  if (options_.staleness > 0 && options_.divide_lr) return double(lr) / options_.staleness;
  return double(lr);
}

float PsStrategy::grad_scale(int64_t local_batch) const {
  return 1.0f / float(local_batch * workers_);
}

void PsStrategy::begin_step(int64_t step, float lr) {
  const bool first = step_ < 0 || resumed_;
  LOOM_CHECK(step == step_ + 1 || (first && step > step_),
             "steps must follow each other: {} after {}", step, step_);
  if (step_ < 0 && step > 0 && options_.staleness > 0) {
    // A resumed run: the parameters in place stand for the version of the step it resumes at
    // (no pull buffer holds an older one).
    version_ = step;
    std::lock_guard<std::mutex> lock(mu_);
    arrived_ = step;
  }
  resumed_ = false;
  step_ = step;
  tracker_.reset();
  buckets_pushed_ = 0;
  if (servers_) servers_->note_begin(step);
  if (ps_.rank() != 0) return;
  const int slot = int(step % slots_);
  for (int s = 0; s < options_.servers; ++s)
    control_[size_t(slot * options_.servers + s)] =
        PsControl{PsControl::kStep, step, server_lr(lr)};
  auto send = [this, slot] {
    for (int s = 0; s < options_.servers; ++s)
      in_flight_[size_t(slot)].requests.push_back(
          ps_.isend(server_rank(s), &control_[size_t(slot * options_.servers + s)],
                    sizeof(PsControl), kPsTagControl));
  };
  if (queue_) {
    post(send);
  } else {
    send();
  }
}

void PsStrategy::post(std::function<void()> fn) {
  queue_->post([this, fn = std::move(fn)] {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (error_) return;  // the step is lost; the worker's thread rethrows
    }
    try {
      fn();
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = std::current_exception();
    }
    arrived_cv_.notify_all();
  });
}

void PsStrategy::push_bucket(int b) {
  Stopwatch watch;
  const int64_t step = step_;
  // Record the step as pushed before its last piece leaves: whoever learns of the piece
  // (through the server) then also sees the table entry.
  if (++buckets_pushed_ == int(buckets_.size()) && servers_)
    servers_->note_pushed(ps_.rank(), step + 1);
  for (const PsPiece& p : layout_.by_bucket[size_t(b)]) {
    const int64_t bytes = p.count * int64_t(sizeof(float));
    stats_.bytes_sent += bytes;
    stats_.bytes_received += bytes;
    if (queue_)  // the next backward overwrites the gradients: push from a copy
      std::memcpy(push_copy_[size_t(step % slots_)].data() + p.offset, model_.grads() + p.offset,
                  size_t(bytes));
  }
  if (queue_) {
    post([this, b, step] { post_pieces(b, step); });
  } else {
    post_pieces(b, step);
  }
  comm_seconds_ += watch.seconds();
}

void PsStrategy::post_pieces(int b, int64_t step) {
  InFlight& f = in_flight_[size_t(step % slots_)];
  for (const PsPiece& p : layout_.by_bucket[size_t(b)]) {
    const size_t bytes = size_t(p.count) * sizeof(float);
    const float* src = model_.grads() + p.offset;
    // k = 0: the pull lands straight in the parameters: backward is done with this bucket's
    // layers (on_ready comes after a layer's whole backward), as in the allreduce strategy.
    float* dst = model_.params() + p.offset;
    // options_, not queue_: this runs on the queue's own thread, while the destructor may be
    // resetting queue_ (and draining the queue's last tasks).
    if (options_.staleness > 0) {
      src = push_copy_[size_t(step % slots_)].data() + p.offset;
      dst = pull_[size_t((step + 1) % slots_)].data() + p.offset;  // version step + 1
    }
    f.requests.push_back(ps_.irecv(server_rank(p.server), dst, bytes, ps_pull_tag(p.index)));
    f.requests.push_back(ps_.isend(server_rank(p.server), src, bytes, ps_push_tag(p.index)));
  }
}

void PsStrategy::on_gradients_ready(const nn::ParamRange& range) {
  const int b = tracker_.ready(range);
  if (b >= 0 && options_.overlap) push_bucket(b);
}

void PsStrategy::take_version(int64_t needed, int64_t applied_at) {
  int64_t v;
  {
    std::unique_lock<std::mutex> lock(mu_);
    arrived_cv_.wait(lock, [&] { return arrived_ >= needed || error_; });
    if (error_) std::rethrow_exception(error_);
    v = options_.exact_delay ? needed : arrived_;
  }
  const size_t n = size_t(model_.num_params());
  float* params = model_.params();
  // Versions v .. step_ + 1 use distinct pull buffers (at most k + 1 of them), so version v's
  // buffer is not being written while it is copied.
  if (!options_.lookahead) {
    if (v > version_) {
      std::memcpy(params, pull_[size_t(v % slots_)].data(), n * sizeof(float));
      version_ = v;
    }
    return;
  }
  if (v > version_) {
    prev_base_.swap(base_);
    prev_version_ = version_;
    base_.assign(pull_[size_t(v % slots_)].data(), pull_[size_t(v % slots_)].data() + n);
    version_ = v;
  }
  // Lookahead: the gradient computed now is applied to version `applied_at`, `lag` updates
  // after the one we hold. Without new gradients, momentum SGD moves each step by mu times the
  // last step, so the parameters then are about x_v + (mu + ... + mu^lag) * delta, delta the
  // last update per step (x_v - x_p) / (v - p). Computing the gradient there rather than at
  // x_v removes most of the delay's effect (Hakimi et al., "Taming momentum in a distributed
  // asynchronous environment", 2019, compute gradients on such predicted parameters; Kosson
  // et al. 2021 call it weight prediction). With delay d and momentum 0.9, plain delayed SGD
  // on a quadratic is stable only for lr * curvature < 0.1 (d = 1) or 0.05 (d = 2); with the
  // lookahead 0.25 and 0.11 (and the flat directions converge at the synchronous rate).
  const int64_t lag = applied_at - version_;
  const float mu = options_.momentum;
  if (lag <= 0 || prev_version_ < 0 || mu <= 0) {
    std::memcpy(params, base_.data(), n * sizeof(float));
    return;
  }
  float gain = 0, p = 1;
  for (int64_t j = 0; j < lag; ++j) {
    p *= mu;
    gain += p;
  }
  const float scale = gain / float(version_ - prev_version_);
  const float* __restrict b = base_.data();
  const float* __restrict q = prev_base_.data();
  for (size_t i = 0; i < n; ++i) params[i] = b[i] + scale * (b[i] - q[i]);
}

void PsStrategy::end_step() {
  if (!options_.overlap)
    for (int b = 0; b < int(buckets_.size()); ++b) push_bucket(b);
  LOOM_CHECK_EQ(buckets_pushed_, int(buckets_.size()));
  Stopwatch waited;
  if (!queue_) {
    wait(in_flight_[0].requests, "this step's parameters");
  } else {
    const int64_t step = step_;
    post([this, step] {
      wait(in_flight_[size_t(step % slots_)].requests, "a step's parameters");
      std::lock_guard<std::mutex> lock(mu_);
      arrived_ = step + 1;
    });
    // Step t + 1 may compute on any version from t + 1 - k on.
    take_version(std::max<int64_t>(0, step + 1 - options_.staleness), step + 1);
  }
  const double w = waited.seconds();
  ++stats_.exchanges;
  stats_.exposed_seconds += w;
  stats_.comm_seconds += comm_seconds_ + w;
  comm_seconds_ = 0;
}

void PsStrategy::finish() {
  if (finished_ || !started_) return;
  Stopwatch waited;
  if (queue_) {
    queue_->wait_idle();
    take_version(step_ + 1, step_ + 1);  // the last version: every step applied
  }
  if (ps_.rank() == 0) {
    std::vector<PsControl> stop(size_t(options_.servers),
                                PsControl{PsControl::kStop, step_ + 1, 0});
    std::vector<comm::Request> sends;
    for (int s = 0; s < options_.servers; ++s)
      sends.push_back(
          ps_.isend(server_rank(s), &stop[size_t(s)], sizeof(PsControl), kPsTagControl));
    wait(sends, "the servers to stop");
    if (servers_) servers_->mark_stopped();
  }
  stats_.exposed_seconds += waited.seconds();
  stats_.comm_seconds += waited.seconds();
  finished_ = true;
}

int64_t PsStrategy::max_lead() const {
  return servers_ ? servers_->max_lead() : -1;
}

namespace {

std::vector<uint8_t> i64_bytes(const std::vector<int64_t>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(int64_t));
  if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

std::vector<int64_t> bytes_i64(const std::vector<uint8_t>& b) {
  std::vector<int64_t> out(b.size() / sizeof(int64_t));
  if (!out.empty()) std::memcpy(out.data(), b.data(), out.size() * sizeof(int64_t));
  return out;
}

std::string server_section(int s, const std::string& what) {
  return fmt::format("ps.server{}.{}", s, what);
}

}  // namespace

// Sections (rank 0's state only):
//   ps.servers          bytes, int64 {server count S, parameter count}
//   ps.optim_names      bytes, the servers' optimizer buffer names, '\n' after each
//   ps.server<s>.meta   bytes, int64 {key range begin, end, optimizer steps, next step}
//   ps.server<s>.params floats, the server's parameters of its key range
//   ps.server<s>.optim.<name>  floats, that optimizer buffer over its key range
void PsStrategy::save_state(StrategyState& out) const {
  if (ps_.rank() != 0 || !started_ || finished_) return;
  // Bounded staleness: every step this worker began is pushed and pulled (its other workers
  // pushed theirs before they got here), so each server has served them all.
  if (queue_) queue_->wait_idle();
  const int servers = options_.servers;
  std::vector<PsControl> ctl(size_t(servers), PsControl{PsControl::kSave, step_ + 1, 0});
  std::vector<comm::Request> sends;
  for (int s = 0; s < servers; ++s)
    sends.push_back(ps_.isend(server_rank(s), &ctl[size_t(s)], sizeof(PsControl), kPsTagControl));
  wait(sends, "the servers to take the save command");
  std::string names;
  for (int s = 0; s < servers; ++s) {
    PsShardState h;
    ps_.recv(server_rank(s), &h, sizeof h, kPsTagState);
    const PsShard& sh = layout_.shards[size_t(s)];
    LOOM_CHECK(h.magic == kPsMagic && h.shard_begin == sh.begin && h.shard_end == sh.end &&
                   h.num_buffers >= 0 && h.num_buffers <= kPsMaxStateBuffers,
               "ps server {}: state of keys [{}, {}), expected [{}, {})", s, h.shard_begin,
               h.shard_end, sh.begin, sh.end);
    const size_t n = size_t(sh.size());
    std::vector<float> v(n, 0.0f);
    ps_.recv(server_rank(s), v.data(), n * sizeof(float), kPsTagState);
    out.floats[server_section(s, "params")] = v;
    std::string these;
    for (int64_t b = 0; b < h.num_buffers; ++b) {
      const std::string name(h.names[b], strnlen(h.names[b], kPsStateNameBytes));
      these += name + "\n";
      ps_.recv(server_rank(s), v.data(), n * sizeof(float), kPsTagState);
      out.floats[server_section(s, "optim." + name)] = v;
    }
    LOOM_CHECK(s == 0 || these == names, "ps servers with other optimizer buffers");
    names = these;
    out.bytes[server_section(s, "meta")] =
        i64_bytes({h.shard_begin, h.shard_end, h.optimizer_steps, h.next_step});
  }
  out.bytes["ps.servers"] = i64_bytes({servers, layout_.num_params});
  out.bytes["ps.optim_names"] = std::vector<uint8_t>(names.begin(), names.end());
}

std::string PsStrategy::restore_servers(const StrategyState& in) {
  if (in.bytes.count("ps.servers") == 0)
    return "the checkpoint holds no parameter-server state (written by an older loom): the "
           "servers' optimizer state (momentum, Adam moments and step count) starts fresh";
  const std::vector<int64_t> head = bytes_i64(in.need_bytes("ps.servers", 2 * sizeof(int64_t)));
  const int64_t old_servers = head[0], n = layout_.num_params;
  if (head[1] != n || old_servers < 1 || old_servers > n)
    throw InputError(fmt::format(
        "checkpoint: strategy section 'ps.servers' names {} servers over {} parameters; this "
        "model has {} (another model?)",
        old_servers, head[1], n));
  const std::vector<uint8_t>& raw_names = in.bytes.at("ps.optim_names");
  std::vector<std::string> names;
  {
    std::string cur;
    for (uint8_t c : raw_names) {
      if (c == '\n') {
        names.push_back(cur);
        cur.clear();
      } else {
        cur += char(c);
      }
    }
    if (!cur.empty() || int(names.size()) > kPsMaxStateBuffers)
      throw InputError("checkpoint: strategy section 'ps.optim_names' is malformed");
    for (const std::string& name : names)
      if (name.empty() || int(name.size()) >= kPsStateNameBytes)
        throw InputError("checkpoint: strategy section 'ps.optim_names' is malformed");
  }
  // The whole state, put together by key from the checkpoint's servers.
  std::vector<float> params(static_cast<size_t>(n));
  std::vector<std::vector<float>> bufs(names.size(), std::vector<float>(size_t(n)));
  int64_t covered = 0, steps = 0, next_step = 0;
  for (int64_t s = 0; s < old_servers; ++s) {
    const std::vector<int64_t> meta =
        bytes_i64(in.need_bytes(server_section(int(s), "meta"), 4 * sizeof(int64_t)));
    if (meta[0] != covered || meta[1] <= meta[0] || meta[1] > n)
      throw InputError(fmt::format(
          "checkpoint: strategy section '{}' holds keys [{}, {}); the servers before it end at "
          "{} of {}",
          server_section(int(s), "meta"), meta[0], meta[1], covered, n));
    if (s > 0 && (meta[2] != steps || meta[3] != next_step))
      throw InputError(fmt::format(
          "checkpoint: strategy section '{}': server {} at step {} (optimizer step {}), server 0 "
          "at {} ({})",
          server_section(int(s), "meta"), s, meta[3], meta[2], next_step, steps));
    steps = meta[2];
    next_step = meta[3];
    const size_t count = size_t(meta[1] - meta[0]);
    const std::vector<float>& p = in.need_floats(server_section(int(s), "params"), count);
    std::copy(p.begin(), p.end(), params.begin() + meta[0]);
    for (size_t b = 0; b < names.size(); ++b) {
      const std::vector<float>& v =
          in.need_floats(server_section(int(s), "optim." + names[b]), count);
      std::copy(v.begin(), v.end(), bufs[b].begin() + meta[0]);
    }
    covered = meta[1];
  }
  if (covered != n)
    throw InputError(fmt::format(
        "checkpoint: the parameter servers' sections cover keys [0, {}) of {}", covered, n));
  if (queue_) queue_->wait_idle();
  // Each server of this run takes its key range.
  const int servers = options_.servers;
  std::vector<PsControl> ctl(size_t(servers), PsControl{PsControl::kRestore, next_step, 0});
  std::vector<PsShardState> headers(static_cast<size_t>(servers));
  std::vector<comm::Request> sends;
  for (int s = 0; s < servers; ++s) {
    const PsShard& sh = layout_.shards[size_t(s)];
    PsShardState& h = headers[size_t(s)];
    h.shard_begin = sh.begin;
    h.shard_end = sh.end;
    h.optimizer_steps = steps;
    h.next_step = next_step;
    h.num_buffers = int64_t(names.size());
    for (size_t b = 0; b < names.size(); ++b)
      std::memcpy(h.names[b], names[b].data(), names[b].size());
    const int r = server_rank(s);
    const size_t bytes = size_t(sh.size()) * sizeof(float);
    sends.push_back(ps_.isend(r, &ctl[size_t(s)], sizeof(PsControl), kPsTagControl));
    sends.push_back(ps_.isend(r, &h, sizeof h, kPsTagState));
    sends.push_back(ps_.isend(r, params.data() + sh.begin, bytes, kPsTagState));
    for (const std::vector<float>& b : bufs)
      sends.push_back(ps_.isend(r, b.data() + sh.begin, bytes, kPsTagState));
  }
  wait(sends, "the servers to take the checkpoint's state");
  if (options_.staleness > 0)
    return fmt::format(
        "ps.staleness = {}: the servers' state is restored, but the versions in flight "
        "between workers and servers are not in checkpoints, so the steps after the resume "
        "compute on other (staler) parameters than the uninterrupted run",
        options_.staleness);
  return "";
}

void PsStrategy::restore_state(const StrategyState& in) {
  resumed_ = true;
  if (ps_.rank() != 0) return;
  const std::string inexact = restore_servers(in);
  if (!inexact.empty() && !warned_) {
    log_warn("parameter server: {}", inexact);
    warned_ = true;
  }
}

std::string PsStrategy::restore_resharded(const std::vector<StrategyState>& ranks) {
  resumed_ = true;
  if (ps_.rank() != 0) return "";
  return restore_servers(ranks.at(0));
}

}  // namespace loom::sync
