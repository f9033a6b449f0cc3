// Policies: what each layer does at each step (DESIGN.md "Policies"). A policy must decide from state that is
// identical on every rank (the step, the layer, agreed statistics), so all ranks launch the same collectives.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dd::sync {

enum class Action : int8_t { None = 0, AverageParams = 1, AllreduceGrads = 2 };
const char* action_name(Action a);

// "name:key=value,key=value" parsed; unknown keys are refused by the policy that reads them.
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
};

// What a policy may know about the model (identical on all ranks).
struct LayerMeta {
  std::string name;
  std::string kind;
  int64_t params = 0;
  int64_t bytes = 0;  // parameters + buffers, float32
};

// Measured per-layer backward and communication times (seconds), agreed across ranks.
struct LayerTimes {
  std::vector<double> backward_s;
  std::vector<double> comm_s;
};

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string describe() const = 0;
  virtual void setup(const std::vector<LayerMeta>& layers, int world) { layers_ = layers; world_ = world; }
  // The action of `layer` at `step`. Must depend only on rank-identical state.
  virtual Action decide(int layer, int64_t step) = 0;
  // True when the whole model is averaged, blocking, after the update of `step` (plain Local SGD).
  virtual bool full_average_after(int64_t step) const { (void)step; return false; }
  // Policies that schedule from a profile ask for one during their first steps (lock-step meanwhile).
  virtual int64_t profile_steps() const { return 0; }
  virtual void on_profile(const LayerTimes& t) { (void)t; }
  // Human-readable plan printed by rank 0 at start (or after profiling).
  virtual std::string plan() const { return ""; }

 protected:
  std::vector<LayerMeta> layers_;
  int world_ = 1;
};

// ddp, localsgd:k=K, plsgd:h=H, dreamddp:h=H[,profile=DIR][,fillin=1][,profile_steps=N]
std::unique_ptr<Policy> make_policy(const PolicySpec& spec);

}  // namespace dd::sync
