// loom's compressed allreduce for Python: the reference (compressed_allreduce over the thread
// transport, N ranks as threads of this process) and the stages of its two-stage algorithm on
// buffers the caller moves between processes itself (the PyTorch DDP hook, loom/torch.py):
// kStripes' encode / reduce / decode around two byte exchanges, kGather's encode / decode
// around one, and PowerSGD's (kLinear) local P / local Q / decode around two float sums.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <vector>

#include "bindings.h"
#include "loom/comm/thread/thread_world.h"
#include "loom/compress/codec_kind.h"
#include "loom/sync/allreduce/compressed_allreduce.h"

namespace loom::python {
namespace {

using compress::Aggregation;

// The bucket's matrices (rows, cols) end to end, for PowerSGD; checked here so that a wrong
// list is a ValueError, not loom's internal check.
std::vector<compress::MatrixDims> matrix_dims(const PyCodec& c, size_t n,
                                              const std::vector<std::pair<int64_t, int64_t>>& m) {
  std::vector<compress::MatrixDims> out;
  size_t total = 0;
  for (const auto& [rows, cols] : m) {
    if (rows < 1 || cols < 1)
      throw py::value_error(
          fmt::format("matrix ({}, {}): rows and cols must be positive", rows, cols));
    out.push_back({size_t(rows), size_t(cols)});
    total += size_t(rows) * size_t(cols);
  }
  if (!out.empty() && total != n)
    throw py::value_error(fmt::format(
        "the matrices hold {} elements, the bucket {}: they must cover it end to end", total, n));
  if (!out.empty() && c.codec->aggregation() != Aggregation::kLinear)
    throw py::value_error(fmt::format(
        "codec {} takes a bucket as a flat array; matrices are for powersgd", c.codec->name()));
  return out;
}

// How the sum is formed, as loom's codec.aggregation takes it: "auto" is what loom's training
// does at `world` ranks (1-bit gathers at two), "stripes" or "gather" asks for one.
Aggregation aggregation_of(const PyCodec& c, const std::string& choice, int world) {
  const Aggregation own = c.codec->aggregation();
  if (choice == "auto") {
    const compress::CodecKind* kind = compress::find_codec_kind(c.codec->name());
    return kind ? kind->default_aggregation(world) : own;
  }
  if (choice == "gather" && sync::can_gather(*c.codec)) return Aggregation::kGather;
  if (choice == "stripes" && own == Aggregation::kStripes) return own;
  if (choice == "gather" || choice == "stripes")
    throw py::value_error(fmt::format("aggregation = \"{}\": codec {} is summed by {} only", choice,
                                      c.codec->name(), compress::aggregation_name(own)));
  throw py::value_error(
      fmt::format("aggregation = \"{}\": expected auto, stripes or gather", choice));
}

// compressed_allreduce on `world` thread ranks, one state per rank kept across calls.
struct ThreadAllreduce {
  PyCodec codec;
  size_t n = 0;
  std::unique_ptr<comm::ThreadWorld> world;
  std::vector<sync::CompressedAllreduceState> states;

  ThreadAllreduce(PyCodec c, int size, int64_t count,
                  const std::vector<std::pair<int64_t, int64_t>>& matrices,
                  const std::string& bucket, const std::string& aggregation)
      : codec(std::move(c)) {
    if (size < 1) throw py::value_error(fmt::format("world = {}: need at least 1 rank", size));
    if (count < 0) throw py::value_error(fmt::format("n = {} is negative", count));
    n = size_t(count);
    const std::vector<compress::MatrixDims> dims = matrix_dims(codec, n, matrices);
    const Aggregation how = aggregation_of(codec, aggregation, size);
    world = std::make_unique<comm::ThreadWorld>(size);
    for (int r = 0; r < size; ++r)
      states.push_back(
          sync::make_compressed_allreduce_state(*codec.codec, n, size, r, bucket, dims, how));
  }

