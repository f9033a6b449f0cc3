// ControlFile: rank 0's watch on --control-file. Every 10th step it reads the file; a new, valid policy spec there
// is a switch request (the engine carries the flag in the control all-reduce and every rank switches at the same
// step). A bad spec is reported and ignored: never fatal for a running job.
#pragma once
#include <cstdint>
#include <string>

namespace dd::sync {

class ControlFile {
 public:
  explicit ControlFile(std::string path) : path_(std::move(path)) {}
  bool on() const { return !path_.empty(); }
  // True when the file holds a new valid spec (then pending() is it).
  bool poll(int64_t step);
  const std::string& pending() const { return pending_; }

 private:
  std::string path_, pending_, last_;
};

}  // namespace dd::sync
