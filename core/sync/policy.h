// Policies: what each layer does at each step (docs/policies.md). A policy must decide from state that is
// identical on every rank (the step, the layer, agreed statistics), so all ranks launch the same collectives.
#pragma once
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/sync/contention.h"

namespace dd::sync {

// AverageGroup averages the layer's parameters inside this rank's group only (two-level topology, `hier`).
enum class Action : int8_t { None = 0, AverageParams = 1, AllreduceGrads = 2, AverageGroup = 3 };
const char* action_name(Action a);

// "name:key=value,key=value" parsed; unknown keys are refused by the policy that reads them. A value may carry its
// own keys, "outer=nesterov:lr=0.7,momentum=0.9": they are stored as "outer.lr", "outer.momentum" (the items after
// it whose key is one of that value's keys belong to it; see kNestedKeys in policy_spec.cpp).
struct PolicySpec {
  std::string name;
  std::map<std::string, std::string> kv;
  std::string text;  // as given

  static PolicySpec parse(const std::string& text);                  // throws dd::UsageError
  int64_t get_int(const std::string& key, int64_t dflt, int64_t lo, int64_t hi) const;
  double get_double(const std::string& key, double dflt, double lo, double hi) const;
  std::string get_str(const std::string& key, const std::string& dflt) const;
  bool get_bool(const std::string& key, bool dflt) const;
  void allow_only(const std::vector<std::string>& keys) const;        // throws on any other key
  void allow_only_with_merge_keys(std::vector<std::string> keys) const;  // keys + merge_keys()
};

// What a policy may know about the model (identical on all ranks).
struct LayerMeta {
  std::string name;
  std::string kind;
  int64_t params = 0;
  int64_t bytes = 0;  // parameters + buffers, float32
};

// Local, per-layer statistics of this rank's step (computed only for policies that ask for them), taken from the
// local gradient when the layer's backward finishes, before any all-reduce.
struct LayerSignals {
  std::vector<double> grad_norm;   // ||g_l||
  std::vector<double> cos_prev;    // cos(g_l(t), g_l(t-1)) of this rank's local gradients (1 at the first step)
  std::vector<int64_t> stale;      // local updates since the layer's last sync
};

// Measured per-layer backward and communication times (seconds), agreed across ranks.
struct LayerTimes {
  std::vector<double> backward_s;
  std::vector<double> comm_s;
  // What overlapped communication and compute cost each other here (self_profile.h measure_contention); none
  // where they do not share cores (the time model of the paper).
  Contention contention;
};

// Payload codecs of compressed layer sync (core/sync/codec.h).
enum class Codec : int8_t { None = 0, Bf16 = 1, Int8 = 2 };
const char* codec_name(Codec c);

// The merge keys of the local policies (plsgd, dreamddp, localsgd), parsed by parse_merge():
// - delay=T: the average of a layer launched at step t is merged at the start of step t + T as a correction
//   theta += avg(theta(t)) - theta(t), keeping the local progress made meanwhile (0: today's in-step average);
// - outer=avg|nesterov[:lr=X,momentum=M]: at its sync a layer's anchor (its value at the previous sync, identical
//   on every rank) takes one Nesterov step on the pseudo-gradient anchor - avg(theta), and the layer restarts
//   from the new anchor (DiLoCo); avg is plain averaging;
// - compress=none|bf16|int8|auto: the average of theta - anchor is computed from encoded payloads with error
//   feedback; auto picks int8 for the layers that tolerate staleness best and bf16 for the others (choose_codecs).
struct MergeSpec {
  int delay = 0;
  bool nesterov = false;
  double outer_lr = 1.0, outer_momentum = 0.0;
  Codec compress = Codec::None;
  // compress=auto: a codec per layer from its measured staleness tolerance (LayerSync; bf16 until it has measured).
  bool compress_auto = false;
  // Anchors are kept: the average is transformed (outer step or compressed delta), not taken as is.
  bool transforms() const { return nesterov || compress != Codec::None; }
  std::string describe() const;  // ",delay=2,outer=nesterov:lr=0.7,momentum=0.9,compress=int8" ("" by default)
};

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string describe() const = 0;
  virtual void setup(const std::vector<LayerMeta>& layers, int world) { layers_ = layers; world_ = world; }
  // The action of `layer` at `step`: a function of rank-identical state only (the step, setup, agreed numbers, what
  // on_actions told it), so every rank launches the same collectives; const, so it may be asked any number of times.
  virtual Action decide(int layer, int64_t step) const = 0;
  // The actions the engine took at `step`, once per step the policy was asked (after every layer's decide(), before
  // the step's backward; not during lock-step profiling or a fallback). A policy whose decisions depend on its
  // past syncs (threshold, the staleness cap) updates that state here; a composite forwards the final actions to
  // the policy it wraps, so the wrapped one learns of syncs it did not decide.
  virtual void on_actions(int64_t step, const std::vector<Action>& actions) { (void)step; (void)actions; }
  // True when the whole model is averaged, blocking, after the update of `step` (plain Local SGD).
  virtual bool full_average_after(int64_t step) const { (void)step; return false; }
  // Two-level topology: the group of every rank (hosts[r] is rank r's host name); ranks of one group run
  // Action::AverageGroup among themselves on their own sub-group backend. Empty: no groups.
  virtual std::vector<int> groups(const std::vector<std::string>& hosts) const { (void)hosts; return {}; }
  // How this policy's parameter averages are formed and merged (docs/design.md "Delayed merge, outer optimizer, compression"): delay=T,
  // outer=nesterov, compress=bf16|int8. The default is the plain in-step average.
  virtual MergeSpec merge() const { return {}; }
  int merge_delay() const { return merge().delay; }
  // Called by the engine at the start of every step, before that step's decide() calls (after a switch, the new
  // policy's); a policy that places something relative to the current step anchors it here.
  virtual void on_step_begin(int64_t step) { (void)step; }
  // Measured trials: step boundaries s_0 < s_1 < ... < s_n whose wall times the engine measures (window i = steps
  // [s_i, s_{i+1}), forward to the end of its averages). At the start of step s_n, before its decide() calls, the
  // engine hands the rank-averaged seconds of every window to on_period_times, identical on every rank, or an
  // empty vector where it missed a boundary (a resume inside the trial). Empty: nothing to time.
  virtual std::vector<int64_t> timed_periods() const { return {}; }
  virtual void on_period_times(int64_t step, const std::vector<double>& seconds) { (void)step; (void)seconds; }
  // Steps in one period of this policy's schedule (its H or K), 0 if it has none: throughput is timed over whole
  // periods, so every timed window holds the same syncs whatever the step they fall in.
  virtual int64_t period() const { return 0; }
  // For a run starting at `start`, the step from which this policy's schedule no longer changes by itself (after
  // profiling and a measured trial), at worst: throughput is timed from there.
  virtual int64_t settled_by(int64_t start) const { return std::max(start, first_step_ + profile_steps()); }
  // The first step this policy is in force: 0, or the step of a switch into it (--switch, the control file). Set by
  // the engine before that step's on_step_begin; windows a policy counts over its own first steps (profiling,
  // sensitivity measurement) count from here, never from step 0. A composite forwards it to the policy it wraps.
  virtual void start_at(int64_t step) { first_step_ = step; }
  int64_t first_step() const { return first_step_; }
  // Policies that schedule from a profile ask for one during their first profile_steps() steps from first_step()
  // (lock-step meanwhile); 0 once they have one.
  virtual int64_t profile_steps() const { return 0; }
  bool profiling(int64_t step) const { return step - first_step_ < profile_steps(); }
  virtual void on_profile(const LayerTimes& t) { (void)t; }
  // Consensus (docs/design.md, consistency rule). A policy that decides from local statistics publishes
  // votes_per_layer() floats per layer after each backward (cast_votes); the engine sums them over the ranks with
  // one small asynchronous all-reduce and hands the sums to on_agreed() before the next step's decide() calls:
  // every rank then decides from the same numbers, one step later, without stalling compute.
  virtual int votes_per_layer() const { return 0; }
  virtual bool wants_signals() const { return votes_per_layer() > 0; }
  virtual void cast_votes(int64_t step, const LayerSignals& s, float* votes) { (void)step; (void)s; (void)votes; }
  virtual void on_agreed(int64_t step, const float* vote_sums, int world) { (void)step; (void)vote_sums; (void)world; }
  // Human-readable plan printed by rank 0 at start, and again whenever plan_version() changes (e.g. after a
  // policy finished measuring and assigned its schedule).
  virtual std::string plan() const { return ""; }
  virtual int64_t plan_version() const { return 0; }
  // What this policy decided from a measurement (a self-profile, a trial), as one JSON object, for metrics.h5's
  // /decisions (docs/design.md, HDF5); "" when nothing it does depends on one. The engine records it when the
  // policy comes into force and whenever plan_version() changes.
  virtual std::string decisions() const { return ""; }
  // Everything decide() depends on beyond the spec and setup() (schedules, EMAs, counters), for checkpoints.
  // Restoring it must make the policy decide exactly as the saved one would have.
  virtual std::string save_state() const { return ""; }
  virtual void load_state(const std::string& s) { (void)s; }

