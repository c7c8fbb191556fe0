#include "loom/core/io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "loom/core/error.h"

namespace loom::core {

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

MappedFile::MappedFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    throw InputError(
        fmt::format("{}: {}", path, err == ENOENT ? "no such file" : std::strerror(err)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError(fmt::format("{}: not a regular file", path));
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      throw InputError(fmt::format("{}: cannot map the file: {}", path, std::strerror(err)));
    }
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping keeps the file open
}

MappedFile MappedFile::borrow(const uint8_t* data, size_t size, const std::string& name) {
  MappedFile f;
  f.path_ = name;
  f.data_ = data;
  f.size_ = size;
  f.owned_ = false;
  return f;
}

MappedFile::~MappedFile() {
  release();
}

MappedFile::MappedFile(MappedFile&& o) noexcept
    : path_(std::move(o.path_)),
      data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      owned_(o.owned_) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    owned_ = o.owned_;
  }
  return *this;
}

void MappedFile::release() {
  if (data_ && owned_) ::munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

namespace {
void advise(const uint8_t* base, size_t size, size_t offset, size_t length, int what) {
  if (!base || offset >= size) return;
  length = std::min(length, size - offset);
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  size_t start = offset / page * page;  // madvise wants a page-aligned address
  ::madvise(const_cast<uint8_t*>(base) + start, length + (offset - start), what);
}
}  // namespace

void MappedFile::advise_sequential() const {
  if (owned_) advise(data_, size_, 0, size_, MADV_SEQUENTIAL);
}
void MappedFile::advise_willneed(size_t offset, size_t length) const {
  if (owned_) advise(data_, size_, offset, length, MADV_WILLNEED);
}
void MappedFile::advise_dontneed(size_t offset, size_t length) const {
  // Never on borrowed memory: MADV_DONTNEED would zero anonymous pages.
  if (owned_) advise(data_, size_, offset, length, MADV_DONTNEED);
}

}  // namespace loom::core
