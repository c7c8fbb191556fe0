// Where a step reads its batch: the loader's host memory as it is on the CPU backend; on a GPU
// backend a device copy, made by put() on the backend's compute stream (in stream order, so
// the buffer is reused only after the step that read it). The loader fills host memory.
#pragma once

#include <cstdint>

#include "loom/tensor/backend.h"
#include "loom/tensor/buffer.h"

namespace loom::train {

class DeviceBatch {
 public:
  explicit DeviceBatch(Backend& backend) : backend_(backend) {}

  struct View {
    const float* x;
    const int32_t* y;
  };
  // rows samples of `numel` floats each, and their labels (labels_per_row each).
  View put(const float* x, const int32_t* y, int64_t rows, int64_t numel,
           int64_t labels_per_row = 1);
  // Float targets (regression), `count` values.
  const float* put_targets(const float* t, int64_t count);

 private:
  Backend& backend_;
  DeviceBuffer<float> x_;
  DeviceBuffer<int32_t> y_;
  DeviceBuffer<float> t_;
};

}  // namespace loom::train
