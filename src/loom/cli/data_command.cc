// `loom data convert SRC DST`, `loom data inspect FILE` and `loom bench loader`: parse the
// options, call the data layer, print.
#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "loom/cli/commands.h"
#include "loom/core/error.h"
#include "loom/data/formats/convert.h"
#include "loom/data/formats/token_shard.h"
#include "loom/measure/loader_bench.h"

namespace loom::cli::data_command {
namespace {

struct ConvertArgs {
  std::string src, dst;
  data::ConvertOptions opts;
  std::string delimiter = ",";
  bool text = false;            // --text: SRC is text, written as a token stream
  std::string vocab = "bytes";  // --vocab
};

void add_csv_options(CLI::App* c, data::CsvOptions& csv, std::string& delimiter) {
  c->add_option("--delimiter", delimiter, "CSV: the cell delimiter (one character, or 'tab')");
  c->add_flag("--header", csv.header, "CSV: the first line is a header");
  c->add_option("--label-column", csv.label_column,
                "CSV: index of the label column (negative: from the end)")
      ->default_val(-1);
}

void convert_text(const ConvertArgs& a) {
  if (a.vocab != "bytes" && a.vocab != "chars")
    throw ConfigError(fmt::format("--vocab {}: give bytes or chars", a.vocab));
  if (a.opts.chunk_records < 0)
    throw ConfigError(
        fmt::format("--chunk-records {}: give >= 1 records per chunk (or 0: about 1 MiB)",
                    a.opts.chunk_records));
  const data::ShardInfo info = data::convert_text(
      a.src, a.dst, a.vocab == "chars" ? data::TextVocab::kChars : data::TextVocab::kBytes,
      a.opts.chunk_records);
  fmt::print("{}: {} tokens ({}, vocabulary {} {}), {} chunks, {} bytes\n", a.dst, info.count,
             data::dtype_name(info.dtype), info.num_classes, a.vocab, info.num_chunks,
             info.file_bytes());
}

void convert(ConvertArgs& a) {
  if (a.text) return convert_text(a);
  if (a.vocab != "bytes")
    throw ConfigError("--vocab chooses the tokens of --text: give --text too");
  a.opts.csv.delimiter = data::parse_csv_delimiter(a.delimiter);
  data::ShardInfo info = data::convert_to_shard(a.src, a.dst, a.opts);
  const std::string target = info.target == data::ShardTarget::kFloat
                                 ? fmt::format("{} float targets", info.target_numel)
                                 : fmt::format("{} classes", info.num_classes);
  fmt::print("{}: {} records of {} {} ({}), {} chunks of {} records, {} bytes\n", a.dst, info.count,
             fmt::join(info.shape, "x"), data::dtype_name(info.dtype), target, info.num_chunks,
             info.chunk_records, info.file_bytes());
}

struct InspectArgs {
  std::string file;
  data::CsvOptions csv;
  std::string delimiter = ",";
  bool json = false;
};

void inspect(InspectArgs& a) {
  a.csv.delimiter = data::parse_csv_delimiter(a.delimiter);
  data::FileSummary s = data::inspect_file(a.file, a.csv);
  if (a.json) {
    nlohmann::json j = {{"file", a.file},
                        {"format", data::format_name(s.format)},
                        {"dtype", s.dtype},
                        {"shape", s.shape},
                        {"count", s.count},
                        {"label_histogram", s.label_histogram},
                        {"target", s.target},
                        {"shard_version", s.shard_version},
                        {"checksum", s.checksum},
                        {"checksum_ok", s.checksum_ok},
                        {"labels_out_of_range", s.labels_out_of_range}};
    if (s.vocab_size > 0) j["vocabulary"] = {{"kind", s.vocab_kind}, {"size", s.vocab_size}};
    fmt::print("{}\n", j.dump());
  } else {
    fmt::print("file:     {}\nformat:   {}\ndtype:    {}\nshape:    {}\ncount:    {}\n", a.file,
               data::format_name(s.format), s.dtype, fmt::join(s.shape, "x"), s.count);
    if (!s.target.empty()) fmt::print("version:  {}\ntarget:   {}\n", s.shard_version, s.target);
    if (s.vocab_size > 0) fmt::print("vocab:    {} tokens, {}\n", s.vocab_size, s.vocab_kind);
    if (!s.label_histogram.empty()) {
      // The classes that occur, the first kShown of them: a line, not a screenful.
      constexpr int kShown = 64;
      int shown = 0, more = 0;
      fmt::print("labels:  ");
      for (size_t c = 0; c < s.label_histogram.size(); ++c) {
        if (s.label_histogram[c] == 0) continue;
        if (shown++ < kShown)
          fmt::print(" {}:{}", c, s.label_histogram[c]);
        else
          ++more;
      }
      if (more > 0) fmt::print(" ... and {} more classes (--json lists all)", more);
      fmt::print("\n");
    }
    if (s.labels_out_of_range > 0)
      fmt::print("labels outside the class count: {} (the file is corrupt)\n",
                 s.labels_out_of_range);
    fmt::print("checksum: {}\n", s.checksum);
  }
  if (!s.checksum_ok || s.labels_out_of_range > 0) set_exit_code(2);
}

CommandRegistrar convert_reg("data convert", [](CLI::App& parent) {
  auto a = std::make_shared<ConvertArgs>();
  CLI::App* c = parent.add_subcommand(
      "convert",
      "write loom shards from a Fashion-MNIST folder, IDX, CSV, NPY or shard file (through a "
      "temporary file and a rename)");
  c->add_option("SRC", a->src, "source: a folder, .idx[.gz], .csv, .npy or .shard")->required();
  c->add_option("DST", a->dst, "the shard file to write")->required();
  c->add_option("--labels", a->opts.labels, "the labels file for IDX or NPY features");
  c->add_option("--targets", a->opts.targets,
                "NPY features: float targets (n,) or (n, K) for regression, instead of --labels");
  c->add_flag("--test", a->opts.test_split, "a Fashion-MNIST folder: convert the t10k set");
  c->add_flag("--text", a->text,
              "SRC is a text file: write a token stream (one token per byte or character)");
  c->add_option("--vocab", a->vocab,
                "--text: bytes (256 tokens, any file) or chars (the text's distinct UTF-8 "
                "characters, sorted)");
  c->add_option("--classes", a->opts.num_classes, "class count (default: 10 for IDX, else max+1)");
  c->add_option("--chunk-records", a->opts.chunk_records, "records per CRC chunk (default ~1 MiB)");
  c->add_option("--max-classes", a->opts.max_classes,
                "integer labels must lie below this (CSV, NPY; default 65536)");
  add_csv_options(c, a->opts.csv, a->delimiter);
  c->callback([a] { convert(*a); });
});

CommandRegistrar inspect_reg("data inspect", [](CLI::App& parent) {
  auto a = std::make_shared<InspectArgs>();
  CLI::App* c = parent.add_subcommand(
      "inspect", "print shape, dtype, count, label histogram and checksum status of a data file");
  c->add_option("FILE", a->file, "an .idx[.gz], .csv, .npy or .shard file")->required();
  c->add_flag("--json", a->json, "one JSON object instead of text");
  c->add_option("--max-classes", a->csv.max_classes,
                "integer labels must lie below this (CSV, NPY; default 65536)");
  add_csv_options(c, a->csv, a->delimiter);
  c->callback([a] { inspect(*a); });
});

CommandRegistrar bench_reg("bench loader", [](CLI::App& parent) {
  auto o = std::make_shared<measure::LoaderBenchOptions>();
  CLI::App* c = parent.add_subcommand(
      "loader",
      "input pipeline: stall with K=4 vs K=0 on a throttled source, shards vs IDX, "
      "peak RSS over a memory cap, GB/s from page-cached shards");
  c->add_option("--data-dir", o->fashion_dir, "Fashion-MNIST folder (for shards vs IDX)");
  c->add_option("--work-dir", o->work_dir, "where temporary shards are written");
  c->add_option("--throttle-mbps", o->throttle_mbps, "the emulated disk's rate");
  c->add_option("--mem-cap-mb", o->mem_cap_mb, "the memory cap; the synthetic set is 4x this");
  c->add_option("--stall-batch", o->stall_batch, "global batch of the stall figure");
  c->add_option("--consume-share", o->consume_share,
                "the stand-in model consumes this share of the disk's rate");
  c->add_flag("--quick", o->quick, "smaller sets and fewer steps (for tests)");
  c->callback([o] {
    measure::BenchOutput out;
    measure::run_loader_bench(*o, out);
  });
});

}  // namespace
}  // namespace loom::cli::data_command
