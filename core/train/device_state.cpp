// The host as a device (device_state.h), and --device cuda in a build without CUDA: the factory refuses with one
// clear line (the CUDA build defines make_cuda_state in core/train/cuda/device_state.cpp).
#include "core/train/device_state.h"

#include "base/error.h"
#include "core/ops/ops.h"
#include "core/train/trainer_parts.h"

namespace dd::train {

namespace {
class HostState final : public DeviceState {
 public:
  ops::Device& kernels() override { return ops::host_device(); }
  models::Input upload(const data::Batch& b) override { return make_input(b); }
  nn::BackwardHook* hook(nn::BackwardHook* engine) override { return engine; }
  std::unique_ptr<sync::DataPath> data_path(const sync::Arenas&, int, Backend&) override {
    return std::make_unique<sync::HostDataPath>();
  }
};
}  // namespace

std::unique_ptr<DeviceState> make_host_state() { return std::make_unique<HostState>(); }

#ifdef DREAMDDP_HAVE_CUDA
std::unique_ptr<DeviceState> make_cuda_state(const TrainConfig& cfg);  // core/train/cuda/device_state.cpp
#else
void check_cuda_usable() {
  throw UsageError("--device cuda: this build has no CUDA support (rebuild with the CUDA toolkit, nvcc, cuDNN and "
                   "NCCL installed), use --device cpu");
}
static std::unique_ptr<DeviceState> make_cuda_state(const TrainConfig&) {
  check_cuda_usable();
  return nullptr;
}
#endif

void check_device_fits(const TrainConfig& c) {
  if (c.backend == BackendKind::Nccl && c.device != Device::Cuda && c.world > 1)
    throw UsageError("--backend nccl reduces GPU memory: it needs --device cuda (or use --backend gloo or mpi)");
  // bf16 compute is the CPU kernels' (core/ops); the CUDA kernels compute in fp32.
  if (c.precision == Precision::bf16 && c.device == Device::Cuda)
    throw UsageError("--precision bf16: the cuda device computes in fp32 here; use --device cpu or --precision fp32");
  if (c.precision == Precision::bf16)
    if (const std::string why = ops::bf16_refusal(); !why.empty()) throw UsageError(why);
  if (c.device == Device::Cuda) check_cuda_usable();  // every model, policy and option runs there
}

std::unique_ptr<DeviceState> make_device_state(const TrainConfig& cfg) {
  return cfg.device == Device::Cuda ? make_cuda_state(cfg) : make_host_state();
}

}  // namespace dd::train
