// Internal to dd_ops_cuda: block-wide reductions (warp shuffles, then one shared-memory hop) that return the
// result to EVERY thread. Block sizes must be multiples of 32 (all launches here use 128 or 256 threads).
#pragma once
#include <cuda_runtime.h>

namespace dd::cuops::detail {

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <typename T>
__device__ __forceinline__ T warp_max(T v) {
  for (int o = 16; o > 0; o >>= 1) {
    const T u = __shfl_xor_sync(0xffffffffu, v, o);
    v = u > v ? u : v;
  }
  return v;
}

template <typename T>
__device__ T block_sum(T v) {
  __shared__ T sh[32];
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  __syncthreads();  // a previous call's readers of sh[0] are done before it is overwritten
  if (lane == 0) sh[wid] = v;
  __syncthreads();
  if (wid == 0) {
    T r = lane < nw ? sh[lane] : T(0);
    r = warp_sum(r);
    if (lane == 0) sh[0] = r;
  }
  __syncthreads();
  return sh[0];
}

template <typename T>
__device__ T block_max(T v) {
  __shared__ T sh[32];
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) sh[wid] = v;
  __syncthreads();
  if (wid == 0) {
    T r = lane < nw ? sh[lane] : sh[0];  // sh[0] is a real value, so it is a neutral filler for max
    r = warp_max(r);
    if (lane == 0) sh[0] = r;
  }
  __syncthreads();
  return sh[0];
}

}  // namespace dd::cuops::detail
