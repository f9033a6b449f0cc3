// Temp dirs and IDX/gzip fixture writers shared by the data tests.
#include "tests/data/fixtures.h"

#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace dd::data::testing {

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "dd-data-test-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed for " + tmpl);
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::vector<uint8_t> idx_bytes(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out = {0, 0, 0x08, uint8_t(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) out.push_back(uint8_t(d >> s));
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::vector<uint8_t> gzip_bytes(const std::vector<uint8_t>& raw) {
  z_stream zs{};
  // windowBits 15 + 16 asks deflate for a gzip wrapper (header and CRC trailer), as gzip(1) writes.
  if (deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("deflateInit2 failed");
  std::vector<uint8_t> out(deflateBound(&zs, uLong(raw.size())) + 64);
  zs.next_in = const_cast<Bytef*>(raw.data());
  zs.avail_in = uInt(raw.size());
  zs.next_out = out.data();
  zs.avail_out = uInt(out.size());
  const int rc = deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) throw std::runtime_error("deflate did not finish");
  return out;
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  if (!f) throw std::runtime_error("cannot write fixture " + path);
}

void write_text(const std::string& path, const std::string& text) {
  write_file(path, std::vector<uint8_t>(text.begin(), text.end()));
}

TinyFashion tiny_fashion(uint32_t n) {
  std::vector<uint8_t> px(size_t(n) * 784), lb(n);
  for (uint32_t s = 0; s < n; ++s) {
    for (uint32_t k = 0; k < 784; ++k) px[size_t(s) * 784 + k] = uint8_t((7 * s + k) % 256);
    lb[s] = uint8_t(s % 10);
  }
  return {idx_bytes({n, 28, 28}, px), idx_bytes({n}, lb)};
}

void write_tiny_fashion(const std::string& dir, const std::string& prefix, const TinyFashion& t) {
  write_file(dir + "/" + prefix + "-images-idx3-ubyte.gz", gzip_bytes(t.images));
  write_file(dir + "/" + prefix + "-labels-idx1-ubyte.gz", gzip_bytes(t.labels));
}

}  // namespace dd::data::testing
