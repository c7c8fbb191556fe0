#include "loom/core/log.h"

#include <atomic>
#include <cstdio>
#include <mutex>

#include "loom/core/error.h"

namespace loom {
namespace {
std::atomic<LogLevel> g_level{LogLevel::kInfo};
std::mutex g_mutex;
}  // namespace

void set_log_level(LogLevel level) {
  g_level = level;
}
LogLevel log_level() {
  return g_level;
}

LogLevel parse_log_level(const std::string& name) {
  if (name == "debug") return LogLevel::kDebug;
  if (name == "info") return LogLevel::kInfo;
  if (name == "warn") return LogLevel::kWarn;
  if (name == "error") return LogLevel::kError;
  if (name == "quiet") return LogLevel::kQuiet;
  throw ConfigError(fmt::format("unknown log level '{}' (debug, info, warn, error, quiet)", name));
}

void log_message(LogLevel level, const std::string& text) {
  static const char* const kPrefix[] = {"debug: ", "", "warning: ", "error: ", ""};
  std::lock_guard<std::mutex> lock(g_mutex);
  std::fprintf(stderr, "%s%s\n", kPrefix[static_cast<int>(level)], text.c_str());
  std::fflush(stderr);
}

}  // namespace loom
