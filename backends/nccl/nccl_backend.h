// NCCL backend: factory, plus the few device-memory helpers the allreduce bench needs (no CUDA headers here).
#pragma once
#include <cstddef>
#include <memory>

#include "backends/backend.h"

namespace dd {

// NCCL for the data path (device buffers, its own stream), a Gloo backend over the same rendezvous for the
// control path (unique-id bootstrap, allgather, barrier, split). The CUDA device is
// discover_rank().local_rank % device count. Throws dd::UsageError when no GPU is visible.
std::unique_ptr<Backend> make_nccl_backend(const BackendOptions& opts);

// Device memory for callers that do not include CUDA headers (bench, tests). Throw std::runtime_error.
int cuda_device_count();  // 0 when CUDA is unusable (no driver, no device)
float* cuda_alloc_floats(size_t n);
void cuda_free(float* p);
void cuda_copy_to_device(float* dst, const float* src, size_t n);
void cuda_copy_to_host(float* dst, const float* src, size_t n);

}  // namespace dd
