// Schedule files in the DreamDDP artifact's format.
#include "core/sync/schedule/schedule_io.h"

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace dd::sync {

std::string schedule_json(const std::vector<std::string>& names, int H, const std::vector<int>& phase,
                          const FillIn* fillin) {
  if (names.size() != phase.size() || (fillin && fillin->size() != names.size()))
    throw std::invalid_argument("schedule_json: names, phases and fill-in must have one entry per layer");
  nlohmann::ordered_json j;
  j["H"] = H;
  j["schedule"] = nlohmann::ordered_json::object();
  for (size_t l = 0; l < names.size(); ++l) j["schedule"][names[l]] = phase[l];
  if (fillin) {
    j["fillin"] = nlohmann::ordered_json::object();
    for (size_t l = 0; l < names.size(); ++l)
      if (!(*fillin)[l].empty()) j["fillin"][names[l]] = (*fillin)[l];
  }
  return j.dump(4);
}

void write_schedule(const std::string& file, const std::vector<std::string>& names, int H,
                    const std::vector<int>& phase, const FillIn* fillin) {
  const std::string text = schedule_json(names, H, phase, fillin);
  if (std::filesystem::exists(file)) throw UsageError("refusing to overwrite existing schedule file " + file);
  std::ofstream out(file);
  if (!out) throw UsageError("cannot write schedule file " + file);
  out << text << "\n";
  if (!out) throw UsageError("error while writing schedule file " + file);
}

}  // namespace dd::sync
