#include "loom/data/formats/idx.h"

#include <zlib.h>

#include <cstdio>
#include <memory>

#include "loom/core/error.h"
#include "loom/core/io/mapped_file.h"
#include "loom/data/formats/gzip_reader.h"

namespace loom::data {
namespace {

// A single IDX array larger than this is taken as a corrupt header, not a request to allocate.
constexpr int64_t kMaxIdxBytes = int64_t(1) << 36;  // 64 GiB
constexpr int kMaxIdxDims = 16;

const char* type_name(uint8_t t) {
  switch (t) {
    case 0x08:
      return "unsigned byte";
    case 0x09:
      return "signed byte";
    case 0x0B:
      return "int16";
    case 0x0C:
      return "int32";
    case 0x0D:
      return "float32";
    case 0x0E:
      return "float64";
    default:
      return "unknown";
  }
}

uint32_t be32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | p[3];
}

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += 'x';
    s += std::to_string(dims[i]);
  }
  return s;
}

}  // namespace

int64_t IdxArray::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

IdxArray parse_idx(const uint8_t* data, size_t size, const std::string& name) {
  MaybeGzipReader in(data, size, name);
  const char* what = in.compressed() ? "decompressed data" : "file";
  uint8_t head[4];
  size_t got = in.read(head, 4);
  if (got < 4)
    throw InputError(fmt::format("{}: truncated IDX file: {} has {} bytes, the header needs 4",
                                 name, what, got));
  if (head[0] != 0 || head[1] != 0)
    throw InputError(
        fmt::format("{}: wrong magic {:02x} {:02x} {:02x} {:02x}: not an IDX file (expected 00 00 "
                    "<type> <ndims>)",
                    name, head[0], head[1], head[2], head[3]));
  if (head[2] != 0x08)
    throw InputError(fmt::format(
        "{}: unsupported IDX data type 0x{:02x} ({}); loom reads only 0x08 (unsigned byte)", name,
        head[2], type_name(head[2])));
  int ndims = head[3];
  if (ndims == 0 || ndims > kMaxIdxDims)
    throw InputError(fmt::format("{}: absurd IDX header: {} dimensions (expected 1..{})", name,
                                 ndims, kMaxIdxDims));
  uint8_t dimbuf[4 * kMaxIdxDims];
  got = in.read(dimbuf, 4 * size_t(ndims));
  if (got < 4 * size_t(ndims))
    throw InputError(fmt::format("{}: truncated IDX header: {} dimensions need {} bytes, {} has {}",
                                 name, ndims, 4 + 4 * ndims, what, 4 + got));
  IdxArray out;
  int64_t total = 1;
  for (int i = 0; i < ndims; ++i) {
    int64_t d = be32(dimbuf + 4 * i);
    out.dims.push_back(d);
    if (d > kMaxIdxBytes || (d > 0 && total > kMaxIdxBytes / d))
      throw InputError(fmt::format("{}: absurd IDX dimensions {}...: more than {} bytes", name,
                                   dims_text(out.dims), kMaxIdxBytes));
    total *= d;
  }
  const int64_t header = 4 + 4 * int64_t(ndims);
  if (!in.compressed() && int64_t(size) - header != total)
    throw InputError(fmt::format(
        "{}: IDX dimensions {} need {} data bytes after the {}-byte header, the file has {}{}",
        name, dims_text(out.dims), total, header, int64_t(size) - header,
        int64_t(size) - header < total ? " (truncated?)" : ""));
  // Deflate expands by at most ~1032:1 (RFC 1951 block limits), so a header claiming more than
  // that is corrupt: refuse before allocating what it claims.
  if (in.compressed() && total > int64_t(size) * 1100 + (int64_t(1) << 20))
    throw InputError(
        fmt::format("{}: IDX dimensions {} need {} bytes, more than a {}-byte gzip stream can hold "
                    "(truncated or corrupt)",
                    name, dims_text(out.dims), total, size));
  out.bytes.resize(size_t(total));
  got = total ? in.read(out.bytes.data(), size_t(total)) : 0;
  if (int64_t(got) < total)
    throw InputError(fmt::format(
        "{}: IDX dimensions {} need {} data bytes after the {}-byte header, the {} has {} "
        "(truncated?)",
        name, dims_text(out.dims), total, header, what, got));
  uint8_t extra;
  if (in.read(&extra, 1) != 0)
    throw InputError(fmt::format(
        "{}: IDX dimensions {} need {} data bytes after the {}-byte header, but the {} has more",
        name, dims_text(out.dims), total, header, what));
  return out;
}

IdxArray read_idx(const std::string& path) {
  core::MappedFile file(path);
  return parse_idx(file.data(), file.size(), path);
}

void write_idx(const std::string& path, const IdxArray& a, bool gzip) {
  std::vector<uint8_t> buf = {0, 0, 0x08, uint8_t(a.dims.size())};
  for (int64_t d : a.dims)
    for (int s = 24; s >= 0; s -= 8) buf.push_back(uint8_t(uint64_t(d) >> s));
  buf.insert(buf.end(), a.bytes.begin(), a.bytes.end());
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    if (!f) throw InputError(fmt::format("{}: cannot open for writing", path));
    bool ok = gzwrite(f, buf.data(), unsigned(buf.size())) == int(buf.size());
    if (gzclose(f) != Z_OK || !ok) throw InputError(fmt::format("{}: write failed", path));
    return;
  }
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) throw InputError(fmt::format("{}: cannot open for writing", path));
  if (std::fwrite(buf.data(), 1, buf.size(), f.get()) != buf.size())
    throw InputError(fmt::format("{}: write failed", path));
}

}  // namespace loom::data
