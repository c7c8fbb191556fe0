// The JSON lines a calibration file holds, one builder per kind: `loom bench calibrate`
// (measure/machine_probe.h) writes them and calibration.h reads them back, so the format lives
// with the model that reads it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace loom::perf {

nlohmann::json gemm_line(int workers, int threads, const std::vector<int64_t>& widths,
                         int64_t batch, double gflops, const std::string& library);
nlohmann::json membw_line(const std::string& op, int threads, size_t bytes, double gbs);
nlohmann::json elementwise_line(int threads, const std::vector<int64_t>& widths, int64_t batch,
                                double gbs);
nlohmann::json host_line(int cores);
nlohmann::json allreduce_line(const std::string& transport, const std::string& algo, int ranks,
                              size_t bytes, double time_us);
// An allreduce timed beside busy compute threads (host_model.h BusyLink): "busy": true and
// the fraction of the GEMM rate it took, "compute_steal".
nlohmann::json busy_allreduce_line(const std::string& transport, const std::string& algo, int ranks,
                                   size_t bytes, double time_us, double steal);
nlohmann::json codec_line(const std::string& codec, size_t n, double encode_gbs, double decode_gbs);
nlohmann::json loader_line(double samples_per_s, double bytes_per_sample);
// Which machine the file's figures belong to: the CPU model, the transport measured and its
// world size (one line per transport). A run that reuses the file checks them
// (calibration.h calibration_mismatch).
nlohmann::json machine_line(const std::string& cpu, const std::string& transport, int world_size);

}  // namespace loom::perf
