// Everything a training run is configured by (CLI flags / INI keys of docs/cli.md); validated before any work.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "base/fp_mode.h"
#include "base/precision.h"
#include "core/optim/lr_schedule.h"
#include "core/sync/policy/policy_spec.h"

namespace dd::train {

// The options that name one of a fixed set, parsed once where a run is configured (the CLI or a test) and compared
// as values from there on. name() spells each as the CLI, metrics.h5, summary.json and checkpoints do.
enum class Device { Cpu, Cuda };
using BackendKind = dd::BackendKind;  // backends/backend.h, with its name()
enum class OptimizerKind { Auto, Sgd, AdamW };  // Auto: sgd, adamw for the language models (optim_config maps it)
using LrSchedule = optim::ScheduleKind;          // the schedule's own kind: const | cosine | step
enum class AnomalyMode { Off, Fallback, Stop };

const char* name(Device v);
const char* name(OptimizerKind v);  // Auto: "auto"
const char* name(LrSchedule v);
const char* name(AnomalyMode v);
// Each throws UsageError naming its option and the accepted values.
Device parse_device(const std::string& s);
BackendKind parse_backend(const std::string& s);
OptimizerKind parse_optimizer(const std::string& s);  // "" is Auto
LrSchedule parse_lr_schedule(const std::string& s);
AnomalyMode parse_anomaly(const std::string& s);

struct TrainConfig {
  std::string model = "mlp";
  std::string data = "fashion-mnist";
  std::string data_dir;                 // empty: the dataset's Debian location
  std::string policy = "ddp";
  std::vector<std::string> switches;    // "STEP:SPEC"
  // `policy` and `switches` parsed, once, by resolve_and_validate (the Trainer parses them itself only when they
  // were changed after it); every later use of the spec reads these.
  sync::PolicySpec policy_spec;
  std::vector<sync::PolicySwitch> policy_switches;
  BackendKind backend = BackendKind::Gloo;
  Device device = Device::Cpu;
  int64_t batch = 64;                   // per rank
  int64_t steps = 1000;
  float lr = -1;                        // <0: the optimizer's default (sgd 0.05, adamw 1e-3)
  float momentum = 0.9f;
  bool nesterov = false;
  float weight_decay = 0.0f;
  OptimizerKind optimizer = OptimizerKind::Auto;
  LrSchedule lr_schedule = LrSchedule::Cosine;
  int64_t warmup = -1;                  // <0: 2% of steps
  uint64_t seed = 0;
  int64_t eval_every = 0;               // 0: only at the end
  int64_t eval_samples = 0;             // 0: the whole test set (text: 512 windows)
  std::string out;
  bool overwrite = false;
  int64_t checkpoint_every = 0;
  std::string resume;
  std::string sensitivity;              // empty: off
  std::string save_params;
  std::string rendezvous;
  std::string iface;
  double timeout_s = 60;
  int threads = 0;                      // 0: 1 when several ranks share a machine, else all cores
  Subnormals subnormals = Subnormals::flush;  // --subnormals flush|keep, on every compute thread (base/fp_mode.h)
  Precision precision = Precision::fp32;      // --precision fp32|bf16: the GEMMs and convolutions (base/precision.h)
  int64_t log_every = 0;                // 0: automatic
  bool check_collectives = false;
  double staleness_gamma = 0;           // >0: lr_l = lr * gamma^stale_l
  bool average_optimizer_state = false;
  bool last_period_local = true;        // --last-period local|scheduled (core/sync/policy/closing_period.h)
  bool immediate_update = false;        // update each layer as soon as its sync is done
  AnomalyMode anomaly = AnomalyMode::Fallback;
  double anomaly_spike = 10;            // loss > factor x EMA counts as an anomaly (0: off)
  int64_t anomaly_window = 50;          // fallback: steps of lock-step sync
  int64_t inject_nan = -1;              // testing: poison a gradient on rank 0 at this step
  std::string control_file;             // rank 0 watches it for a policy spec to switch to
  bool shrink_on_peer_loss = false;     // --on-peer-loss shrink (docs/elastic.md); false: exit 3
  bool rejoin = false;                  // --rejoin: join the live world of the rendezvous (docs/elastic.md)
  double heartbeat_s = -1;              // --heartbeat: a silent member is lost after this (-1: auto, 0: off)
  int rejoins_in_place = -1;            // --rejoins-in-place: an excluded rank asks to join again (-1: 8 times)
  int64_t bucket_cap_mb = 25;
  double first_bucket_mb = 1;
  std::string config_file;

  // Rank placement (from the environment, not the CLI).
  int rank = 0;
  int world = 1;
  int local_rank = 0;
  int local_world = 1;
};

}  // namespace dd::train
