// summarize / write_run: the simulated run in train's telemetry schema (core/telemetry writes both files).
#include "app/sim/sim_output.h"

#include <ctime>

#include "core/telemetry/metrics_writer.h"
#include "core/telemetry/summary_json.h"

namespace dd::sim {

nlohmann::ordered_json summarize(const SimResult& r, const SimLayers& layers, const SimOptions& o,
                                 const std::string& profile) {
  nlohmann::ordered_json s;
  s["simulated"] = true;
  s["profile"] = profile;
  s["policy"] = o.policy;
  s["world"] = r.world;
  s["steps"] = o.steps;
  s["batch"] = o.batch;
  s["layers"] = layers.size();
  s["params"] = layers.num_params;
  s["step_ms"] = r.step_ms;
  if (o.batch > 0) s["samples_per_s"] = r.step_ms > 0 ? double(o.batch) * r.world / (r.step_ms / 1e3) : 0.0;
  int64_t bytes = 0;
  for (auto& st : r.steps) bytes += st.bytes_sent;
  s["comm_bytes"] = bytes;
  s["exposed_comm_fraction"] = r.exposed_comm_fraction;
  s["simulated_s"] = r.simulated_s;
  s["flows"] = r.flows;
  s["wall_s"] = r.wall_s;
  return s;
}

void write_run(const std::string& out, bool overwrite, const SimResult& r, const SimLayers& layers,
               const std::map<std::string, std::string>& attrs, const nlohmann::ordered_json& summary) {
  telemetry::MetricsWriterOptions wo;
  wo.overwrite = overwrite;
  wo.background = false;
  telemetry::MetricsWriter w(out + "/metrics.h5", wo);
  w.set_attributes(attrs);
  std::time_t t = std::time(nullptr);
  char when[64];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  w.set_attribute("start_time", std::string(when));
  w.set_attribute("backend", std::string("simgrid"));
  w.set_attribute("model", attrs.count("model") ? attrs.at("model") : std::string("profile"));
  w.set_attribute("world", int64_t(r.world));
  w.set_attribute("params", int64_t(layers.num_params));
  w.set_attribute("hosts", r.hosts);
  w.set_attribute("simulated", int64_t(1));
  // As train writes them (analysis/runs.py reads batch and world for the samples axis).
  w.set_attribute("batch", int64_t(summary.value("batch", int64_t(0))));
  w.set_attribute("steps", int64_t(summary.value("steps", int64_t(0))));
#ifdef DREAMDDP_GIT_COMMIT
  w.set_attribute("git_commit", std::string(DREAMDDP_GIT_COMMIT));
#endif
  std::vector<telemetry::LayerInfo> info;
  for (int l = 0; l < layers.size(); ++l)
    info.push_back({int32_t(l), layers.meta[size_t(l)].name, layers.meta[size_t(l)].kind,
                    layers.meta[size_t(l)].params, layers.meta[size_t(l)].bytes});
  w.write_layers(info);
  for (auto& s : r.steps) w.append_step(s);
  for (auto& e : r.events) w.append_sync_event(e);
  for (auto& e : r.ready) w.append_layer_ready(e);
  w.close();
  telemetry::write_summary_json(out + "/summary.json", nlohmann::json::parse(summary.dump()));
}

}  // namespace dd::sim
