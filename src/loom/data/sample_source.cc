#include "loom/data/sample_source.h"

#include <cstring>

namespace loom::data {

int64_t SampleSource::sample_numel() const {
  int64_t n = 1;
  for (int64_t d : sample_shape()) n *= d;
  return n;
}

void DatasetSource::gather(const int64_t* idx, int64_t n, float* x, int32_t* y) const {
  const int64_t numel = ds_.sample_numel();
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(x + i * numel, ds_.features.data() + idx[i] * numel, size_t(numel) * sizeof(float));
    y[i] = ds_.labels[size_t(idx[i])];
  }
}

Dataset materialise(const SampleSource& src) {
  Dataset ds;
  ds.name = "shards";
  ds.count = src.count();
  ds.sample_shape = src.sample_shape();
  ds.num_classes = src.num_classes();
  ds.features.resize(size_t(ds.count * src.sample_numel()));
  ds.labels.resize(size_t(ds.count));
  std::vector<int64_t> idx(size_t(ds.count));
  for (int64_t i = 0; i < ds.count; ++i) idx[size_t(i)] = i;
  src.gather(idx.data(), ds.count, ds.features.data(), ds.labels.data());
  return ds;
}

}  // namespace loom::data
