// --device cuda in a build without CUDA: the factory refuses with one clear line (the CUDA build replaces this
// file's definitions with core/train/cuda/device_state.cpp).
#include "core/train/device_state.h"

#include "base/error.h"

namespace dd::train {

#ifndef DREAMDDP_HAVE_CUDA
void check_cuda_usable() {
  throw UsageError("--device cuda: this build has no CUDA support (rebuild with the CUDA toolkit, nvcc, cuDNN and "
                   "NCCL installed), use --device cpu");
}

std::unique_ptr<DeviceState> make_device_state(const TrainConfig&, const models::Model&, const optim::OptimConfig&) {
  check_cuda_usable();
  return nullptr;
}
#endif

}  // namespace dd::train
