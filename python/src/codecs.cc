// loom._loom.Codec and loom._loom.State: compress::Codec and compress::CodecState on NumPy
// arrays, zero-copy, with the GIL released while the codec runs.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <chrono>
#include <vector>

#include "bindings.h"
#include "loom/compress/registry.h"
#include "loom/core/config.h"
#include "loom/plan/codec_reader.h"

namespace loom::python {
namespace {

using compress::Codec;
using compress::CodecState;

PyCodec make(const std::string& name, const py::dict& params) {
  Config cfg;
  std::string shown;
  for (auto [k, v] : params) {
    const std::string key = py::str(k);
    ConfigScalar value;
    if (py::isinstance<py::bool_>(v))
      value = v.cast<bool>();
    else if (py::isinstance<py::int_>(v))
      value = v.cast<int64_t>();
    else if (py::isinstance<py::float_>(v))
      value = v.cast<double>();
    else if (py::isinstance<py::str>(v))
      value = v.cast<std::string>();
    else
      throw py::value_error(fmt::format("codec parameter {}: {} is not a bool, int, float or str",
                                        key, std::string(py::repr(v))));
    cfg.set("codec." + key, value, "Python argument");
    shown += fmt::format("{}{}={}", shown.empty() ? "" : ", ", key, std::string(py::repr(v)));
  }
  PyCodec c;
  c.codec = std::shared_ptr<Codec>(compress::make_codec(plan::read_codec_options(name, cfg)));
  c.params = fmt::format("{}({})", name, shown);
  return c;
}

// The state to encode with: the caller's, checked against this codec and size, or a fresh one.
CodecState& state_for(const PyCodec& c, PyState* s, size_t n, std::unique_ptr<PyState>& fresh) {
  if (s == nullptr) {
    fresh = std::make_unique<PyState>();
    fresh->codec = c.codec;
    fresh->state = c.codec->make_state(n, "python");
    return fresh->state;
  }
  if (s->codec.get() != c.codec.get() && s->codec->name() != c.codec->name())
    throw py::value_error(
        fmt::format("state was made by codec {}, not {}", s->codec->name(), c.codec->name()));
  if (s->state.n != n)
    throw py::value_error(fmt::format(
        "state of {} was made for a bucket of {} elements; this gradient has {} (one state per "
        "bucket)",
        s->state.bucket, s->state.n, n));
  return s->state;
}

py::array encode(const PyCodec& c, const py::array& grad, PyState* state, py::object out) {
  std::span<const float> g = float32_view(grad, "grad", false);
  const size_t bytes = c.codec->encoded_bytes(g.size());
  py::array result =
      out.is_none() ? py::array(py::array_t<uint8_t>(py::ssize_t(bytes))) : out.cast<py::array>();
  std::span<std::byte> o = byte_view(result, "out", true);
  if (o.size() < bytes)
    throw py::value_error(fmt::format("out: {} bytes, the {} encoding of {} elements takes {}",
                                      o.size(), c.codec->name(), g.size(), bytes));
  std::unique_ptr<PyState> fresh;
  CodecState& st = state_for(c, state, g.size(), fresh);
  std::unique_lock<std::mutex> lock;
  {
    py::gil_scoped_release nogil;
    if (state) lock = std::unique_lock<std::mutex>(state->mu);
    c.codec->encode(g, st, o.first(bytes));
  }
  return result;
}

py::array decode(const PyCodec& c, const py::array& payload, py::object out, py::object n,
                 bool accumulate) {
  std::span<const std::byte> in = byte_view(payload, "payload", false);
  py::array result;
  if (out.is_none()) {
    if (n.is_none()) throw py::value_error("decode: pass out= or n= (the number of elements)");
    const int64_t count = n.cast<int64_t>();
    if (count < 0) throw py::value_error(fmt::format("decode: n = {} is negative", count));
    if (accumulate) throw py::value_error("decode: accumulate=True needs out=");
    result = py::array_t<float>(py::ssize_t(count));
  } else {
    result = out.cast<py::array>();
    if (!n.is_none() && n.cast<int64_t>() != int64_t(result.size()))
      throw py::value_error(
          fmt::format("decode: n = {} but out has {} elements", n.cast<int64_t>(), result.size()));
  }
  std::span<float> o = float32_view(result, "out", true);
  {
    // A payload from Python may be anything: checked against this codec and n (its size, the
    // codec's invariants, finite values) before it is decoded; InputError -> ValueError.
    py::gil_scoped_release nogil;
    c.codec->decode_checked(
        in, o, accumulate ? compress::DecodeMode::kAccumulate : compress::DecodeMode::kWrite,
        "payload");
  }
  return result;
}

// Seconds per encode and per decode of n elements, timed in C++ (no Python in the loop), for
// the benchmark that compares the bindings' overhead with the codec itself.
std::pair<double, double> bench(const PyCodec& c, size_t n, int iters) {
  py::gil_scoped_release nogil;
  std::vector<float> g(n), d(n);
  for (size_t i = 0; i < n; ++i) g[i] = float(int64_t(i % 2003) - 1001) * 1e-3f;
  CodecState st = c.codec->make_state(n, "bench");
  std::vector<uint32_t> buf((c.codec->encoded_bytes(n) + 3) / 4);
  std::span<std::byte> out(reinterpret_cast<std::byte*>(buf.data()), c.codec->encoded_bytes(n));
  c.codec->encode(g, st, out);  // warm up
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) c.codec->encode(g, st, out);
  auto t1 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) c.codec->decode(out, d, compress::DecodeMode::kWrite);
  auto t2 = std::chrono::steady_clock::now();
  return {std::chrono::duration<double>(t1 - t0).count() / iters,
          std::chrono::duration<double>(t2 - t1).count() / iters};
}

}  // namespace

