// Atomic writer for OUT/summary.json (temp file + rename, so readers never see a half-written file).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace dd::telemetry {

// Writes `j` (indented) to PATH via PATH.tmp.<pid> + rename. Throws dd::UsageError if the directory is unwritable.
void write_summary_json(const std::string& path, const nlohmann::json& j);

}  // namespace dd::telemetry
