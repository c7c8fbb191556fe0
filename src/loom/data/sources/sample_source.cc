#include "loom/data/sources/sample_source.h"

#include <cstring>

#include "loom/core/error.h"

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
    const int64_t l = ds_.labels_per_sample;
    for (int64_t j = 0; j < l; ++j)
      y[i * l + j] = ds_.labels.empty() ? 0 : ds_.labels[size_t(idx[i] * l + j)];
  }
}

void SampleSource::gather_targets(const int64_t*, int64_t, float*) const {
  throw Error("this data source holds class labels, not float targets");
}

void DatasetSource::gather_targets(const int64_t* idx, int64_t n, float* t) const {
  const int64_t k = ds_.target_numel;
  if (k == 0) SampleSource::gather_targets(idx, n, t);
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(t + i * k, ds_.targets.data() + idx[i] * k, size_t(k) * sizeof(float));
}

Dataset materialise(const SampleSource& src, const std::string& name) {
  Dataset ds;
  ds.name = name;
  ds.count = src.count();
  ds.sample_shape = src.sample_shape();
  ds.num_classes = src.num_classes();
  ds.features.resize(size_t(ds.count * src.sample_numel()));
  ds.labels_per_sample = src.labels_per_sample();
  ds.labels.resize(size_t(ds.count * ds.labels_per_sample));
  std::vector<int64_t> idx(size_t(ds.count));
  for (int64_t i = 0; i < ds.count; ++i) idx[size_t(i)] = i;
  src.gather(idx.data(), ds.count, ds.features.data(), ds.labels.data());
  ds.target_numel = src.target_numel();
  if (ds.target_numel > 0) {
    ds.targets.resize(size_t(ds.count * ds.target_numel));
    src.gather_targets(idx.data(), ds.count, ds.targets.data());
  }
  return ds;
}

}  // namespace loom::data
