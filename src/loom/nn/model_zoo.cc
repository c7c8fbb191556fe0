#include "loom/nn/model_zoo.h"

#include "loom/core/error.h"
#include "loom/nn/activation.h"
#include "loom/nn/conv2d.h"
#include "loom/nn/linear.h"

namespace loom::nn {

std::vector<ConfigKeySpec> model_config_keys() {
  return {
      {"model", ConfigType::kString, "\"mlp\"", "model of the zoo: \"mlp\" or \"cnn\""},
      {"mlp.hidden", ConfigType::kArray, "[1024, 1024]", "widths of the MLP's hidden layers"},
      {"mlp.dropout", ConfigType::kDouble, "0.5", "dropout after each hidden ReLU (0 = none)"},
      {"cnn.channels", ConfigType::kArray, "[32, 64]", "channels of each 5x5 conv + 2x2 pool"},
      {"cnn.hidden", ConfigType::kInt, "1024", "width of the CNN's dense layer"},
      {"cnn.dropout", ConfigType::kDouble, "0.5", "dropout after the dense layer"},
  };
}

namespace {

void check_widths(const Config& cfg, const std::string& key, const std::vector<int64_t>& widths) {
  for (int64_t w : widths)
    if (w <= 0 || w > (int64_t(1) << 20))
      throw ConfigError(
          fmt::format("{}: key '{}': width {} out of range [1, 1048576]", cfg.where(key), key, w));
}

}  // namespace

std::vector<std::unique_ptr<Layer>> build_layers(const Config& cfg, const Shape& input_shape,
                                                 int num_classes) {
  const std::string kind = cfg.get_choice("model", "mlp", {"mlp", "cnn"});
  std::vector<std::unique_ptr<Layer>> layers;
  if (kind == "mlp") {
    auto hidden = cfg.get_int_list("mlp.hidden", {1024, 1024});
    check_widths(cfg, "mlp.hidden", hidden);
    const float p = float(cfg.get_double("mlp.dropout", 0.5, 0.0, 0.99));
    layers.push_back(std::make_unique<Flatten>());
    int64_t in = numel(input_shape);
    for (int64_t h : hidden) {
      layers.push_back(std::make_unique<Linear>(in, h));
      layers.push_back(std::make_unique<ReLU>());
      if (p > 0) layers.push_back(std::make_unique<Dropout>(p));
      in = h;
    }
    layers.push_back(std::make_unique<Linear>(in, num_classes));
  } else {
    if (input_shape.size() != 3)
      throw ConfigError(fmt::format("model \"cnn\" needs images [C, H, W], the data has {}",
                                    shape_text(input_shape)));
    auto channels = cfg.get_int_list("cnn.channels", {32, 64});
    check_widths(cfg, "cnn.channels", channels);
    const int64_t hidden = cfg.get_int("cnn.hidden", 1024, 1, 1 << 20);
    const float p = float(cfg.get_double("cnn.dropout", 0.5, 0.0, 0.99));
    Shape shape = input_shape;
    int64_t c = input_shape[0];
    for (int64_t out : channels) {
      layers.push_back(std::make_unique<Conv2d>(c, out, 5, 1, 2));
      layers.push_back(std::make_unique<ReLU>());
      layers.push_back(std::make_unique<MaxPool2d>(2));
      shape = {out, shape[1] / 2, shape[2] / 2};
      if (shape[1] < 1 || shape[2] < 1)
        throw ConfigError(
            fmt::format("{}: key 'cnn.channels': {} pooling stages shrink a {} "
                        "image to nothing",
                        cfg.where("cnn.channels"), channels.size(), shape_text(input_shape)));
      c = out;
    }
    layers.push_back(std::make_unique<Flatten>());
    layers.push_back(std::make_unique<Linear>(numel(shape), hidden));
    layers.push_back(std::make_unique<ReLU>());
    if (p > 0) layers.push_back(std::make_unique<Dropout>(p));
    layers.push_back(std::make_unique<Linear>(hidden, num_classes));
  }
  return layers;
}

std::unique_ptr<Model> build_model(const Config& cfg, Backend& backend, const Shape& input_shape,
                                   int num_classes) {
  return std::make_unique<Model>(backend, input_shape, num_classes,
                                 build_layers(cfg, input_shape, num_classes));
}

}  // namespace loom::nn
