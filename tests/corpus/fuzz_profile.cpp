// libFuzzer target: a profile JSON file (bp.json / comm.json) gives layer times or a one-line UsageError.
#include <cmath>
#include <cstdint>

#include "base/error.h"
#include "core/sync/profile/profile_io.h"
#include "tests/corpus/fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = dd::fuzz::input_file(data, size, ".json");
  try {
    for (auto& [name, t] : dd::sync::read_layer_times(path))
      if (!(t >= 0) || !std::isfinite(t)) __builtin_trap();  // accepted times are finite and >= 0
  } catch (const dd::UsageError& e) {
    for (const char* p = e.what(); *p; ++p)
      if (*p == '\n') __builtin_trap();  // the message must stay on one line
  }
  return 0;
}
