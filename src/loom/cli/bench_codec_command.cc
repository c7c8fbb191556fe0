// `loom bench codec`: parses options, runs loom::measure::run_codec_bench, prints a table and
// JSON lines (one object per codec).
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "loom/cli/commands.h"
#include "loom/core/format_version.h"
#include "loom/measure/bench_harness.h"
#include "loom/measure/codec_bench.h"
#include "loom/perf/calibration.h"
#include "loom/plan/codec_reader.h"

namespace loom::cli::bench_codec_command {
namespace {

struct Args {
  measure::CodecBenchOptions bench;
  std::vector<std::string> sets;
  bool json_only = false;
};

void run_bench(Args& a) {
  Config params;
  for (const auto& s : a.sets) params.set_override(s);
  a.bench.options = [params](const std::string& name) {
    return plan::read_codec_options(name, params);
  };
  measure::BenchOutput out(!a.json_only);
  out.note(fmt::format(
      "codecs, 1 thread, {} floats ({:.2f} MB); GB/s of fp32 input; vs_memcpy = memcpy time / "
      "(encode + decode time), memcpy timed in the same rounds, fastest of each; wire = encoded / "
      "fp32 bytes; allreduce_wire = bytes per rank per step of the compressed allreduce over {} "
      "ranks / fp32 ring allreduce's",
      a.bench.n, 4e-6 * double(a.bench.n), a.bench.world));
  out.note(fmt::format("{:>8} {:>10} {:>8} {:>9} {:>8} {:>8} {:>8} {:>8} {:>9} {:>14} {:>9} {:>8}",
                       "codec", "bytes", "wire", "1/wire", "memcpy", "encode", "decode", "enc+dec",
                       "vs_memcpy", "allreduce_wire", "nmse", "residual"));
  measure::run_codec_bench(a.bench, [&](const measure::CodecBenchRow& r) {
    const double ar = double(r.allreduce_wire_bytes) / double(r.fp32_allreduce_wire_bytes);
    const nlohmann::json j = {{"bench", "codec"},
                              {"codec", r.codec},
                              {"residual", r.residual},
                              {"n", r.n},
                              {"threads", 1},
                              {"encoded_bytes", r.encoded_bytes},
                              {"wire_ratio", r.wire_ratio},
                              {"allreduce_ranks", a.bench.world},
                              {"allreduce_wire_bytes", r.allreduce_wire_bytes},
                              {"fp32_allreduce_wire_bytes", r.fp32_allreduce_wire_bytes},
                              {"memcpy_GBps", r.memcpy_gbs},
                              {"encode_GBps", r.encode_gbs},
                              {"decode_GBps", r.decode_gbs},
                              {"roundtrip_GBps", r.roundtrip_gbs},
                              {"vs_memcpy", r.vs_memcpy},
                              {"nmse_one_step", r.decode_error_nmse},
                              {"reps", r.reps},
                              {kFormatVersionKey, perf::kCalibrationFormatVersion}};
    out.row(fmt::format("  {:>8} {:>10} {:>8.4f} {:>9.2f} {:>8.2f} {:>8.2f} {:>8.2f} {:>8.2f} "
                        "{:>9.2f} {:>14.4f} {:>9.2g} {:>8}",
                        r.codec, r.encoded_bytes, r.wire_ratio, 1.0 / r.wire_ratio, r.memcpy_gbs,
                        r.encode_gbs, r.decode_gbs, r.roundtrip_gbs, r.vs_memcpy, ar,
                        r.decode_error_nmse, r.residual),
            j);
  });
}

CommandRegistrar reg("bench codec", [](CLI::App& parent) {
  auto args = std::make_shared<Args>();
  CLI::App* cmd = parent.add_subcommand(
      "codec", "gradient codecs: encode/decode GB/s vs memcpy (1 thread), bytes on the wire");
  cmd->add_option("--n", args->bench.n, "floats per bucket (default 1863690: the default MLP)");
  cmd->add_option("--codec", args->bench.codecs,
                  "codecs to run (default all: fp32 fp16 bf16 int8 onebit topk powersgd)");
  cmd->add_option("--seconds", args->bench.min_seconds,
                  "minimum seconds per measurement (default 0.25)");
  cmd->add_option("--world", args->bench.world,
                  "ranks for the compressed allreduce wire bytes (default 2)");
  cmd->add_option("--set", args->sets, "codec parameter, e.g. --set codec.int8_block=1024");
  cmd->add_flag("--json", args->json_only, "JSON lines only");
  cmd->callback([args] { run_bench(*args); });
});

}  // namespace
}  // namespace loom::cli::bench_codec_command
