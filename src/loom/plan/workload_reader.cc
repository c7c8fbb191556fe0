#include "loom/plan/workload_reader.h"

#include <fmt/format.h>

#include "loom/core/config_refusal.h"
#include "loom/core/error.h"
#include "loom/plan/batch_reader.h"
#include "loom/plan/model_reader.h"

namespace loom::plan {

bool counts_own_workload(const nn::ModelSpec& spec) {
  if (!spec.inline_graph.layers.empty()) return false;
  const nn::CnnOptions shape;
  return spec.model == "mlp" ||
         (spec.model == "cnn" && spec.cnn.channels == shape.channels &&
          spec.cnn.hidden == shape.hidden && spec.cnn.dropout == shape.dropout);
}

perf::Workload read_workload(const Config& cfg, const std::string& name) {
  const nn::ModelSpec spec = read_model_spec(cfg);
  const int64_t batch = read_batch(cfg);
  if (spec.inline_graph.layers.empty() && spec.model == "mlp")
    return perf::mlp_workload(spec.mlp.hidden, spec.mlp.dropout, batch, name);
  if (spec.inline_graph.layers.empty() && spec.model == "cnn") {
    // The count follows the CNN's default layers; another shape would be priced as that one.
    const std::string why = fmt::format(
        "the cost model counts model = \"cnn\" at its default shape ({}); describe another "
        "shape as [[layer]] tables",
        spec.where);
    if (sets_other_than(cfg, "cnn.channels", std::vector<ConfigScalar>{int64_t(32), int64_t(64)}))
      refuse_key(cfg, "cnn.channels", why);
    refuse_unless_default(cfg, "cnn.hidden", int64_t(1024), why);
    refuse_unless_default(cfg, "cnn.dropout", 0.5, why);
    return perf::cnn_workload(batch, name);
  }
  throw ConfigError(fmt::format(
      "{}: key 'model': the workload of a config is counted for \"mlp\" and \"cnn\"; \"{}\" is "
      "neither",
      spec.where, spec.inline_graph.layers.empty() ? spec.model : "[[layer]] tables"));
}

}  // namespace loom::plan
