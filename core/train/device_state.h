// Where a rank computes (--device): what a device adds to the training state beyond its kernel table. The model and
// the optimizer are built on kernels() and hold the one training state there; the host holds copies only where
// bytes must cross (checkpoint files, --save-params, HDF5 rows, the state a shrink agrees on). The host is one
// device among others (HostState below); CUDA's is in core/train/cuda (built with CUDA only; elsewhere the
// factory refuses with a usage error). The trainer never asks which device it is on.
#pragma once
#include <memory>

#include "core/data/dataset.h"
#include "core/models/model.h"
#include "core/nn/layer.h"
#include "core/ops/device.h"
#include "core/sync/types/data_path.h"
#include "core/train/config.h"

namespace dd {
class Backend;
}

namespace dd::train {

class DeviceState {
 public:
  virtual ~DeviceState() = default;
  // The kernel table the model and optimizer are built on.
  virtual ops::Device& kernels() = 0;
  // This step's batch in the device's memory (host: the batch's own vectors). Valid until the next upload.
  virtual models::Input upload(const data::Batch& b) = 0;
  // The hook the model's backward calls: the engine's (may be null), after what the device needs first (CUDA:
  // the layer's ready event on the compute stream).
  virtual nn::BackwardHook* hook(nn::BackwardHook* engine) = 0;
  // How the sync engine's collectives run on arenas in this device's memory.
  virtual std::unique_ptr<sync::DataPath> data_path(const sync::Arenas& a, int layers, Backend& b) = 0;
};

// --device cpu: the host kernels, the batch as it is, the engine's hook, collectives straight on host memory.
std::unique_ptr<DeviceState> make_host_state();
// The configured device; dd::UsageError (exit 2) for cuda when this build has no CUDA or no device is visible.
std::unique_ptr<DeviceState> make_device_state(const TrainConfig& cfg);
void check_cuda_usable();
// What the configured device cannot run, refused before any work (dd::UsageError, one line): --device cuda without
// a usable CUDA, --backend nccl without --device cuda.
void check_device_fits(const TrainConfig& cfg);

}  // namespace dd::train
