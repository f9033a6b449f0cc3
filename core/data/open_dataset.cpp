// --data NAME dispatch: which data fits which model (docs/data.md), the loader for the model's shape, and the
// default folders.
#include <algorithm>
#include <cstdint>

#include "base/error.h"
#include "core/data/dataset.h"
#include "core/data/shuffle.h"

namespace dd::data {
namespace {

// Big enough that a throughput run does not repeat a batch often, small enough for 4 ranks on a laptop; a split
// of large samples is cut to the byte budget.
constexpr int64_t kSyntheticTrainSize = 10000;
constexpr int64_t kSyntheticTestSize = 2000;
constexpr int64_t kSyntheticTrainBytes = int64_t(512) << 20;
constexpr int64_t kSyntheticTestBytes = int64_t(128) << 20;
// Largest number of inputs per sample any dataset here is asked for (a bound against overflow, not a limit any
// reference model comes near: 3x4096x4096 or a context of 50M tokens).
constexpr int64_t kMaxSampleNumel = int64_t(1) << 26;

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t;
  for (int64_t d : s) t += (t.empty() ? "" : "x") + std::to_string(d);
  return t.empty() ? "{}" : t;
}

std::string what_model_reads(const InputSpec& m) {
  if (m.tokens) return "tokens (context " + std::to_string(m.x_shape[0]) + ", vocabulary " +
                       std::to_string(m.classes) + ")";
  return shape_text(m.x_shape) + " images with " + std::to_string(m.classes) + " classes";
}

[[noreturn]] void refuse(const std::string& name, const InputSpec& m, const std::string& why) {
  throw dd::UsageError("--data " + name + " does not fit --model " + m.model + ", which reads " +
                       what_model_reads(m) + ": " + why);
}

void check_spec(const InputSpec& m) {
  bool ok = !m.x_shape.empty() && m.classes >= 1 && m.classes <= INT32_MAX && (!m.tokens || m.x_shape.size() == 1);
  int64_t numel = 1;
  for (int64_t d : m.x_shape) {
    ok = ok && d >= 1 && d <= kMaxSampleNumel;
    if (ok) numel *= d;
    ok = ok && numel <= kMaxSampleNumel;
  }
  if (!ok)
    throw dd::UsageError("--model " + m.model + " reads samples of shape " + shape_text(m.x_shape) + " with " +
                         std::to_string(m.classes) + " classes, which no dataset can provide");
}

}  // namespace

void check_fits(const std::string& name, const InputSpec& m) {
  if (name != "fashion-mnist" && name != "text" && name != "synthetic")
    throw dd::UsageError("unknown --data '" + name + "' (expected fashion-mnist, text or synthetic)");
  check_spec(m);
  if (name == "fashion-mnist") {
    if (m.tokens) refuse(name, m, "fashion-mnist holds images (use --data text or synthetic)");
    const auto& s = m.x_shape;
    if (s.size() != 3 || (s[0] != 1 && s[0] != 3))
      refuse(name, m, "fashion-mnist comes as 1x28x28 images, or resized to 3xHxW (use --data synthetic)");
    if (s[0] == 1 && (s[1] != 28 || s[2] != 28))
      refuse(name, m, "one-channel models get fashion-mnist as stored, 1x28x28; it is resized only for "
                      "3-channel models (use --data synthetic)");
    if (m.classes < 10) refuse(name, m, "fashion-mnist has 10 classes (use --data synthetic)");
  } else if (name == "text") {
    if (!m.tokens) refuse(name, m, "text holds byte tokens (use --data fashion-mnist or synthetic)");
    if (m.classes < 256) refuse(name, m, "text holds byte tokens 0..255, so it needs a vocabulary of at least 256 "
                                         "(use --data synthetic)");
  }
  // synthetic: any shape the model reads.
}

int64_t synthetic_size(const InputSpec& m, bool train) {
  int64_t numel = 1;
  for (int64_t d : m.x_shape) numel *= d;
  const int64_t bytes = 4 * (numel + (m.tokens ? numel : 1));  // float or int32 inputs, int32 targets
  const int64_t budget = train ? kSyntheticTrainBytes : kSyntheticTestBytes;
  return std::max<int64_t>(1, std::min(train ? kSyntheticTrainSize : kSyntheticTestSize, budget / bytes));
}

Dataset open_dataset(const std::string& name, const std::string& dir, bool train, const InputSpec& m,
                     uint64_t seed) {
  check_fits(name, m);
  if (name == "fashion-mnist") return load_fashion_mnist(dir.empty() ? kFashionMnistDir : dir, train, m.x_shape);
  if (name == "text") return load_text(dir.empty() ? kTextDir : dir, train, m.x_shape[0]);
  const uint64_t s = derive_seed(seed, train ? 1 : 2);
  return make_synthetic(m.x_shape, m.tokens, int(m.classes), synthetic_size(m, train), s);
}

}  // namespace dd::data
