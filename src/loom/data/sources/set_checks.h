// Checks that keep bad data sets from reaching training as crashes or made-up figures: the
// class count a set may announce, a test set that fits the training set, and label values
// read from files (NPY, CSV) before they become int32 labels.
#pragma once

#include <cstdint>
#include <string>

#include "loom/data/sources/dataset.h"
#include "loom/data/sources/sample_source.h"

namespace loom::data {

// The default bound on a class count: data.max_classes for training, --max-classes for
// `loom data convert` and `inspect`. A label of 16,000,000 is a data error far more often than
// a 16M-way classifier, and the model would allocate an output per class.
constexpr int64_t kMaxClasses = 65536;
// What the shard format can hold at all (shard_format.h).
constexpr int64_t kShardMaxClasses = int64_t(1) << 24;

// Before training: InputError naming the file and the problem, when the training set has more
// than max_classes classes or empty samples, or (test not null: evaluation on) the test set is
// empty, its sample shape or class count differs from the training set's, or a feature is NaN
// or Inf. `max_where` is where data.max_classes was set (for the message).
void check_data_sets(const SampleSource& train, const std::string& train_name, const Dataset* test,
                     const std::string& test_name, int64_t max_classes,
                     const std::string& max_where);
// The checks above for one held-out set (`role`: "test" or "validation"): not empty, the
// training set's sample shape and class count, finite features. InputError naming `set_name`.
void check_held_out_set(const SampleSource& train, const std::string& train_name,
                        const Dataset& set, const std::string& set_name, const char* role);

// A label value read from a file: an integer in [0, max_classes), else InputError naming the
// file and the record, and how to raise the bound. Returns it as int32.
int32_t checked_label(double value, int64_t max_classes, const std::string& file, int64_t record,
                      const char* bound_name);

}  // namespace loom::data
