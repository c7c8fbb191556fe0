#include "loom/perf/calibration.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "loom/core/error.h"

namespace loom::perf {
namespace {

TEST(Calibration, ReadsBenchmarkLinesAndSkipsTables) {
  Calibration c = parse_calibration(
      "size   busbw\n"
      "{\"bench\":\"gemm\",\"gflops\":150}\n"
      "{\"bench\":\"membw\",\"gbs\":9.5}\n"
      "{\"bench\":\"allreduce\",\"transport\":\"mpi\",\"ranks\":2,\"bytes\":1000000,\"busbw_gbs\":"
      "2}\n"
      "{\"bench\":\"codec\",\"codec\":\"onebit\",\"encode_gbs\":2,\"decode_gbs\":2}\n"
      "{\"bench\":\"something_else\",\"x\":1}\n",
      "cal.jsonl");
  EXPECT_DOUBLE_EQ(c.gemm_flops, 150e9);
  EXPECT_DOUBLE_EQ(c.mem_bytes_per_s, 9.5e9);
  ASSERT_EQ(c.allreduce["mpi"].size(), 1u);
  // busbw 2 GB/s on 2 ranks = algbw 2 GB/s: 1 MB in 0.5 ms
  EXPECT_NEAR(c.allreduce["mpi"][0].seconds, 0.5e-3, 1e-12);
  EXPECT_DOUBLE_EQ(c.codec_gbs["onebit"], 1.0);
}

TEST(Calibration, RingFitRecoversAlphaAndBandwidth) {
  // time = 2(n-1) alpha + 2(n-1)/n S / B with alpha = 20 us, B = 1.5 GB/s, n = 2.
  std::vector<AllreducePoint> pts;
  for (double s : {1e3, 1e6, 16e6, 64e6}) pts.push_back({s, 2 * 20e-6 + s / 1.5e9, 2});
  LinkFit f = Calibration::fit_ring(pts);
  EXPECT_NEAR(f.alpha_s, 20e-6, 1e-9);
  EXPECT_NEAR(f.bytes_per_s, 1.5e9, 1e3);
}

TEST(Calibration, ApplyMakesThisMachineAndItsLinks) {
  Calibration c = parse_calibration(
      "{\"bench\":\"gemm\",\"gflops\":150}\n{\"bench\":\"membw\",\"gbs\":9.5}\n"
      "{\"bench\":\"allreduce\",\"transport\":\"thread\",\"bytes\":1000000,\"time_us\":300}\n",
      "cal.jsonl");
  Catalog cat = Catalog::builtin();
  Derating d;
  c.apply(cat, d);
  EXPECT_DOUBLE_EQ(cat.gpu("this-machine").fp32_tflops, 0.15);
  EXPECT_TRUE(cat.has_link("this-machine-thread"));
  EXPECT_DOUBLE_EQ(d.compute, 1.0);
}

TEST(Calibration, BadLinesNameFileAndLine) {
  try {
    parse_calibration("{\"bench\":\"gemm\",\"gflops\":150}\n{\"bench\":\"membw\",\"gbs\":-1}\n",
                      "cal.jsonl");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("cal.jsonl:2: field 'gbs' must be > 0"));
  }
  EXPECT_THROW(parse_calibration("{\"bench\": gemm}\n", "x"), InputError);
  EXPECT_THROW(parse_calibration("no json here\n", "x"), InputError);
}

// Lines of this build (format_version 2), of version 1 and of older ones (none) are read alike;
// a line the model uses of a newer version is refused naming the file, the line and the version.
TEST(Calibration, NewerFormatVersionIsRefusedNamingFileAndLine) {
  EXPECT_EQ(kCalibrationFormatVersion, 2);
  const Calibration c = parse_calibration(
      "{\"bench\":\"gemm\",\"gflops\":150,\"format_version\":1}\n"
      "{\"bench\":\"membw\",\"gbs\":9.5}\n"
      "{\"bench\":\"train\",\"samples_per_s\":1,\"format_version\":9}\n",
      "cal.jsonl");
  EXPECT_DOUBLE_EQ(c.gemm_flops, 150e9);
  EXPECT_DOUBLE_EQ(c.mem_bytes_per_s, 9.5e9);
  try {
    parse_calibration(
        "{\"bench\":\"gemm\",\"gflops\":150,\"format_version\":1}\n"
        "{\"bench\":\"membw\",\"gbs\":9.5,\"format_version\":3}\n",
        "cal.jsonl");
    FAIL() << "a calibration line of version 3 was read";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("cal.jsonl:2: calibration format version 3"));
  }
}

