// ControlFile: rank 0's watch on --control-file. Every 10th step it reads the file; a new, valid policy spec there
// is a switch request (the engine carries the flag in the control all-reduce and every rank switches at the same
// step). A bad spec is reported and ignored: never fatal for a running job. What the file last held travels in the
// checkpoint, so a resumed run does not switch again to a spec the uninterrupted run had already taken.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "core/common/bytes.h"
#include "core/sync/policy/policy_spec.h"

namespace dd::sync {

// Why a spec the control file holds cannot be switched to in this run ("" when it can): the checks the same spec
// meets as --policy or --switch beyond parsing (device, model, --on-peer-loss shrink).
using SpecCheck = std::function<std::string(const PolicySpec& spec)>;

class ControlFile {
 public:
  explicit ControlFile(std::string path, SpecCheck check = {}) : path_(std::move(path)), check_(std::move(check)) {}
  bool on() const { return !path_.empty(); }
  // True when the file holds a new valid spec (then pending() is it).
  bool poll(int64_t step);
  const std::string& pending() const { return pending_; }

  // The checkpoint: the spec last read (taken or ignored), the step it was read at, and the one still to apply.
  void save(ByteWriter& w) const;
  void load(ByteReader& r);

 private:
  std::string path_, pending_, last_;
  int64_t last_step_ = -1;
  SpecCheck check_;
};

// Refuses (dd::UsageError, one line) a --control-file path a run could never read: empty, a directory, or in a
// directory that does not exist. The file itself may be written later.
void check_control_file_path(const std::string& option, const std::string& path);

}  // namespace dd::sync
