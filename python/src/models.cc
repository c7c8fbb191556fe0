// loom._loom.TrainedModel: a trained run (train::load_trained_model) evaluated from NumPy.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <thread>
#include <vector>

#include "bindings.h"
#include "loom/tensor/cpu/cpu_backend.h"
#include "loom/train/evaluation.h"
#include "loom/train/forward_settings.h"
#include "loom/train/trained_model.h"

namespace loom::python {
namespace {

struct PyModel {
  train::TrainedModel m;
  std::mutex mu;  // one forward at a time: the model keeps its activations

  int64_t sample_numel() const { return nn::numel(m.input_shape); }
  int64_t output_numel() const {
    return nn::numel(m.model->output_shape(int(m.model->layers().size()) - 1));
  }

  // X as float32 samples of the model's input shape: (N, *input_shape) or (N, numel).
  std::span<const float> samples(const py::array& x, int64_t* count) const {
    std::span<const float> v = float32_view(x, "X", false);
    const int64_t per = sample_numel();
    if (x.ndim() < 1 || (x.ndim() == 1 && per != 1) || v.size() % size_t(per) != 0 ||
        (x.ndim() > 1 && int64_t(v.size()) / x.shape(0) != per))
      throw py::value_error(fmt::format(
          "X: shape {} does not hold samples of the model's input shape {} ({} values each)",
          std::string(py::str(
              py::tuple(py::cast(std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()))))),
          nn::shape_text(m.input_shape), per));
    *count = int64_t(v.size()) / per;
    // As `loom predict` refuses a NaN or Inf in its input file (data/formats/feature_file.h): a
    // model given one answers NaN, or quietly the same for every sample.
    for (size_t i = 0; i < v.size(); ++i)
      if (!std::isfinite(v[i]))
        throw py::value_error(
            fmt::format("X: sample {} value {} is {}", int64_t(i) / per, int64_t(i) % per, v[i]));
    return v;
  }
};

// Runs `f` on a thread of its own with loom's forward settings (train/forward_settings.h:
// `threads` intra-op threads, 0 every core, denormals flushed), as `loom predict` and `loom eval`
// run theirs, so the numbers are the CLI's bit for bit; the caller's thread keeps its own
// floating-point mode and OpenMP settings. Call without the GIL.
template <class F>
void on_forward_thread(Backend& backend, int threads, F&& f) {
  std::exception_ptr error;
  std::thread t([&] {
    try {
      train::use_forward_threads(backend, threads);
      f();
    } catch (...) {
      error = std::current_exception();
    }
  });
  t.join();
  if (error) std::rethrow_exception(error);
}

void check_threads(int threads) {
  if (threads < 0)
    throw py::value_error(fmt::format("threads = {}: give 1 or more (0: every core)", threads));
}

std::unique_ptr<PyModel> load(const std::string& path) {
  if (!std::filesystem::exists(path)) {
    errno = ENOENT;
    PyErr_SetFromErrnoWithFilename(PyExc_OSError, path.c_str());
    throw py::error_already_set();
  }
  auto p = std::make_unique<PyModel>();
  py::gil_scoped_release nogil;
  p->m = train::load_trained_model(path, cpu_backend());
  return p;
}

py::array predict(PyModel& p, const py::array& x, int64_t batch, int threads) {
  if (batch < 0)
    throw py::value_error(fmt::format("batch = {}: need at least 1 (0: as evaluate)", batch));
  check_threads(threads);
  if (batch == 0) batch = train::forward_chunk(p.m.model->output_positions());
  int64_t n = 0;
  std::span<const float> in = p.samples(x, &n);
  const int64_t per = p.sample_numel(), k = p.output_numel();
  py::array_t<float> out({py::ssize_t(n), py::ssize_t(k)});
  float* o = out.mutable_data();
  py::gil_scoped_release nogil;
  std::lock_guard<std::mutex> lock(p.mu);
  on_forward_thread(p.m.model->backend(), threads, [&] {
    for (int64_t i = 0; i < n; i += batch) {
      const int64_t b = std::min(batch, n - i);
      const float* y = p.m.model->forward(in.data() + i * per, b, nn::StepInfo{.training = false});
      std::memcpy(o + i * k, y, size_t(b * k) * sizeof(float));
    }
  });
  return out;
}

py::dict evaluate(PyModel& p, const py::array& x, const py::array& y, int threads) {
  check_threads(threads);
  int64_t n = 0;
  std::span<const float> in = p.samples(x, &n);
  data::Dataset set;
  set.name = "Python arrays";
  set.count = n;
  set.sample_shape = p.m.input_shape;
  set.features.assign(in.begin(), in.end());
  if (p.m.loss == nn::LossKind::kMse) {
    std::span<const float> t = float32_view(y, "y", false);
    const int64_t k = p.output_numel();
    if (int64_t(t.size()) != n * k)
      throw py::value_error(
          fmt::format("y: {} values; {} samples of {} targets need {}", t.size(), n, k, n * k));
    set.target_numel = k;
    set.targets.assign(t.begin(), t.end());
    set.labels.assign(size_t(n), 0);
  } else {
    if (y.dtype().kind() != 'i' && y.dtype().kind() != 'u')
      throw py::value_error(
          fmt::format("y: dtype {}, class labels are integers", std::string(py::str(y.dtype()))));
    py::array_t<int64_t, py::array::c_style | py::array::forcecast> labels(y);
    if (labels.size() != n)
      throw py::value_error(fmt::format("y: {} labels for {} samples", labels.size(), n));
    set.num_classes = p.m.num_classes;
    for (py::ssize_t i = 0; i < labels.size(); ++i) {
      const int64_t c = labels.data()[i];
      if (c < 0 || c >= p.m.num_classes)
        throw py::value_error(
            fmt::format("y[{}] = {}: the model has classes 0..{}", i, c, p.m.num_classes - 1));
      set.labels.push_back(int32_t(c));
    }
  }
  train::EvalResult r;
  {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(p.mu);
    on_forward_thread(p.m.model->backend(), threads,
                      [&] { r = train::evaluate_model(*p.m.model, set); });
  }
  py::dict d;
  d["count"] = r.count;
  d["loss"] = r.loss;
  if (!r.regression) {
    d["accuracy"] = r.accuracy;
    const py::ssize_t c = r.num_classes;
    py::array_t<int64_t> conf({c, c});
    std::memcpy(conf.mutable_data(), r.confusion.data(), r.confusion.size() * sizeof(int64_t));
    d["confusion"] = conf;
  }
  return d;
}

}  // namespace

