// In-memory datasets (images, byte tokens, synthetic), their loaders, and gathering samples into a batch.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dd::data {

// Where Debian's packages put the data (dataset-fashion-mnist, fortunes); overridable per call (--data-dir).
inline const char* const kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
inline const char* const kTextDir = "/usr/share/games/fortunes";

// Per-pixel normalization of Fashion-MNIST (training-set mean and std of x/255).
inline constexpr float kFashionMean = 0.2860f;
inline constexpr float kFashionStd = 0.3530f;

struct Dataset {
  std::string name;               // "fashion-mnist", "text", "synthetic"
  int64_t size = 0;               // number of samples
  std::vector<int64_t> x_shape;   // per-sample input shape: {1,28,28} for images, {T} for tokens
  bool tokens = false;            // true: inputs are int32 token ids (xi), targets have length T per sample
  int64_t target_len = 1;         // 1 for classification, T for language modelling
  int num_classes = 10;           // 10, or 256 for bytes
  std::vector<float> xf;          // images, normalized ((x/255 - mean) / std), size*prod(x_shape)
  std::vector<int32_t> xi;        // tokens, size*T
  std::vector<int32_t> y;         // labels (size) or next-byte targets (size*T)
  int64_t sample_numel() const;   // prod(x_shape)
};

// Fashion-MNIST from IDX files (gzip or plain). Missing/truncated/corrupt files throw dd::UsageError naming the file.
Dataset load_fashion_mnist(const std::string& dir = kFashionMnistDir, bool train = true);

// Byte-level corpus: the plain files of `dir` concatenated in sorted name order; the last 10% is the test split.
// Samples are non-overlapping windows of T+1 bytes: input bytes [0,T), targets bytes [1,T+1).
// `dir` may also name a single file.
Dataset load_text(const std::string& dir = kTextDir, bool train = true, int64_t T = 128);

// Deterministic random inputs of `x_shape` (unit-variance floats, or token ids below num_classes when `tokens`)
// and random labels (one per sample, or T per sample for tokens), from `seed`.
Dataset make_synthetic(const std::vector<int64_t>& x_shape, bool tokens, int num_classes, int64_t size,
                       uint64_t seed);

// Dispatch by the CLI's --data name. `tokens` says what the model consumes (gpt-mini: true) and the
// mismatching dataset is refused with a UsageError; `T` is the context length for token data; `dir` empty means
// the default; synthetic data uses `seed` (train and test get different streams).
Dataset open_dataset(const std::string& name, const std::string& dir, bool train, bool tokens, int64_t T,
                     uint64_t seed);

struct Batch {
  int64_t n = 0;
  std::vector<float> xf;          // n*sample_numel when the dataset has float inputs
  std::vector<int32_t> xi;        // n*T when the dataset has token inputs
  std::vector<int32_t> y;         // n*target_len
};

// Copies samples idx[0..n) into `out` (buffers are reused; only the matching input vector is filled).
void gather(const Dataset& d, const int64_t* idx, int64_t n, Batch* out);

// Copies the contiguous samples [first, first+n) (evaluation walks the test set in order).
void gather_range(const Dataset& d, int64_t first, int64_t n, Batch* out);

}  // namespace dd::data
