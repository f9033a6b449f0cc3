// --save-params: the model's parameters and buffers as raw little-endian float32 (docs/cli.md layout).
#include <fstream>

#include "base/error.h"
#include "core/train/run_dir.h"
#include "core/train/trainer_parts.h"

namespace dd::train {

void save_params(models::Model& m, const std::string& path, int rank) {
  const std::string p = save_params_path(path, rank);
  if (p.empty()) return;
  std::string bytes;
  for (auto* l : m.layers()) {
    bytes.append(reinterpret_cast<const char*>(l->params()), sizeof(float) * size_t(l->num_params()));
    if (l->num_buffers())
      bytes.append(reinterpret_cast<const char*>(l->buffers()), sizeof(float) * size_t(l->num_buffers()));
  }
  write_file_atomic(p, bytes);  // x86-64 is little-endian: the in-memory floats are the file format
}

}  // namespace dd::train
