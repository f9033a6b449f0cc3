// The run directory contract: never overwrite an earlier run, fail early and clearly on a bad --out.
#pragma once
#include <string>

namespace dd::train {

// Creates `dir` (with parents) if missing. Throws dd::UsageError if it exists and is non-empty (unless
// `overwrite`), if it is not a directory, or if it is not writable. Only rank 0 checks emptiness.
void prepare_run_dir(const std::string& dir, bool overwrite, bool check_empty);

// Writes `text` to `path` atomically (temporary file in the same directory, then rename).
void write_file_atomic(const std::string& path, const std::string& text);

}  // namespace dd::train
