#include "loom/core/io/atomic_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "loom/core/error.h"

namespace loom::core {
namespace {

std::string temp_path_for(const std::string& path) {
  return fmt::format("{}.tmp.{}", path, ::getpid());
}

std::string parent_dir(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

}  // namespace

void fsync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

void write_file_atomically(const std::string& path, std::span<const uint8_t> bytes) {
  AtomicFile f(path);
  // fwrite of one large block goes straight to write(2); a short count carries errno.
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f.file()) != bytes.size()) {
    const int err = errno ? errno : EIO;
    throw InputError(
        fmt::format("{}: cannot write {} bytes: {}", path, bytes.size(), std::strerror(err)));
  }
  f.commit();
}

void write_file_atomically(const std::string& path, std::string_view text) {
  write_file_atomically(
      path, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)), tmp_(temp_path_for(path_)) {
  file_ = std::fopen(tmp_.c_str(), "wb");
  if (!file_)
    throw InputError(
        fmt::format("{}: cannot write: {} (creating {})", path_, std::strerror(errno), tmp_));
}

AtomicFile::~AtomicFile() {
  if (committed_) return;
  if (file_) std::fclose(file_);
  ::unlink(tmp_.c_str());
}

void AtomicFile::commit() {
  int err = std::ferror(file_) ? (errno ? errno : EIO) : 0;
  if (err == 0 && std::fflush(file_) != 0) err = errno;
  if (err == 0 && ::fsync(::fileno(file_)) != 0) err = errno;
  if (std::fclose(file_) != 0 && err == 0) err = errno;
  file_ = nullptr;
  if (err == 0 && std::rename(tmp_.c_str(), path_.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp_.c_str());
    throw InputError(fmt::format("{}: cannot write: {}", path_, std::strerror(err)));
  }
  committed_ = true;
  fsync_directory(parent_dir(path_));
}

}  // namespace loom::core
