#include "loom/sync/allreduce/device_compressed_allreduce.h"

#include <fmt/format.h>

#include "loom/core/error.h"
#include "loom/core/trace.h"

namespace loom::sync {

// The codecs are the layer below; this file composes them with the transport.
using namespace loom::compress;

DeviceAllreduceState make_device_allreduce_state(const DeviceCodec& codec, Backend& backend,
                                                 size_t n, int world, int rank,
                                                 const std::string& bucket) {
  LOOM_CHECK(world >= 1 && rank >= 0 && rank < world, "rank {} of world {}", rank, world);
  DeviceAllreduceState st;
  st.bucket = bucket;
  st.n = n;
  st.world = world;
  st.rank = rank;
  st.slot_bytes = codec.encoded_bytes(n);
  st.residual = DeviceBuffer<float>(backend, int64_t(n));
  st.gather = DeviceBuffer<uint8_t>(backend, int64_t(st.slot_bytes) * world);
  st.wire_bytes = size_t(world - 1) * st.slot_bytes;
  return st;
}

void device_compressed_allreduce(comm::Communicator& c, DeviceCodec& codec, Backend& backend,
                                 float* data, DeviceAllreduceState& st) {
  LOOM_CHECK_EQ(c.size(), st.world);
  LOOM_CHECK_EQ(c.rank(), st.rank);
  const size_t E = st.slot_bytes;
  if (st.n == 0 || E == 0) return;
  trace::Span phase;  // timeline (core/trace.h)
  phase.next("encode", "codec");
  if (!codec.host().error_feedback()) backend.fill(st.residual.data(), st.residual.size(), 0.0f);
  uint8_t* slots = st.gather.data();
  codec.encode(data, st.residual.data(), st.n, slots + size_t(st.rank) * E);
  phase.next("allgather", "comm");
  c.allgather(slots, E * size_t(st.world), E);  // NCCL orders it after the encode
  phase.next("decode", "codec");
  for (int i = 0; i < st.world; ++i)
    codec.decode(slots + size_t(i) * E, st.n, data, /*accumulate=*/i > 0);
  ++st.steps;
}

void check_device_codec_finite(DeviceCodec& codec, const std::string& what) {
  if (codec.take_non_finite())
    throw NumericError(fmt::format("codec {}: {}: a gradient plus its residual holds NaN or Inf",
                                   codec.host().name(), what));
}

}  // namespace loom::sync
