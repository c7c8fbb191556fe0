#include "loom/perf/calibration_lines.h"

namespace loom::perf {

nlohmann::json gemm_line(int workers, int threads, const std::vector<int64_t>& widths,
                         int64_t batch, double gflops, const std::string& library) {
  return {{"bench", "gemm"},  {"library", library}, {"workers", workers}, {"threads", threads},
          {"widths", widths}, {"batch", batch},     {"gflops", gflops}};
}

nlohmann::json membw_line(const std::string& op, int threads, size_t bytes, double gbs) {
  return {{"bench", "membw"}, {"op", op}, {"threads", threads}, {"bytes", bytes}, {"gbs", gbs}};
}

nlohmann::json elementwise_line(int threads, const std::vector<int64_t>& widths, int64_t batch,
                                double gbs) {
  return {{"bench", "elementwise"},
          {"threads", threads},
          {"widths", widths},
          {"batch", batch},
          {"gbs", gbs}};
}

nlohmann::json host_line(int cores) {
  return {{"bench", "host"}, {"cores", cores}};
}

nlohmann::json allreduce_line(const std::string& transport, const std::string& algo, int ranks,
                              size_t bytes, double time_us) {
  return {{"bench", "allreduce"}, {"transport", transport}, {"algo", algo},
          {"ranks", ranks},       {"bytes", bytes},         {"time_us", time_us}};
}

nlohmann::json busy_allreduce_line(const std::string& transport, const std::string& algo, int ranks,
                                   size_t bytes, double time_us, double steal) {
  nlohmann::json j = allreduce_line(transport, algo, ranks, bytes, time_us);
  j["busy"] = true;
  j["compute_steal"] = steal;
  return j;
}

nlohmann::json codec_line(const std::string& codec, size_t n, double encode_gbs,
                          double decode_gbs) {
  return {{"bench", "codec"},
          {"codec", codec},
          {"n", n},
          {"encode_gbs", encode_gbs},
          {"decode_gbs", decode_gbs}};
}

nlohmann::json loader_line(double samples_per_s, double bytes_per_sample) {
  return {{"bench", "loader"},
          {"samples_per_s", samples_per_s},
          {"bytes_per_sample", bytes_per_sample}};
}

nlohmann::json machine_line(const std::string& cpu, const std::string& transport, int world_size) {
  return {{"bench", "machine"}, {"cpu", cpu}, {"transport", transport}, {"world_size", world_size}};
}

}  // namespace loom::perf
