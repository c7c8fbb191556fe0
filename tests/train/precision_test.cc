// `precision` in training: bf16 matrix products train the MLP and a small residual CNN as well
// as fp32 does (the loss falls alike, the test accuracy agrees), the run leaves the shared CPU
// backend in fp32, and what cannot run is a ConfigError naming the key.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "common/tiny_run.h"
#include "loom/core/cpu_features.h"
#include "loom/core/error.h"
#include "loom/tensor/cpu/cpu_backend.h"
#include "loom/train/trainer.h"

namespace loom::train {
namespace {

using loom::testing::tiny_run;
using loom::testing::with_tiny_residual_graph;

TrainResult run_with(Config cfg, const std::string& precision) {
  cfg.set("precision", precision);
  return run_training(plan::read_run_plan(cfg));
}

TEST(Precision, Bf16MlpLossFallsLikeFp32) {
  if (!cpu_has_avx512_bf16()) GTEST_SKIP() << "this CPU lacks AVX512_BF16 (avx512_bf16)";
  Config cfg = tiny_run(2, 32, 200);
  cfg.set("eval", true);
  cfg.set("mlp.dropout", 0.0);
  const TrainResult fp32 = run_with(cfg, "fp32");
  const TrainResult bf16 = run_with(cfg, "bf16");
  EXPECT_EQ(cpu_backend().matmul_precision(), Precision::kFp32);  // restored after the run
  ASSERT_EQ(bf16.epochs.size(), 1u);
  // Untrained loss is ln(10) = 2.30.
  EXPECT_LT(bf16.epochs[0].train_loss, 1.0);
  EXPECT_NEAR(bf16.epochs[0].train_loss, fp32.epochs[0].train_loss,
              0.05 * fp32.epochs[0].train_loss);
  EXPECT_NEAR(bf16.test_acc, fp32.test_acc, 0.03);
  std::printf("fp32: loss %.4f, test accuracy %.4f; bf16: loss %.4f, test accuracy %.4f\n",
              fp32.epochs[0].train_loss, fp32.test_acc, bf16.epochs[0].train_loss, bf16.test_acc);
  EXPECT_NE(bf16.final_params, fp32.final_params);  // the products did run in bf16
  // The next fp32 run is the first one again, bit for bit.
  EXPECT_EQ(run_with(cfg, "fp32").final_params, fp32.final_params);
}

TEST(Precision, Bf16ConvolutionsTrainLikeFp32) {
  if (!cpu_has_avx512_bf16()) GTEST_SKIP() << "this CPU lacks AVX512_BF16 (avx512_bf16)";
  const Config cfg = with_tiny_residual_graph(tiny_run(1, 32, 80));
  const TrainResult fp32 = run_with(cfg, "fp32");
  const TrainResult bf16 = run_with(cfg, "bf16");
  ASSERT_EQ(bf16.epochs.size(), 1u);
  EXPECT_LT(bf16.epochs[0].train_loss, 0.8 * std::log(10.0));
  EXPECT_NEAR(bf16.epochs[0].train_loss, fp32.epochs[0].train_loss,
              0.05 * fp32.epochs[0].train_loss);
  EXPECT_NE(bf16.final_params, fp32.final_params);
}

void expect_config_error(const Config& cfg, const std::string& needle) {
  try {
    run_training(plan::read_run_plan(cfg));
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("precision"), std::string::npos) << what;
    EXPECT_NE(what.find(needle), std::string::npos) << what;
  }
}

TEST(Precision, WhatCannotRunIsAConfigErrorNamingTheKey) {
  Config cfg = tiny_run(1, 32, 5);
  cfg.set("precision", std::string("fp16"));
  expect_config_error(cfg, "cuda");
  cfg.set("precision", std::string("int8"));
  expect_config_error(cfg, "int8");
  cfg.set("precision", std::string("bf16"));
  cpu::hide_bf16_for_tests(true);
  expect_config_error(cfg, "avx512_bf16");
  cpu::hide_bf16_for_tests(false);
  EXPECT_EQ(cpu_backend().matmul_precision(), Precision::kFp32);
}

}  // namespace
}  // namespace loom::train