constexpr const char* kMachineLines =
    "{\"bench\":\"machine\",\"cpu\":\"Zen 4 (family 25, model 17)\",\"transport\":"
    "\"thread\",\"world_size\":2,\"format_version\":2}\n"
    "{\"bench\":\"machine\",\"cpu\":\"Zen 4 (family 25, model 17)\",\"transport\":\"mpi\","
    "\"world_size\":4,\"format_version\":2}\n"
    "{\"bench\":\"gemm\",\"gflops\":150,\"format_version\":2}\n";

TEST(CalibrationIdentity, MachineLinesAreReadAndMatchedOnEveryField) {
  const Calibration c = parse_calibration(kMachineLines, "cal.jsonl");
  ASSERT_EQ(c.machines.size(), 2u);
  EXPECT_EQ(c.machines[1].transport, "mpi");
  EXPECT_EQ(c.machines[1].world_size, 4);
  EXPECT_EQ(calibration_mismatch(c, {"Zen 4 (family 25, model 17)", "thread", 2}), "");
  EXPECT_EQ(calibration_mismatch(c, {"Zen 4 (family 25, model 17)", "mpi", 4}), "");
  // Each field alone makes a mismatch, and the text names that field with both values.
  const std::string cpu = calibration_mismatch(c, {"Zen 5 (family 26, model 2)", "thread", 2});
  EXPECT_THAT(cpu, ::testing::HasSubstr("CPU: file 'Zen 4 (family 25, model 17)', this "
                                        "machine 'Zen 5 (family 26, model 2)'"));
  EXPECT_THAT(cpu, ::testing::Not(::testing::HasSubstr("world size")));
  const std::string world = calibration_mismatch(c, {"Zen 4 (family 25, model 17)", "mpi", 2});
  EXPECT_THAT(world, ::testing::HasSubstr("world size: file 4, the run 2"));
  EXPECT_THAT(world, ::testing::Not(::testing::HasSubstr("CPU")));
  const std::string transport = calibration_mismatch(c, {"Zen 4 (family 25, model 17)", "nccl", 2});
  EXPECT_THAT(transport, ::testing::HasSubstr("transport: file measured thread, mpi, the run "
                                              "uses nccl"));
}

TEST(CalibrationIdentity, AFileWithoutMachineLinesCannotBeChecked) {
  const Calibration old = parse_calibration("{\"bench\":\"gemm\",\"gflops\":150}\n", "old.jsonl");
  EXPECT_TRUE(old.machines.empty());
  EXPECT_THAT(calibration_mismatch(old, {"Zen 4", "thread", 2}),
              ::testing::HasSubstr("names no machine"));
}

TEST(CalibrationIdentity, AMismatchIsAnErrorNamingTheFileOrAWarningWhenMeasuring) {
  const Calibration c = parse_calibration(kMachineLines, "cal.jsonl");
  std::string warning;
  EXPECT_TRUE(accept_calibration(c, {"Zen 4 (family 25, model 17)", "thread", 2},
                                 MismatchPolicy::kError, &warning));
  EXPECT_EQ(warning, "");
  try {
    accept_calibration(c, {"Zen 4 (family 25, model 17)", "thread", 8}, MismatchPolicy::kError,
                       &warning);
    FAIL() << "a file of another world size was accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("cal.jsonl: calibration file from another machine"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("world size: file 2, the run 8"));
  }
  EXPECT_FALSE(accept_calibration(c, {"Zen 4 (family 25, model 17)", "thread", 8},
                                  MismatchPolicy::kMeasure, &warning));
  EXPECT_THAT(warning, ::testing::HasSubstr("world size: file 2, the run 8"));
  EXPECT_THAT(warning, ::testing::HasSubstr("measuring instead"));
  EXPECT_EQ(mismatch_policy_from_name("measure"), MismatchPolicy::kMeasure);
  EXPECT_THROW(mismatch_policy_from_name("ignore"), InputError);
  // A machine line without its fields is refused naming the line.
  EXPECT_THROW(parse_calibration("{\"bench\":\"machine\",\"cpu\":\"x\",\"world_size\":2}\n", "m"),
               InputError);
}

}  // namespace
}  // namespace loom::perf
