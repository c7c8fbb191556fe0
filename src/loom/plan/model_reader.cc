#include "loom/plan/model_reader.h"

#include <fmt/format.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "loom/core/config_refusal.h"
#include "loom/core/error.h"

namespace loom::plan {
namespace {

// The built-in networks' keys shape only their own network: mlp.hidden with model = "cnn", a
// zoo graph or [[layer]] tables would change nothing.
void refuse_other_model_keys(const Config& cfg, const std::string& model,
                             const std::string& where) {
  const std::string run = fmt::format("the model is {} ({})", model, where);
  if (model != "\"mlp\"") {
    const std::string why = "shapes model = \"mlp\"; " + run;
    if (sets_other_than(cfg, "mlp.hidden", std::vector<ConfigScalar>{int64_t(1024), int64_t(1024)}))
      refuse_key(cfg, "mlp.hidden", why);
    refuse_unless_default(cfg, "mlp.dropout", 0.5, why);
  }
  if (model != "\"cnn\"") {
    const std::string why = "shapes model = \"cnn\"; " + run;
    if (sets_other_than(cfg, "cnn.channels", std::vector<ConfigScalar>{int64_t(32), int64_t(64)}))
      refuse_key(cfg, "cnn.channels", why);
    refuse_unless_default(cfg, "cnn.hidden", int64_t(1024), why);
    refuse_unless_default(cfg, "cnn.dropout", 0.5, why);
  }
}

std::vector<int64_t> read_widths(const Config& cfg, const std::string& key,
                                 const std::vector<int64_t>& def) {
  std::vector<int64_t> widths = cfg.get_int_list(key, def);
  for (int64_t w : widths)
    if (w <= 0 || w > (int64_t(1) << 20))
      throw ConfigError(
          fmt::format("{}: key '{}': width {} out of range [1, 1048576]", cfg.where(key), key, w));
  return widths;
}

nn::LossKind read_loss_kind(const Config& cfg) {
  const std::string type = cfg.get_string("loss.type", "cross_entropy");
  if (type == "cross_entropy") return nn::LossKind::kCrossEntropy;
  if (type == "mse") {
    if (cfg.get_double("loss.label_smoothing", 0.0, 0.0, 1.0) > 0)
      refuse_key(cfg, "loss.label_smoothing",
                 fmt::format("label smoothing is a cross-entropy option; loss.type = \"mse\" ({}) "
                             "has no labels",
                             cfg.where("loss.type")));
    if (cfg.has("loss.ignore_index"))
      refuse_key(cfg, "loss.ignore_index",
                 fmt::format("ignores the positions of a class label; loss.type = \"mse\" ({}) "
                             "has float targets",
                             cfg.where("loss.type")));
    return nn::LossKind::kMse;
  }
  throw ConfigError(
      fmt::format("{}: loss.type = \"{}\": give \"cross_entropy\" (class labels) "
                  "or \"mse\" (float targets)",
                  cfg.where("loss.type"), type));
}

}  // namespace

nn::ModelSpec read_model_spec(const Config& cfg) {
  nn::ModelSpec spec;
  spec.inline_graph = nn::graph_from_values(cfg.values(), "layer");
  if (!spec.inline_graph.layers.empty()) {
    const std::string& first = spec.inline_graph.layers[0].where;
    if (cfg.has("model"))
      throw ConfigError(
          fmt::format("{}: key 'model': the config also has [[layer]] tables "
                      "(line {}); give the model one way",
                      cfg.where("model"), first));
    spec.inline_graph.source = first.substr(0, first.rfind(':'));
    refuse_other_model_keys(cfg, "the [[layer]] tables", first);
    spec.loss = read_loss_options(cfg);
    return spec;
  }
  spec.model = cfg.get_string("model", "mlp");
  spec.where = cfg.where("model");
  refuse_other_model_keys(cfg, "\"" + spec.model + "\"", spec.where);
  if (spec.model == "mlp") {
    spec.mlp.hidden = read_widths(cfg, "mlp.hidden", spec.mlp.hidden);
    if (cfg.has("mlp.hidden")) spec.mlp.hidden_where = cfg.where("mlp.hidden");
    spec.mlp.dropout = cfg.get_double("mlp.dropout", spec.mlp.dropout, 0.0, 0.99);
  } else if (spec.model == "cnn") {
    spec.cnn.channels = read_widths(cfg, "cnn.channels", spec.cnn.channels);
    spec.cnn.channels_where = cfg.where("cnn.channels");
    spec.cnn.hidden = cfg.get_int("cnn.hidden", spec.cnn.hidden, 1, 1 << 20);
    spec.cnn.dropout = cfg.get_double("cnn.dropout", spec.cnn.dropout, 0.0, 0.99);
  }
  spec.loss = read_loss_options(cfg);
  return spec;
}

nn::LossOptions read_loss_options(const Config& cfg) {
  nn::LossOptions o;
  o.where = cfg.where("loss.type");
  o.label_smoothing = float(cfg.get_double("loss.label_smoothing", 0.0, 0.0, 1.0));
  o.kind = read_loss_kind(cfg);
  if (cfg.has("loss.ignore_index"))
    o.ignore_index =
        int32_t(cfg.get_int("loss.ignore_index", -1, std::numeric_limits<int32_t>::min(),
                            std::numeric_limits<int32_t>::max()));
  return o;
}

}  // namespace loom::plan
