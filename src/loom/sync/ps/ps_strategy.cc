#include "loom/sync/ps/ps_strategy.h"

#include <algorithm>
#include <cstring>

#include "loom/core/error.h"
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

void PsStrategy::wait(std::vector<comm::Request>& requests, const char* what) {
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
  LOOM_CHECK(step == step_ + 1, "steps must follow each other: {} after {}", step, step_);
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

std::string PsStrategy::restore_resharded(const std::vector<StrategyState>& ranks) {
  throw ConfigError(fmt::format(
      "sync = \"ps\": a checkpoint of {} worker{} resumes on as many only (the servers' "
      "optimizer state is not in checkpoints, so there is nothing exact to reshard)",
      ranks.size(), ranks.size() == 1 ? "" : "s"));
}

}  // namespace loom::sync
