// loom._loom.train: loom's trainer (train::run_training) on NumPy arrays, in this process. The
// training arrays are read in place by a SampleSource the loader threads share; the config
// comes from a TOML file or from (key, value) pairs that python/loom/__init__.py flattened.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <vector>

#include "bindings.h"
#include "loom/core/config.h"
#include "loom/core/error.h"
#include "loom/data/sources/sample_source.h"
#include "loom/nn/io/model_file.h"
#include "loom/train/trained_model.h"
#include "loom/train/trainer.h"

namespace loom::python {
namespace {

std::string shape_text(const py::array& a) {
  return std::string(
      py::str(py::tuple(py::cast(std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim())))));
}

// Samples held by NumPy arrays the caller keeps alive for the whole run: features read in place
// (float32, C-contiguous), class labels as int32 or float targets read in place.
class ArraySource final : public data::SampleSource {
 public:
  ArraySource(const float* x, int64_t count, std::vector<int64_t> shape,
              std::vector<int32_t> labels, int classes, const float* targets, int64_t target_numel)
      : x_(x),
        count_(count),
        shape_(std::move(shape)),
        numel_(nn::numel(shape_)),
        labels_(std::move(labels)),
        classes_(classes),
        targets_(targets),
        target_numel_(target_numel) {}
  int64_t count() const override { return count_; }
  std::vector<int64_t> sample_shape() const override { return shape_; }
  int num_classes() const override { return classes_; }
  int64_t target_numel() const override { return target_numel_; }
  void gather(const int64_t* idx, int64_t n, float* x, int32_t* y) const override {
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(x + i * numel_, x_ + idx[i] * numel_, size_t(numel_) * sizeof(float));
      y[i] = labels_.empty() ? 0 : labels_[size_t(idx[i])];
    }
  }
  void gather_targets(const int64_t* idx, int64_t n, float* t) const override {
    if (target_numel_ == 0) return SampleSource::gather_targets(idx, n, t);
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(t + i * target_numel_, targets_ + idx[i] * target_numel_,
                  size_t(target_numel_) * sizeof(float));
  }

 private:
  const float* x_;
  int64_t count_;
  std::vector<int64_t> shape_;
  int64_t numel_;
  std::vector<int32_t> labels_;
  int classes_;
  const float* targets_;
  int64_t target_numel_;
};

// One set's arrays, checked: X float32 (N, *sample_shape), y N integer labels or float32
// targets (N,) or (N, K). ValueError naming the argument otherwise: nothing is converted, so the
// run trains on exactly the bits the caller holds.
struct Arrays {
  const float* x = nullptr;
  int64_t count = 0;
  std::vector<int64_t> shape;
  std::vector<int32_t> labels;  // classification
  int32_t max_label = -1;
  const float* targets = nullptr;  // regression
  int64_t target_numel = 0;
};

