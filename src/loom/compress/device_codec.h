// A codec's kernels on a device, for gradients that live there (the nccl transport). Same
// packed bytes and error-feedback contract as the host Codec it mirrors (codec.h):
//   encode(g, r, n, out):  s = g + r;  out = Q(s);  r = s - D(Q(s))
//   decode(in, n, out, accumulate):  out = D(in)  or  out += D(in)
// Every pointer is device memory of the backend it was made for, and every call is queued on
// that backend's stream of the calling thread (Backend::enter_side) in call order. Encode
// does not stop on NaN/Inf: it raises a device flag that take_non_finite() reads back (one
// wait), so the caller can throw NumericError as the host codec does, once per step rather
// than once per encode.
//
// make_device_codec (device_codec_registry.h) knows which codecs have device kernels (fp16, bf16,
// int8, onebit, topk; CUDA builds only: compress/cuda/); PowerSGD and fp32 have none.
#pragma once

#include <memory>
#include <string>

#include "loom/compress/codec.h"

namespace loom {
class Backend;
}

namespace loom::compress {

class DeviceCodec {
 public:
  virtual ~DeviceCodec() = default;
  virtual const Codec& host() const = 0;  // the codec this mirrors (name, sizes, parameters)
  size_t encoded_bytes(size_t n) const { return host().encoded_bytes(n); }
  virtual void encode(const float* g, float* r, size_t n, void* out) = 0;
  virtual void decode(const void* in, size_t n, float* out, bool accumulate) = 0;
  // True if any encode queued before this call saw NaN or Inf; clears the flag. Waits for the
  // calling thread's stream up to this call (on the device: through pinned memory and an
  // event).
  virtual bool take_non_finite() = 0;
};

}  // namespace loom::compress
