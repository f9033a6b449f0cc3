// Fashion-MNIST loader: two IDX files per split, pixels normalized to the training set's mean and std.
#include <sys/stat.h>

#include <algorithm>
#include <array>

#include "base/error.h"
#include "core/data/dataset.h"
#include "core/data/idx_file.h"
#include "core/data/resize.h"

namespace dd::data {
namespace {

// Debian ships the .gz files; a gunzipped copy (the same name without .gz) is accepted as well.
std::string pick_file(const std::string& dir, const std::string& stem) {
  const std::string gz = dir + "/" + stem + ".gz";
  struct stat st {};
  if (stat(gz.c_str(), &st) == 0) return gz;
  const std::string plain = dir + "/" + stem;
  if (stat(plain.c_str(), &st) == 0) return plain;
  throw dd::UsageError("missing dataset file " + gz +
                       " (install Debian package dataset-fashion-mnist, or point --data-dir at a copy)");
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t;
  for (int64_t d : s) t += (t.empty() ? "" : "x") + std::to_string(d);
  return t.empty() ? "{}" : t;
}

// The resized training split of one rank must stay below this (it is held in memory as floats).
constexpr double kMaxResizedBytes = 8.0 * (1ull << 30);

}  // namespace

Dataset load_fashion_mnist(const std::string& dir, bool train, const std::vector<int64_t>& x_shape) {
  const bool as_stored = x_shape == std::vector<int64_t>{1, 28, 28};
  if (!as_stored && !(x_shape.size() == 3 && x_shape[0] == 3 && x_shape[1] >= 1 && x_shape[2] >= 1))
    throw dd::UsageError("fashion-mnist comes as 1x28x28, or resized to 3xHxW; not as " + shape_text(x_shape));
  const std::string prefix = train ? "train" : "t10k";
  const std::string img_path = pick_file(dir, prefix + "-images-idx3-ubyte");
  const std::string lbl_path = pick_file(dir, prefix + "-labels-idx1-ubyte");
  IdxFile img = read_idx_u8(img_path, 3);
  IdxFile lbl = read_idx_u8(lbl_path, 1);
  if (img.dims[1] != 28 || img.dims[2] != 28)
    throw dd::UsageError("corrupt or unreadable dataset file " + img_path + ": images are " +
                         std::to_string(img.dims[1]) + "x" + std::to_string(img.dims[2]) + ", expected 28x28");
  if (lbl.dims[0] != img.dims[0])
    throw dd::UsageError("corrupt or unreadable dataset file " + lbl_path + ": " + std::to_string(lbl.dims[0]) +
                         " labels for " + std::to_string(img.dims[0]) + " images in " + img_path);

  Dataset d;
  d.name = "fashion-mnist";
  d.size = img.dims[0];
  d.x_shape = x_shape;
  d.num_classes = 10;
  d.y.resize(size_t(d.size));
  for (int64_t i = 0; i < d.size; ++i) {
    const uint8_t c = lbl.data[size_t(i)];
    if (c >= 10)
      throw dd::UsageError("corrupt or unreadable dataset file " + lbl_path + ": label " + std::to_string(c) +
                           " of sample " + std::to_string(i) + " is not in 0..9");
    d.y[size_t(i)] = c;
  }
  if (as_stored) {
    // A 256-entry table makes the conversion one load per pixel and identical to (x/255 - mean)/std in float.
    std::array<float, 256> lut;
    for (int v = 0; v < 256; ++v) lut[size_t(v)] = (float(v) / 255.0f - kFashionMean) / kFashionStd;
    d.xf.resize(img.data.size());
    const uint8_t* src = img.data.data();
    float* dst = d.xf.data();
    for (size_t i = 0, n = img.data.size(); i < n; ++i) dst[i] = lut[src[i]];
    return d;
  }
  // 3 x H x W (docs/data.md, "Resizing"): x/255, resized bilinearly once here, then normalized; one plane per
  // image is kept and gather() repeats it as the three channels.
  const int64_t H = x_shape[1], W = x_shape[2];
  const double bytes = double(d.size) * double(H) * double(W) * sizeof(float);
  if (bytes > kMaxResizedBytes)
    throw dd::UsageError("fashion-mnist resized to 3x" + std::to_string(H) + "x" + std::to_string(W) + " would hold " +
                         std::to_string(int64_t(bytes / 1e6)) + " MB per rank in memory (at most 8 GiB): use a " +
                         "smaller image or --data synthetic");
  d.replicas = 3;
  const int64_t n_plane = 28 * 28;
  d.xf.resize(size_t(d.size * H * W));
  // Resized in chunks so that the x/255 copy of the source stays small.
  constexpr int64_t kChunk = 1024;
  std::vector<float> unit(size_t(std::min<int64_t>(kChunk, d.size) * n_plane));
  for (int64_t first = 0; first < d.size; first += kChunk) {
    const int64_t n = std::min(kChunk, d.size - first);
    const uint8_t* src = img.data.data() + first * n_plane;
    for (int64_t i = 0; i < n * n_plane; ++i) unit[size_t(i)] = float(src[i]) / 255.0f;
    float* dst = d.xf.data() + first * H * W;
    if (H == 28 && W == 28)
      std::copy_n(unit.data(), n * n_plane, dst);
    else
      resize_bilinear(unit.data(), n, 28, 28, dst, H, W);
    for (int64_t i = 0; i < n * H * W; ++i) dst[i] = (dst[i] - kFashionMean) / kFashionStd;
  }
  return d;
}

}  // namespace dd::data
