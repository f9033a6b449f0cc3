// A batch as a model on some device sees it (models::Input): copies of its vectors in that device's memory, grown
// only (the step's own batch goes through DeviceState::upload, which on the host copies nothing). One BatchUpload
// per batch that must stay valid: an upload overwrites the previous one's memory.
#pragma once
#include "core/data/dataset.h"
#include "core/models/model.h"
#include "core/ops/device.h"

namespace dd::train {

class BatchUpload {
 public:
  explicit BatchUpload(ops::Device& d) : dev_(d), x_(d), tokens_(d), y_(d) {}
  // Valid until the next upload or until `b` changes (host: the input points into b).
  models::Input upload(const data::Batch& b);

 private:
  ops::Device& dev_;
  ops::DeviceArray<float> x_;
  ops::DeviceArray<int32_t> tokens_, y_;
};

}  // namespace dd::train
