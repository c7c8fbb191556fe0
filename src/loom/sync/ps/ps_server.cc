#include "loom/sync/ps/ps_server.h"

#include <cstring>
#include <vector>

#include "loom/core/error.h"
#include "loom/core/log.h"
#include "loom/optim/optimizer.h"
#include "loom/sync/ps/ps_protocol.h"
#include "loom/tensor/cpu/cpu_backend.h"

namespace loom::sync {
namespace {

struct LocalPiece {
  int64_t offset;  // into the shard
  int64_t count;
};

// acc[i] += in[i]: workers are summed in rank order, so a run's bits do not depend on timing.
void accumulate(float* __restrict acc, const float* __restrict in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc[i] += in[i];
}

class ShardServer {
 public:
  ShardServer(comm::Communicator& c, int num_workers, const optim::OptimizerOptions& optimizer)
      : c_(c),
        workers_(num_workers),
        shard_(c.rank() - num_workers),
        optimizer_options_(optimizer) {}

  void run() {
    receive_start();
    for (;;) {
      PsControl ctl;
      c_.recv(0, &ctl, sizeof ctl, kPsTagControl);
      if (ctl.command == PsControl::kStop) break;
      if (ctl.command == PsControl::kSave) {
        send_state();
        continue;
      }
      if (ctl.command == PsControl::kRestore) {
        receive_state();
        continue;
      }
      // After a restore the loop may go on from a later step (a step skipped for a NaN loss
      // is rolled back here but not run again).
      if (restored_ && ctl.command == PsControl::kStep && ctl.step > next_step_)
        next_step_ = ctl.step;
      restored_ = false;
      if (ctl.command != PsControl::kStep || ctl.step != next_step_)
        throw CommError(
            fmt::format("ps server {}: expected step {} from rank 0, got command {} "
                        "for step {}",
                        shard_, next_step_, ctl.command, ctl.step));
      serve_step(float(ctl.lr));
      ++next_step_;
    }
    for (auto& sends : sends_) c_.wait_all(sends);
    log_debug("ps server {}: served {} steps", shard_, next_step_);
  }

 private:
  void receive_start() {
    PsHello hello;
    c_.recv(0, &hello, sizeof hello, kPsTagHello);
    if (hello.magic != kPsMagic || hello.num_workers != workers_ ||
        hello.shard_end <= hello.shard_begin || hello.num_pieces < 1 ||
        hello.num_pieces > kPsMaxPieces)
      throw CommError(
          fmt::format("ps server {} (rank {}): bad start message from rank 0 "
                      "({} workers, shard [{}, {}), {} pieces; this server counts "
                      "{} workers)",
                      shard_, c_.rank(), hello.num_workers, hello.shard_begin, hello.shard_end,
                      hello.num_pieces, workers_));
    n_ = hello.shard_end - hello.shard_begin;
    begin_ = hello.shard_begin;
    std::vector<int64_t> raw(size_t(2 * hello.num_pieces));
    c_.recv(0, raw.data(), raw.size() * sizeof(int64_t), kPsTagPieces);
    int64_t covered = 0;
    for (int64_t p = 0; p < hello.num_pieces; ++p) {
      const LocalPiece lp{raw[size_t(2 * p)] - hello.shard_begin, raw[size_t(2 * p + 1)]};
      LOOM_CHECK(lp.offset >= 0 && lp.count > 0 && lp.offset + lp.count <= n_,
                 "ps server {}: piece {} [{}, +{}) outside the shard of {}", shard_, p, lp.offset,
                 lp.count, n_);
      covered += lp.count;
      pieces_.push_back(lp);
    }
    LOOM_CHECK_EQ(covered, n_);
    params_.resize(size_t(n_));
    c_.recv(0, params_.data(), size_t(n_) * sizeof(float), kPsTagInit);
    optimizer_ = optim::make_optimizer(optimizer_options_, cpu_backend(), n_);
    inbox_.assign(size_t(workers_), std::vector<float>(size_t(n_)));
    sends_.resize(pieces_.size());
    recvs_.resize(pieces_.size());
    // Version 0: every worker starts from rank 0's parameters, pulled from the servers.
    std::vector<comm::Request> init;
    for (int w = 0; w < workers_; ++w)
      init.push_back(c_.isend(w, params_.data(), size_t(n_) * sizeof(float), kPsTagInit));
    c_.wait_all(init);
    // A resumed run's first step is the one it resumes at.
    restored_ = true;
  }