void register_codecs(py::module_& m) {
  m.def("codec_names", &compress::codec_names, "The names loom's codec registry knows.");
  m.def(
      "codec_kinds",
      [] {
        py::list out;
        for (const compress::CodecKind* k : compress::codec_kinds()) {
          py::list keys;
          for (const compress::CodecKey& key : k->keys) {
            const ConfigKeySpec s = key.spec();
            keys.append(py::dict(py::arg("key") = s.key, py::arg("default") = s.default_text,
                                 py::arg("doc") = s.doc));
          }
          out.append(py::dict(py::arg("name") = k->name, py::arg("summary") = k->summary,
                              py::arg("reference") = k->reference, py::arg("lossy") = k->lossy,
                              py::arg("summable") = k->summable,
                              py::arg("aggregation") = compress::aggregation_name(k->aggregation),
                              py::arg("wire_bits_per_element") = k->wire_bits_per_element(),
                              py::arg("auto_candidate") = k->auto_candidate,
                              py::arg("device_kernels") = k->device_kernels,
                              py::arg("keys") = keys));
        }
        return out;
      },
      "Every codec's record (compress/codec_kind.h) as a dict: name, summary, reference, lossy, "
      "summable, aggregation, wire_bits_per_element, auto_candidate, device_kernels and its "
      "codec.* keys.");
  py::class_<PyState>(m, "State", "One bucket's error-feedback state (residual, PowerSGD's Q).")
      .def_property_readonly("n", [](const PyState& s) { return s.state.n; })
      .def_property_readonly("bucket", [](const PyState& s) { return s.state.bucket; })
      .def_property_readonly("steps", [](const PyState& s) { return s.state.steps; })
      .def_property_readonly("codec", [](const PyState& s) { return s.codec->name(); })
      .def_property_readonly(
          "residual_format",
          [](const PyState& s) { return compress::residual_format_name(s.state.residual_format); })
      .def_property_readonly(
          "residual",
          [](PyState& s) {
            std::lock_guard<std::mutex> lock(s.mu);
            std::vector<float> r = s.state.residual_values();
            if (r.empty() && s.state.n > 0) r.assign(s.state.n, 0.0f);
            return py::array_t<float>(py::ssize_t(r.size()), r.data());
          },
          "A copy of the residual as float32 (what the next encode adds to its input).")
      .def("reset",
           [](PyState& s) {
             std::lock_guard<std::mutex> lock(s.mu);
             s.state.clear_residual();
           })
      .def("__repr__", [](const PyState& s) {
        return fmt::format("<loom State {} n={} steps={}>", s.codec->name(), s.state.n,
                           s.state.steps);
      });

  py::class_<PyCodec>(m, "Codec")
      .def(py::init(&make), py::arg("name"), py::arg("params") = py::dict())
      .def_property_readonly("name", [](const PyCodec& c) { return c.codec->name(); })
      .def_property_readonly(
          "aggregation",
          [](const PyCodec& c) { return compress::aggregation_name(c.codec->aggregation()); })
      .def_property_readonly("error_feedback",
                             [](const PyCodec& c) { return c.codec->error_feedback(); })
      .def_property_readonly("residual_format",
                             [](const PyCodec& c) {
                               return compress::residual_format_name(c.codec->residual_format());
                             })
      .def("encoded_bytes",
           [](const PyCodec& c, int64_t n) {
             if (n < 0) throw py::value_error(fmt::format("n = {} is negative", n));
             return c.codec->encoded_bytes(size_t(n));
           })
      .def("wire_ratio", [](const PyCodec& c, size_t n) { return c.codec->wire_ratio(n); })
      .def(
          "make_state",
          [](const PyCodec& c, int64_t n, const std::string& bucket) {
            if (n < 0) throw py::value_error(fmt::format("n = {} is negative", n));
            auto s = std::make_unique<PyState>();
            s->codec = c.codec;
            s->state = c.codec->make_state(size_t(n), bucket);
            return s;
          },
          py::arg("n"), py::arg("bucket") = "python")
      .def("encode", &encode, py::arg("grad"), py::arg("state") = nullptr,
           py::arg("out") = py::none())
      .def("decode", &decode, py::arg("payload"), py::arg("out") = py::none(),
           py::arg("n") = py::none(), py::arg("accumulate") = false)
      .def("bench", &bench, py::arg("n"), py::arg("iters"))
      .def("__repr__", [](const PyCodec& c) { return "<loom Codec " + c.params + ">"; });
}

}  // namespace loom::python
