// The checkpoint file's own helpers, shared by its writer and reader (checkpoint.cpp) and its loader
// (checkpoint_load.cpp). Private to core/train.
#pragma once
#include <string>

namespace dd::train {

// The verified body of a checkpoint file (magic and CRC checked). Throws dd::UsageError.
std::string checkpoint_body(const std::string& path);
// The fields in which fingerprint `got` (a checkpoint's) differs from `want` (this run's), as
// "model (checkpoint: model=cnn, now: model=mlp), ..."; "" when they agree.
std::string fingerprint_diff(const std::string& want, const std::string& got);

}  // namespace dd::train
