// Writing a file so that a reader, a crash or a full disk never leaves half of it: the bytes go
// to a temporary beside the file (`path`.tmp.<pid>, so two processes never share one), which is
// fsync'ed and renamed over `path`; then the directory is fsync'ed, so the rename survives a
// power cut. On failure the temporary is removed and `path` is as it was. Every file loom
// writes whole (results, checkpoints, models, reports, shards) goes through here.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>

namespace loom::core {

// InputError naming `path` and the reason when any step fails.
void write_file_atomically(const std::string& path, std::span<const uint8_t> bytes);
void write_file_atomically(const std::string& path, std::string_view text);

// The same for a file written piece by piece (a shard, a CSV of predictions): write to file()
// (or temp_path()), then commit(). Dropped without commit() (an exception on the way), the
// temporary is removed and `path` is untouched.
class AtomicFile {
 public:
  // Creates the temporary; InputError naming it when that fails.
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  std::FILE* file() { return file_; }
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return tmp_; }
  // Flushes, fsyncs, closes and renames into place; InputError naming `path` when a step (or an
  // earlier write through file()) failed.
  void commit();

 private:
  std::string path_, tmp_;
  std::FILE* file_ = nullptr;
  bool committed_ = false;
};

// fsync of a directory, so that a rename or a new file in it is durable; errors are ignored (not
// every file system can fsync a directory).
void fsync_directory(const std::string& dir);

}  // namespace loom::core
