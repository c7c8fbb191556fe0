// A read-only memory mapping of a whole file (RAII). Sources parse straight from the mapping,
// so page-cached data is read without a copy and sets larger than memory are paged on demand.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace loom::core {

class MappedFile {
 public:
  MappedFile() = default;
  // Throws InputError naming the path if it is missing, a directory or unreadable.
  explicit MappedFile(const std::string& path);
  // A non-owning view of bytes already in memory, named `name` (fuzz harnesses, tests).
  static MappedFile borrow(const uint8_t* data, size_t size, const std::string& name);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Tells the kernel which pages will (not) be needed soon; a no-op on failure.
  void advise_sequential() const;
  void advise_willneed(size_t offset, size_t length) const;
  void advise_dontneed(size_t offset, size_t length) const;

 private:
  void release();
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool owned_ = true;
};

bool file_exists(const std::string& path);

}  // namespace loom::core
