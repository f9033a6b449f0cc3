// summarize / write_run: the simulated run in train's telemetry schema (core/telemetry writes both files).
#include "app/sim/sim_output.h"

#include <sys/resource.h>

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
  s["forward_ms"] = o.forward_s * 1e3;  // per step, around the profile's backward
  s["update_ms"] = o.update_s * 1e3;
  s["step_ms"] = r.step_ms;
  s["timed_steps"] = nlohmann::ordered_json::array({r.timed_first, r.timed_end});  // [first, end), as train's
  if (o.batch > 0) s["samples_per_s"] = r.step_ms > 0 ? double(o.batch) * r.world / (r.step_ms / 1e3) : 0.0;
  int64_t bytes = 0;
  for (auto& st : r.steps) bytes += st.bytes_sent;
  s["comm_bytes"] = bytes;
  s["exposed_comm_fraction"] = r.exposed_comm_fraction;
  s["simulated_s"] = r.simulated_s;
  s["flows"] = r.flows;
  s["wall_s"] = r.wall_s;
  // The simulation's peak resident memory (every simulated rank's engine; the arenas hold sizes, not data).
  struct rusage ru {};
  if (getrusage(RUSAGE_SELF, &ru) == 0) s["peak_rss_mb"] = double(ru.ru_maxrss) / 1024.0;
  return s;
}

std::unique_ptr<telemetry::MetricsWriter> open_run(const std::string& out, const SimLayers& layers,
                                                   const SimOptions& o, const std::map<std::string, std::string>& attrs) {
  telemetry::MetricsWriterOptions wo;
  wo.overwrite = true;  // the CLI has checked OUT (prepare_run_dir)
  wo.background = false;
  auto w = std::make_unique<telemetry::MetricsWriter>(out + "/metrics.h5", wo);
  w->set_attributes(attrs);
  std::time_t t = std::time(nullptr);
  char when[64];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  w->set_attribute("start_time", std::string(when));
  w->set_attribute("backend", std::string("simgrid"));
  w->set_attribute("model", attrs.count("model") ? attrs.at("model") : std::string("profile"));
  w->set_attribute("params", int64_t(layers.num_params));
  w->set_attribute("simulated", int64_t(1));
  // As train writes them (analysis/runs.py reads batch and world for the samples axis).
  w->set_attribute("batch", int64_t(o.batch));
  w->set_attribute("steps", int64_t(o.steps));
#ifdef DREAMDDP_GIT_COMMIT
  w->set_attribute("git_commit", std::string(DREAMDDP_GIT_COMMIT));
#endif
  std::vector<telemetry::LayerInfo> info;
  for (int l = 0; l < layers.size(); ++l)
    info.push_back({int32_t(l), layers.meta[size_t(l)].name, layers.meta[size_t(l)].kind,
                    layers.meta[size_t(l)].params, layers.meta[size_t(l)].bytes});
  w->write_layers(info);
  return w;
}

void finish_run(telemetry::MetricsWriter& w, const std::string& out, const SimResult& r,
                const nlohmann::ordered_json& summary) {
  w.set_attribute("world", int64_t(r.world));
  w.set_attribute("hosts", r.hosts);
  for (auto& s : r.steps) w.append_step(s);
  w.close();
  telemetry::write_summary_json(out + "/summary.json", nlohmann::json::parse(summary.dump()));
}

}  // namespace dd::sim
