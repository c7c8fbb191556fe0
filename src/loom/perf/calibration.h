// Calibration: the figures loom's own benchmarks measured on this machine, read back from
// the JSON lines they print (one object per line; other lines are ignored), turned into the
// model's deratings and into a device "this-machine" with links "this-machine-<transport>".
//
// Lines understood (key "bench", or "kind"):
//   {"bench":"gemm",      "gflops": 150.2}                 achievable FLOP/s
//   {"bench":"membw",     "gbs": 9.6}                      memory bandwidth (copy/stream)
//   {"bench":"allreduce", "transport":"thread", "ranks":2, "bytes":1048576, "busbw_gbs":3.6}
//                         ("time_us" may replace "busbw_gbs")
//   {"bench":"codec",     "codec":"onebit", "encode_gbs":2.1, "decode_gbs":4.0}  (fp32 GB/s in)
//   {"bench":"loader",    "samples_per_s": 52000, "bytes_per_sample": 785}
// Optional "memory_gb" on the gemm line sizes the device (default: 16).
//
// `loom bench calibrate` writes these with the details the host model (host_model.h) needs:
//   {"bench":"gemm", "gflops":G, "workers":w, "threads":t, "widths":[784,1024,1024,10],
//   "batch":128}
//                         one worker's rate on the step's GEMM shapes, w workers at once
//   {"bench":"membw", "op":"add"|"memcpy", "threads":t, "bytes":B, "gbs":X}
//                         X = bytes read + written per second, all t threads together; "add"
//                         lines on buffers >= 8 MiB give the DRAM rate of the optimizer update
//   {"bench":"elementwise", "threads":t, "gbs":X}   the layer ops between GEMMs, same unit
//   {"bench":"host", "cores":n}
//   {"bench":"machine", "cpu":"AMD EPYC ...", "transport":"thread", "world_size":2}
//                         the machine measured (format version 2 on): its CPU model, and the
//                         transport and world size of the allreduce lines it wrote
// `loom bench allreduce` and `loom bench codec` lines are read as well ("lat_us",
// "encode_GBps"); allreduce rows of algorithms the training loop does not call
// (MPI_Allreduce, halving-doubling, the thread transport's "ring") are skipped.
// These commands write "format_version": kCalibrationFormatVersion on each line; a line of
// one of the kinds above with a newer version is refused (docs/formats.md), one without it is
// read as version 0 (the same fields).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "loom/perf/catalog.h"
#include "loom/perf/cost_model.h"
#include "loom/perf/host_model.h"

namespace loom::perf {

// The version of the calibration lines that this build writes and reads.
// 2: "machine" lines name the CPU, transport and world size measured.
inline constexpr int64_t kCalibrationFormatVersion = 2;

// Where figures were measured, or where a run that wants to reuse them runs.
struct MachineIdentity {
  std::string cpu;        // /proc/cpuinfo's model name, family and model
  std::string transport;  // thread, mpi
  int world_size = 0;
};

struct AllreducePoint {
  double bytes = 0, seconds = 0;
  int ranks = 2;
};

struct LinkFit {
  double alpha_s = 0;      // per ring step
  double bytes_per_s = 0;  // per direction, as the ring model uses it
};

struct Calibration {
  std::string file;
  double gemm_flops = 0;  // FLOP/s
  double mem_bytes_per_s = 0;
  double memory_gb = 16;
  std::map<std::string, std::vector<AllreducePoint>> allreduce;  // by transport
  std::map<std::string, double> codec_gbs;  // combined encode+decode speed, fp32 GB/s in
  std::map<std::string, std::pair<double, double>> codec_enc_dec_gbs;  // encode, decode
  double loader_bytes_per_s = 0;
  double loader_samples_per_s = 0;
  std::vector<MachineIdentity> machines;  // "machine" lines; empty: a file before version 2
  HostRates host;  // per-part rates of this machine's CPU (valid() once gemm/membw/host given)

  // Least-squares fit of ring time = 2(n-1) alpha + 2(n-1)/n bytes / bw over the sizes.
  static LinkFit fit_ring(const std::vector<AllreducePoint>& points);

  // Adds "this-machine" and its links to `cat`; sets `d` so that figures are achieved as
  // measured (compute/memory derating 1 on this device, codec speeds).
  void apply(Catalog& cat, Derating& d) const;
};

// Throws InputError naming the file and line for a malformed JSON line, a bad value or a
// newer format version.
Calibration read_calibration(const std::string& path);
Calibration parse_calibration(const std::string& text, const std::string& name);

// What tells the machine `cal` measured apart from `here`: "" when one of its machine lines
// has the same CPU, transport and world size; else the fields that differ, each with both
// values ("CPU: file 'X', this machine 'Y'"), or that the file names no machine at all.
std::string calibration_mismatch(const Calibration& cal, const MachineIdentity& here);

// What a run does with a calibration file from another machine: refuse it (the default) or
// warn and measure instead (`--calibration-mismatch=measure`, `auto.calibration_mismatch`).
enum class MismatchPolicy { kError, kMeasure };
MismatchPolicy mismatch_policy_from_name(const std::string& name);  // "error", "measure"

// True when `cal` was measured on `here`. Otherwise InputError naming the file and the
// mismatch (kError), or false with `warning` set to the same text (kMeasure).
bool accept_calibration(const Calibration& cal, const MachineIdentity& here, MismatchPolicy policy,
                        std::string* warning);

}  // namespace loom::perf
