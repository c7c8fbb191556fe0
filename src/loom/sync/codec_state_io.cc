#include "loom/sync/codec_state_io.h"

#include <cstring>

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

}  // namespace loom::sync
