// Hashes of the training state that ranks compare (docs/elastic.md "Rejoin", docs/design.md "Sync semantics"):
// CRC-32 of an arena's bytes, on whatever device it lives, read in bounded pieces.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/common/crc.h"
#include "core/ops/device.h"

namespace dd::train {

// CRC-32 of the floats of `a`, copied to the host through a buffer of at most 4 MiB.
inline uint32_t state_crc(const ops::DeviceFloats& a) {
  if (a.size() == 0) return 0;
  constexpr size_t kPiece = size_t(1) << 20;  // floats
  std::vector<float> piece(std::min(kPiece, a.size()));
  uint32_t c = 0;
  for (size_t i = 0; i < a.size(); i += kPiece) {
    const size_t n = std::min(kPiece, a.size() - i);
    a.device().copy_to_host(piece.data(), a.data() + i, n * sizeof(float));
    c = crc32_of(piece.data(), n * sizeof(float), c);
  }
  return c;
}

}  // namespace dd::train
