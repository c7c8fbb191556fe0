#include "loom/measure/fidelity_probe.h"

#include <fmt/format.h>

#include <cmath>

#include "loom/compress/powersgd_codec.h"
#include "loom/compress/registry.h"
#include "loom/core/error.h"
#include "loom/tensor/cpu/cpu_backend.h"

namespace loom::measure {
namespace {

bool all_finite(std::span<const float> x) {
  for (float v : x)
    if (!std::isfinite(v)) return false;
  return true;
}

// Mean of x[from, to) (clamped), 0 when empty.
double mean_of(const std::vector<double>& x, size_t from, size_t to) {
  to = std::min(to, x.size());
  if (from >= to) return 0;
  double s = 0;
  for (size_t i = from; i < to; ++i) s += x[i];
  return s / double(to - from);
}

}  // namespace

struct FidelityProbe::Track {
  std::unique_ptr<compress::Codec> codec;
  std::vector<compress::CodecState> states;  // one per segment
  std::unique_ptr<optim::Optimizer> optimizer;
  std::vector<float> params, decoded;
  std::vector<uint32_t> packed;  // one segment's encoding, 4-byte aligned
  double cosine_sum = 0;
  std::vector<double> residual_norm;  // |residual| after each step
};

FidelityProbe::FidelityProbe(const std::vector<compress::CodecOptions>& codecs,
                             const optim::OptimizerOptions& optimizer,
                             std::span<const float> params,
                             const std::vector<FidelitySegment>& segments, int64_t max_elements)
    : full_(int64_t(params.size())) {
  int64_t covered = 0;
  for (const FidelitySegment& s : segments) {
    LOOM_CHECK(s.offset == covered && s.count >= 0, "fidelity segments must tile the parameters");
    covered += s.count;
  }
  LOOM_CHECK_EQ(covered, full_);
  if (max_elements > 0 && full_ > max_elements) stride_ = (full_ + max_elements - 1) / max_elements;
  for (const FidelitySegment& s : segments) {
    FidelitySegment sampled{int64_t(index_.size()), 0,
                            stride_ == 1 ? s.matrices : std::vector<compress::MatrixDims>{}};
    for (int64_t i = 0; i < s.count; i += stride_) index_.push_back(s.offset + i);
    sampled.count = int64_t(index_.size()) - sampled.offset;
    segments_.push_back(std::move(sampled));
  }
  n_ = int64_t(index_.size());
  for (int64_t i : index_) start_.push_back(params[size_t(i)]);
  grad_.resize(size_t(n_));
  Backend& host = cpu_backend();
  exact_opt_ = optim::make_optimizer(optimizer, host, n_);
  exact_ = start_;
  before_.resize(size_t(n_));
  update_.resize(size_t(n_));
  for (const compress::CodecOptions& o : codecs) {
    auto t = std::make_unique<Track>();
    t->codec = compress::make_codec(o);
    size_t largest = 0;
    for (size_t i = 0; i < segments_.size(); ++i) {
      const FidelitySegment& s = segments_[i];
      const std::string name = fmt::format("fidelity segment {}", i);
      const auto* psgd = dynamic_cast<const compress::PowerSgdCodec*>(t->codec.get());
      t->states.push_back(psgd && !s.matrices.empty()
                              ? psgd->make_state(size_t(s.count), name, s.matrices)
                              : t->codec->make_state(size_t(s.count), name));
      largest = std::max(largest, t->codec->encoded_bytes(size_t(s.count)));
    }
    t->packed.resize(largest / 4 + 1);
    t->optimizer = optim::make_optimizer(optimizer, host, n_);
    t->params = start_;
    t->decoded.resize(size_t(n_));
    tracks_.push_back(std::move(t));
  }
}

FidelityProbe::~FidelityProbe() = default;

void FidelityProbe::record(std::span<const float> full_grad, float lr, float scale) {
  LOOM_CHECK_EQ(int64_t(full_grad.size()), full_);
  for (int64_t k = 0; k < n_; ++k) grad_[size_t(k)] = scale * full_grad[size_t(index_[size_t(k)])];
  const std::span<const float> grad(grad_);
  if (!all_finite(grad)) return;
  grad_norm_.push_back(std::sqrt(optim::squared_norm(grad.data(), n_)));
  before_ = exact_;
  exact_opt_->step(exact_.data(), grad.data(), n_, lr);
  for (int64_t i = 0; i < n_; ++i) update_[size_t(i)] = exact_[size_t(i)] - before_[size_t(i)];
  const double exact_norm = std::sqrt(optim::squared_norm(update_.data(), n_));
  for (auto& t : tracks_) {
    double residual_sq = 0;
    for (size_t i = 0; i < segments_.size(); ++i) {
      const FidelitySegment& s = segments_[i];
      if (s.count == 0) continue;
      const auto bytes = std::as_writable_bytes(std::span<uint32_t>(t->packed));
      const size_t used = t->codec->encoded_bytes(size_t(s.count));
      t->codec->encode(grad.subspan(size_t(s.offset), size_t(s.count)), t->states[i],
                       bytes.first(used));
      t->codec->decode(bytes.first(used),
                       std::span<float>(t->decoded).subspan(size_t(s.offset), size_t(s.count)),
                       compress::DecodeMode::kWrite);
      const compress::CodecState& st = t->states[i];
      for (size_t k = 0; k < st.residual_size(); ++k) {
        const double r = st.residual_value(k);
        residual_sq += r * r;
      }
    }
    before_ = t->params;
    t->optimizer->step(t->params.data(), t->decoded.data(), n_, lr);
    double along = 0, own_sq = 0;
    for (int64_t i = 0; i < n_; ++i) {
      const double u = double(t->params[size_t(i)]) - double(before_[size_t(i)]);
      along += u * double(update_[size_t(i)]);
      own_sq += u * u;
    }
    const double denominator = std::sqrt(own_sq) * exact_norm;
    // Two zero updates agree; one zero update beside another does not.
    t->cosine_sum += denominator > 0 ? along / denominator : (own_sq == exact_norm ? 1.0 : 0.0);
    t->residual_norm.push_back(std::sqrt(residual_sq));
  }
  ++steps_;
}

std::vector<perf::CodecFidelity> FidelityProbe::figures() const {
  std::vector<perf::CodecFidelity> out;
  double moved_sq = 0;
  for (int64_t i = 0; i < n_; ++i) {
    const double d = double(exact_[size_t(i)]) - double(start_[size_t(i)]);
    moved_sq += d * d;
  }
  for (const auto& t : tracks_) {
    perf::CodecFidelity f;
    f.codec = t->codec->name();
    f.steps = steps_;
    if (steps_ > 0) {
      f.update_cosine = t->cosine_sum / double(steps_);
      double apart_sq = 0;
      for (int64_t i = 0; i < n_; ++i) {
        const double d = double(t->params[size_t(i)]) - double(exact_[size_t(i)]);
        apart_sq += d * d;
      }
      f.drift = moved_sq > 0 ? std::sqrt(apart_sq / moved_sq) : (apart_sq > 0 ? INFINITY : 0.0);
      // Means over quarters of the window: one step's norms move with its mini-batch.
      const auto& r = t->residual_norm;
      const size_t q = std::max<size_t>(1, r.size() / 4);
      const double last = mean_of(r, r.size() - q, r.size());
      const double last_grad = mean_of(grad_norm_, r.size() - q, r.size());
      f.residual = last_grad > 0 ? last / last_grad : 0;
      const double second = mean_of(r, q, 2 * q);
      f.residual_growth = r.size() >= 4 && second > 0 ? last / second : 1.0;
    }
    out.push_back(f);
  }
  return out;
}

}  // namespace loom::measure
