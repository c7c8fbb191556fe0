#include "loom/data/sources/set_checks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstring>

#include "loom/core/error.h"

namespace loom::data {

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  return shape.empty() ? std::string("(none)") : fmt::format("{}", fmt::join(shape, "x"));
}

// The first record holding a NaN or Inf, or -1.
int64_t first_non_finite(const Dataset& ds) {
  const int64_t numel = ds.sample_numel();
  for (int64_t i = 0; i < ds.count; ++i) {
    uint32_t bad = 0;
    const float* x = ds.features.data() + i * numel;
    for (int64_t j = 0; j < numel; ++j) {
      uint32_t b;
      std::memcpy(&b, x + j, 4);
      bad |= uint32_t((b & 0x7f800000u) == 0x7f800000u);
    }
    if (bad) return i;
  }
  return -1;
}

}  // namespace

void check_data_sets(const SampleSource& train, const std::string& train_name, const Dataset* test,
                     const std::string& test_name, int64_t max_classes,
                     const std::string& max_where) {
  if (train.num_classes() > max_classes)
    throw InputError(fmt::format(
        "{}: {} classes, more than data.max_classes = {} ({}): the model would have an output "
        "per class. A label that large is usually a data error; raise data.max_classes if the "
        "classes are real",
        train_name, train.num_classes(), max_classes, max_where));
  if (train.sample_numel() < 1)
    throw InputError(fmt::format("{}: samples of shape {} hold no features", train_name,
                                 shape_text(train.sample_shape())));
  if (test) check_held_out_set(train, train_name, *test, test_name, "test");
}

void check_held_out_set(const SampleSource& train, const std::string& train_name,
                        const Dataset& set, const std::string& set_name, const char* role) {
  const std::string off =
      std::string(role) == "test" ? "set eval = false" : "set data.validation = 0";
  if (set.count == 0)
    throw InputError(
        fmt::format("{}: the {} set is empty: nothing to evaluate (or {})", set_name, role, off));
  if (set.sample_shape != train.sample_shape())
    throw InputError(fmt::format(
        "{}: {} samples of shape {} differ from the training samples' {} ({}): the model "
        "takes the training shape; convert both sets from data of the same shape",
        set_name, role, shape_text(set.sample_shape), shape_text(train.sample_shape()),
        train_name));
  if (set.target_numel != train.target_numel())
    throw InputError(fmt::format(
        "{}: the {} set has {} float targets per sample, the training set {} ({}); 0 means "
        "class labels",
        set_name, role, set.target_numel, train.target_numel(), train_name));
  if (set.num_classes != train.num_classes())
    throw InputError(fmt::format(
        "{}: the {} set has {} classes, the training set {} ({}): the model has one output "
        "per training class; convert both with the same `--classes N`",
        set_name, role, set.num_classes, train.num_classes(), train_name));
  const int64_t bad = first_non_finite(set);
  if (bad >= 0)
    throw InputError(
        fmt::format("{}: {} record {} holds a NaN or Inf feature: the accuracy would be made up",
                    set_name, role, bad));
}

int32_t checked_label(double value, int64_t max_classes, const std::string& file, int64_t record,
                      const char* bound_name) {
  if (!(value >= 0) || value != std::floor(value))
    throw InputError(fmt::format("{}: record {}: label {} is not a class (an integer >= 0)", file,
                                 record, value));
  if (value >= double(max_classes))
    throw InputError(fmt::format(
        "{}: record {}: label {:.0f} is outside [0, {}); raise {} if there are that many "
        "classes",
        file, record, value, max_classes, bound_name));
  return int32_t(value);
}

}  // namespace loom::data
