#include "loom/sync/codec_state_io.h"

#include <cstring>

#include "loom/core/error.h"

namespace loom::sync {
namespace {

void save_one(const compress::CodecState& st, const std::string& prefix, StrategyState& out) {
  // As floats whatever the format: a bf16 residual converts exactly both ways.
  out.floats[prefix + ".residual"] = st.residual_values();
  out.floats[prefix + ".aux"] = st.aux;
  std::vector<uint8_t> steps(sizeof(uint64_t));
  std::memcpy(steps.data(), &st.steps, sizeof(uint64_t));
  out.bytes[prefix + ".steps"] = std::move(steps);
}

void restore_one(compress::CodecState& st, const std::string& prefix, const StrategyState& in) {
  st.set_residual_values(in.need_floats(prefix + ".residual", st.residual_size()));
  st.aux = in.need_floats(prefix + ".aux", st.aux.size());
  std::memcpy(&st.steps, in.need_bytes(prefix + ".steps", sizeof(uint64_t)).data(),
              sizeof(uint64_t));
}

}  // namespace

void save_codec_states(const sync::CompressedAllreduceState& st, const std::string& prefix,
                       StrategyState& out) {
  for (size_t j = 0; j < st.worker.size(); ++j)
    save_one(st.worker[j], prefix + ".worker" + std::to_string(j), out);
  save_one(st.owner, prefix + ".owner", out);
}

void restore_codec_states(sync::CompressedAllreduceState& st, const std::string& prefix,
                          const StrategyState& in) {
  for (size_t j = 0; j < st.worker.size(); ++j)
    restore_one(st.worker[j], prefix + ".worker" + std::to_string(j), in);
  restore_one(st.owner, prefix + ".owner", in);
}

std::vector<double> add_saved_residuals(const std::vector<StrategyState>& ranks,
                                        const std::string& prefix, size_t n,
                                        std::vector<double> total) {
  total.resize(n, 0.0);
  const int world = int(ranks.size());
  for (int r = 0; r < world; ++r) {
    const StrategyState& st = ranks[size_t(r)];
    // Striped (as many worker sections as ranks, more than one): stripe j of the bucket is
    // block_range(n, world, j), the owner side covers the rank's own stripe. Otherwise the one
    // worker residual, and an owner's if any, cover the whole bucket.
    const bool striped =
        world > 1 && st.floats.count(prefix + ".worker" + std::to_string(world - 1) + ".residual");
    auto add = [&](const std::string& name, size_t offset) {
      auto it = st.floats.find(name);
      if (it == st.floats.end()) return;
      if (offset + it->second.size() > n)
        throw InputError(fmt::format(
            "checkpoint: strategy section '{}' of rank {} holds {} floats from {}, past the {} of "
            "its bucket (another config?)",
            name, r, it->second.size(), offset, n));
      for (size_t i = 0; i < it->second.size(); ++i) total[offset + i] += double(it->second[i]);
    };
    for (int j = 0; j < (striped ? world : 1); ++j)
      add(prefix + ".worker" + std::to_string(j) + ".residual",
          striped ? comm::block_range(n, world, j).begin : 0);
    add(prefix + ".owner.residual", striped ? comm::block_range(n, world, r).begin : 0);
  }
  return total;
}

void restore_summed_residuals(sync::CompressedAllreduceState& st, const std::string& prefix,
                              std::span<const double> total, const StrategyState& old_rank0) {
  uint64_t steps = 0;
  auto it = old_rank0.bytes.find(prefix + ".worker0.steps");
  if (it != old_rank0.bytes.end() && it->second.size() == sizeof(uint64_t))
    std::memcpy(&steps, it->second.data(), sizeof(uint64_t));
  auto aux = old_rank0.floats.find(prefix + ".worker0.aux");
  for (size_t j = 0; j < st.worker.size(); ++j) {
    compress::CodecState& w = st.worker[j];
    w.steps = steps;
    if (aux != old_rank0.floats.end() && aux->second.size() == w.aux.size()) w.aux = aux->second;
    if (w.residual_size() == 0) continue;  // no error feedback
    const size_t begin =
        st.aggregation == compress::Aggregation::kStripes ? st.stripes[j].begin : 0;
    std::vector<float> part(w.n, 0.0f);
    if (st.rank == 0 && !total.empty())
      for (size_t i = 0; i < w.n; ++i) part[i] = float(total[begin + i]);
    w.set_residual_values(part);
  }
  st.owner.steps = steps;
  st.owner.clear_residual();
}

}  // namespace loom::sync
