// Refusals before any work: every option's range, the defaults that depend on other options, what --device cuda,
// --on-peer-loss shrink and a --control-file spec cannot do, and that --data fits --model.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "core/models/model.h"
#include "core/models/model_spec.h"
#include "core/sync/control/control_file.h"
#include "core/sync/policy/layer_meta.h"
#include "core/sync/policy/registry.h"
#include "core/train/checkpoint.h"
#include "core/train/device_state.h"
#include "core/train/sensitivity.h"
#include "core/train/trainer.h"
#include "core/train/trainer_parts.h"

namespace dd::train {

// Why --on-peer-loss shrink refuses policy `spec` ("" when it does not).
static std::string shrink_refusal(const sync::PolicySpec& spec) {
  const std::string why = unmappable_policy_state(spec);
  return why.empty() ? why : "--on-peer-loss shrink: " + why + ", so its state does not carry to a smaller world";
}

// Refuses --on-peer-loss shrink where it cannot work, with one line (dd::UsageError): the mpi and nccl backends
// (no fault tolerance here: a lost peer ends the job with exit 3), --sensitivity (its open probe is per rank) and
// policies whose state does not carry to a smaller world (the rule of --resume on another world size), also as a
// --switch. Either device: what an unfinished collective leaves is undone in the arenas' own memory.
static void check_shrink_fits(const TrainConfig& c) {
  const std::string head = "--on-peer-loss shrink: ";
  if (c.backend == BackendKind::Mpi)
    throw UsageError(head + "the mpi backend has no fault tolerance here: a lost peer ends the job with exit 3 "
                     "(use --backend gloo, or --on-peer-loss exit)");
  if (c.backend == BackendKind::Nccl)
    throw UsageError(head + "the nccl backend cannot be rebuilt after a lost peer here; use --backend gloo");
  if (!c.sensitivity.empty()) throw UsageError(head + "not with --sensitivity (its open probe is per rank)");
  std::vector<sync::PolicySpec> specs{c.policy_spec};
  for (auto& sw : c.policy_switches) specs.push_back(sw.spec);
  for (auto& spec : specs)
    if (const std::string why = shrink_refusal(spec); !why.empty()) throw UsageError(why);
}

// A dreamddp profile=DIR measured on another model or another world size (DIR/meta.json, written by `dreamddp
// profile`) would schedule this run from times that are not its own: refused, naming what differs. A profile
// without meta.json (written by hand) is taken as given.
static void check_profile_fits_run(const TrainConfig& c, const sync::PolicySpec& spec) {
  std::vector<const sync::PolicySpec*> parts{&spec};
  if (spec.composite()) parts = {&spec.parts[0], &spec.parts[1]};
  for (const sync::PolicySpec* p : parts) {
    const std::string dir = p->name == "dreamddp" ? p->get_str("profile", "") : "";
    if (dir.empty()) continue;
    std::ifstream in(std::filesystem::path(dir) / "meta.json");
    if (!in) continue;
    const auto meta = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!meta.is_object()) throw UsageError("--policy " + spec.text + ": profile " + dir + ": meta.json is not a JSON object");
    std::string diff;
    if (meta.contains("model") && meta["model"].is_string() && meta["model"].get<std::string>() != c.model)
      diff = "model " + meta["model"].get<std::string>() + " (this run: " + c.model + ")";
    if (c.world > 1 && meta.contains("world") && meta["world"].is_number_integer() &&
        meta["world"].get<int64_t>() != c.world)
      diff += (diff.empty() ? "" : " and ") + std::to_string(meta["world"].get<int64_t>()) + " rank(s) (this run: " +
              std::to_string(c.world) + ")";
    if (!diff.empty())
      throw UsageError("--policy " + spec.text + ": profile " + dir + " was measured on " + diff +
                       "; measure one for this run with `dreamddp profile`");
  }
}

std::string control_spec_refusal(const TrainConfig& c, const std::vector<nn::Layer*>& layers,
                                 const sync::PolicySpec& spec) {
  try {
    const auto p = sync::make_policy(spec);  // one policy answers every question below
    if (c.backend == BackendKind::Nccl && p->merge().compress != sync::Codec::None)
      return "--policy " + spec.text + ": compress= needs the byte channel of gloo or mpi, not nccl";
    p->setup(sync::layer_metas(layers), c.world);  // what check_policy_fits_model does
    check_profile_fits_run(c, spec);
  } catch (const UsageError& e) {
    return e.what();
  }
  return c.shrink_on_peer_loss ? shrink_refusal(spec) : std::string();
}

void parse_policy_specs(TrainConfig& c) {
  c.policy_spec = sync::PolicySpec::parse(c.policy);
  sync::make_policy(c.policy_spec);  // a bad spec is refused before any work
  c.policy_switches = sync::parse_switches(c.switches);
}

bool policy_specs_current(const TrainConfig& c) {
  if (c.policy_spec.text != c.policy || c.policy_switches.size() != c.switches.size()) return false;
  // parse_switches sorts by step: compare as sets of "STEP:SPEC"
  std::vector<std::string> parsed, given = c.switches;
  for (auto& sw : c.policy_switches) parsed.push_back(std::to_string(sw.step) + ":" + sw.spec.text);
  std::sort(parsed.begin(), parsed.end());
  std::sort(given.begin(), given.end());
  return parsed == given;
}

data::InputSpec input_spec_of(const models::Model& m, const std::string& spec) {
  data::InputSpec s;
  s.model = spec;
  s.x_shape = m.input_shape();
  s.tokens = m.takes_tokens();
  s.classes = s.tokens ? m.vocab() : m.num_classes();
  return s;
}

