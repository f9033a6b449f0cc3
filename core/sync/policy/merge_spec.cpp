// The merge keys of the local policies (merge_spec.h): parsed, checked against the policy's period, described.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "base/error.h"
#include "core/sync/policy/merge_spec.h"

namespace dd::sync {

const char* codec_name(Codec c) {
  switch (c) {
    case Codec::None: return "none";
    case Codec::Bf16: return "bf16";
    case Codec::Int8: return "int8";
    case Codec::TopK: return "topk";
  }
  return "?";
}

const std::vector<std::string>& merge_keys() {
  static const std::vector<std::string> keys = {"delay",    "outer",      "outer.lr",        "outer.momentum",
                                                "compress", "compress.p", "compress.values"};
  return keys;
}

MergeSpec parse_merge(const PolicySpec& s, const std::string& policy, int64_t h) {
  MergeSpec m;
  const int64_t d = s.get_int("delay", 0, 0, 1024);
  if (d >= h)
    throw UsageError("--policy " + policy + ": delay=" + std::to_string(d) + " must be below " +
                     (policy == "localsgd" ? "k=" : "h=") + std::to_string(h) +
                     " (a layer's next average starts that many steps after the last, which must have been merged)");
  m.delay = int(d);
  const std::string outer = s.get_str("outer", "avg");
  if (outer == "nesterov") {
    m.nesterov = true;
    m.outer_lr = s.get_double("outer.lr", 0.7, 1e-6, 10);
    m.outer_momentum = s.get_double("outer.momentum", 0.9, 0, 0.999);
  } else if (outer == "avg") {
    if (s.kv.count("outer.lr") || s.kv.count("outer.momentum"))
      throw UsageError("--policy " + policy + ": outer=avg takes no lr or momentum (did you mean outer=nesterov:lr=...?)");
  } else {
    throw UsageError("--policy " + policy + ": outer=" + outer + " is not one of avg, nesterov");
  }
  const std::string c = s.get_str("compress", "none");
  if (c == "none") m.compress = Codec::None;
  else if (c == "bf16") m.compress = Codec::Bf16;
  else if (c == "int8") m.compress = Codec::Int8;
  else if (c == "auto") m.compress = Codec::Bf16, m.compress_auto = true;
  else if (c == "topk") m.compress = Codec::TopK;
  else
    throw UsageError("--policy " + policy + ": compress=" + c + " is not one of none, bf16, int8, auto, topk:p=P");
  const bool p = s.kv.count("compress.p"), values = s.kv.count("compress.values");
  if (m.compress != Codec::TopK) {
    if (p || values)
      throw UsageError("--policy " + policy + ": compress=" + c +
                       " takes no p or values (did you mean compress=topk:p=1?)");
    return m;
  }
  if (!p)
    throw UsageError("--policy " + policy +
                     ": compress=topk needs the percent of entries it sends, e.g. compress=topk:p=1");
  const std::string pv = s.get_str("compress.p", "");
  double pct = 0;
  if (!parse_number(pv, &pct) || !(pct > 0) || pct > 50)
    throw UsageError("--policy " + policy + ": compress=topk:p=" + pv +
                     " must be a percent in (0, 50] (of each layer's entries sent per sync)");
  m.topk.percent = pct;
  const std::string v = s.get_str("compress.values", "fp32");
  if (v == "int8") m.topk.int8 = true;
  else if (v != "fp32")
    throw UsageError("--policy " + policy + ": compress=topk values=" + v + " is not one of fp32, int8");
  return m;
}

std::string MergeSpec::describe() const {
  std::string o;
  auto num = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%g", v);
    return std::string(b);
  };
  if (delay) o += ",delay=" + std::to_string(delay);
  if (nesterov) o += ",outer=nesterov:lr=" + num(outer_lr) + ",momentum=" + num(outer_momentum);
  if (compress == Codec::TopK) o += ",compress=" + topk.describe();
  else if (compress != Codec::None) o += std::string(",compress=") + (compress_auto ? "auto" : codec_name(compress));
  return o;
}

std::string TopK::describe() const {
  char b[32];
  std::snprintf(b, sizeof b, "%g", percent);
  if (std::strtod(b, nullptr) != percent) std::snprintf(b, sizeof b, "%.17g", percent);  // reads back the same
  return std::string("topk:p=") + b + (int8 ? ",values=int8" : "");
}

}  // namespace dd::sync
