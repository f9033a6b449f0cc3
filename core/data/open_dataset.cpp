// --data NAME dispatch: picks the loader, its default folder, and refuses data the model cannot consume.
#include "core/common/error.h"
#include "core/data/dataset.h"
#include "core/data/shuffle.h"

namespace dd::data {

// Big enough that a throughput run does not repeat a batch often, small enough for 4 ranks on a laptop.
constexpr int64_t kSyntheticTrainSize = 10000;
constexpr int64_t kSyntheticTestSize = 2000;

Dataset open_dataset(const std::string& name, const std::string& dir, bool train, bool tokens, int64_t T,
                     uint64_t seed) {
  if (name == "fashion-mnist") {
    if (tokens)
      throw dd::UsageError("--data fashion-mnist holds images but the model reads tokens (use --data text or "
                           "synthetic)");
    return load_fashion_mnist(dir.empty() ? kFashionMnistDir : dir, train);
  }
  if (name == "text") {
    if (!tokens)
      throw dd::UsageError("--data text holds byte tokens but the model reads images (use --data fashion-mnist "
                           "or synthetic)");
    return load_text(dir.empty() ? kTextDir : dir, train, T);
  }
  if (name == "synthetic") {
    const int64_t size = train ? kSyntheticTrainSize : kSyntheticTestSize;
    const uint64_t s = derive_seed(seed, train ? 1 : 2);
    if (tokens) return make_synthetic({T}, true, 256, size, s);
    return make_synthetic({1, 28, 28}, false, 10, size, s);
  }
  throw dd::UsageError("unknown --data '" + name + "' (expected fashion-mnist, text or synthetic)");
}

}  // namespace dd::data
