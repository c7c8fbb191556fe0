// read_trained_model_metadata: every key loom reads from a model file it did not just write is
// checked for type, range and agreement, and an error names the file and the key.
#include "loom/train/trained_model_metadata.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "loom/core/error.h"

namespace loom::train {
namespace {

using ::testing::HasSubstr;
using Meta = std::map<std::string, std::string>;

std::string error_of(const Meta& m) {
  try {
    read_trained_model_metadata(m, "run/model.safetensors");
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "accepted";
  return "";
}

TEST(TrainedModelMetadata, WhatTrainWritesReadsBack) {
  const Meta m =
      trained_model_metadata(120, data::Normalisation{0.2860402f, 0.3530239f}, nn::LossKind::kMse);
  const TrainedModelMetadata r = read_trained_model_metadata(m, "f");
  EXPECT_EQ(r.steps, 120);
  ASSERT_TRUE(r.input_normalisation);
  EXPECT_EQ(r.input_normalisation->mean, 0.2860402f);
  EXPECT_EQ(r.input_normalisation->stddev, 0.3530239f);
  EXPECT_EQ(r.loss, nn::LossKind::kMse);
  // Files older than the keys: the defaults.
  const TrainedModelMetadata old = read_trained_model_metadata({}, "f");
  EXPECT_EQ(old.steps, -1);
  EXPECT_FALSE(old.input_normalisation);
  EXPECT_EQ(old.loss, nn::LossKind::kCrossEntropy);
}

TEST(TrainedModelMetadata, NormalisationMustBeFiniteWithAPositiveStddev) {
  for (const char* bad : {"nan", "NaN", "inf", "-inf", "0", "-0.5", "1e-45", "abc", "", " 0.3",
                          "0.3x", "0x1p-2", "1e39"}) {
    const std::string e = error_of({{"input_mean", "0.28"}, {"input_stddev", bad}});
    EXPECT_THAT(e, HasSubstr("run/model.safetensors: metadata \"input_stddev\" is")) << bad;
  }
  for (const char* bad : {"nan", "inf", "abc", "", "1e39", "0.5 "}) {
    const std::string e = error_of({{"input_mean", bad}, {"input_stddev", "0.35"}});
    EXPECT_THAT(e, HasSubstr("run/model.safetensors: metadata \"input_mean\" is")) << bad;
  }
  // A mean that the stddev turns into Inf: the shift -mean/stddev overflows.
  EXPECT_THAT(error_of({{"input_mean", "3e38"}, {"input_stddev", "1e-3"}}),
              HasSubstr("\"input_stddev\""));
}

TEST(TrainedModelMetadata, OneHalfOfTheNormalisationIsRefused) {
  EXPECT_THAT(error_of({{"input_mean", "0.28"}}),
              HasSubstr("metadata has \"input_mean\" without \"input_stddev\""));
  EXPECT_THAT(error_of({{"input_stddev", "0.35"}}),
              HasSubstr("metadata has \"input_stddev\" without \"input_mean\""));
}

TEST(TrainedModelMetadata, StepsAndLossAreChecked) {
  for (const char* bad : {"abc", "", "-2", "1.5", "12 ", "99999999999999999999"})
    EXPECT_THAT(error_of({{"steps", bad}}), HasSubstr("metadata \"steps\" is")) << bad;
  EXPECT_EQ(read_trained_model_metadata({{"steps", "-1"}}, "f").steps, -1);
  EXPECT_THAT(error_of({{"loss", "hinge"}}), HasSubstr("metadata \"loss\" is \"hinge\""));
}

}  // namespace
}  // namespace loom::train
