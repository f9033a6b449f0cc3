// Reader for IDX files (the MNIST family's format), gzip-compressed or plain, validated against the header.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dd::data {

struct IdxFile {
  std::vector<int64_t> dims;   // from the header, outermost first
  std::vector<uint8_t> data;   // prod(dims) unsigned bytes
};

// Reads an IDX file of unsigned bytes with `ndims` dimensions. Throws dd::UsageError with a one-line message
// naming `path` when the file is missing, unreadable, not valid gzip, has the wrong magic, or holds a different
// number of bytes than its header announces.
IdxFile read_idx_u8(const std::string& path, int ndims);

}  // namespace dd::data
