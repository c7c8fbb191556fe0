// The cost model's workload of a loom config (experiments/workloads.h) is sized by the config's
// own data: a shard of 3 x 8 x 8 images in 5 classes gives the MLP 192 inputs and 5 outputs,
// where Fashion-MNIST's 784 and 10 were once assumed for every config.
#include "loom/experiments/workloads.h"

#include <gtest/gtest.h>

#include <fstream>
#include <vector>

#include "data/temp_dir.h"
#include "loom/core/config.h"
#include "loom/data/formats/shard_writer.h"
#include "loom/plan/run_plan.h"
#include "loom/train/run_data.h"

namespace loom::experiments {
namespace {

using loom::data::testing::TempDir;

// A config of the MLP 192-16-5 on a shard of 40 such images, and the shard.
std::string small_images_config(const TempDir& t) {
  const std::string shard = t.file("images.shard");
  data::ShardWriter w(shard, {data::ShardDtype::kUint8, {3, 8, 8}, 5, 40});
  std::vector<uint8_t> px(192, 7);
  for (int i = 0; i < 40; ++i) w.append(i % 5, px.data());
  w.finish();
  const std::string cfg = t.file("small.toml");
  std::ofstream(cfg) << "model = \"mlp\"\neval = false\nbatch = 8\n[mlp]\nhidden = [16]\n"
                     << "[data]\ntrain_shards = \"" << shard << "\"\n";
  return cfg;
}

TEST(Workloads, AConfigIsSizedByItsOwnData) {
  TempDir t;
  const std::string cfg = small_images_config(t);
  const plan::RunPlan run = plan::read_run_plan(Config::from_file(cfg));
  const train::DataShape d = train::read_data_shape(run.settings, run.pipeline);
  EXPECT_EQ(d.sample, (nn::Shape{3, 8, 8}));
  EXPECT_EQ(d.outputs, 5);
  EXPECT_EQ(d.count, 40);
  EXPECT_FALSE(d.tokens);
  const perf::Workload w = resolve_workload(cfg);
  double params = 0;
  for (const auto& l : w.layers) params += l.params;
  EXPECT_DOUBLE_EQ(params, 192 * 16 + 16 + 16 * 5 + 5);
}

TEST(Workloads, AConfigWhoseDataIsMissingSaysWhichFile) {
  TempDir t;
  const std::string cfg = t.file("missing.toml");
  std::ofstream(cfg) << "model = \"mlp\"\neval = false\n[data]\ntrain_shards = \""
                     << t.file("none.shard") << "\"\n";
  try {
    resolve_workload(cfg);
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("none.shard"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace loom::experiments
