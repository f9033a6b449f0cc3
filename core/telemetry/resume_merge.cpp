// The resume merge: which rows of an interrupted run a resumed writer keeps, and the event saying so.
#include "core/telemetry/resume_merge.h"

#include <cstdio>

namespace dd::telemetry {

ImportedRun resumed_run(const std::string& path, int64_t s, bool path_exists) {
  ImportedRun run;
  std::string detail = "after step " + std::to_string(s);
  if (path_exists) {
    run = import_metrics(path, s);  // its created_unix_s (the first run's) replaces this run's
    // Rows the old run never flushed cannot be recovered; say so in the file rather than hide the gap.
    if (run.last_step < s) {
      std::string gap = "steps " + std::to_string(run.last_step + 1) + ".." + std::to_string(s) +
                        " missing (never flushed by the interrupted run)";
      detail += "; " + gap;
      std::fprintf(stderr, "metrics: resuming %s after step %lld: %s\n", path.c_str(), static_cast<long long>(s),
                   gap.c_str());
    }
  } else {
    detail += " (no earlier metrics file)";
  }
  run.events.push_back(EventRow{s, "resume", std::move(detail)});
  return run;
}

}  // namespace dd::telemetry
