// The training state of one rank on a CUDA device (--device cuda), behind an interface without CUDA headers:
// the model built for the GPU and its optimizer, batch upload, host copies for checkpoints/evaluation/--save-params,
// and the sync engine over the device arenas. Built only with CUDA (core/train/cuda); elsewhere the factory
// refuses with a usage error.
#pragma once
#include <memory>
#include <string>

#include "core/data/dataset.h"
#include "core/models/model.h"
#include "core/optim/optimizer.h"
#include "core/sync/engine/make_layer_sync.h"
#include "core/sync/engine/sync_engine.h"
#include "core/train/config.h"

namespace dd {
class Backend;
}

namespace dd::train {

class DeviceState {
 public:
  virtual ~DeviceState() = default;
  // Uploads the batch (through pinned memory) and runs the forward; the loss is the only value read back.
  virtual models::ForwardResult forward(const data::Batch& b, bool train) = 0;
  virtual void backward(nn::BackwardHook* hook) = 0;
  virtual void update_layer(int layer, float lr) = 0;
  // Training state to the host model and optimizer (parameters, buffers, optimizer state, step counters), and
  // back (the device runs the same optim::Optimizer, so SGD and AdamW checkpoints resume alike).
  virtual void to_host(models::Model& m, optim::Optimizer& o) = 0;
  virtual void params_to_host(models::Model& m) = 0;  // parameters and buffers only
  virtual void from_host(const models::Model& m, optim::Optimizer& o) = 0;
  // The sync engine over the device arenas: NCCL on device pointers for `nccl`, pinned staging otherwise.
  virtual std::unique_ptr<sync::SyncEngine> make_engine(const sync::EngineOptions& eo, models::Model& m,
                                                        Backend& b) = 0;
};

// dd::UsageError (exit 2) when this build has no CUDA or no device is visible (every model has a GPU path).
void check_cuda_usable();
std::unique_ptr<DeviceState> make_device_state(const TrainConfig& cfg, const models::Model& m,
                                               const optim::OptimConfig& oc);

}  // namespace dd::train
