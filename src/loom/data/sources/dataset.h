// An in-memory data set: decoded, normalised float features and int32 labels, or float
// targets for regression.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace loom::data {

struct Dataset {
  std::string name;
  int64_t count = 0;
  std::vector<int64_t> sample_shape;  // e.g. {1, 28, 28}
  int64_t sample_numel() const;       // product of sample_shape
  int num_classes = 0;
  std::vector<float> features;  // count * sample_numel, normalised
  std::vector<int32_t> labels;  // count, each in [0, num_classes); zeros for float targets
  // Labels per sample: 1, or one per position (token windows: labels holds count * this).
  int64_t labels_per_sample = 1;
  // Token windows: what one token is ("byte", "character", "token"), the unit of bits per
  // token; empty for other data.
  std::string token_unit;
  // Regression: target_numel > 0 float targets per sample (count * target_numel), and
  // num_classes 0.
  int64_t target_numel = 0;
  std::vector<float> targets;
};

// x -> (x/255 - mean) / stddev for uint8 pixels.
struct Normalisation {
  float mean = 0, stddev = 1;
};

constexpr const char* kDefaultFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// Loads {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] from dir (the .gz name first).
// A missing dir or file -> InputError that says `apt-get install dataset-fashion-mnist` and that
// the key `data.dir` sets the path. Images/labels count mismatch, a label >= 10 -> InputError
// naming the file. Pixels are divided by 255 then mapped to (x - mean)/stddev; if norm is
// nullopt, mean and stddev (unbiased, as torch.std) are computed over this set's pixels, as the
// PyTorch peer does over the training set, and returned in *computed (if not null).
Dataset load_fashion_mnist(const std::string& dir, bool train, std::optional<Normalisation> norm,
                           Normalisation* computed);

// Mean and unbiased standard deviation of bytes/255, from a histogram (exact in double).
Normalisation byte_statistics(const uint8_t* bytes, size_t n);
// The same from a histogram of byte values (hist[256]); shard writers keep one as they go.
Normalisation histogram_statistics(const uint64_t* hist);

// v -> (v/255 - mean)/stddev as one fused multiply-add, fma(v, scale, shift), with scale and
// shift rounded once from double. Every uint8 path (the IDX table, shard decoding) uses exactly
// this, so they produce the same bits; an explicit std::fma keeps compilers from contracting
// differently in scalar and vector loops, and it vectorises (no division in the hot loop).
struct ByteAffine {
  float scale, shift;
};
ByteAffine byte_affine(const Normalisation& norm);
inline float normalise_byte(uint8_t v, ByteAffine a) {
  return std::fma(float(v), a.scale, a.shift);
}
void byte_normalisation_table(const Normalisation& norm, float table[256]);

// Checks labels lie in [0, num_classes); InputError naming `file` and the record otherwise.
void check_labels(const std::vector<int32_t>& labels, int num_classes, const std::string& file);

}  // namespace loom::data
