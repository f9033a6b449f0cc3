// AutoCodecs: compress=auto's measurement and decision, and its checkpoint.
#include "core/sync/merge/auto_codec.h"

#include <sstream>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "core/sync/merge/codec.h"

namespace dd::sync {

void AutoCodecs::reset(const MergeSpec& m, int layers, int64_t step) {
  votes_ = m.compress_auto ? size_t(layers) : 0;
  codec_.assign(size_t(layers), m.compress);
  sum_.assign(size_t(layers), 0.0);
  n_ = 0;
  from_ = step;
  decided_ = !m.compress_auto;
}

bool AutoCodecs::add(int64_t step, const float* sums, int world) {
  if (decided_ || step <= from_) return false;
  for (size_t l = 0; l < sum_.size(); ++l) sum_[l] += double(sums[l]) / world;
  if (++n_ < kSteps) return false;
  std::vector<double> mean(sum_.size());
  for (size_t l = 0; l < mean.size(); ++l) mean[l] = sum_[l] / n_;
  codec_ = choose_codecs(mean);
  decided_ = true;
  return true;
}

std::string AutoCodecs::describe(const std::vector<LayerMeta>& layers) const {
  std::ostringstream o;
  o << "compress=auto after " << n_ << " steps (agreed mean cos between successive gradients):";
  for (size_t l = 0; l < codec_.size(); ++l)
    o << " " << layers[l].name << "=" << codec_name(codec_[l]) << "(" << sum_[l] / n_ << ")";
  return o.str();
}

std::string AutoCodecs::decisions(const std::vector<LayerMeta>& layers) const {
  nlohmann::json codec = nlohmann::json::object(), cos = nlohmann::json::object();
  for (size_t l = 0; l < codec_.size(); ++l) {
    codec[layers[l].name] = codec_name(codec_[l]);
    cos[layers[l].name] = n_ ? sum_[l] / n_ : 0.0;
  }
  return nlohmann::json{{"steps", n_}, {"codec", codec}, {"mean_cos", cos}}.dump();
}

void AutoCodecs::save(ByteWriter& w) const {
  std::vector<int8_t> codecs;
  for (Codec c : codec_) codecs.push_back(int8_t(c));
  w.put_vec(codecs);
  w.put<uint8_t>(decided_);
  w.put<int64_t>(from_);
  w.put<int32_t>(n_);
  w.put_vec(sum_);
}

void AutoCodecs::load(ByteReader& r) {
  const auto codecs = r.get_vec<int8_t>();
  if (codecs.size() != codec_.size()) throw UsageError("checkpoint: engine state is for another model");
  for (size_t l = 0; l < codecs.size(); ++l) {
    if (codecs[l] < 0 || codecs[l] > int8_t(Codec::TopK)) throw UsageError("checkpoint: engine state holds an unknown codec");
    codec_[l] = Codec(codecs[l]);
  }
  decided_ = r.get<uint8_t>() != 0;
  from_ = r.get<int64_t>();
  n_ = r.get<int32_t>();
  auto sums = r.get_vec<double>();
  if (sums.size() != sum_.size()) throw UsageError("checkpoint: engine state is for another model");
  sum_ = sums;
}

}  // namespace dd::sync
