// Writes a synthetic but realistic study (4 policies, ResNet-20-like layers) with MetricsWriter, for figure tests.
// Usage: telemetry_synthetic_runs OUT_DIR  ->  OUT_DIR/study_a/{ddp,localsgd,plsgd,dreamddp}/metrics.h5,
//        OUT_DIR/study_a/schedule.json, OUT_DIR/study_a/throughput.json
// Timing follows the docs/design.md time model (FIFO channel, launch at layer ready); curves are smooth decays + noise.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/telemetry/metrics_writer.h"
#include "core/telemetry/summary_json.h"

namespace fs = std::filesystem;
using namespace dd::telemetry;

namespace {

struct Layer {
  LayerInfo info;
  double bwd_s;   // backward time
  double comm_s;  // all-reduce time of its parameters
};

std::vector<Layer> resnet20_layers() {
  std::vector<Layer> out;
  auto add = [&](const std::string& name, const std::string& kind, int64_t params, double flops) {
    int idx = static_cast<int>(out.size());
    Layer l;
    l.info = {idx, name, kind, params, params * 4};
    l.bwd_s = 2e-5 + flops * 2.0e-11;
    l.comm_s = 1.5e-4 + static_cast<double>(params * 4) / 12e6;  // ~12 MB/s effective (1 GbE shared by 4 ranks)
    out.push_back(l);
  };
  add("conv1", "Conv", 144, 144.0 * 784 * 128);
  add("bn1", "BatchNorm", 32, 16.0 * 784 * 128);
  int cin = 16, hw = 784;
  for (int s = 0; s < 3; ++s) {
    int c = 16 << s;
    for (int b = 0; b < 3; ++b) {
      std::string p = "layer" + std::to_string(s + 1) + "." + std::to_string(b) + ".";
      if (s > 0 && b == 0) hw /= 4;
      add(p + "conv1", "Conv", int64_t(cin) * c * 9, double(cin) * c * 9 * hw * 128);
      add(p + "bn1", "BatchNorm", 2 * c, double(c) * hw * 128);
      add(p + "conv2", "Conv", int64_t(c) * c * 9, double(c) * c * 9 * hw * 128);
      add(p + "bn2", "BatchNorm", 2 * c, double(c) * hw * 128);
      if (s > 0 && b == 0) {
        add(p + "shortcut.conv", "Conv", int64_t(cin) * c, double(cin) * c * hw * 128);
        add(p + "shortcut.bn", "BatchNorm", 2 * c, double(c) * hw * 128);
      }
      cin = c;
    }
  }
  add("fc", "Linear", 64 * 10 + 10, 640.0 * 128);
  return out;
}

// Contiguous groups of ~equal communication, one per phase (what plsgd does; dreamddp gets a shifted variant).
std::vector<int> contiguous_phases(const std::vector<Layer>& L, int h) {
  double total = 0;
  for (auto& l : L) total += l.comm_s;
  std::vector<int> phase(L.size());
  double acc = 0;
  for (size_t i = 0; i < L.size(); ++i) {
    phase[i] = std::min(h - 1, static_cast<int>(acc / total * h));
    acc += L[i].comm_s;
  }
  return phase;
}

struct Policy {
  std::string dir, spec;
  int h;           // 1 = every step (ddp); K for localsgd
  bool blocking;   // localsgd: one blocking average after the update
  double conv;     // convergence per sample relative to ddp
};

void write_run(const fs::path& dir, const Policy& pol, const std::vector<Layer>& L, const std::vector<int>& sched,
               uint32_t seed, nlohmann::json& thr) {
  fs::create_directories(dir);
  MetricsWriter w((dir / "metrics.h5").string(), {2.0, false, false});
  const int world = 4, batch = 128, steps = 600;
  w.set_attributes({{"policy", pol.spec}, {"model", "resnet20"}, {"backend", "gloo"}, {"data", "fashion-mnist"},
                    {"git_commit", "synthetic"}, {"network", "1gbit"}});
  w.set_attribute("world", int64_t{world});
  w.set_attribute("batch", int64_t{batch});
  w.set_attribute("steps", int64_t{steps});
  w.set_attribute("hosts", std::vector<std::string>{"node0", "node1", "node2", "node3"});
  std::vector<LayerInfo> infos;
  for (auto& l : L) infos.push_back(l.info);
  w.write_layers(infos);

  const bool sens = pol.dir == "dreamddp";
  const std::vector<int32_t> delays = {1, 2, 4, 8};
  if (sens) {
    w.declare_sensitivity(ProbeKind::kFixedBatch, delays, static_cast<int32_t>(L.size()));
    w.declare_sensitivity(ProbeKind::kMinibatch, delays, static_cast<int32_t>(L.size()));
  }
  std::mt19937 rng(seed);
  std::normal_distribution<double> noise(0.0, 1.0);
  double wall = 0, sps_sum = 0;
  const double fwd_s = 0.012, upd_s = 0.002;
  for (int t = 0; t < steps; ++t) {
    // Backward: layer ready times in reverse order, with jitter.
    std::vector<double> ready(L.size());
    double acc = 0;
    for (size_t i = L.size(); i-- > 0;) {
      acc += L[i].bwd_s * (1.0 + 0.05 * noise(rng));
      ready[i] = acc;
      if (t % 10 == 0 || t == steps - 1) w.append_layer_ready({t, 0, static_cast<int32_t>(i), ready[i]});
    }
    double B = acc, chan = 0, wait = 0;
    int64_t bytes = 0;
    // Which layers sync this step, bucketed over adjacent layers (reverse order, ~64 KB cap).
    auto syncs = [&](size_t i) {
      if (pol.blocking) return false;
      return pol.h == 1 || sched[i] == t % pol.h;
    };
    size_t i = L.size();
    while (i-- > 0) {
      if (!syncs(i)) continue;
      size_t last = i;
      int64_t bb = L[i].info.bytes;
      double c = L[i].comm_s;
      while (i > 0 && syncs(i - 1) && bb + L[i - 1].info.bytes < 64 * 1024) {
        --i;
        bb += L[i].info.bytes;
        c += L[i].comm_s - 1.5e-4;  // one latency per bucket, not per layer
      }
      double start = std::max(ready[i], chan);
      chan = start + c;
      bytes += bb;
      w.append_sync_event({t, static_cast<int32_t>(i), static_cast<int32_t>(last),
                           pol.h == 1 ? SyncAction::kAllreduceGrads : SyncAction::kAverageParams, 0, 0, bb,
                           ready[i], chan});
    }
    wait = std::max(0.0, chan - B);
    if (pol.blocking && t % pol.h == pol.h - 1) {
      double c = 0;
      for (auto& l : L) c += l.comm_s, bytes += l.info.bytes;
      c *= 0.6;  // one fused buffer
      w.append_sync_event({t, 0, static_cast<int32_t>(L.size() - 1), SyncAction::kAverageParams, 0, 0,
                           bytes, B + upd_s, B + upd_s + c});
      wait += c;
    }
    double step_s = fwd_s + B + upd_s + wait;
    wall += step_s;
    double sps = world * batch / step_s;
    sps_sum += sps;
    double samples = double(t + 1) * world * batch;
    double loss = 0.28 + 2.0 * std::exp(-samples * pol.conv / 60000.0) + 0.04 * noise(rng);
    w.append_step({t, wall, loss, 0.05, fwd_s * 1e3, B * 1e3, upd_s * 1e3, wait * 1e3, bytes, sps});
    if (t % 50 == 0 || t == steps - 1) {
      double acc_v = 0.91 - 0.8 * std::exp(-samples * pol.conv / 50000.0) + 0.004 * noise(rng);
      w.append_eval({t, 0.25 + 2.0 * std::exp(-samples * pol.conv / 50000.0), acc_v, std::nan("")});
    }
    if (sens && t % 100 == 0) {
      for (int32_t d : delays) {
        std::vector<float> fixed, mini;
        for (size_t l = 0; l < L.size(); ++l) {
          double depth = double(l) / double(L.size() - 1);
          double rate = 0.006 + 0.09 * std::pow(depth, 3) + (L[l].info.kind == "Linear" ? 0.2 : 0.0);
          double c = std::exp(-rate * d * (1.0 + 0.3 * t / steps)) - 0.01 * std::abs(noise(rng));
          fixed.push_back(static_cast<float>(c));
          mini.push_back(static_cast<float>(c * (0.55 + 0.1 * depth)));
        }
        w.record_cosine(ProbeKind::kFixedBatch, t, d, fixed);
        w.record_cosine(ProbeKind::kMinibatch, t, d, mini);
      }
    }
  }
  if (pol.dir == "dreamddp") w.append_event(300, "switch", "dreamddp:h=8 -> dreamddp:h=8,fillin=1");
  w.close();
  double mean_sps = sps_sum / steps;
  write_summary_json((dir / "summary.json").string(),
                     {{"model", "resnet20"}, {"policy", pol.spec}, {"samples_per_s", mean_sps}, {"world", world}});
  thr.push_back({{"system", "dreamddp"}, {"policy", pol.spec}, {"network", "1gbit"}, {"samples_per_s", mean_sps}});
  thr.push_back({{"system", "dreamddp"}, {"policy", pol.spec}, {"network", "10gbit"}, {"samples_per_s", mean_sps * (pol.h == 1 ? 1.5 : 1.25)}});
  if (pol.dir == "ddp" || pol.dir == "localsgd") {
    thr.push_back({{"system", "torch"}, {"policy", pol.spec}, {"network", "1gbit"}, {"samples_per_s", mean_sps * 0.8}});
    thr.push_back({{"system", "torch"}, {"policy", pol.spec}, {"network", "10gbit"}, {"samples_per_s", mean_sps * (pol.h == 1 ? 1.3 : 1.1)}});
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  fs::path study = fs::path(argv[1]) / "study_a";
  fs::create_directories(study);
  auto L = resnet20_layers();
  auto plsgd = contiguous_phases(L, 8);
  // A dreamddp-like schedule: same groups, rotated so the head syncs at phase 0 (early in the period).
  std::vector<int> dream(L.size());
  for (size_t i = 0; i < L.size(); ++i) dream[i] = (plsgd[i] + 3) % 8;
  nlohmann::json thr = nlohmann::json::array();
  std::vector<int> ones(L.size(), 0);
  write_run(study / "ddp", {"ddp", "ddp", 1, false, 1.0}, L, ones, 1, thr);
  write_run(study / "localsgd", {"localsgd", "localsgd:k=8", 8, true, 0.85}, L, ones, 2, thr);
  write_run(study / "plsgd", {"plsgd", "plsgd:h=8", 8, false, 0.9}, L, plsgd, 3, thr);
  write_run(study / "dreamddp", {"dreamddp", "dreamddp:h=8", 8, false, 0.95}, L, dream, 4, thr);
  // ordered_json keeps the forward layer order in the file (plain json would sort the names).
  nlohmann::ordered_json sched = {{"H", 8}, {"schedule", nlohmann::ordered_json::object()}};
  for (size_t i = 0; i < L.size(); ++i) sched["schedule"][L[i].info.name] = dream[i];
  sched["fillin"] = {{"fc", {4}}, {"layer3.2.conv2", {0}}};
  std::ofstream(study / "schedule.json") << sched.dump(2) << "\n";
  std::ofstream(study / "throughput.json") << thr.dump(2) << "\n";
  std::printf("wrote synthetic study to %s\n", study.c_str());
  return 0;
}
