// An RAII buffer of T in a backend's memory.
#pragma once

#include <cstdint>
#include <utility>

#include "loom/tensor/backend.h"

namespace loom {

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Backend& backend, int64_t count) : backend_(&backend), count_(count) {
    if (count > 0) data_ = static_cast<T*>(backend.allocate(size_t(count) * sizeof(T)));
  }
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      std::swap(backend_, o.backend_);
      std::swap(data_, o.data_);
      std::swap(count_, o.count_);
    }
    return *this;
  }
  void reset() {
    if (data_) backend_->deallocate(data_);
    data_ = nullptr;
    count_ = 0;
  }
  T* data() { return data_; }
  const T* data() const { return data_; }
  int64_t size() const { return count_; }

 private:
  Backend* backend_ = nullptr;
  T* data_ = nullptr;
  int64_t count_ = 0;
};

}  // namespace loom
