// BatchUpload: the batch in the model's memory (see batch_upload.h).
#include "core/train/batch_upload.h"

namespace dd::train {

namespace {
template <class T>
const T* put(ops::Device& d, ops::DeviceArray<T>& dst, const std::vector<T>& v) {
  if (v.empty()) return nullptr;
  dst.ensure(v.size());
  d.copy_from_host(dst.data(), v.data(), sizeof(T) * v.size());
  return dst.data();
}
}  // namespace

models::Input BatchUpload::upload(const data::Batch& b) {
  models::Input in;
  in.n = b.n;
  in.x = put(dev_, x_, b.xf);
  in.tokens = put(dev_, tokens_, b.xi);
  in.y = put(dev_, y_, b.y);
  return in;
}

}  // namespace dd::train
