#include "loom/train/device_batch.h"

namespace loom::train {

DeviceBatch::View DeviceBatch::put(const float* x, const int32_t* y, int64_t rows, int64_t numel,
                                   int64_t labels_per_row) {
  if (backend_.device() == Device::kCpu) return {x, y};
  const int64_t labels = rows * labels_per_row;
  if (x_.size() < rows * numel) x_ = DeviceBuffer<float>(backend_, rows * numel);
  if (y_.size() < labels) y_ = DeviceBuffer<int32_t>(backend_, labels);
  backend_.copy_to_device(x_.data(), x, size_t(rows * numel) * sizeof(float));
  backend_.copy_to_device(y_.data(), y, size_t(labels) * sizeof(int32_t));
  return {x_.data(), y_.data()};
}

const float* DeviceBatch::put_targets(const float* t, int64_t count) {
  if (backend_.device() == Device::kCpu) return t;
  if (t_.size() < count) t_ = DeviceBuffer<float>(backend_, count);
  backend_.copy_to_device(t_.data(), t, size_t(count) * sizeof(float));
  return t_.data();
}

}  // namespace loom::train
