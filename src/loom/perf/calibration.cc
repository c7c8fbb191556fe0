#include "loom/perf/calibration.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "loom/core/error.h"
#include "loom/core/format_version.h"

namespace loom::perf {
namespace {

// The first of `keys` the line has (benchmarks spell the same field differently).
const char* pick(const nlohmann::json& j, std::initializer_list<const char*> keys) {
  for (const char* k : keys)
    if (j.contains(k)) return k;
  return *keys.begin();
}

int count(const nlohmann::json& j, const char* key, int fallback, const std::string& where);

double positive(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key)) throw InputError(fmt::format("{}: field '{}' is missing", where, key));
  const auto& v = j.at(key);
  if (!v.is_number()) throw InputError(fmt::format("{}: field '{}' must be a number", where, key));
  double x = v.get<double>();
  if (!(x > 0) || !std::isfinite(x))
    throw InputError(fmt::format("{}: field '{}' must be > 0, got {}", where, key, x));
  return x;
}

int count(const nlohmann::json& j, const char* key, int fallback, const std::string& where) {
  if (!j.contains(key)) return fallback;
  const double x = positive(j, key, where);
  if (x != std::floor(x) || x > 1 << 20)
    throw InputError(
        fmt::format("{}: field '{}' must be a whole number >= 1, got {}", where, key, x));
  return int(x);
}

// Allreduce rows the training loop's collectives correspond to: loom's own ring / native
// collectives (bench allreduce also times MPI_Allreduce and halving-doubling as peers).
bool training_algo(const std::string& transport, const std::string& algo) {
  if (algo.empty() || algo == "native" || algo == "auto") return true;
  return algo == "ring" && transport != "thread";
}

bool calibration_kind(const std::string& kind) {
  for (const char* k : {"gemm", "membw", "elementwise", "host", "allreduce", "shared_core_messages",
                        "codec", "loader", "machine"})
    if (kind == k) return true;
  return false;
}

}  // namespace

