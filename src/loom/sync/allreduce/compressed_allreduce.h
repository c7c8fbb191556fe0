// Compressed collectives, written once on a Communicator's point-to-point and its plain
// collectives, so they run over every transport (threads, MPI, later NCCL).
//
// compressed_allreduce() picks the algorithm the codec's aggregation() asks for:
//
// * kStripes, two error-compensated stages (Seide et al. 2014 / CNTK's stripe owners; Tang et
//   al. 2021 / DeepSpeed's compressed allreduce). The bucket is cut into one stripe per rank
//   (block_range). 1) Every rank encodes each stripe with its own worker-side residual for
//   that stripe and sends it to the stripe's owner. 2) The owner decodes the N encodings and
//   sums them in rank order, re-encodes the sum with its owner-side residual, and the owners'
//   encodings are allgathered; every rank decodes all stripes. Each rank sends about
//   2 (N-1)/N of the encoded bucket, like a ring allreduce of the compressed data, and every
//   rank ends with the same bits.
// * kGather (top-k): every rank encodes the whole bucket, the encodings are allgathered and
//   each rank sums the N decoded sparse vectors in rank order.
// * kLinear (PowerSGD, Vogels et al. 2019): P = M_i Q is allreduced, orthonormalised,
//   Q = M_i^T P allreduced; the result is P Q^T. Plain float allreduce: it is linear.
//
// All of them produce the SUM over ranks (as Communicator::allreduce does), in place.
// Error feedback telescopes: summed over steps, the outputs equal the summed inputs minus the
// residuals held now (every rank's worker residuals plus the owners' residuals).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "loom/comm/communicator.h"
#include "loom/compress/codec.h"

namespace loom::sync {

// One bucket's state for compressed_allreduce on one rank; created once, buffers included.
struct CompressedAllreduceState {
  size_t n = 0;
  int world = 1, rank = 0;
  compress::Aggregation aggregation = compress::Aggregation::kStripes;
  std::vector<comm::BlockRange> stripes;     // kStripes: stripe j of the bucket, owned by rank j
  std::vector<compress::CodecState> worker;  // kStripes: one per stripe; otherwise one
  compress::CodecState owner;                // kStripes: the owner-side residual of my stripe
  size_t slot_bytes = 0;                     // bytes per rank slot in the buffers below
  std::vector<uint32_t> send, recv, gather;  // word-aligned byte buffers, world slots each
  std::vector<float> scratch;                // owner sum / PowerSGD factors
  // Bytes this rank puts on the wire per call (ring allgather/allreduce accounting).
  size_t wire_bytes = 0;

  // Adds this rank's residuals (worker side, and owner side for its stripe) into acc (n).
  void add_residuals(std::span<double> acc) const;
};

// `matrices` (optional) are the bucket's matrices end to end (codec.h, compress::MatrixDims);
// PowerSGD compresses each on its own, the other codecs ignore them. `aggregation` (optional,
// default the codec's own) may be kGather for a kStripes codec (can_gather): every rank encodes the
// whole bucket once, the encodings are allgathered and each rank decodes and sums them in rank
// order. Each value is then quantised once, where the stripes quantise it twice (by its worker,
// then the sum again by the stripe's owner), for (N-1) encoded buckets sent per rank instead of
// about 2 (N-1)/N: the same bytes at N = 2, more above.
CompressedAllreduceState make_compressed_allreduce_state(
    const compress::Codec& codec, size_t n, int world, int rank, const std::string& bucket,
    std::span<const compress::MatrixDims> matrices = {},
    std::optional<compress::Aggregation> aggregation = std::nullopt);

// Whether a codec's sums may be formed by kGather (decodable encodings that add up: kStripes
// and kGather codecs, not PowerSGD's factors).
bool can_gather(const compress::Codec& codec);

// In place: data becomes the decoded sum over ranks, the same bits on every rank. Every rank
// calls with the same codec, bucket size and order. NaN/Inf in data throws NumericError
// naming the bucket (on the rank that holds it; the others then fail with a CommError).
void compressed_allreduce(comm::Communicator& c, const compress::Codec& codec,
                          std::span<float> data, CompressedAllreduceState& state);

// The codec work of kStripes' two stages without the transport, for callers that move the
// bytes themselves (the Python package's PyTorch DDP hook, docs/python.md): stripes_encode
// encodes stripe j of data into slot j of st.send; after each owner has received the others'
// encodings of its stripe into st.recv (slot i from rank i), stripes_reduce sums them in rank
// order and encodes the sum into this rank's slot of st.gather; after the gather buffer holds
// every owner's slot, stripes_decode writes the decoded sum into data. compressed_allreduce
// runs exactly these between its sends, so both give the same bits.
void stripes_encode(const compress::Codec& codec, std::span<const float> data,
                    CompressedAllreduceState& st);
void stripes_reduce(const compress::Codec& codec, CompressedAllreduceState& st);
void stripes_decode(const compress::Codec& codec, std::span<float> data,
                    CompressedAllreduceState& st);

// The same for kLinear (PowerSGD), whose sums are plain float allreduces: powersgd_local_p
// adds data into the residual (M = g + residual) and returns this rank's P = M Q (all the
// bucket's matrices, in st.scratch); once that span holds the sum over ranks,
// powersgd_local_q orthonormalises P, keeps M - P (M^T P)^T as the residual and returns this
// rank's Q = M^T P; once that span holds the sum, powersgd_decode keeps Q as the next warm
// start and writes P Q^T into data. compressed_allreduce runs exactly these around its two
// allreduces. NaN/Inf entering powersgd_local_p throws NumericError naming the bucket.
std::span<float> powersgd_local_p(const compress::Codec& codec, std::span<const float> data,
                                  CompressedAllreduceState& st);
std::span<float> powersgd_local_q(const compress::Codec& codec, CompressedAllreduceState& st);
void powersgd_decode(const compress::Codec& codec, std::span<float> data,
                     CompressedAllreduceState& st);

// Bytes one rank sends per compressed_allreduce of n elements over `world` ranks, and the
// same for a plain fp32 ring allreduce (2 (N-1)/N * 4n), for logs and the bench.
// (For PowerSGD, with the default view; a state with matrices holds its own in wire_bytes.)
size_t compressed_allreduce_wire_bytes(const compress::Codec& codec, size_t n, int world);
size_t compressed_allreduce_wire_bytes(const compress::Codec& codec, size_t n, int world,
                                       compress::Aggregation aggregation);
size_t fp32_allreduce_wire_bytes(size_t n, int world);

}  // namespace loom::sync