Arrays check_arrays(const py::array& x, const py::array& y, const std::string& set) {
  Arrays a;
  const std::string xn = set + " X", yn = set + " y";
  if (!x.dtype().is(py::dtype::of<float>()))
    throw py::value_error(
        fmt::format("{}: dtype {}; loom trains on float32 (convert with X.astype(numpy.float32))",
                    xn, std::string(py::str(x.dtype()))));
  if (!(x.flags() & py::array::c_style))
    throw py::value_error(
        fmt::format("{}: not C-contiguous (pass numpy.ascontiguousarray(X))", xn));
  if (x.ndim() < 2)
    throw py::value_error(
        fmt::format("{}: shape {}; give (N, *sample_shape), e.g. (N, 784) or (N, 1, 28, 28)", xn,
                    shape_text(x)));
  a.count = x.shape(0);
  for (py::ssize_t d = 1; d < x.ndim(); ++d) a.shape.push_back(x.shape(d));
  if (a.count < 1 || nn::numel(a.shape) < 1)
    throw py::value_error(fmt::format("{}: shape {} holds no samples", xn, shape_text(x)));
  a.x = static_cast<const float*>(x.data());
  // As `loom data convert` refuses NaN or Inf features (the command line's way to training
  // data): refused where they enter, not when a step meets them.
  const int64_t per = nn::numel(a.shape);
  for (int64_t i = 0; i < a.count * per; ++i)
    if (!std::isfinite(a.x[i]))
      throw py::value_error(
          fmt::format("{}: sample {} value {} is {}", xn, i / per, i % per, a.x[i]));
  if (y.ndim() < 1 || y.shape(0) != a.count)
    throw py::value_error(fmt::format("{}: shape {}; {} has {} samples, y needs one row per sample",
                                      yn, shape_text(y), xn, a.count));
  const char kind = y.dtype().kind();
  if (kind == 'f') {
    if (!y.dtype().is(py::dtype::of<float>()))
      throw py::value_error(fmt::format(
          "{}: dtype {}; float targets are float32 (convert with y.astype(numpy.float32))", yn,
          std::string(py::str(y.dtype()))));
    if (!(y.flags() & py::array::c_style) || y.ndim() > 2)
      throw py::value_error(fmt::format(
          "{}: shape {}; float targets are (N,) or (N, K), C-contiguous", yn, shape_text(y)));
    a.targets = static_cast<const float*>(y.data());
    a.target_numel = y.ndim() == 2 ? y.shape(1) : 1;
    for (int64_t i = 0; i < a.count * a.target_numel; ++i)
      if (!std::isfinite(a.targets[i]))
        throw py::value_error(fmt::format("{}: sample {} target {} is {}", yn, i / a.target_numel,
                                          i % a.target_numel, a.targets[i]));
    return a;
  }
  if (kind != 'i' && kind != 'u')
    throw py::value_error(
        fmt::format("{}: dtype {}; class labels are integers, regression targets float32", yn,
                    std::string(py::str(y.dtype()))));
  if (y.ndim() != 1)
    throw py::value_error(fmt::format("{}: shape {}; class labels are (N,)", yn, shape_text(y)));
  py::array_t<int64_t, py::array::c_style | py::array::forcecast> labels(y);
  a.labels.reserve(size_t(a.count));
  for (int64_t i = 0; i < a.count; ++i) {
    const int64_t c = labels.data()[i];
    if (c < 0 || c > INT32_MAX)
      throw py::value_error(fmt::format("{}[{}] = {}: class labels are 0, 1, 2, ...", yn, i, c));
    a.labels.push_back(int32_t(c));
    a.max_label = std::max(a.max_label, int32_t(c));
  }
  return a;
}

// The config: the file, or the pairs (arrays through TOML text, so they read as a file's do),
// then the defaults of a run from Python: no output directory, no progress unless asked.
Config make_config(const std::string& path,
                   const std::vector<std::pair<std::string, py::object>>& entries, bool progress) {
  Config cfg;
  if (!path.empty()) {
    cfg = Config::from_file(path);
  } else {
    std::string arrays;
    for (const auto& [key, value] : entries) {
      if (!py::isinstance<py::list>(value)) continue;
      std::vector<std::string> items;
      for (const py::handle item : value.cast<py::list>()) {
        if (py::isinstance<py::bool_>(item))
          items.push_back(config_scalar_text(item.cast<bool>()));
        else if (py::isinstance<py::int_>(item))
          items.push_back(config_scalar_text(item.cast<int64_t>()));
        else if (py::isinstance<py::float_>(item))
          items.push_back(config_scalar_text(item.cast<double>()));
        else
          items.push_back(config_scalar_text(item.cast<std::string>()));
      }
      arrays += fmt::format("{} = [{}]\n", toml_key(key), fmt::join(items, ", "));
    }
    cfg = Config::from_string(arrays, "config");
    for (const auto& [key, value] : entries) {
      if (py::isinstance<py::list>(value)) continue;
      if (py::isinstance<py::bool_>(value))
        cfg.set(key, value.cast<bool>(), "config");
      else if (py::isinstance<py::int_>(value))
        cfg.set(key, value.cast<int64_t>(), "config");
      else if (py::isinstance<py::float_>(value))
        cfg.set(key, value.cast<double>(), "config");
      else
        cfg.set(key, value.cast<std::string>(), "config");
    }
  }
  if (!cfg.has("output.dir")) cfg.set("output.dir", std::string(), "loom.train");
  if (!cfg.has("progress"))
    cfg.set("progress", std::string(progress ? "auto" : "none"), "loom.train");
  if (!progress && !cfg.has("log.level")) cfg.set("log.level", std::string("warn"), "loom.train");
  return cfg;
}

