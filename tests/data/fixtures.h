// Test fixtures for the data readers: a self-deleting temp dir and writers for (gzipped) IDX files.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dd::data::testing {

// mkdtemp-created folder, removed with its contents at scope exit.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Bytes of an IDX file of unsigned bytes: magic 0x000008<ndims>, big-endian dims, data.
std::vector<uint8_t> idx_bytes(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data);
std::vector<uint8_t> gzip_bytes(const std::vector<uint8_t>& raw);
void write_file(const std::string& path, const std::vector<uint8_t>& bytes);
void write_text(const std::string& path, const std::string& text);

// A valid tiny Fashion-MNIST split (n images, pixel (s, k) = (7*s + k) % 256, label s % 10) as gzip files.
struct TinyFashion {
  std::vector<uint8_t> images;  // raw IDX bytes (uncompressed)
  std::vector<uint8_t> labels;
};
TinyFashion tiny_fashion(uint32_t n);
void write_tiny_fashion(const std::string& dir, const std::string& prefix, const TinyFashion& t);

}  // namespace dd::data::testing
