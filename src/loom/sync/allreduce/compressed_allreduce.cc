#include "loom/sync/allreduce/compressed_allreduce.h"

#include <algorithm>
#include <cstring>

#include "loom/compress/half.h"
#include "loom/compress/powersgd_codec.h"
#include "loom/core/error.h"
#include "loom/core/trace.h"

namespace loom::sync {

// The codecs are the layer below; this file composes them with the transport.
using namespace loom::compress;
namespace {

std::byte* slot(std::vector<uint32_t>& buf, size_t slot_bytes, int i) {
  return reinterpret_cast<std::byte*>(buf.data()) + size_t(i) * slot_bytes;
}

void two_stage_allreduce(comm::Communicator& c, const Codec& codec, std::span<float> data,
                         CompressedAllreduceState& st) {
  const int N = st.world, me = st.rank;
  const size_t E = st.slot_bytes;
  if (E == 0) return;  // an empty bucket
  auto bytes_of = [&](int j) { return codec.encoded_bytes(st.stripes[j].size()); };

  // Stage 1: encode every stripe with its worker residual; send each to its owner.
  trace::Span phase;  // timeline (core/trace.h): encode, send/receive, decode phases
  phase.next("encode", "codec");
  stripes_encode(codec, data, st);
  phase.next("send/receive", "comm");
  const int tag = c.next_collective_tag();
  std::vector<comm::Request> reqs;
  reqs.reserve(2 * size_t(N));
  const size_t mine = bytes_of(me);
  for (int i = 0; i < N; ++i)
    if (i != me && mine > 0) reqs.push_back(c.irecv(i, slot(st.recv, E, i), mine, tag));
  for (int j = 0; j < N; ++j)
    if (j != me && bytes_of(j) > 0)
      reqs.push_back(c.isend(j, slot(st.send, E, j), bytes_of(j), tag));
  c.wait_all(reqs);

  phase.next("decode + encode sum", "codec");
  stripes_reduce(codec, st);

  // Stage 2: allgather the owners' encodings; everyone decodes every stripe.
  phase.next("allgather", "comm");
  c.allgather(st.gather.data(), E * size_t(N), E);
  phase.next("decode", "codec");
  stripes_decode(codec, data, st);
}

void gather_allreduce(comm::Communicator& c, const Codec& codec, std::span<float> data,
                      CompressedAllreduceState& st) {
  const size_t E = st.slot_bytes;
  if (E == 0) return;
  trace::Span phase;  // timeline (core/trace.h)
  phase.next("encode", "codec");
  codec.encode(data, st.worker[0], {slot(st.gather, E, st.rank), E});
  phase.next("allgather", "comm");
  c.allgather(st.gather.data(), E * size_t(st.world), E);
  phase.next("decode", "codec");
  for (int i = 0; i < st.world; ++i)
    codec.decode({slot(st.gather, E, i), E}, data,
                 i == 0 ? DecodeMode::kWrite : DecodeMode::kAccumulate);
}

// PowerSGD on plain allreduce (Vogels et al. 2019, Algorithm 1), one power step per matrix
// of the bucket; the factors of all matrices travel in one allreduce of P and one of Q.
// Worker i keeps M_i - P (M_i^T P)^T, so the residuals sum to what the aggregate
// P (sum_i M_i^T P)^T lacks. (Vogels et al. keep M_i - P Qbar^T with the averaged Q: the
// same sum, and the next step's P = sum_i M_i Q and Q = sum_i M_i^T P depend on the
// residuals only through their sum, so both give the same updates.)
void powersgd_allreduce(comm::Communicator& c, const PowerSgdCodec& codec, std::span<float> data,
                        CompressedAllreduceState& st) {
  if (st.n == 0) return;
  c.allreduce(powersgd_local_p(codec, data, st));
  c.allreduce(powersgd_local_q(codec, st));
  powersgd_decode(codec, data, st);
}

}  // namespace

void CompressedAllreduceState::add_residuals(std::span<double> acc) const {
  LOOM_CHECK_EQ(acc.size(), n);
  if (aggregation != Aggregation::kStripes) {
    for (size_t i = 0; i < n; ++i) acc[i] += worker[0].residual_value(i);
    return;
  }
  for (size_t j = 0; j < stripes.size(); ++j)
    for (size_t i = 0; i < stripes[j].size(); ++i)
      acc[stripes[j].begin + i] += worker[j].residual_value(i);
  for (size_t i = 0; i < owner.residual_size(); ++i)
    acc[stripes[rank].begin + i] += owner.residual_value(i);
}

bool can_gather(const Codec& codec) {
  return codec.aggregation() != Aggregation::kLinear;
}

CompressedAllreduceState make_compressed_allreduce_state(const Codec& codec, size_t n, int world,
                                                         int rank, const std::string& bucket,
                                                         std::span<const MatrixDims> matrices,
                                                         std::optional<Aggregation> aggregation) {
  LOOM_CHECK(world >= 1 && rank >= 0 && rank < world, "rank {} of world {}", rank, world);
  CompressedAllreduceState st;
  st.n = n;
  st.world = world;
  st.rank = rank;
  st.aggregation = aggregation.value_or(codec.aggregation());
  LOOM_CHECK(st.aggregation == codec.aggregation() ||
                 (st.aggregation == Aggregation::kGather && can_gather(codec)),
             "codec {} cannot be summed that way", codec.name());
  auto words = [](size_t bytes) { return (bytes + 3) / 4; };
  switch (st.aggregation) {
    case Aggregation::kStripes: {
      for (int j = 0; j < world; ++j) {
        st.stripes.push_back(comm::block_range(n, world, j));
        st.worker.push_back(codec.make_state(
            st.stripes[j].size(), fmt::format("{} (stripe {} of {})", bucket, j, world)));
        st.slot_bytes = std::max(st.slot_bytes, codec.encoded_bytes(st.stripes[j].size()));
      }
      st.owner = codec.make_state(st.stripes[rank].size(),
                                  fmt::format("{} (owner of stripe {})", bucket, rank));
      st.send.resize(words(st.slot_bytes) * world);
      st.recv.resize(words(st.slot_bytes) * world);
      st.scratch.resize(st.stripes[rank].size());
      break;
    }
    case Aggregation::kGather:
      st.worker.push_back(codec.make_state(n, bucket));
      st.slot_bytes = codec.encoded_bytes(n);
      break;
    case Aggregation::kLinear: {
      auto* psgd = dynamic_cast<const PowerSgdCodec*>(&codec);
      LOOM_CHECK(psgd != nullptr, "codec {} claims linear aggregation; only powersgd has it",
                 codec.name());
      st.worker.push_back(psgd->make_state(n, bucket, matrices));
      const PowerSgdPlan plan = psgd->plan(st.worker[0]);
      st.scratch.resize(plan.p_floats + plan.q_floats);
      break;
    }
  }
  st.gather.resize(words(st.slot_bytes) * world);
  st.wire_bytes = compressed_allreduce_wire_bytes(codec, n, world, st.aggregation);
  if (st.aggregation == Aggregation::kLinear && world > 1) {  // the factors of its own matrices
    const PowerSgdPlan plan = static_cast<const PowerSgdCodec&>(codec).plan(st.worker[0]);
    st.wire_bytes =
        2 * size_t(world - 1) * (plan.p_floats + plan.q_floats) * sizeof(float) / size_t(world);
  }
  return st;
}

void stripes_encode(const Codec& codec, std::span<const float> data, CompressedAllreduceState& st) {
  LOOM_CHECK(st.aggregation == Aggregation::kStripes && data.size() == st.n,
             "stripes_encode: a kStripes state of {} elements, given {}", st.n, data.size());
  for (int j = 0; j < st.world; ++j)
    codec.encode(data.subspan(st.stripes[j].begin, st.stripes[j].size()), st.worker[j],
                 {slot(st.send, st.slot_bytes, j), codec.encoded_bytes(st.stripes[j].size())});
}

void stripes_reduce(const Codec& codec, CompressedAllreduceState& st) {
  const int me = st.rank;
  const size_t E = st.slot_bytes, mine = codec.encoded_bytes(st.stripes[me].size());
  // Decode and sum in rank order (the same order on every owner), re-encode the sum with the
  // owner-side residual into my slot of the gather buffer.
  std::span<float> sum(st.scratch.data(), st.stripes[me].size());
  for (int i = 0; i < st.world; ++i) {
    const std::byte* in = i == me ? slot(st.send, E, me) : slot(st.recv, E, i);
    codec.decode({in, mine}, sum, i == 0 ? DecodeMode::kWrite : DecodeMode::kAccumulate);
  }
  std::byte* out = slot(st.gather, E, me);
  std::memset(out, 0, E);
  codec.encode(sum, st.owner, {out, mine});
}

void stripes_decode(const Codec& codec, std::span<float> data, CompressedAllreduceState& st) {
  LOOM_CHECK_EQ(data.size(), st.n);
  for (int j = 0; j < st.world; ++j)
    codec.decode({slot(st.gather, st.slot_bytes, j), codec.encoded_bytes(st.stripes[j].size())},
                 data.subspan(st.stripes[j].begin, st.stripes[j].size()), DecodeMode::kWrite);
}

namespace {
const PowerSgdCodec& powersgd_of(const Codec& codec, const CompressedAllreduceState& st) {
  auto* psgd = dynamic_cast<const PowerSgdCodec*>(&codec);
  LOOM_CHECK(psgd != nullptr && st.aggregation == Aggregation::kLinear,
             "powersgd steps on codec {} or a state not made for powersgd", codec.name());
  return *psgd;
}
}  // namespace

std::span<float> powersgd_local_p(const Codec& codec, std::span<const float> data,
                                  CompressedAllreduceState& st) {
  const PowerSgdCodec& psgd = powersgd_of(codec, st);
  LOOM_CHECK_EQ(data.size(), st.n);
  CodecState& cs = st.worker[0];
  const PowerSgdPlan plan = psgd.plan(cs);
  if (st.n == 0) return {st.scratch.data(), 0};
  if (!psgd.error_feedback()) std::fill(cs.residual.begin(), cs.residual.end(), 0.0f);
  float* m = cs.residual.data();
  uint32_t bad = 0;
  for (size_t i = 0; i < st.n; ++i) {
    m[i] += data[i];
    bad |= uint32_t(!is_finite_bits(m[i]));
  }
  if (bad) throw_non_finite(psgd.name(), cs, data);
  float* p = st.scratch.data();
  float* qs = cs.aux.data();  // warm-started Q, identical on every rank
  for (size_t b = 0; b < plan.blocks.size(); ++b) {
    const PowerSgdBlock& k = plan.blocks[b];
    refill_zero_columns(qs + k.q, k.s.cols, k.s.rank, psgd.refill_key(cs, b));
    powersgd_mul_q(m + k.offset, k.n, k.s, qs + k.q, p + k.p);
  }
  return {p, plan.p_floats};
}

std::span<float> powersgd_local_q(const Codec& codec, CompressedAllreduceState& st) {
  const PowerSgdCodec& psgd = powersgd_of(codec, st);
  CodecState& cs = st.worker[0];
  const PowerSgdPlan plan = psgd.plan(cs);
  float* m = cs.residual.data();
  float* p = st.scratch.data();
  float* q = p + plan.p_floats;
  if (st.n == 0) return {q, 0};
  for (const PowerSgdBlock& k : plan.blocks) {
    orthonormalise_columns(p + k.p, k.s.rows, k.s.rank);
    powersgd_mul_p(m + k.offset, k.n, k.s, p + k.p, q + k.q);
    powersgd_expand(p + k.p, q + k.q, k.n, k.s, m + k.offset, DecodeMode::kAccumulate,
                    -1.0f);  // local residual
  }
  return {q, plan.q_floats};
}

void powersgd_decode(const Codec& codec, std::span<float> data, CompressedAllreduceState& st) {
  const PowerSgdCodec& psgd = powersgd_of(codec, st);
  LOOM_CHECK_EQ(data.size(), st.n);
  CodecState& cs = st.worker[0];
  if (st.n == 0) return;
  const PowerSgdPlan plan = psgd.plan(cs);
  const float* p = st.scratch.data();
  const float* q = p + plan.p_floats;
  std::copy(q, q + plan.q_floats, cs.aux.begin());
  for (const PowerSgdBlock& k : plan.blocks)
    powersgd_expand(p + k.p, q + k.q, k.n, k.s, data.data() + k.offset, DecodeMode::kWrite);
  ++cs.steps;
}

void compressed_allreduce(comm::Communicator& c, const Codec& codec, std::span<float> data,
                          CompressedAllreduceState& st) {
  LOOM_CHECK_EQ(data.size(), st.n);
  LOOM_CHECK_EQ(c.size(), st.world);
  LOOM_CHECK_EQ(c.rank(), st.rank);
  LOOM_CHECK(codec.aggregation() == st.aggregation ||
                 (st.aggregation == Aggregation::kGather && can_gather(codec)),
             "state made for another codec than {}", codec.name());
  switch (st.aggregation) {
    case Aggregation::kStripes:
      two_stage_allreduce(c, codec, data, st);
      break;
    case Aggregation::kGather:
      gather_allreduce(c, codec, data, st);
      break;
    case Aggregation::kLinear:
      powersgd_allreduce(c, dynamic_cast<const PowerSgdCodec&>(codec), data, st);
      break;
  }
}

size_t compressed_allreduce_wire_bytes(const Codec& codec, size_t n, int world) {
  return compressed_allreduce_wire_bytes(codec, n, world, codec.aggregation());
}

size_t compressed_allreduce_wire_bytes(const Codec& codec, size_t n, int world,
                                       Aggregation aggregation) {
  const size_t N = size_t(world);
  if (N == 1) return 0;
  switch (aggregation) {
    case Aggregation::kStripes: {
      size_t slot = 0, to_owners = 0;
      for (int j = 0; j < world; ++j) {
        size_t e = codec.encoded_bytes(comm::block_range(n, world, j).size());
        slot = std::max(slot, e);
        to_owners += e;
      }
      // Stage 1 sends every stripe but (about) one's own; stage 2's ring allgather N-1 slots.
      return to_owners - to_owners / N + (N - 1) * slot;
    }
    case Aggregation::kGather:
      return (N - 1) * codec.encoded_bytes(n);
    case Aggregation::kLinear:
      return 2 * (N - 1) * codec.encoded_bytes(n) / N;
  }
  return 0;
}

size_t fp32_allreduce_wire_bytes(size_t n, int world) {
  return 2 * (size_t(world) - 1) * n * sizeof(float) / size_t(world);
}

}  // namespace loom::sync
