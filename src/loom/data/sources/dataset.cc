#include "loom/data/sources/dataset.h"

#include <sys/stat.h>

#include <cmath>

#include "loom/core/error.h"
#include "loom/core/io/mapped_file.h"
#include "loom/data/formats/idx.h"

namespace loom::data {

int64_t Dataset::sample_numel() const {
  int64_t n = 1;
  for (int64_t d : sample_shape) n *= d;
  return n;
}

Normalisation byte_statistics(const uint8_t* bytes, size_t n) {
  std::vector<uint64_t> hist(256, 0);
  for (size_t i = 0; i < n; ++i) ++hist[bytes[i]];
  return histogram_statistics(hist.data());
}

Normalisation histogram_statistics(const uint64_t* hist) {
  double n = 0, sum = 0;
  for (int v = 0; v < 256; ++v) {
    n += double(hist[v]);
    sum += double(hist[v]) * (v / 255.0);
  }
  if (n == 0) return {};
  double mean = sum / n;
  double ss = 0;
  for (int v = 0; v < 256; ++v) {
    double d = v / 255.0 - mean;
    ss += double(hist[v]) * d * d;
  }
  double var = n > 1 ? ss / (n - 1) : 0.0;  // Bessel's correction, as torch.Tensor.std()
  double sd = std::sqrt(var);
  return {float(mean), sd > 0 ? float(sd) : 1.0f};
}

ByteAffine byte_affine(const Normalisation& norm) {
  return {float(1.0 / (255.0 * double(norm.stddev))),
          float(-double(norm.mean) / double(norm.stddev))};
}

void byte_normalisation_table(const Normalisation& norm, float table[256]) {
  const ByteAffine a = byte_affine(norm);
  for (int v = 0; v < 256; ++v) table[v] = normalise_byte(uint8_t(v), a);
}

void check_labels(const std::vector<int32_t>& labels, int num_classes, const std::string& file) {
  for (size_t i = 0; i < labels.size(); ++i)
    if (labels[i] < 0 || labels[i] >= num_classes)
      throw InputError(fmt::format("{}: label {} of record {} is outside [0, {})", file, labels[i],
                                   i, num_classes));
}

namespace {

std::string missing_hint(const std::string& dir) {
  return fmt::format(
      "install Fashion-MNIST with `apt-get install dataset-fashion-mnist` (it goes to {}), or "
      "set the key `data.dir` to the folder that holds it (now: {})",
      kDefaultFashionMnistDir, dir);
}

std::string find_file(const std::string& dir, const std::string& stem) {
  for (const char* ext : {".gz", ""}) {
    std::string p = dir + "/" + stem + ext;
    if (core::file_exists(p)) return p;
  }
  throw InputError(
      fmt::format("Fashion-MNIST file {}/{}[.gz] not found: {}", dir, stem, missing_hint(dir)));
}

}  // namespace

Dataset load_fashion_mnist(const std::string& dir, bool train, std::optional<Normalisation> norm,
                           Normalisation* computed) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw InputError(fmt::format("Fashion-MNIST folder {} not found: {}", dir, missing_hint(dir)));
  const std::string prefix = train ? "train" : "t10k";
  const std::string image_path = find_file(dir, prefix + "-images-idx3-ubyte");
  const std::string label_path = find_file(dir, prefix + "-labels-idx1-ubyte");
  IdxArray images = read_idx(image_path);
  IdxArray labels = read_idx(label_path);
  if (images.dims.size() != 3)
    throw InputError(fmt::format("{}: expected 3 dimensions (count, rows, cols), the header has {}",
                                 image_path, images.dims.size()));
  if (labels.dims.size() != 1)
    throw InputError(fmt::format("{}: expected 1 dimension (count), the header has {}", label_path,
                                 labels.dims.size()));
  if (images.dims[0] != labels.dims[0])
    throw InputError(fmt::format("{} has {} images but {} has {} labels", image_path,
                                 images.dims[0], label_path, labels.dims[0]));
  Dataset ds;
  ds.name = std::string("fashion-mnist/") + (train ? "train" : "test");
  ds.count = images.dims[0];
  ds.sample_shape = {1, images.dims[1], images.dims[2]};
  ds.num_classes = 10;
  ds.labels.assign(labels.bytes.begin(), labels.bytes.end());
  check_labels(ds.labels, ds.num_classes, label_path);
  Normalisation n = norm ? *norm : byte_statistics(images.bytes.data(), images.bytes.size());
  if (!(n.stddev > 0) || !std::isfinite(n.mean))
    throw ConfigError(
        fmt::format("normalisation stddev must be > 0 (got mean {}, stddev {})", n.mean, n.stddev));
  if (computed) *computed = n;
  float table[256];
  byte_normalisation_table(n, table);
  ds.features.resize(images.bytes.size());
  for (size_t i = 0; i < images.bytes.size(); ++i) ds.features[i] = table[images.bytes[i]];
  return ds;
}

}  // namespace loom::data