  PsShardState state_header() {
    PsShardState h;
    h.shard_begin = begin_;
    h.shard_end = begin_ + n_;
    h.optimizer_steps = optimizer_->steps();
    h.next_step = next_step_;
    const std::vector<optim::StateBuffer> bufs = optimizer_->state();
    LOOM_CHECK(int(bufs.size()) <= kPsMaxStateBuffers, "ps server {}: {} optimizer buffers", shard_,
               bufs.size());
    h.num_buffers = int64_t(bufs.size());
    for (size_t i = 0; i < bufs.size(); ++i) {
      LOOM_CHECK(int(bufs[i].name.size()) < kPsStateNameBytes, "optimizer buffer name {}",
                 bufs[i].name);
      std::memcpy(h.names[i], bufs[i].name.data(), bufs[i].name.size());
    }
    return h;
  }

  // Between steps: the shard's parameters, optimizer buffers and counters to rank 0.
  void send_state() {
    const PsShardState h = state_header();
    c_.send(0, &h, sizeof h, kPsTagState);
    c_.send(0, params_.data(), size_t(n_) * sizeof(float), kPsTagState);
    for (const optim::StateBuffer& b : optimizer_->state()) {
      LOOM_CHECK_EQ(b.size, n_);
      c_.send(0, b.data, size_t(n_) * sizeof(float), kPsTagState);
    }
  }

  // The reverse of send_state: rank 0 hands this shard the state of a checkpoint (put
  // together by key from the servers that wrote it).
  void receive_state() {
    // The last step's pulls read the parameters this overwrites.
    for (auto& sends : sends_) {
      c_.wait_all(sends);
      sends.clear();
    }
    const PsShardState mine = state_header();
    PsShardState h;
    c_.recv(0, &h, sizeof h, kPsTagState);
    if (h.magic != kPsMagic || h.shard_begin != mine.shard_begin || h.shard_end != mine.shard_end ||
        h.num_buffers != mine.num_buffers || std::memcmp(h.names, mine.names, sizeof h.names) != 0)
      throw CommError(fmt::format(
          "ps server {} (rank {}): restore message for keys [{}, {}) with {} optimizer buffers; "
          "this server holds [{}, {}) with {}",
          shard_, c_.rank(), h.shard_begin, h.shard_end, h.num_buffers, mine.shard_begin,
          mine.shard_end, mine.num_buffers));
    c_.recv(0, params_.data(), size_t(n_) * sizeof(float), kPsTagState);
    for (const optim::StateBuffer& b : optimizer_->state())
      c_.recv(0, b.data, size_t(n_) * sizeof(float), kPsTagState);
    optimizer_->set_steps(h.optimizer_steps);
    next_step_ = h.next_step;
    restored_ = true;
  }

  void serve_step(float lr) {
    optimizer_->advance();
    // Post every receive of the step at once: whichever worker's piece comes first lands
    // straight in its inbox.
    for (size_t p = 0; p < pieces_.size(); ++p) {
      recvs_[p].clear();
      for (int w = 0; w < workers_; ++w)
        recvs_[p].push_back(c_.irecv(w, inbox_[size_t(w)].data() + pieces_[p].offset,
                                     size_t(pieces_[p].count) * sizeof(float),
                                     ps_push_tag(int(p))));
    }
    for (size_t p = 0; p < pieces_.size(); ++p) {
      const LocalPiece& lp = pieces_[p];
      c_.wait_all(recvs_[p]);
      float* acc = inbox_[0].data() + lp.offset;
      for (int w = 1; w < workers_; ++w)
        accumulate(acc, inbox_[size_t(w)].data() + lp.offset, lp.count);
      // The last step's pull of this piece must be out before the piece changes.
      c_.wait_all(sends_[p]);
      sends_[p].clear();
      optimizer_->update(params_.data() + lp.offset, acc, lp.offset, lp.count, lr);
      for (int w = 0; w < workers_; ++w)
        sends_[p].push_back(c_.isend(w, params_.data() + lp.offset,
                                     size_t(lp.count) * sizeof(float), ps_pull_tag(int(p))));
    }
  }

  comm::Communicator& c_;
  const int workers_;
  const int shard_;
  const optim::OptimizerOptions optimizer_options_;
  int64_t n_ = 0, begin_ = 0;
  bool restored_ = false;
  int64_t next_step_ = 0;
  std::vector<LocalPiece> pieces_;
  std::vector<float> params_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::vector<std::vector<float>> inbox_;  // by worker: the shard's gradients of this step
  std::vector<std::vector<comm::Request>> recvs_, sends_;  // by piece
};

}  // namespace

void serve_ps_shard(comm::Communicator& c, int num_workers,
                    const optim::OptimizerOptions& optimizer) {
  LOOM_CHECK(num_workers >= 1 && c.rank() >= num_workers && c.rank() < c.size(),
             "rank {} of {} is no server of a world with {} workers", c.rank(), c.size(),
             num_workers);
  ShardServer(c, num_workers, optimizer).run();
}

}  // namespace loom::sync