RunData load_run_data(const TrainConfig& cfg, const data::InputSpec& input) {
  RunData d;
  d.train = data::open_dataset(cfg.data, cfg.data_dir, true, input, cfg.seed);
  d.test = data::open_dataset(cfg.data, cfg.data_dir, false, input, cfg.seed);
  return d;
}

data::InputSpec resolve_and_validate(TrainConfig& c) {
  bool known = false;
  const std::string family = models::ModelSpec::parse(c.model).family();  // NAME[:key=value,...]
  for (auto& m : models::model_names()) known |= (m == family);
  if (!known)
    throw UsageError("--model: unknown model '" + family + "' (expected mlp, cnn, resnet20, gpt-mini, gpt2, llama, "
                     "resnet18 or resnet50)");
  // The model, built once for every question below that depends on it (what it reads, its layers for the
  // policies' checks): as costly as one initialization, and needed at the end anyway.
  const auto probe = models::make_model(c.model, c.seed);
  const bool language_model = probe->takes_tokens();
  if (c.data != "fashion-mnist" && c.data != "text" && c.data != "synthetic")
    throw UsageError("--data: unknown dataset '" + c.data + "' (expected fashion-mnist, text or synthetic)");
  if (c.batch < 1 || c.batch > 1 << 20) throw UsageError("--batch must be between 1 and 1048576");
  if (c.steps < 1) throw UsageError("--steps must be >= 1");
  if (c.optimizer == OptimizerKind::Auto) c.optimizer = language_model ? OptimizerKind::AdamW : OptimizerKind::Sgd;
  if (c.lr < 0) c.lr = c.optimizer == OptimizerKind::AdamW ? 1e-3f : 0.05f;
  if (!(c.lr > 0) || !std::isfinite(c.lr)) throw UsageError("--lr must be a positive number");
  if (!(c.momentum >= 0 && c.momentum < 1)) throw UsageError("--momentum must be in [0, 1)");
  if (!(c.weight_decay >= 0) || !std::isfinite(c.weight_decay)) throw UsageError("--weight-decay must be >= 0");
  if (c.warmup < 0) c.warmup = c.steps / 50;
  if (c.eval_every < 0) throw UsageError("--eval-every must be >= 0");
  if (c.eval_samples < 0) throw UsageError("--eval-samples must be >= 0");
  if (c.checkpoint_every < 0) throw UsageError("--checkpoint-every must be >= 0");
  if (c.checkpoint_every > 0 && c.out.empty()) throw UsageError("--checkpoint-every needs --out (checkpoints go there)");
  if (!(c.timeout_s > 0) || c.timeout_s > 86400) throw UsageError("--timeout must be in (0, 86400] seconds");
  if (c.threads < 0 || c.threads > 1024) throw UsageError("--threads must be between 0 and 1024");
  if (c.threads == 0) {
    int hw = int(std::max(1u, std::thread::hardware_concurrency()));
    c.threads = c.local_world > 1 ? 1 : hw;
  }
  if (!c.sensitivity.empty()) parse_sensitivity(c.sensitivity, c.steps);
  parse_policy_specs(c);  // once: every later use of --policy and --switch reads c.policy_spec, c.policy_switches
  if (!(c.anomaly_spike >= 0)) throw UsageError("--anomaly-spike must be >= 0");
  if (c.anomaly_window < 1) throw UsageError("--anomaly-window must be >= 1");
  if (c.inject_nan >= 0 && language_model)
    throw UsageError("--inject-nan poisons image inputs; " + family + " takes tokens");
  check_device_fits(c);
  if (c.shrink_on_peer_loss) check_shrink_fits(c);
  if (!c.control_file.empty()) sync::check_control_file_path("--control-file", c.control_file);
  if (c.bucket_cap_mb < 1 || c.bucket_cap_mb > 16384) throw UsageError("--bucket-cap-mb must be in [1, 16384]");
  if (!(c.first_bucket_mb > 0 && c.first_bucket_mb <= 16384)) throw UsageError("--first-bucket-mb must be in (0, 16384]");
  if (c.log_every < 0) throw UsageError("--log-every must be >= 0");
  if (c.staleness_gamma != 0 && !(c.staleness_gamma > 0 && c.staleness_gamma <= 1))
    throw UsageError("--staleness-lr must be in (0, 1]");
  // Model-dependent policy mistakes (a `fixed` pattern naming no layer, a profile of another model) are refused
  // here, before anything is written, also for a single process, which has no sync engine to find them.
  sync::check_policy_fits_model(c.policy_spec, probe->layers(), c.world);
  for (auto& sw : c.policy_switches) sync::check_policy_fits_model(sw.spec, probe->layers(), c.world);
  check_profile_fits_run(c, c.policy_spec);
  for (auto& sw : c.policy_switches) check_profile_fits_run(c, sw.spec);
  data::InputSpec input = input_spec_of(*probe, c.model);
  data::check_fits(c.data, input);
  return input;
}

optim::OptimConfig optim_config(const TrainConfig& cfg) {
  optim::OptimConfig oc;
  // The one place the CLI's kind (with Auto, resolved by now) becomes the optimizer's.
  oc.kind = cfg.optimizer == OptimizerKind::AdamW ? optim::OptimizerKind::AdamW : optim::OptimizerKind::Sgd;
  oc.momentum = cfg.momentum;
  oc.nesterov = cfg.nesterov;
  oc.weight_decay = cfg.weight_decay;
  return oc;
}

}  // namespace dd::train