  void run(const std::vector<py::array>& data) {
    if (data.size() != states.size())
      throw py::value_error(
          fmt::format("{} arrays for a world of {} ranks", data.size(), states.size()));
    std::vector<std::span<float>> views;
    for (size_t r = 0; r < data.size(); ++r) {
      views.push_back(float32_view(data[r], "data", true));
      if (views.back().size() != n)
        throw py::value_error(fmt::format(
            "data[{}] has {} elements; this allreduce was made for {}", r, views.back().size(), n));
    }
    py::gil_scoped_release nogil;
    world->run([&](comm::Communicator& c) {
      sync::compressed_allreduce(c, *codec.codec, views[size_t(c.rank())],
                                 states[size_t(c.rank())]);
    });
  }
};

// One rank's bucket state for the two-stage algorithm, with its byte buffers as NumPy views.
struct Stages {
  PyCodec codec;
  sync::CompressedAllreduceState st;
  std::mutex mu;

  std::span<float> checked(const py::array& a, bool write) {
    std::span<float> v = float32_view(a, "data", write);
    if (v.size() != st.n)
      throw py::value_error(
          fmt::format("data has {} elements; this bucket state was made for {} (one state per "
                      "bucket)",
                      v.size(), st.n));
    return v;
  }
};

py::array bytes_view(std::vector<uint32_t>& buf, py::handle owner) {
  return py::array_t<uint8_t>({py::ssize_t(buf.size() * 4)}, {py::ssize_t(1)},
                              reinterpret_cast<uint8_t*>(buf.data()), owner);
}

py::array floats_view(std::span<float> v, py::handle owner) {
  return py::array_t<float>({py::ssize_t(v.size())}, {py::ssize_t(sizeof(float))}, v.data(), owner);
}

}  // namespace

void register_collectives(py::module_& m) {
  py::class_<ThreadAllreduce>(m, "ThreadAllreduce",
                              "loom's compressed_allreduce over its thread transport: the "
                              "reference the DDP hook is tested against.")
      .def(py::init<PyCodec, int, int64_t, const std::vector<std::pair<int64_t, int64_t>>&,
                    const std::string&, const std::string&>(),
           py::arg("codec"), py::arg("world"), py::arg("n"),
           py::arg("matrices") = std::vector<std::pair<int64_t, int64_t>>{},
           py::arg("bucket") = "python reference", py::arg("aggregation") = "auto",
           "bucket names the states (PowerSGD seeds its first Q from the name); aggregation: "
           "auto (what loom's training does at this world size), stripes or gather")
      .def("run", &ThreadAllreduce::run, py::arg("data"),
           "In place: each data[r] (float32, n) becomes the decoded sum over ranks.")
      .def_property_readonly("wire_bytes",
                             [](const ThreadAllreduce& a) { return a.states[0].wire_bytes; });

  py::class_<Stages>(m, "Stages",
                     "One rank's state of loom's two-stage compressed allreduce for a bucket.")
      .def(py::init([](const PyCodec& c, int64_t n, int world, int rank, const std::string& b,
                       const std::vector<std::pair<int64_t, int64_t>>& matrices,
                       const std::string& aggregation) {
             if (n < 0) throw py::value_error(fmt::format("n = {} is negative", n));
             if (world < 1 || rank < 0 || rank >= world)
               throw py::value_error(fmt::format("rank {} of world {}", rank, world));
             const std::vector<compress::MatrixDims> dims = matrix_dims(c, size_t(n), matrices);
             const Aggregation how = aggregation_of(c, aggregation, world);
             auto s = std::make_unique<Stages>();
             s->codec = c;
             s->st = sync::make_compressed_allreduce_state(*c.codec, size_t(n), world, rank, b,
                                                           dims, how);
             return s;
           }),
           py::arg("codec"), py::arg("n"), py::arg("world"), py::arg("rank"),
           py::arg("bucket") = "bucket",
           py::arg("matrices") = std::vector<std::pair<int64_t, int64_t>>{},
           py::arg("aggregation") = "auto")
      .def_property_readonly("n", [](const Stages& s) { return s.st.n; })
      .def_property_readonly(
          "aggregation",
          [](const Stages& s) { return compress::aggregation_name(s.st.aggregation); })
      .def_property_readonly("slot_bytes", [](const Stages& s) { return s.st.slot_bytes; })
      .def_property_readonly("wire_bytes", [](const Stages& s) { return s.st.wire_bytes; })
      .def("stripe_bytes",
           [](const Stages& s, int j) {
             if (j < 0 || j >= s.st.world) throw py::value_error("no such stripe");
             if (s.st.aggregation != Aggregation::kStripes) return s.st.slot_bytes;
             return s.codec.codec->encoded_bytes(s.st.stripes[size_t(j)].size());
           })
      .def_property_readonly(
          "send", [](py::object self) { return bytes_view(self.cast<Stages&>().st.send, self); })
      .def_property_readonly(
          "recv", [](py::object self) { return bytes_view(self.cast<Stages&>().st.recv, self); })
      .def_property_readonly(
          "gather",
          [](py::object self) { return bytes_view(self.cast<Stages&>().st.gather, self); })
      .def(
          "encode",
          [](py::object self, const py::array& data) -> py::object {
            Stages& s = self.cast<Stages&>();
            std::span<float> v = s.checked(data, false);
            if (s.st.aggregation == Aggregation::kLinear) {
              std::span<float> p;
              {
                py::gil_scoped_release nogil;
                std::lock_guard<std::mutex> lock(s.mu);
                p = sync::powersgd_local_p(*s.codec.codec, v, s.st);
              }
              return floats_view(p, self);
            }
            py::gil_scoped_release nogil;
            std::lock_guard<std::mutex> lock(s.mu);
            if (s.st.aggregation == Aggregation::kStripes) {
              sync::stripes_encode(*s.codec.codec, v, s.st);
            } else if (s.st.slot_bytes > 0) {  // kGather: my whole encoding into my slot
              auto* out = reinterpret_cast<std::byte*>(s.st.gather.data()) +
                          size_t(s.st.rank) * s.st.slot_bytes;
              s.codec.codec->encode(v, s.st.worker[0], {out, s.st.slot_bytes});
            }
            return py::none();
          },
          "Stage 1: stripe j's encoding into slot j of send (gather: mine into my gather slot). "
          "linear (powersgd): returns this rank's P (float32, a view of the state), to be "
          "replaced in place by the sum over ranks.")
      .def(
          "reduce",
          [](py::object self) -> py::object {
            Stages& s = self.cast<Stages&>();
            if (s.st.aggregation == Aggregation::kLinear) {
              std::span<float> q;
              {
                py::gil_scoped_release nogil;
                std::lock_guard<std::mutex> lock(s.mu);
                q = sync::powersgd_local_q(*s.codec.codec, s.st);
              }
              return floats_view(q, self);
            }
            if (s.st.aggregation != Aggregation::kStripes) return py::none();
            py::gil_scoped_release nogil;
            std::lock_guard<std::mutex> lock(s.mu);
            if (s.st.slot_bytes > 0) sync::stripes_reduce(*s.codec.codec, s.st);
            return py::none();
          },
          "Owner: sum the encodings of my stripe in recv (and my own in send), re-encode the "
          "sum into my slot of gather. linear (powersgd): after P holds the sum over ranks, "
          "orthonormalise it and return this rank's Q (float32 view), to be summed in place.")
      .def(
          "decode",
          [](Stages& s, const py::array& data) {
            std::span<float> v = s.checked(data, true);
            py::gil_scoped_release nogil;
            std::lock_guard<std::mutex> lock(s.mu);
            if (s.st.aggregation == Aggregation::kLinear) {
              sync::powersgd_decode(*s.codec.codec, v, s.st);
              return;
            }
            if (s.st.slot_bytes == 0) return;
            if (s.st.aggregation == Aggregation::kStripes) {
              sync::stripes_decode(*s.codec.codec, v, s.st);
              return;
            }
            for (int i = 0; i < s.st.world; ++i)  // in rank order, as compressed_allreduce
              s.codec.codec->decode(
                  {reinterpret_cast<const std::byte*>(s.st.gather.data()) +
                       size_t(i) * s.st.slot_bytes,
                   s.st.slot_bytes},
                  v, i == 0 ? compress::DecodeMode::kWrite : compress::DecodeMode::kAccumulate);
          },
          "Stage 2: data becomes the decoded sum from every owner's slot of gather. linear "
          "(powersgd): after Q holds the sum over ranks, data becomes P Q^T.");
}

}  // namespace loom::python
