// The names of TrainConfig's enumerated options, and their parsing (one line naming the option on a bad value).
#include "core/train/config.h"

#include "base/error.h"

namespace dd::train {

namespace {

template <typename E, size_t N>
E parse_one(const std::string& s, const char* const (&names)[N], const std::string& what) {
  for (size_t i = 0; i < N; ++i)
    if (s == names[i]) return E(i);
  throw UsageError(what + " '" + s + "'" + [&] {
    std::string list;
    for (size_t i = 0; i < N; ++i) list += (i == 0 ? "" : i + 1 == N ? " or " : ", ") + std::string(names[i]);
    return " (expected " + list + ")";
  }());
}

constexpr const char* kDevice[] = {"cpu", "cuda"};
constexpr const char* kOptimizer[] = {"sgd", "adamw"};
constexpr const char* kSchedule[] = {"const", "cosine", "step"};
constexpr const char* kAnomaly[] = {"off", "fallback", "stop"};

}  // namespace

const char* name(Device v) { return kDevice[int(v)]; }
const char* name(OptimizerKind v) { return v == OptimizerKind::Auto ? "auto" : kOptimizer[int(v) - 1]; }
const char* name(LrSchedule v) { return kSchedule[int(v)]; }
const char* name(AnomalyMode v) { return kAnomaly[int(v)]; }

Device parse_device(const std::string& s) { return parse_one<Device>(s, kDevice, "--device: unknown device"); }
BackendKind parse_backend(const std::string& s) {
  return parse_backend_kind(s, "--backend: unknown backend");
}
OptimizerKind parse_optimizer(const std::string& s) {
  if (s.empty()) return OptimizerKind::Auto;
  return OptimizerKind(int(parse_one<OptimizerKind>(s, kOptimizer, "--optimizer: unknown optimizer")) + 1);
}
LrSchedule parse_lr_schedule(const std::string& s) {
  return parse_one<LrSchedule>(s, kSchedule, "--lr-schedule: unknown schedule");
}
AnomalyMode parse_anomaly(const std::string& s) { return parse_one<AnomalyMode>(s, kAnomaly, "--anomaly:"); }

}  // namespace dd::train
