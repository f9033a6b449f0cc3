// What a MetricsWriter resumed after step S starts from: the kept part of the interrupted run's metrics.h5
// (metrics_import.h) and the /events row that records the resume.
#pragma once
#include <cstdint>
#include <string>

#include "core/telemetry/metrics_import.h"

namespace dd::telemetry {

// PATH exists: import_metrics(PATH, S) (dd::UsageError when it is not a metrics.h5 of this schema version),
// plus the event {S, "resume", "after step S"}; when the old file stops before S the detail gains
// "; steps A..S missing (never flushed by the interrupted run)" and the gap is reported on stderr.
// PATH absent: nothing imported, the event {S, "resume", "after step S (no earlier metrics file)"}.
ImportedRun resumed_run(const std::string& path, int64_t after_step, bool path_exists);

}  // namespace dd::telemetry
