#include "loom/data/loader/pipeline_config.h"

#include <gtest/gtest.h>

#include "loom/core/error.h"
#include "loom/data/loader/throttle.h"
#include "loom/plan/data_reader.h"

namespace loom::data {
namespace {

TEST(PipelineConfig, ReadsKeysAndAppliesThem) {
  Config cfg = Config::from_string(
      "[data]\nworkers = 3\nshuffle_window = 4096\nthrottle_mbps = 120.0\n"
      "train_shards = \"a.shard\"\n[data.augment]\ncrop_padding = 4\nhflip = true\n",
      "t.toml");
  PipelineConfig p = plan::read_pipeline_config(cfg);
  EXPECT_EQ(p.workers, 3);
  EXPECT_EQ(p.shuffle_window, 4096);
  EXPECT_EQ(p.throttle_mbps, 120.0);
  EXPECT_EQ(p.train_shards, "a.shard");
  EXPECT_EQ(p.augment.crop_padding, 4);
  EXPECT_TRUE(p.augment.hflip);
  LoaderOptions o;
  apply_pipeline(p, o);
  EXPECT_EQ(o.workers, 3);
  EXPECT_EQ(o.shuffle_window, 4096);
  EXPECT_TRUE(o.augment.enabled());
  Dataset d;
  d.count = 1;
  d.sample_shape = {1};
  d.features = {0};
  d.labels = {0};
  auto src = std::make_shared<DatasetSource>(d);
  EXPECT_NE(dynamic_cast<const ThrottledSource*>(maybe_throttle(src, p).get()), nullptr);
  p.throttle_mbps = 0;
  EXPECT_EQ(maybe_throttle(src, p).get(), src.get());
  // Every key read is documented.
  cfg.check_known(data_config_keys());
}

TEST(PipelineConfig, OutOfRangeNamesTheKey) {
  Config cfg = Config::from_string("[data]\nworkers = 0\n", "t.toml");
  try {
    plan::read_pipeline_config(cfg);
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("data.workers"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace loom::data
