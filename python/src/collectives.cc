// loom's compressed allreduce for Python: the reference (compressed_allreduce over the thread
// transport, N ranks as threads of this process) and the stages of its two-stage algorithm on
// buffers the caller moves between processes itself (the PyTorch DDP hook, loom/torch.py).
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <vector>

#include "bindings.h"
#include "loom/comm/thread/thread_world.h"
#include "loom/sync/allreduce/compressed_allreduce.h"

namespace loom::python {
namespace {

using compress::Aggregation;

void check_stripes(const PyCodec& c) {
  if (c.codec->aggregation() == Aggregation::kLinear)
    throw py::value_error(fmt::format(
        "codec {}: its sums are formed from low-rank factors (plain allreduce), which the "
        "byte-moving stages here do not cover",
        c.codec->name()));
}

// compressed_allreduce on `world` thread ranks, one state per rank kept across calls.
struct ThreadAllreduce {
  PyCodec codec;
  size_t n = 0;
  std::unique_ptr<comm::ThreadWorld> world;
  std::vector<sync::CompressedAllreduceState> states;

  ThreadAllreduce(PyCodec c, int size, int64_t count) : codec(std::move(c)) {
    if (size < 1) throw py::value_error(fmt::format("world = {}: need at least 1 rank", size));
    if (count < 0) throw py::value_error(fmt::format("n = {} is negative", count));
    n = size_t(count);
    world = std::make_unique<comm::ThreadWorld>(size);
    for (int r = 0; r < size; ++r)
      states.push_back(
          sync::make_compressed_allreduce_state(*codec.codec, n, size, r, "python reference"));
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

}  // namespace

void register_collectives(py::module_& m) {
  py::class_<ThreadAllreduce>(m, "ThreadAllreduce",
                              "loom's compressed_allreduce over its thread transport: the "
                              "reference the DDP hook is tested against.")
      .def(py::init<PyCodec, int, int64_t>(), py::arg("codec"), py::arg("world"), py::arg("n"))
      .def("run", &ThreadAllreduce::run, py::arg("data"),
           "In place: each data[r] (float32, n) becomes the decoded sum over ranks.")
      .def_property_readonly("wire_bytes",
                             [](const ThreadAllreduce& a) { return a.states[0].wire_bytes; });

  py::class_<Stages>(m, "Stages",
                     "One rank's state of loom's two-stage compressed allreduce for a bucket.")
      .def(py::init([](const PyCodec& c, int64_t n, int world, int rank, const std::string& b) {
             check_stripes(c);
             if (n < 0) throw py::value_error(fmt::format("n = {} is negative", n));
             if (world < 1 || rank < 0 || rank >= world)
               throw py::value_error(fmt::format("rank {} of world {}", rank, world));
             auto s = std::make_unique<Stages>();
             s->codec = c;
             s->st = sync::make_compressed_allreduce_state(*c.codec, size_t(n), world, rank, b);
             return s;
           }),
           py::arg("codec"), py::arg("n"), py::arg("world"), py::arg("rank"),
           py::arg("bucket") = "bucket")
      .def_property_readonly("n", [](const Stages& s) { return s.st.n; })
      .def_property_readonly("aggregation",
                             [](const Stages& s) {
                               return s.st.aggregation == Aggregation::kStripes ? "stripes"
                                                                                : "gather";
                             })
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
          [](Stages& s, const py::array& data) {
            std::span<float> v = s.checked(data, false);
            py::gil_scoped_release nogil;
            std::lock_guard<std::mutex> lock(s.mu);
            if (s.st.aggregation == Aggregation::kStripes) {
              sync::stripes_encode(*s.codec.codec, v, s.st);
            } else if (s.st.slot_bytes > 0) {  // kGather: my whole encoding into my slot
              auto* out = reinterpret_cast<std::byte*>(s.st.gather.data()) +
                          size_t(s.st.rank) * s.st.slot_bytes;
              s.codec.codec->encode(v, s.st.worker[0], {out, s.st.slot_bytes});
            }
          },
          "Stage 1: stripe j's encoding into slot j of send (gather: mine into my gather slot).")
      .def(
          "reduce",
          [](Stages& s) {
            if (s.st.aggregation != Aggregation::kStripes) return;
            py::gil_scoped_release nogil;
            std::lock_guard<std::mutex> lock(s.mu);
            if (s.st.slot_bytes > 0) sync::stripes_reduce(*s.codec.codec, s.st);
          },
          "Owner: sum the encodings of my stripe in recv (and my own in send), re-encode the "
          "sum into my slot of gather.")
      .def(
          "decode",
          [](Stages& s, const py::array& data) {
            std::span<float> v = s.checked(data, true);
            py::gil_scoped_release nogil;
            std::lock_guard<std::mutex> lock(s.mu);
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
          "Stage 2: data becomes the decoded sum from every owner's slot of gather.");
}

}  // namespace loom::python