py::object wrap_trained_model(train::TrainedModel&& m) {
  auto p = std::make_unique<PyModel>();
  p->m = std::move(m);
  return py::cast(std::move(p));
}

void register_models(py::module_& m) {
  py::class_<PyModel>(m, "TrainedModel", "A trained run's model (train::load_trained_model).")
      .def(py::init(&load), py::arg("path"))
      .def_property_readonly("input_shape", [](const PyModel& p) { return p.m.input_shape; })
      .def_property_readonly("num_classes", [](const PyModel& p) { return p.m.num_classes; })
      .def_property_readonly("outputs", &PyModel::output_numel)
      .def_property_readonly("steps", [](const PyModel& p) { return p.m.steps; })
      .def_property_readonly("weights", [](const PyModel& p) { return p.m.weights; })
      .def_property_readonly("loss", [](const PyModel& p) { return nn::loss_kind_name(p.m.loss); })
      .def_property_readonly("input_normalisation",
                             [](const PyModel& p) -> py::object {
                               if (!p.m.input_normalisation) return py::none();
                               return py::make_tuple(p.m.input_normalisation->mean,
                                                     p.m.input_normalisation->stddev);
                             })
      .def("predict", &predict, py::arg("X"), py::arg("batch") = 0, py::arg("threads") = 0)
      .def("evaluate", &evaluate, py::arg("X"), py::arg("y"), py::arg("threads") = 0);
}

}  // namespace loom::python
