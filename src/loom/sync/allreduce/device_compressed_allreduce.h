// The compressed allreduce for gradients in device memory (the nccl transport): every rank
// encodes its whole bucket with its device codec (error feedback in a device residual), the
// encodings are all-gathered through the communicator (NCCL's allgather of the packed bytes),
// and every rank decodes the N encodings and sums them in rank order, so all ranks end with
// the same bits. This is compressed_allreduce.h's kGather algorithm for every codec: it sends
// (N-1) E bytes per rank where the host's two-stage algorithm sends about 2 (N-1)/N E, and it
// needs no owner-side residual (nothing is re-encoded). PowerSGD has no device kernels.
#pragma once

#include <cstdint>
#include <string>

#include "loom/comm/communicator.h"
#include "loom/compress/device_codec.h"
#include "loom/tensor/buffer.h"

namespace loom::sync {

struct DeviceAllreduceState {
  std::string bucket;  // named in errors
  size_t n = 0;
  int world = 1, rank = 0;
  size_t slot_bytes = 0;         // encoded_bytes(n), one slot per rank in `gather`
  DeviceBuffer<float> residual;  // n, zero at the start
  DeviceBuffer<uint8_t> gather;  // world * slot_bytes
  uint64_t steps = 0;
  size_t wire_bytes = 0;  // (world - 1) * slot_bytes
};

DeviceAllreduceState make_device_allreduce_state(const compress::DeviceCodec& codec,
                                                 Backend& backend, size_t n, int world, int rank,
                                                 const std::string& bucket);

// In place on device memory `data` (n floats): the decoded sum over ranks, queued on the
// calling thread's stream of `backend` (Backend::enter_side). NaN/Inf in data + residual is
// not checked here, which would wait for the device once per bucket: it raises the codec's
// flag, and the caller checks it once per step (check_device_codec_finite), after every
// bucket's allgather, so no rank is left waiting for a peer that threw.
void device_compressed_allreduce(comm::Communicator& c, compress::DeviceCodec& codec,
                                 Backend& backend, float* data, DeviceAllreduceState& state);

// Throws NumericError naming the codec and `what` (the step's buckets) if any encode queued
// so far on the calling thread's stream saw NaN or Inf; clears the flag (one wait).
void check_device_codec_finite(compress::DeviceCodec& codec, const std::string& what);

}  // namespace loom::sync
