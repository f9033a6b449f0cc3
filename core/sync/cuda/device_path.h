// DataPath for arenas in CUDA device memory (docs/design.md "Backends"): NCCL straight on device pointers, or the
// CPU-GPU hybrid where each bucket is staged through pinned host memory for a Gloo/MPI collective.
#pragma once
#include <cuda_runtime_api.h>

#include <functional>
#include <memory>

#include "core/sync/types/data_path.h"

namespace dd::sync {

enum class DeviceCollectives {
  Nccl,    // the backend takes device pointers (its own stream)
  Staged,  // the backend takes host pointers: D2H to a pinned mirror, host collective, H2D back
};

// `a`: the device arenas; `compute`: the stream the model's kernels and updates run on; `ready_event(l)`: the
// event recorded on `compute` right before the backward hook of layer l (GpuModel's hook adapter records it;
// GpuModel::layer_ready_event).
//
// Every collective passes through one FIFO staging thread, so the backend sees them in submission order. A
// hook-launched bucket never stalls the compute thread: Staged queues its D2H copy on a copy stream behind the
// layer's ready event, the staging thread waits for that copy, runs the host collective on the backend's
// communication thread, queues the H2D copy on a second copy stream and records an event; Work::wait() then
// makes `compute` wait on that event (the host only waits for the host collective). Nccl: the staging thread
// waits for the ready event and enqueues the NCCL collective (the backend keeps its stream private, so the
// stream-side wait is a host-side event wait on that thread); Work::wait() waits for the NCCL collective.
std::unique_ptr<DataPath> make_device_path(DeviceCollectives kind, const Arenas& a, cudaStream_t compute,
                                           std::function<cudaEvent_t(int)> ready_event);

}  // namespace dd::sync
