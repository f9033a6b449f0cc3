// The run directory contract: never overwrite an earlier run, fail early and clearly on a bad --out.
#pragma once
#include <string>

namespace dd::train {

// Creates `dir` (with parents) if missing. Throws dd::UsageError if it exists and is non-empty (unless
// `overwrite`), if it is not a directory, or if it is not writable. Only rank 0 checks emptiness.
void prepare_run_dir(const std::string& dir, bool overwrite, bool check_empty);

// Throws dd::UsageError ("OPTION PATH: ...") unless a file can be written at `path` later: it is not a directory,
// its parent directory exists and is writable, and an existing file there is writable. Run before any work, so
// that a run does not end with its result unwritable. `made_dir`: a directory the run will create first (its
// --out, checked with check_output_dir): a parent that is that directory need not exist yet.
void check_output_file(const std::string& option, const std::string& path, const std::string& made_dir = "");

// Throws dd::UsageError unless directory `dir` exists and is writable, or can be created: its nearest existing
// ancestor is a writable directory. Creates nothing.
void check_output_dir(const std::string& option, const std::string& dir);

// --save-params FILE as this rank writes it: every "%r" replaced by the rank; empty when this rank writes none
// (no "%r" and rank != 0).
std::string save_params_path(const std::string& path, int rank);

// Writes `text` to `path` atomically (temporary file in the same directory, then rename).
void write_file_atomic(const std::string& path, const std::string& text);

}  // namespace dd::train