Calibration read_calibration(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(fmt::format("{}: cannot open calibration file", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_calibration(ss.str(), path);
}

Calibration parse_calibration(const std::string& text, const std::string& name) {
  Calibration c;
  c.file = name;
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  std::map<std::string, std::pair<double, double>> codec;  // encode, decode GB/s
  std::map<std::string, std::vector<AllreducePoint>> busy_points;
  std::map<std::string, std::vector<double>> steals;
  bool any = false;
  while (std::getline(in, line)) {
    ++lineno;
    size_t p = line.find_first_not_of(" \t\r");
    if (p == std::string::npos || line[p] != '{') continue;  // table rows, headers
    std::string where = fmt::format("{}:{}", name, lineno);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line.substr(p));
    } catch (const nlohmann::json::parse_error& e) {
      throw InputError(fmt::format("{}: not a JSON object: {}", where, e.what()));
    }
    std::string kind = j.value("bench", j.value("kind", std::string()));
    if (!calibration_kind(kind)) continue;  // other benchmarks' lines
    check_format_version(j, kCalibrationFormatVersion, "calibration", where);
    if (kind == "gemm") {
      const double flops = positive(j, "gflops", where) * 1e9;
      c.gemm_flops = std::max(c.gemm_flops, flops);
      if (j.contains("memory_gb")) c.memory_gb = positive(j, "memory_gb", where);
      if (j.contains("threads")) {
        const std::pair<int, int> key{count(j, "workers", 1, where), count(j, "threads", 1, where)};
        c.host.gemm_flops[key] = std::max(c.host.gemm_flops[key], flops);
      }
    } else if (kind == "membw") {
      const double bps = positive(j, "gbs", where) * 1e9;
      c.mem_bytes_per_s = std::max(c.mem_bytes_per_s, bps);
      const bool dram = !j.contains("bytes") || positive(j, "bytes", where) >= (8 << 20);
      if (j.contains("threads") && j.value("op", std::string()) == "add" && dram) {
        double& r = c.host.stream_bytes[count(j, "threads", 1, where)];
        r = std::max(r, bps);
      }
    } else if (kind == "elementwise") {
      double& r = c.host.elementwise_bytes[count(j, "threads", 1, where)];
      r = std::max(r, positive(j, "gbs", where) * 1e9);
    } else if (kind == "host") {
      c.host.cores = count(j, "cores", 1, where);
    } else if (kind == "allreduce") {
      const std::string transport = j.value("transport", std::string("default"));
      if (!training_algo(transport, j.value("algo", std::string()))) continue;
      if (j.value("busy", false)) {  // beside busy compute threads (host_model.h BusyLink)
        AllreducePoint pt;
        pt.bytes = positive(j, "bytes", where);
        pt.ranks = count(j, "ranks", 2, where);
        pt.seconds = positive(j, "time_us", where) * 1e-6;
        if (pt.ranks < 2) continue;
        busy_points[transport].push_back(pt);
        if (j.contains("compute_steal")) {
          const auto& v = j.at("compute_steal");
          if (!v.is_number() || v.get<double>() < 0 || v.get<double>() > 1)
            throw InputError(
                fmt::format("{}: field 'compute_steal' must be a number in [0, 1]", where));
          steals[transport].push_back(v.get<double>());
        }
        any = true;
        continue;
      }
      AllreducePoint pt;
      pt.bytes = positive(j, "bytes", where);
      pt.ranks = count(j, "ranks", 2, where);
      if (pt.ranks < 2) continue;
      if (j.contains("time_us") || j.contains("lat_us")) {
        pt.seconds = positive(j, pick(j, {"time_us", "lat_us"}), where) * 1e-6;
      } else {
        double busbw = positive(j, pick(j, {"busbw_gbs", "busbw_GBps"}), where) * 1e9;
        double algbw = busbw * pt.ranks / (2.0 * (pt.ranks - 1));
        pt.seconds = pt.bytes / algbw;
      }
      c.allreduce[transport].push_back(pt);
    } else if (kind == "shared_core_messages") {
      // The least disturbed of the timings: the smallest time per message.
      const int ranks = count(j, "ranks", 0, where);  // ranks that ran at once, for the record
      const int messages = count(j, "messages", 0, where);
      if (ranks < 2 || messages < 1)
        throw InputError(fmt::format(
            "{}: a shared_core_messages line needs 'ranks' >= 2 and 'messages' >= 1", where));
      const double per = positive(j, "time_us", where) * 1e-6 / messages;
      if (c.host.shared_core_message_s == 0 || per < c.host.shared_core_message_s)
        c.host.shared_core_message_s = per;
    } else if (kind == "codec") {
      auto& e = codec[j.value("codec", std::string("?"))];
      e.first = positive(j, pick(j, {"encode_gbs", "encode_GBps"}), where);
      e.second = positive(j, pick(j, {"decode_gbs", "decode_GBps"}), where);
    } else if (kind == "machine") {
      MachineIdentity m;
      for (const char* key : {"cpu", "transport"})
        if (!j.contains(key) || !j.at(key).is_string() || j.at(key).get<std::string>().empty())
          throw InputError(fmt::format("{}: field '{}' must be a non-empty string", where, key));
      m.cpu = j.at("cpu").get<std::string>();
      m.transport = j.at("transport").get<std::string>();
      m.world_size = count(j, "world_size", 0, where);
      if (m.world_size == 0)
        throw InputError(fmt::format("{}: field 'world_size' is missing", where));
      c.machines.push_back(m);
    } else if (kind == "loader") {
      double bps = j.contains("bytes_per_sample") ? positive(j, "bytes_per_sample", where) : 785;
      c.loader_samples_per_s = positive(j, "samples_per_s", where);
      c.loader_bytes_per_s = c.loader_samples_per_s * bps;
    }
    any = true;
  }
  if (!any)
    throw InputError(
        fmt::format("{}: no calibration lines (gemm, membw, allreduce, codec, loader)", name));
  for (auto& [k, v] : codec) c.codec_gbs[k] = 1.0 / (1.0 / v.first + 1.0 / v.second);
  for (const auto& [transport, pts] : busy_points) {
    const LinkFit f = Calibration::fit_ring(pts);
    HostRates::BusyLink& b = c.host.busy[transport];
    b.alpha_s = f.alpha_s;
    b.bytes_per_s = f.bytes_per_s;
    const auto& st = steals[transport];
    for (double x : st) b.steal += x / double(st.size());
  }
  c.codec_enc_dec_gbs = codec;
  return c;
}

std::string calibration_mismatch(const Calibration& cal, const MachineIdentity& here) {
  if (cal.machines.empty())
    return fmt::format(
        "it names no machine (written before calibration format version {}: no \"machine\" "
        "line); measure again with `loom bench calibrate`",
        kCalibrationFormatVersion);
  for (const MachineIdentity& m : cal.machines)
    if (m.cpu == here.cpu && m.transport == here.transport && m.world_size == here.world_size)
      return "";
  // The line closest to `here`: the same transport if there is one, so that the message
  // names the fields that really differ.
  const MachineIdentity* best = &cal.machines.front();
  int best_same = -1;
  for (const MachineIdentity& m : cal.machines) {
    const int same = (m.transport == here.transport) * 4 + (m.cpu == here.cpu) * 2 +
                     (m.world_size == here.world_size);
    if (same > best_same) best_same = same, best = &m;
  }
  std::vector<std::string> why;
  if (best->cpu != here.cpu)
    why.push_back(fmt::format("CPU: file '{}', this machine '{}'", best->cpu, here.cpu));
  if (best->transport != here.transport) {
    std::vector<std::string> measured;
    for (const MachineIdentity& m : cal.machines) measured.push_back(m.transport);
    why.push_back(fmt::format("transport: file measured {}, the run uses {}",
                              fmt::join(measured, ", "), here.transport));
  } else if (best->world_size != here.world_size) {
    why.push_back(
        fmt::format("world size: file {}, the run {}", best->world_size, here.world_size));
  }
  return fmt::format("{}", fmt::join(why, "; "));
}