 protected:
  std::vector<LayerMeta> layers_;
  int world_ = 1;
  int64_t first_step_ = 0;
};

// ddp, localsgd:k=K, plsgd:h=H[,delay=T], dreamddp:h=H[,profile=DIR][,fillin=1][,profile_steps=N][,delay=T], and
// registered ones.
std::unique_ptr<Policy> make_policy(const PolicySpec& spec);

// The GPU data path keeps gradients on the device: a policy that reads local gradient statistics on the host every
// step (wants_signals) is refused there. Throws dd::UsageError naming `spec` when `on_device`.
void check_policy_fits_device(const Policy& p, const std::string& spec, bool on_device);

// --switch STEP:SPEC values, validated (each SPEC builds a policy) and sorted by step. Throws dd::UsageError.
struct PolicySwitch {
  int64_t step;
  std::string spec;
};
std::vector<PolicySwitch> parse_switches(const std::vector<std::string>& args);

// The merge keys (MergeSpec) of a local policy whose layers sync every `h` steps: 0 <= delay < h, so a layer has at
// most one average in flight (its next one is launched h steps after the last). Throws dd::UsageError.
MergeSpec parse_merge(const PolicySpec& s, const std::string& policy, int64_t h);
// The keys parse_merge reads, for allow_only.
const std::vector<std::string>& merge_keys();

// A policy is one C++ file: implement Policy and register a factory under a name, e.g.
//   static bool reg = dd::sync::register_policy("mine", [](const PolicySpec& s) { return std::make_unique<Mine>(s); });
// The built-in policies (core/sync/policies/) register themselves exactly so. Registering a taken name throws.
using PolicyFactory = std::unique_ptr<Policy> (*)(const PolicySpec&);
bool register_policy(const std::string& name, PolicyFactory factory);
// The registered names, sorted (tests that must cover every policy iterate over them).
std::vector<std::string> registered_policies();

}  // namespace dd::sync
