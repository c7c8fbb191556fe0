// Reads the PyTorch reference files of tests/data/nn (written by make_layer_references.py; the
// format is described there) and compares a layer's values with them.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "loom/nn/layers/layer.h"
#include "loom/tensor/backend_registry.h"

namespace loom::nn::testing {

struct RefTensor {
  std::vector<int64_t> shape;
  std::vector<double> values;
  std::vector<float> floats() const { return {values.begin(), values.end()}; }
};

struct Reference {
  std::map<std::string, double> attrs;
  std::map<std::string, RefTensor> tensors;

  double attr(const std::string& key) const {
    auto it = attrs.find(key);
    if (it == attrs.end()) ADD_FAILURE() << "reference has no attr " << key;
    return it == attrs.end() ? 0.0 : it->second;
  }
  int64_t iattr(const std::string& key) const { return int64_t(std::llround(attr(key))); }
  const RefTensor& tensor(const std::string& key) const {
    static const RefTensor empty;
    auto it = tensors.find(key);
    if (it == tensors.end()) ADD_FAILURE() << "reference has no tensor " << key;
    return it == tensors.end() ? empty : it->second;
  }
};

// Fails the test (and returns an empty Reference) if the file is missing or malformed.
inline Reference load_reference(const std::string& name) {
  Reference ref;
  const std::string path = std::string(LOOM_SOURCE_DIR) + "/tests/data/nn/" + name + ".txt";
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line) || line != "loom-layer-reference 1") {
    ADD_FAILURE() << path << ": missing or not version 1";
    return ref;
  }
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string what, key;
    words >> what >> key;
    if (what == "attr") {
      words >> ref.attrs[key];
    } else if (what == "tensor") {
      RefTensor t;
      int rank = 0;
      words >> rank;
      int64_t count = 1;
      for (int i = 0; i < rank; ++i) {
        int64_t d = 0;
        words >> d;
        t.shape.push_back(d);
        count *= d;
      }
      std::string data;
      std::getline(in, data);
      std::istringstream values(data);
      double v;
      while (values >> v) t.values.push_back(v);
      if (int64_t(t.values.size()) != count) {
        ADD_FAILURE() << path << ": tensor " << key << " has " << t.values.size()
                      << " values, its shape " << count;
        return ref;
      }
      ref.tensors[key] = std::move(t);
    } else {
      ADD_FAILURE() << path << ": unknown line " << line;
      return ref;
    }
  }
  return ref;
}

// max |got - want| <= rtol * max |want| + atol: the references are float64 answers, the layers
// compute in float32, so rtol is a few float32 roundings over the sums' length.
inline void expect_matches(const std::string& what, const std::vector<float>& got,
                           const RefTensor& want, double rtol = 1e-5, double atol = 1e-6) {
  ASSERT_EQ(got.size(), want.values.size()) << what;
  double scale = 0, worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    scale = std::max(scale, std::fabs(want.values[i]));
    double d = std::fabs(double(got[i]) - want.values[i]);
    if (std::isnan(d)) d = INFINITY;
    if (d > worst) worst = d, at = i;
  }
  EXPECT_LE(worst, rtol * scale + atol)
      << what << ": worst at " << at << ", got " << got[at] << ", want " << want.values[at]
      << " (max |want| " << scale << ")";
}

// One forward and backward of `layer` on the reference's x (batch = its first dimension) with
// the given parameters (and state, if the layer has any) and upstream gradient "dy".
struct LayerRun {
  Shape out_shape;
  std::vector<float> y, dx, dparams, state;
};

inline LayerRun run_layer(Layer& layer, const Reference& ref, std::vector<float> params,
                          std::vector<float> state, bool training = true) {
  LayerRun run;
  const RefTensor& x = ref.tensor("x");
  if (x.shape.empty()) return run;
  const int64_t batch = x.shape[0];
  const Shape in_shape(x.shape.begin() + 1, x.shape.end());
  run.out_shape = layer.build(in_shape);
  EXPECT_EQ(layer.num_params(), int64_t(params.size())) << layer.describe();
  run.dparams.assign(params.size(), 99.0f);  // backward must overwrite
  if (!params.empty()) layer.bind(params.data(), run.dparams.data());
  run.state = std::move(state);
  EXPECT_EQ(layer.num_state(), int64_t(run.state.size())) << layer.describe();
  if (!run.state.empty()) layer.bind_state(run.state.data());
  Context ctx;
  ctx.backend = &cpu_backend();
  ctx.training = training;
  const std::vector<float> xs = x.floats(), dy = ref.tensor("dy").floats();
  run.y.assign(size_t(numel(run.out_shape) * batch), 0.0f);
  layer.forward(ctx, xs.data(), run.y.data(), batch);
  run.dx.assign(xs.size(), -5.0f);
  if (dy.size() == run.y.size())
    layer.backward(ctx, xs.data(), run.y.data(), dy.data(), run.dx.data(), batch);
  else
    ADD_FAILURE() << "dy has " << dy.size() << " values, y " << run.y.size();
  return run;
}

// Concatenation of reference tensors (a layer's parameters in its order).
inline std::vector<float> join(const Reference& ref, const std::vector<std::string>& keys) {
  std::vector<float> out;
  for (const auto& k : keys) {
    const auto v = ref.tensor(k).floats();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

}  // namespace loom::nn::testing