MismatchPolicy mismatch_policy_from_name(const std::string& name) {
  if (name == "error") return MismatchPolicy::kError;
  if (name == "measure") return MismatchPolicy::kMeasure;
  throw InputError(
      fmt::format("calibration mismatch policy '{}': expected \"error\" or \"measure\"", name));
}

bool accept_calibration(const Calibration& cal, const MachineIdentity& here, MismatchPolicy policy,
                        std::string* warning) {
  const std::string why = calibration_mismatch(cal, here);
  if (why.empty()) return true;
  if (policy == MismatchPolicy::kError)
    throw InputError(
        fmt::format("{}: calibration file from another machine: {} (auto.calibration_mismatch "
                    "= \"measure\", or --calibration-mismatch=measure, measures this machine "
                    "instead)",
                    cal.file, why));
  if (warning)
    *warning = fmt::format("{}: calibration file from another machine: {}; measuring instead",
                           cal.file, why);
  return false;
}

LinkFit Calibration::fit_ring(const std::vector<AllreducePoint>& points) {
  // t = a x + b y with x = 2(n-1), y = 2(n-1)/n * bytes; least squares for (a, b >= 0).
  double sxx = 0, sxy = 0, syy = 0, sxt = 0, syt = 0;
  for (const auto& p : points) {
    double x = 2.0 * (p.ranks - 1), y = 2.0 * (p.ranks - 1) / p.ranks * p.bytes;
    sxx += x * x, sxy += x * y, syy += y * y, sxt += x * p.seconds, syt += y * p.seconds;
  }
  LinkFit f;
  double det = sxx * syy - sxy * sxy;
  double a = 0, b = 0;
  if (points.size() >= 2 && std::abs(det) > 1e-30 * sxx * syy) {
    a = (sxt * syy - syt * sxy) / det;
    b = (syt * sxx - sxt * sxy) / det;
  }
  if (a < 0 || b <= 0) {  // one size, or a fit that went negative: pure bandwidth
    a = 0;
    b = syt / syy;
  }
  f.alpha_s = a;
  f.bytes_per_s = 1.0 / b;
  return f;
}

void Calibration::apply(Catalog& cat, Derating& d) const {
  std::string rows;
  for (const auto& [transport, pts] : allreduce) {
    LinkFit f = fit_ring(pts);
    rows += fmt::format(
        "[[link]]\nname = \"this-machine-{}\"\nkind = \"measured\"\ngbs = {}\nlatency_us = {}\n"
        "efficiency = 1.0\nsource = \"{} (allreduce fit)\"\n\n",
        transport, f.bytes_per_s / 1e9, f.alpha_s * 1e6, file);
  }
  if (gemm_flops > 0 && mem_bytes_per_s > 0) {
    rows += fmt::format(
        "[[link]]\nname = \"this-machine-memory\"\nkind = \"measured\"\ngbs = {}\n"
        "latency_us = 0.35\nefficiency = 1.0\nsource = \"{}\"\n\n",
        mem_bytes_per_s / 1e9, file);
    rows += fmt::format(
        "[[gpu]]\nname = \"this-machine\"\nfp32_tflops = {}\ntensor_tflops = 0\nmemory_gb = {}\n"
        "mem_bw_gbs = {}\nhost_link = \"this-machine-memory\"\npeer_link = \"{}\"\ntdp_w = 1\n"
        "form_factor = \"machine\"\n"
        "source = \"{} (measured)\"\n\n",
        gemm_flops / 1e12, memory_gb, mem_bytes_per_s / 1e9,
        // Workers on this machine exchange through the thread transport when it was measured.
        allreduce.count("thread") ? "this-machine-thread" : "none", file);
    // On the measured device, measured figures are the achievable ones.
    d.compute = 1.0;
    d.memory = 1.0;
  }
  if (loader_bytes_per_s > 0)
    rows +=
        fmt::format("[[storage]]\nname = \"this-machine-loader\"\nread_mbs = {}\nsource = \"{}\"\n",
                    loader_bytes_per_s / 1e6, file);
  if (!rows.empty()) cat.load_text(rows, file + " (as catalog rows)");
  for (const auto& [k, v] : codec_gbs) d.codec_gbs[k] = v;
  for (const auto& [k, v] : codec_enc_dec_gbs) d.codec_enc_dec_gbs[k] = v;
  if (host.valid()) {
    d.host = host;
    // The links fitted above were timed on this machine's cores, by as many ranks at once as
    // their largest measured world.
    for (const auto& [transport, pts] : allreduce) {
      int ranks = 0;
      for (const AllreducePoint& p : pts) ranks = std::max(ranks, p.ranks);
      d.host.link_ranks["this-machine-" + transport] = ranks;
    }
  }
}

}  // namespace loom::perf
