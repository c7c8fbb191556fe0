// Shared pieces of the extension module loom._loom (docs/python.md).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "loom/compress/codec.h"

namespace loom::train {
struct TrainedModel;
}

namespace loom::python {

namespace py = pybind11;

// A codec as Python holds it: shared by the states it made, so a state outlives nothing it needs.
struct PyCodec {
  std::shared_ptr<compress::Codec> codec;
  std::string params;  // "int8(block=512)", for repr and error messages
};

// One bucket's error-feedback state. The mutex keeps two threads (the GIL is released while a
// codec runs) from encoding with the same residual at once.
struct PyState {
  std::shared_ptr<compress::Codec> codec;
  compress::CodecState state;
  std::mutex mu;
};

// `what` as contiguous, aligned float32 (writeable when `write`), else ValueError naming the
// problem: loom neither copies nor converts a gradient behind the caller's back.
std::span<float> float32_view(const py::array& a, const char* what, bool write);
// `what` as contiguous, 4-byte aligned bytes (any dtype; its buffer is taken as raw bytes).
std::span<std::byte> byte_view(const py::array& a, const char* what, bool write);

void register_codecs(py::module_& m);
void register_collectives(py::module_& m);
void register_models(py::module_& m);
void register_training(py::module_& m);
void register_perf(py::module_& m);

// A trained model as Python's loom.TrainedModel (models.cc), taking it over.
py::object wrap_trained_model(train::TrainedModel&& m);

}  // namespace loom::python
