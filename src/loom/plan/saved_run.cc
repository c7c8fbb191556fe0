#include "loom/plan/saved_run.h"

#include "loom/core/config.h"
#include "loom/plan/batch_reader.h"
#include "loom/plan/data_reader.h"
#include "loom/plan/model_reader.h"
#include "loom/plan/train_settings.h"

namespace loom::plan {
namespace {

SavedRun read_saved(const Config& cfg) {
  SavedRun r;
  r.model = read_model_spec(cfg);
  r.loss = read_loss_options(cfg);
  r.data_dir = read_data_dir(cfg);
  r.pipeline = read_pipeline_config(cfg);
  r.batch = read_batch(cfg);
  r.accumulate = read_accumulate(cfg);
  return r;
}

}  // namespace

SavedRun read_saved_run(const std::string& text, const std::string& where) {
  return read_saved(Config::from_string(text, where));
}

SavedRun read_saved_run_file(const std::string& path) {
  return read_saved(Config::from_file(path));
}

}  // namespace loom::plan