// The trainer's process-wide settings (log level, the CPU backend's precision, the stop-signal
// handlers) belong to one run at a time.
std::mutex one_run;

py::dict train(const std::string& path,
               const std::vector<std::pair<std::string, py::object>>& entries, const py::array& x,
               const py::array& y, const py::object& x_test, const py::object& y_test,
               bool progress, bool force) {
  const Config cfg = make_config(path, entries, progress);
  const Arrays tr = check_arrays(x, y, "train");
  std::optional<Arrays> te;
  if (!x_test.is_none())
    te = check_arrays(x_test.cast<py::array>(), y_test.cast<py::array>(), "test");
  if (te && te->shape != tr.shape)
    throw py::value_error(fmt::format("test X: samples of shape {}; the training samples are {}",
                                      nn::shape_text(te->shape), nn::shape_text(tr.shape)));
  if (te && (te->target_numel != tr.target_numel || te->labels.empty() != tr.labels.empty()))
    throw py::value_error(
        "test y: not the kind of target train y holds (class labels or float targets, and how "
        "many per sample)");
  const int classes =
      tr.target_numel > 0 ? 0 : int(std::max(tr.max_label, te ? te->max_label : -1)) + 1;

  train::TrainOptions options;
  options.force = force;
  options.keep_results = true;
  options.data_name = "the arrays given";
  options.train_data = std::make_shared<ArraySource>(tr.x, tr.count, tr.shape, tr.labels, classes,
                                                     tr.targets, tr.target_numel);
  if (te) {
    auto t = std::make_shared<data::Dataset>();
    t->name = "test arrays";
    t->count = te->count;
    t->sample_shape = te->shape;
    t->num_classes = classes;
    t->features.assign(te->x, te->x + te->count * nn::numel(te->shape));
    t->target_numel = te->target_numel;
    if (te->target_numel > 0) {
      t->targets.assign(te->targets, te->targets + te->count * te->target_numel);
      t->labels.assign(size_t(te->count), 0);
    } else {
      t->labels = te->labels;
    }
    options.test_data = std::move(t);
  }
  train::TrainResult r;
  {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(one_run);
    r = train::run_training(plan::read_run_plan(cfg), options);
  }
  py::dict out;
  out["metrics"] = r.metrics_lines;
  out["summary"] = r.summary_json;
  out["dir"] = r.output_dir.empty() ? py::object(py::none()) : py::object(py::str(r.output_dir));
  out["interrupted"] = r.interrupted;
  out["describe"] = r.describe;
  py::dict params;
  if (r.model) {
    for (const nn::ModelTensor& t : nn::model_tensors(*r.model->model)) {
      py::array_t<float> a(std::vector<py::ssize_t>(t.shape.begin(), t.shape.end()));
      const std::vector<float>& from = t.state ? r.final_state : r.final_params;
      std::memcpy(a.mutable_data(), from.data() + t.offset, size_t(t.count) * sizeof(float));
      params[py::str(t.name)] = a;
    }
    out["model"] = wrap_trained_model(std::move(*r.model));
  } else {
    out["model"] = py::none();
  }
  out["parameters"] = params;
  return out;
}

}  // namespace

void register_training(py::module_& m) {
  m.def("train", &train, py::arg("path"), py::arg("entries"), py::arg("X"), py::arg("y"),
        py::arg("X_test"), py::arg("y_test"), py::arg("progress"), py::arg("force"),
        "loom's trainer on NumPy arrays (loom.train wraps it).");
}

}  // namespace loom::python
