// Writing a solved schedule in the DreamDDP artifact's format: {"H": H, "schedule": {layer: phase}, "fillin": ...}.
#pragma once
#include <string>
#include <vector>

#include "core/sync/schedule/schedule_model.h"

namespace dd::sync {

// The schedule as JSON text, layers in forward order; "fillin" ({layer: [phases]}, only layers that have extra
// syncs) is written when fillin is given.
std::string schedule_json(const std::vector<std::string>& names, int H, const std::vector<int>& phase,
                          const FillIn* fillin = nullptr);

// Writes schedule_json to FILE; refuses (dd::UsageError) to overwrite an existing file or an unwritable path.
void write_schedule(const std::string& file, const std::vector<std::string>& names, int H,
                    const std::vector<int>& phase, const FillIn* fillin = nullptr);

}  // namespace dd::sync
