// `loom predict RUN --input FILE --output FILE`: a trained model's predictions for inputs in an
// IDX, NPY or CSV file (data/formats/feature_file.h), written as NPY or CSV. Classification writes
// the predicted class, the top k classes with their probabilities, or every class's probability; a
// regression model (trained with the mse loss) writes its outputs, as does --raw.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "loom/cli/commands.h"
#include "loom/cli/trained_run.h"
#include "loom/core/error.h"
#include "loom/core/io/atomic_file.h"
#include "loom/core/timer.h"
#include "loom/data/formats/csv.h"
#include "loom/data/formats/feature_file.h"
#include "loom/data/formats/npy.h"
#include "loom/tensor/cpu/cpu_backend.h"
#include "loom/train/forward_settings.h"
#include "loom/train/trained_model.h"

namespace loom::cli::predict_command {
namespace {

namespace fs = std::filesystem;

struct PredictArgs {
  std::string run, checkpoint, input, output;
  int top_k = 1;
  bool probabilities = false;
  bool raw = false;  // the model's outputs as they are (a classifier's logits)
  bool force = false;
  int threads = 0;    // 0: every core
  int64_t batch = 0;  // samples per forward; 0: train::forward_chunk, as loom eval
  std::string delimiter = ",";
  bool header = false;
};

enum class OutputFormat { kNpy, kCsv };

OutputFormat output_format(const std::string& path) {
  const std::string ext = fs::path(path).extension().string();
  if (ext == ".npy") return OutputFormat::kNpy;
  if (ext == ".csv") return OutputFormat::kCsv;
  throw ConfigError(
      fmt::format("--output {}: name it .npy or .csv (the format follows the name)", path));
}

// What is written per sample: `cols` numbers; class columns are integers.
struct Table {
  int64_t rows = 0, cols = 0;
  std::vector<std::string> names;  // CSV header, one per column
  std::vector<bool> is_class;      // per column: a class index (written as an integer)
  std::vector<double> values;      // rows * cols
  bool integral() const {
    return std::all_of(is_class.begin(), is_class.end(), [](bool b) { return b; });
  }
  // NPY: an int64 class column of one class is written as shape (rows,).
  bool squeeze = false;
};

// Through core::AtomicFile, so an interrupted predict never leaves half a file under the name
// asked for.
void write_table(const Table& t, const std::string& path, OutputFormat format) {
  core::AtomicFile out(path);
  if (format == OutputFormat::kNpy) {
    // write_npy writes the temporary whole; commit() syncs and renames it.
    const std::vector<int64_t> shape =
        t.squeeze ? std::vector<int64_t>{t.rows} : std::vector<int64_t>{t.rows, t.cols};
    if (t.integral()) {
      std::vector<int64_t> v(t.values.begin(), t.values.end());
      data::write_npy(out.temp_path(), data::NpyDtype::kInt64, shape, v.data());
    } else {
      std::vector<float> v(t.values.begin(), t.values.end());
      data::write_npy(out.temp_path(), data::NpyDtype::kFloat32, shape, v.data());
    }
  } else {
    fmt::print(out.file(), "{}\n", fmt::join(t.names, ","));
    for (int64_t r = 0; r < t.rows; ++r) {
      for (int64_t c = 0; c < t.cols; ++c) {
        const double v = t.values[size_t(r * t.cols + c)];
        if (c) std::fputc(',', out.file());
        if (t.is_class[size_t(c)])
          fmt::print(out.file(), "{}", int64_t(v));
        else
          fmt::print(out.file(), "{:.9g}", v);
      }
      std::fputc('\n', out.file());
    }
  }
  out.commit();
}

// Softmax of one row of logits, in double.
void softmax(const float* z, int64_t n, std::vector<double>& p) {
  p.resize(size_t(n));
  const float mx = *std::max_element(z, z + n);
  double sum = 0;
  for (int64_t c = 0; c < n; ++c) sum += p[size_t(c)] = std::exp(double(z[c] - mx));
  for (double& v : p) v /= sum;
}

Table classification_table(const std::vector<float>& logits, int64_t rows, int64_t classes,
                           const PredictArgs& a) {
  Table t;
  t.rows = rows;
  std::vector<double> p;
  std::vector<int64_t> order(static_cast<size_t>(classes));
  if (a.probabilities) {
    t.cols = classes;
    for (int64_t c = 0; c < classes; ++c) t.names.push_back(fmt::format("p_{}", c));
    t.is_class.assign(size_t(classes), false);
  } else {
    const int64_t k = std::min<int64_t>(a.top_k, classes);
    // One class: the class column alone (NPY: an int64 vector). k > 1: class and probability
    // pairs on CSV; on NPY the k classes (probabilities come with --probabilities).
    t.cols = k;
    t.is_class.assign(size_t(k), true);
    t.squeeze = k == 1;
    for (int64_t j = 0; j < k; ++j)
      t.names.push_back(k == 1 ? std::string("class") : fmt::format("class_{}", j + 1));
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float* z = logits.data() + r * classes;
    if (a.probabilities) {
      softmax(z, classes, p);
      t.values.insert(t.values.end(), p.begin(), p.end());
      continue;
    }
    std::iota(order.begin(), order.end(), 0);
    // Largest first; a tie keeps the smaller class first, as argmax does.
    std::stable_sort(order.begin(), order.end(), [z](int64_t x, int64_t y) { return z[x] > z[y]; });
    for (int64_t j = 0; j < t.cols; ++j) t.values.push_back(double(order[size_t(j)]));
  }
  return t;
}

// CSV with k > 1: class and probability pairs.
Table topk_csv_table(const std::vector<float>& logits, int64_t rows, int64_t classes, int64_t k) {
  Table t;
  t.rows = rows;
  t.cols = 2 * k;
  for (int64_t j = 0; j < k; ++j) {
    t.names.push_back(fmt::format("class_{}", j + 1));
    t.names.push_back(fmt::format("prob_{}", j + 1));
    t.is_class.push_back(true);
    t.is_class.push_back(false);
  }
  std::vector<double> p;
  std::vector<int64_t> order(static_cast<size_t>(classes));
  for (int64_t r = 0; r < rows; ++r) {
    const float* z = logits.data() + r * classes;
    softmax(z, classes, p);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [z](int64_t x, int64_t y) { return z[x] > z[y]; });
    for (int64_t j = 0; j < k; ++j) {
      t.values.push_back(double(order[size_t(j)]));
      t.values.push_back(p[size_t(order[size_t(j)])]);
    }
  }
  return t;
}

Table regression_table(const std::vector<float>& out, int64_t rows, int64_t cols) {
  Table t;
  t.rows = rows;
  t.cols = cols;
  for (int64_t c = 0; c < cols; ++c) t.names.push_back(fmt::format("y_{}", c));
  t.is_class.assign(size_t(cols), false);
  t.values.assign(out.begin(), out.end());
  return t;
}

void run_predict(const PredictArgs& a) {
  const OutputFormat format = output_format(a.output);
  std::error_code ec;
  if (fs::exists(a.output, ec) && !a.force)
    throw InputError(fmt::format(
        "{}: exists; loom predict does not replace earlier results unless --force is given",
        a.output));
  const fs::path out_dir = fs::absolute(a.output).parent_path();
  if (!fs::is_directory(out_dir, ec))
    throw InputError(fmt::format("{}: cannot write: no directory {}", a.output, out_dir.string()));
  if (a.probabilities && a.raw) throw ConfigError("give --probabilities or --raw, not both");
  if (a.top_k < 1) throw ConfigError(fmt::format("--top-k {}: give 1 or more", a.top_k));
  if (a.batch < 0)
    throw ConfigError(fmt::format("--batch {}: give 1 or more (0: as loom eval)", a.batch));
  if (!fs::exists(a.run, ec))
    throw InputError(fmt::format("{}: no such run directory or model file", a.run));

  Backend& be = cpu_backend();
  const int threads = train::use_forward_threads(be, a.threads);
  train::TrainedModel m = train::load_trained_model(weights_path(a.run, a.checkpoint), be);
  data::CsvOptions csv;
  csv.delimiter = data::parse_csv_delimiter(a.delimiter);
  csv.header = a.header;
  const data::FeatureArray in =
      data::read_features(a.input, m.input_shape, m.input_normalisation, csv);
  if (in.count == 0) throw InputError(fmt::format("{}: no records", a.input));

  nn::Model& model = *m.model;
  const int64_t numel = std::accumulate(in.sample_shape.begin(), in.sample_shape.end(), int64_t(1),
                                        std::multiplies<int64_t>());
  const int64_t cols = model.output_positions() * model.num_classes();
  std::vector<float> outputs(size_t(in.count * cols));
  nn::StepInfo info;
  info.training = false;
  Stopwatch watch;
  const int64_t batch = a.batch > 0 ? a.batch : train::forward_chunk(model.output_positions());
  for (int64_t first = 0; first < in.count; first += batch) {
    const int64_t n = std::min(batch, in.count - first);
    const float* y = model.forward(in.values.data() + first * numel, n, info);
    std::memcpy(outputs.data() + first * cols, y, size_t(n * cols) * sizeof(float));
  }
  const double seconds = watch.seconds();

  Table t;
  if (m.loss == nn::LossKind::kMse || a.raw)
    t = regression_table(outputs, in.count, cols);
  else if (!a.probabilities && a.top_k > 1 && format == OutputFormat::kCsv)
    t = topk_csv_table(outputs, in.count, cols, std::min<int64_t>(a.top_k, cols));
  else
    t = classification_table(outputs, in.count, cols, a);
  write_table(t, a.output, format);
  fmt::print(
      "loom predict: {} samples from {} through {} ({} threads, {:.2f} s, {:.0f} samples/s) "
      "-> {}\n",
      in.count, a.input, m.weights, threads, seconds,
      seconds > 0 ? double(in.count) / seconds : 0.0, a.output);
}

CommandRegistrar reg("predict", [](CLI::App& app) {
  auto a = std::make_shared<PredictArgs>();
  CLI::App* cmd = app.add_subcommand(
      "predict", "run a trained model on inputs from an IDX, NPY or CSV file; write NPY or CSV");
  cmd->add_option("run", a->run,
                  "a run directory (its model.safetensors, else its newest checkpoint), a "
                  "checkpoint directory or a model file")
      ->required();
  cmd->add_option("--input", a->input, "the inputs: IDX, NPY or CSV (every column a feature)")
      ->required();
  cmd->add_option("--output", a->output, "where to write predictions: FILE.npy or FILE.csv")
      ->required();
  cmd->add_option("--checkpoint", a->checkpoint,
                  "use this checkpoint's weights (a directory, or a step-N name under the run's "
                  "checkpoints/)");
  cmd->add_option("--top-k", a->top_k,
                  "the k most probable classes (CSV: with their probabilities)")
      ->default_val(1);
  cmd->add_flag("--probabilities", a->probabilities, "every class's probability instead");
  cmd->add_flag("--raw", a->raw, "the model's outputs as they are (a classifier's logits)");
  cmd->add_flag("--force", a->force, "replace an existing output file");
  cmd->add_option("--threads", a->threads, "threads for the forward (default: every core)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--batch", a->batch,
                  "samples per forward (0: as loom eval, about 1000 rows of outputs)")
      ->default_val(0);
  cmd->add_option("--delimiter", a->delimiter, "CSV input: the cell delimiter (or 'tab')");
  cmd->add_flag("--header", a->header, "CSV input: the first line is a header");
  cmd->callback([a] { run_predict(*a); });
});

}  // namespace
}  // namespace loom::cli::predict_command
