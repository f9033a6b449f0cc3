// --save-params: the model's parameters and buffers as raw little-endian float32 (docs/cli.md layout).
#include <fstream>
#include <vector>

#include "base/error.h"
#include "core/train/run_dir.h"
#include "core/train/trainer_parts.h"

namespace dd::train {

void save_params(models::Model& m, const std::string& path, int rank) {
  const std::string p = save_params_path(path, rank);
  if (p.empty()) return;
  std::string bytes;
  std::vector<float> host;  // each layer's floats, from the model's device
  auto append = [&](const float* p, int64_t n) {
    host.resize(size_t(n));
    if (n) m.device().copy_to_host(host.data(), p, sizeof(float) * size_t(n));
    bytes.append(reinterpret_cast<const char*>(host.data()), sizeof(float) * size_t(n));
  };
  for (auto* l : m.layers()) {
    append(l->params(), l->num_params());
    if (l->num_buffers()) append(l->buffers(), l->num_buffers());
  }
  write_file_atomic(p, bytes);  // x86-64 is little-endian: the in-memory floats are the file format
}

}  // namespace dd::train
