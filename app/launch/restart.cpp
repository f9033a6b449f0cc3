// --max-restarts (launch.h, docs/elastic.md): which command a restart runs and from which checkpoint generation.
#include <cstdlib>
#include <string>
#include <vector>

#include "base/error.h"
#include "core/train/checkpoint.h"
#include "app/launch/launch.h"

namespace dd::launch {
namespace {

// The value after `opt` in cmd ("" when absent).
std::string value_of(const std::vector<std::string>& cmd, const std::string& opt) {
  std::string v;
  for (size_t i = 0; i + 1 < cmd.size(); ++i)
    if (cmd[i] == opt) v = cmd[i + 1];  // the last one wins, as in train's parser
  return v;
}

}  // namespace

RestartPlan plan_restarts(const std::vector<std::string>& cmd, const std::vector<std::string>& argv) {
  if (cmd.empty() || cmd[0] != "train")
    throw UsageError("--max-restarts restarts `train` from its checkpoints; the command is '" +
                     (cmd.empty() ? std::string() : cmd[0]) + "'");
  const std::string every = value_of(cmd, "--checkpoint-every");
  if (every.empty() || std::atol(every.c_str()) <= 0)
    throw UsageError("--max-restarts needs train's --checkpoint-every K (K > 0): a restart resumes from a checkpoint");
  RestartPlan p;
  p.dir = value_of(cmd, "--out");
  if (p.dir.empty()) p.dir = value_of(cmd, "--resume");
  if (p.dir.empty()) throw UsageError("--max-restarts needs train's --out DIR (where the checkpoints go)");
  p.argv = argv;
  return p;
}

int64_t newest_complete_checkpoint(const std::string& dir, int world) {
  std::vector<std::vector<int64_t>> steps(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r)
    for (const auto& path : {train::checkpoint_path(dir, r), train::previous_checkpoint_path(dir, r)}) {
      try {
        steps[size_t(r)].push_back(train::checkpoint_step(path));  // magic and CRC checked
      } catch (const UsageError&) {
      }
    }
  int64_t best = -1;
  for (int64_t s : steps[0]) {
    bool everywhere = true;
    for (const auto& v : steps) {
      bool has = false;
      for (int64_t t : v) has |= t == s;
      everywhere &= has;
    }
    if (everywhere && s > best) best = s;
  }
  return best;
}

std::vector<std::string> restart_argv(const RestartPlan& plan, int64_t step) {
  std::vector<std::string> out;
  bool resumes = false;
  for (size_t i = 0; i < plan.argv.size(); ++i) {
    const std::string& a = plan.argv[i];
    if (step >= 0 && a == "--resume" && i + 1 < plan.argv.size()) {
      ++i;
      continue;
    }
    if (step >= 0 && a == "--overwrite") continue;
    resumes |= a == "--resume";
    out.push_back(a);
  }
  if (step >= 0) {
    out.push_back("--resume");
    out.push_back(plan.dir);
  } else if (!resumes) {
    out.push_back("--overwrite");
  }
  return out;
}

}  // namespace dd::launch
