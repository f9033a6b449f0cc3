// The CUDA entry set of the kernel table (core/ops/device.h): every kernel forwards to dd::cuops on stream().
#pragma once
#include "core/ops/device.h"

namespace dd::cuops {

// The process-wide CUDA kernel table (the current device, stream()). Copies to and from the host synchronize
// stream(); allocation is cudaMalloc (zero-filled), so it belongs to setup and to the first step of a shape.
ops::Device& device();

}  // namespace dd::cuops
