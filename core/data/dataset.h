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

// What a model reads, as far as its data is concerned (models::Model's input_shape, takes_tokens, num_classes and
// vocab; the trainer fills it: core/data does not depend on the models).
struct InputSpec {
  std::string model;              // the --model spec, for messages
  std::vector<int64_t> x_shape;   // per sample: {C,H,W} for images, {T} for tokens
  bool tokens = false;
  int64_t classes = 0;            // image models: outputs (labels lie below); token models: the vocabulary
};

struct Dataset {
  std::string name;               // "fashion-mnist", "text", "synthetic"
  int64_t size = 0;               // number of samples
  std::vector<int64_t> x_shape;   // per-sample input shape: {C,H,W} for images, {T} for tokens
  bool tokens = false;            // true: inputs are int32 token ids (xi), targets have length T per sample
  int64_t target_len = 1;         // 1 for classification, T for language modelling
  int num_classes = 10;           // labels / token ids lie in [0, num_classes): 10 Fashion-MNIST, 256 bytes
  // Images stored once per sample and repeated `replicas` times along the channel axis by gather() (Fashion-MNIST
  // for a 3-channel model: one resized plane in memory, three in the batch). 1 otherwise.
  int64_t replicas = 1;
  std::vector<float> xf;          // images, normalized ((x/255 - mean) / std), size*sample_numel()/replicas
  std::vector<int32_t> xi;        // tokens, size*T
  std::vector<int32_t> y;         // labels (size) or next-byte targets (size*T)
  int64_t sample_numel() const;   // prod(x_shape): the numbers per sample of a batch
};

// Fashion-MNIST from IDX files (gzip or plain). Missing/truncated/corrupt files throw dd::UsageError naming the file.
// `x_shape` is what the model reads: {1,28,28} (as stored), or {3,H,W}: each image resized to H x W
// (resize_bilinear, on x/255 before normalizing) and its one plane repeated as three channels.
Dataset load_fashion_mnist(const std::string& dir = kFashionMnistDir, bool train = true,
                           const std::vector<int64_t>& x_shape = {1, 28, 28});

// Byte-level corpus: the plain files of `dir` concatenated in sorted name order; the last 10% is the test split.
// Samples are non-overlapping windows of T+1 bytes: input bytes [0,T), targets bytes [1,T+1).
// `dir` may also name a single file.
Dataset load_text(const std::string& dir = kTextDir, bool train = true, int64_t T = 128);

// Deterministic random inputs of `x_shape` (unit-variance floats, or token ids below num_classes when `tokens`)
// and random labels (one per sample, or T per sample for tokens), from `seed`.
Dataset make_synthetic(const std::vector<int64_t>& x_shape, bool tokens, int num_classes, int64_t size,
                       uint64_t seed);

// Refuses, with one dd::UsageError line naming both, a --data NAME that cannot feed the model `m` (an unknown
// name, images for a token model or tokens for an image model, an image shape Fashion-MNIST cannot be made into,
// text for a vocabulary below 256). Reads nothing: the trainer calls it before any work (docs/data.md, "Which
// data fits which model").
void check_fits(const std::string& name, const InputSpec& m);

// Dispatch by the CLI's --data name: check_fits, then the loader for the model's shape. `dir` empty means the
// default; synthetic data uses `seed` (train and test get different streams) and has synthetic_size() samples.
Dataset open_dataset(const std::string& name, const std::string& dir, bool train, const InputSpec& m,
                     uint64_t seed);

// Samples of the synthetic set for this shape: 10,000 (train) / 2,000 (test), fewer where a sample is so large
// that the split would exceed 512 MiB (train) / 128 MiB (test); at least 1.
int64_t synthetic_size(const InputSpec& m, bool train);

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
