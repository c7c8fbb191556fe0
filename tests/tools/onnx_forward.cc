// A test helper, not a loom command: imports an ONNX file as `model = "net.onnx"` does and
// writes loom's forward in evaluation (the file's own weights and BatchNorm statistics) on the
// inputs of an .npy, so an outside runtime's forward on the same file can be compared with it
// (scripts/onnx-zoo).
//
// usage: loom_onnx_forward MODEL.onnx X.npy OUT.npy --classes N [--threads N]
// X.npy: float32 [samples, per-sample shape...]; OUT.npy: float32 [samples, N].
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "loom/core/error.h"
#include "loom/data/formats/npy.h"
#include "loom/nn/graph/graph_builder.h"
#include "loom/nn/graph/model.h"
#include "loom/nn/io/onnx_import.h"
#include "loom/tensor/backend_registry.h"

namespace {

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "loom_onnx_forward: %s\nusage: loom_onnx_forward MODEL.onnx X.npy OUT.npy "
               "--classes N [--threads N]\n",
               why.c_str());
  std::exit(2);
}

int run(int argc, char** argv) {
  using namespace loom;
  if (argc < 4) usage("MODEL.onnx, X.npy and OUT.npy are required");
  const std::string onnx_path = argv[1], x_path = argv[2], out_path = argv[3];
  int classes = 0, threads = 1;
  for (int i = 4; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(a + " needs a value");
    const int v = std::atoi(argv[++i]);
    if (a == "--classes")
      classes = v;
    else if (a == "--threads")
      threads = v;
    else
      usage("unknown option " + a);
  }
  if (classes < 1 || threads < 1) usage("--classes and --threads must be at least 1");
  std::ifstream f(x_path, std::ios::binary);
  if (!f) usage("cannot open " + x_path);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)),
                                   std::istreambuf_iterator<char>());
  const data::NpyHeader h = data::parse_npy_header(bytes.data(), bytes.size(), x_path);
  if (h.dtype != data::NpyDtype::kFloat32 || h.shape.size() < 2)
    usage(x_path + " is not float32 [samples, ...]");
  const int64_t samples = h.shape[0];
  const nn::Shape shape(h.shape.begin() + 1, h.shape.end());
  std::vector<float> x(size_t(h.numel()));
  std::copy_n(reinterpret_cast<const float*>(bytes.data() + h.data_offset), x.size(), x.data());

  Backend& be = cpu_backend();
  be.set_intra_op_threads(threads);
  const nn::GraphSpec g = nn::graph_from_onnx(onnx_path, shape);
  nn::Model model(be, shape, classes, nn::build_nodes(g, shape));
  model.init_params(1);  // every imported layer takes the file's weights and statistics
  const float* y = model.forward(x.data(), samples, nn::StepInfo{false, 0, 0});
  data::write_npy(out_path, data::NpyDtype::kFloat32, {samples, int64_t(classes)}, y);
  std::printf("%s: %lld parameters, %zu layers\n", onnx_path.c_str(), (long long)model.num_params(),
              model.layers().size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const loom::Error& e) {
    std::fprintf(stderr, "loom_onnx_forward: %s\n", e.what());
    return 2;
  }
}
