// load_layers: profile times from core/sync/profile/profile_io, sizes from a model, a bytes file or the comm times.
#include "app/sim/sim_layers.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "core/models/model.h"
#include "core/sync/profile/profile_io.h"

namespace dd::sim {
namespace {

void add(SimLayers& s, const std::string& name, const std::string& kind, int64_t params, int64_t buffers) {
  s.meta.push_back({name, kind, params, 4 * (params + buffers)});
  s.ranges.push_back({s.num_params, params, s.num_buffers, buffers});
  s.num_params += params;
  s.num_buffers += buffers;
}

}  // namespace

ProfileMeta read_profile_meta(const std::string& dir) {
  ProfileMeta out;
  const auto path = std::filesystem::path(dir) / "meta.json";
  if (!std::filesystem::exists(path)) return out;
  std::ifstream f(path);
  const auto j = nlohmann::json::parse(f, nullptr, false);
  out.found = true;
  if (j.is_discarded() || !j.is_object() || !j.contains("model") || !j["model"].is_string()) return out;
  out.model = j["model"].get<std::string>();
  if (!j.contains("machine") || !j["machine"].is_object()) return out;
  const auto& m = j["machine"];
  const bool alone = m.value("passes", std::string()) == "one rank at a time";
  if (!alone || !m.contains("cores") || !m["cores"].is_number_integer()) return out;
  const int threads = j.contains("threads") && j["threads"].is_number_integer() ? j["threads"].get<int>() : 1;
  out.shared_cores = std::to_string(m["cores"].get<int>()) + ",threads=" + std::to_string(threads);
  return out;
}

SimLayers load_layers(const std::string& dir, const LayerSizeSource& given_src) {
  LayerSizeSource src = given_src;
  // A profile written by `dreamddp profile` names its model: its exact layout, unless another source is given.
  if (src.model.empty() && src.bytes.empty() && !(src.comm_Bps > 0)) {
    const ProfileMeta meta = read_profile_meta(dir);
    if (meta.found && meta.model.empty())
      throw UsageError("profile " + dir + ": meta.json is not a JSON object with a \"model\" string");
    src.model = meta.model;
  }
  const auto prof = sync::read_profile(dir);
  if (!prof.bp_nan.empty()) std::fprintf(stderr, "%s\n", sync::bp_nan_note(prof, dir).c_str());
  if (prof.names.empty()) throw UsageError("profile " + dir + ": bp.json has no layers");
  int given = !src.model.empty() + !src.bytes.empty() + (src.comm_Bps > 0);
  if (given > 1) throw UsageError("simulate: give only one of --model, --bytes, --comm-bw");
  SimLayers s;
  s.contention = prof.contention;
  s.forward_s = prof.forward_s;
  s.update_s = prof.update_s;
  std::map<std::string, size_t> at;
  for (size_t i = 0; i < prof.names.size(); ++i) at[prof.names[i]] = i;
  if (!src.model.empty()) {
    auto m = models::make_model(src.model, 1);
    for (auto* l : m->layers()) {
      auto it = at.find(l->name);
      if (it == at.end())
        throw UsageError("profile " + dir + " has no layer '" + l->name + "' of model " + src.model +
                         " (write one with `dreamddp profile --model " + src.model + "`)");
      // The model's own arena offsets, so the bucket planner fuses exactly what training fuses.
      s.meta.push_back({l->name, l->kind(), l->num_params(), 4 * (l->num_params() + l->num_buffers())});
      s.ranges.push_back({l->param_offset(), l->num_params(), l->buffer_offset(), l->num_buffers()});
      s.bp_s.push_back(prof.bp[it->second]);
      s.comm_s.push_back(prof.comm[it->second]);
    }
    s.num_params = int64_t(m->params().size());
    s.num_buffers = int64_t(m->buffers().size());
    s.size_source = "model " + src.model + (given_src.model.empty() ? " (the profile's meta.json)" : "");
    return s;
  }
  std::vector<int64_t> floats(prof.names.size(), 0);
  if (src.comm_Bps > 0) {
    for (size_t i = 0; i < floats.size(); ++i) floats[i] = std::llround(prof.comm[i] * src.comm_Bps / 4);
    s.size_source = "comm times at " + std::to_string(src.comm_Bps) + " B/s";
  } else {
    std::string file = src.bytes;
    if (file.empty()) {
      file = (std::filesystem::path(dir) / "bytes.json").string();
      if (!std::filesystem::exists(file))
        throw UsageError("profile " + dir + " has no layer sizes (bytes.json): give --model M, --bytes FILE or "
                         "--comm-bw BW");
    }
    const auto bytes = sync::read_layer_bytes(file, prof.names);
    for (size_t i = 0; i < floats.size(); ++i) floats[i] = std::llround(bytes[i] / 4);
    s.size_source = "bytes " + file;
  }
  for (size_t i = 0; i < floats.size(); ++i) {
    add(s, prof.names[i], "Layer", floats[i], 0);
    s.bp_s.push_back(prof.bp[i]);
    s.comm_s.push_back(prof.comm[i]);
  }
  return s;
}

}  // namespace dd::sim
