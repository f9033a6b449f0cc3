// IDX parsing on top of zlib's gz* API (which also reads uncompressed files transparently).
#include "core/data/idx_file.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sys/stat.h>

#include "base/error.h"

namespace dd::data {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& why) {
  throw dd::UsageError("corrupt or unreadable dataset file " + path + ": " + why);
}

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzPtr = std::unique_ptr<gzFile_s, GzCloser>;

// Reads up to `n` bytes; fewer only at end of data. A zlib error (bad gzip, CRC mismatch) throws.
size_t read_some(gzFile f, const std::string& path, uint8_t* dst, size_t n) {
  size_t got = 0;
  while (got < n) {
    const unsigned chunk = unsigned(std::min<size_t>(n - got, size_t(1) << 30));
    const int r = gzread(f, dst + got, chunk);
    int err = Z_OK;
    const char* msg = gzerror(f, &err);
    // Z_BUF_ERROR is how zlib reports a gzip stream cut short ("unexpected end of file").
    if (r < 0 || (err != Z_OK && err != Z_STREAM_END)) {
      if (err == Z_ERRNO) fail(path, std::strerror(errno));
      fail(path, std::string("bad gzip data (") + (msg ? msg : "zlib error") + ")");
    }
    if (r == 0) break;
    got += size_t(r);
  }
  return got;
}

uint32_t big_endian_u32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

}  // namespace

IdxFile read_idx_u8(const std::string& path, int ndims) {
  DD_CHECK(ndims >= 1 && ndims <= 8, "IDX files have 1 to 8 dimensions");
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) fail(path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail(path, "not a regular file");
  GzPtr f(gzopen(path.c_str(), "rb"));
  if (!f) fail(path, errno ? std::strerror(errno) : "gzopen failed");
  gzbuffer(f.get(), 1u << 18);

  uint8_t head[4 + 4 * 8];
  if (read_some(f.get(), path, head, 4) != 4) fail(path, "file shorter than the IDX header");
  // Magic: two zero bytes, type code 0x08 (unsigned byte), number of dimensions.
  if (head[0] != 0 || head[1] != 0 || head[2] != 0x08 || head[3] != uint8_t(ndims)) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "wrong magic 0x%02x%02x%02x%02x, expected 0x000008%02x", head[0], head[1],
                  head[2], head[3], ndims);
    fail(path, buf);
  }
  const size_t dims_len = 4 * size_t(ndims);
  if (read_some(f.get(), path, head + 4, dims_len) != dims_len) fail(path, "file shorter than the IDX header");
  IdxFile out;
  uint64_t expected = 1;
  for (int i = 0; i < ndims; ++i) {
    const uint32_t d = big_endian_u32(head + 4 + 4 * i);
    if (d == 0) fail(path, "dimension " + std::to_string(i) + " is zero");
    out.dims.push_back(int64_t(d));
    expected *= d;
    if (expected > (uint64_t(1) << 40)) fail(path, "implausible dimensions in the header");
  }

  // Grow with what actually arrives, so a header announcing absurd sizes cannot make us allocate them.
  out.data.reserve(size_t(std::min<uint64_t>(expected, uint64_t(1) << 28)));
  uint64_t got = 0;
  while (got < expected) {
    const size_t want = size_t(std::min<uint64_t>(expected - got, uint64_t(1) << 26));
    out.data.resize(size_t(got) + want);
    const size_t r = read_some(f.get(), path, out.data.data() + got, want);
    got += r;
    if (r < want) break;
  }
  out.data.resize(size_t(got));
  if (got < expected)
    fail(path, "truncated: header announces " + std::to_string(expected) + " data bytes, file holds " +
                   std::to_string(got));
  uint8_t extra;
  if (read_some(f.get(), path, &extra, 1) != 0)
    fail(path, "longer than its header announces (" + std::to_string(expected) + " data bytes)");
  return out;
}

}  // namespace dd::data
