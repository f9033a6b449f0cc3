// Fashion-MNIST loader: two IDX files per split, pixels normalized to the training set's mean and std.
#include <sys/stat.h>

#include <array>

#include "core/common/error.h"
#include "core/data/dataset.h"
#include "core/data/idx_file.h"

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

}  // namespace

Dataset load_fashion_mnist(const std::string& dir, bool train) {
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
  d.x_shape = {1, 28, 28};
  d.num_classes = 10;
  d.y.resize(size_t(d.size));
  for (int64_t i = 0; i < d.size; ++i) {
    const uint8_t c = lbl.data[size_t(i)];
    if (c >= 10)
      throw dd::UsageError("corrupt or unreadable dataset file " + lbl_path + ": label " + std::to_string(c) +
                           " of sample " + std::to_string(i) + " is not in 0..9");
    d.y[size_t(i)] = c;
  }
  // A 256-entry table makes the conversion one load per pixel and identical to (x/255 - mean)/std in float.
  std::array<float, 256> lut;
  for (int v = 0; v < 256; ++v) lut[size_t(v)] = (float(v) / 255.0f - kFashionMean) / kFashionStd;
  d.xf.resize(img.data.size());
  const uint8_t* src = img.data.data();
  float* dst = d.xf.data();
  for (size_t i = 0, n = img.data.size(); i < n; ++i) dst[i] = lut[src[i]];
  return d;
}

}  // namespace dd::data
