// libFuzzer target: the IDX reader (gzip or plain) must answer every byte string with data or a UsageError.
#include <cstdint>

#include "base/error.h"
#include "core/data/idx_file.h"
#include "tests/corpus/fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = dd::fuzz::input_file(data, size, ".idx.gz");
  // The first byte picks the expected number of dimensions, as the callers do (1 for labels, 3 for images).
  for (int ndims : {1, 3}) {
    try {
      dd::data::IdxFile f = dd::data::read_idx_u8(path, ndims);
      uint64_t n = 1;
      for (auto d : f.dims) n *= uint64_t(d);
      if (n != f.data.size()) __builtin_trap();  // a success must hold exactly what the header announces
    } catch (const dd::UsageError&) {
    }
  }
  return 0;
}
