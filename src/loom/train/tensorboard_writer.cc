#include "loom/train/tensorboard_writer.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "loom/core/error.h"
#include "loom/train/tensorboard_event.h"
#include "loom/train/tensorboard_histogram.h"
#include "loom/train/tensorboard_record.h"

namespace loom::train {

namespace fs = std::filesystem;

namespace {

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  for (char* c = name; *c; ++c)
    if (*c == '/') *c = '_';  // a file name, whatever the host calls itself
  return name;
}

// A name no file in `dir` has yet.
fs::path new_event_file(const fs::path& dir, double now) {
  const std::string base = fmt::format("events.out.tfevents.{:010d}.{}.{}", int64_t(now),
                                       host_name(), int64_t(getpid()));
  fs::path p = dir / base;
  std::error_code ec;
  for (int n = 1; fs::exists(p, ec); ++n) p = dir / fmt::format("{}.{}", base, n);
  return p;
}

}  // namespace

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    throw InputError(
        fmt::format("{}: cannot create the TensorBoard folder: {}", dir, ec.message()));
  const double now = wall_seconds();
  path_ = new_event_file(dir, now).string();
  out_.open(path_, std::ios::binary | std::ios::trunc);
  if (!out_) throw InputError(fmt::format("{}: cannot write: {}", path_, std::strerror(errno)));
  write(tensorboard::file_version_event(now));
  flush();
}

void TensorBoardWriter::write(const std::string& event) {
  out_ << frame_record(event);
}

void TensorBoardWriter::scalar(const std::string& tag, int64_t step, double value) {
  write(tensorboard::scalar_event(wall_seconds(), step, tag, float(value)));
}

void TensorBoardWriter::text(const std::string& tag, int64_t step, const std::string& markdown) {
  write(tensorboard::text_event(wall_seconds(), step, tag, markdown));
}

void TensorBoardWriter::histogram(const std::string& tag, int64_t step,
                                  std::span<const float> values) {
  write(tensorboard::histogram_event(wall_seconds(), step, tag, tensorboard::histogram_of(values)));
}

void TensorBoardWriter::restart_at(int64_t step) {
  write(tensorboard::session_start_event(wall_seconds(), step));
}

void TensorBoardWriter::flush() {
  out_.flush();
  if (!out_) throw InputError(fmt::format("{}: write failed: {}", path_, std::strerror(errno)));
}

}  // namespace loom::train
