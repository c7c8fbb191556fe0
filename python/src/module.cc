// The extension module loom._loom: loom's codecs and compressed allreduce for Python
// (python/loom/ wraps it; docs/python.md). loom's errors become Python exceptions: bad input or
// config -> ValueError (a missing file -> OSError), NaN/Inf -> loom.NumericError (a
// ValueError), a lost peer -> loom.LostPeerError, anything else -> RuntimeError.
#include <pybind11/stl.h>

#include "bindings.h"
#include "loom/comm/transport_registry.h"
#include "loom/config.h"
#include "loom/core/error.h"
#include "loom/git_rev.h"

namespace loom::python {

std::span<float> float32_view(const py::array& a, const char* what, bool write) {
  if (!a.dtype().is(py::dtype::of<float>()))
    throw py::value_error(std::string(what) + ": dtype " + std::string(py::str(a.dtype())) +
                          ", loom's codecs take float32 (convert with .astype(numpy.float32))");
  if (!(a.flags() & py::array::c_style))
    throw py::value_error(std::string(what) +
                          ": not C-contiguous (pass numpy.ascontiguousarray(...))");
  if (reinterpret_cast<uintptr_t>(a.data()) % alignof(float) != 0)
    throw py::value_error(std::string(what) + ": not aligned to 4 bytes");
  if (write && !a.writeable()) throw py::value_error(std::string(what) + ": read-only array");
  return {static_cast<float*>(const_cast<void*>(a.data())), size_t(a.size())};
}

std::span<std::byte> byte_view(const py::array& a, const char* what, bool write) {
  if (!(a.flags() & py::array::c_style))
    throw py::value_error(std::string(what) + ": not C-contiguous");
  if (reinterpret_cast<uintptr_t>(a.data()) % 4 != 0)
    throw py::value_error(std::string(what) +
                          ": not aligned to 4 bytes (loom's encodings are word-aligned)");
  if (write && !a.writeable()) throw py::value_error(std::string(what) + ": read-only array");
  return {static_cast<std::byte*>(const_cast<void*>(a.data())), size_t(a.nbytes())};
}

}  // namespace loom::python

PYBIND11_MODULE(_loom, m) {
  namespace py = pybind11;
  using namespace loom::python;
  m.doc() = "loom's codecs and compressed allreduce (the C++ core of the loom package)";
  m.attr("__version__") = LOOM_VERSION;
  m.attr("git_rev") = LOOM_GIT_REV;
  py::dict features;
  features["build_type"] = LOOM_BUILD_TYPE;
  features["gemm"] = LOOM_HAVE_OPENBLAS ? "oneDNN+OpenBLAS" : "oneDNN";
  features["cuda"] = bool(LOOM_HAVE_CUDA);
  features["cudnn"] = bool(LOOM_HAVE_CUDNN);
  // Every optional transport, from the registry's records.
  for (const loom::comm::TransportKind& k : loom::comm::transport_kinds())
    if (!k.build_hint.empty()) features[py::str(k.name)] = k.built;
  features["onnx"] = bool(LOOM_HAVE_ONNX);
  m.attr("features") = features;

  static py::exception<loom::CommError> lost_peer(m, "LostPeerError", PyExc_RuntimeError);
  static py::exception<loom::NumericError> numeric(m, "NumericError", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const loom::CommError& e) {
      lost_peer(e.what());
    } catch (const loom::NumericError& e) {
      numeric(e.what());
    } catch (const loom::InputError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const loom::ConfigError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const loom::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });
  register_codecs(m);
  register_collectives(m);
  register_models(m);
  register_training(m);
  register_perf(m);
}
