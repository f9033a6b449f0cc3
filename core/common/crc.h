// CRC-32 (zlib's) of a byte range of any length: the checksum that state comparisons across ranks use (a rejoin's
// hashes of the transferred state, the fingerprint of a carried profile).
#pragma once
#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace dd {

// Continues `crc` (0 to start) over n bytes at p, in chunks that fit zlib's length argument.
inline uint32_t crc32_of(const void* p, size_t n, uint32_t crc = 0) {
  uLong c = crc;
  const auto* b = static_cast<const Bytef*>(p);
  while (n > 0) {
    const uInt k = uInt(std::min<size_t>(n, size_t(1) << 30));
    c = crc32(c, b, k);
    b += k;
    n -= k;
  }
  return uint32_t(c);
}

// "0123abcd": the fixed-width form ranks exchange and compare.
inline std::string crc_hex(uint32_t v) {
  char s[9];
  std::snprintf(s, sizeof s, "%08x", v);
  return s;
}

}  // namespace dd
