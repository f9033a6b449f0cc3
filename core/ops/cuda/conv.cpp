// Conv2d through cuDNN's forward / backward-data / backward-filter calls. Per input shape (N,H,W) the
// descriptors and algorithms are chosen once (heuristics, FP32 FMA math only: no TF32, so results match the
// CPU) and kept; one workspace per object, grown to the largest need.
#include <cudnn.h>

#include <map>
#include <string>
#include <tuple>

#include "base/error.h"
#include "core/ops/cuda/context.h"

#define DD_CUDNN_CHECK(expr)                                                                               \
  do {                                                                                                     \
    const cudnnStatus_t dd_cudnn_st_ = (expr);                                                             \
    if (dd_cudnn_st_ != CUDNN_STATUS_SUCCESS)                                                              \
      throw std::runtime_error(std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": cuDNN error " + \
                               cudnnGetErrorString(dd_cudnn_st_) + " in " #expr);                          \
  } while (0)

namespace dd::cuops {

namespace {
struct CudnnHandle {
  cudnnHandle_t h = nullptr;
  ~CudnnHandle() {
    if (h) cudnnDestroy(h);
  }
};

// This thread's cuDNN handle, pointed at the compute stream.
cudnnHandle_t cudnn() {
  thread_local CudnnHandle th;
  if (!th.h) DD_CUDNN_CHECK(cudnnCreate(&th.h));
  DD_CUDNN_CHECK(cudnnSetStream(th.h, stream()));
  return th.h;
}

// Largest workspace an algorithm may ask for; bigger ones are skipped in favour of the next candidate.
constexpr size_t kMaxWorkspace = size_t(1) << 30;

// Among heuristic candidates (best first): succeeded, workspace in bounds, not a tensor-core variant,
// deterministic preferred. The descriptor's math type stays CUDNN_FMA_MATH when the algorithm runs (as
// PyTorch does with allow_tf32 off), so whatever is picked computes in plain FP32.
template <typename Perf>
const Perf& pick(const Perf* perf, int n, const char* what) {
  const Perf* any = nullptr;
  const Perf* first_ok = nullptr;
  for (int i = 0; i < n; ++i) {
    const Perf& p = perf[i];
    if (p.status != CUDNN_STATUS_SUCCESS || p.memory > kMaxWorkspace) continue;
    if (!first_ok) first_ok = &p;
    if (p.mathType == CUDNN_TENSOR_OP_MATH || p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) continue;
    if (p.determinism == CUDNN_DETERMINISTIC) return p;
    if (!any) any = &p;
  }
  if (any) return *any;
  if (first_ok) return *first_ok;
  throw std::runtime_error(std::string("cuDNN offers no usable algorithm for the convolution ") + what);
}
}  // namespace

struct Conv2d::Impl {
  struct Plan {
    cudnnTensorDescriptor_t x = nullptr, y = nullptr;
    cudnnConvolutionFwdAlgo_t fwd{};
    cudnnConvolutionBwdDataAlgo_t bwd_data{};
    cudnnConvolutionBwdFilterAlgo_t bwd_filter{};
  };
  cudnnFilterDescriptor_t wdesc = nullptr;
  cudnnConvolutionDescriptor_t cdesc = nullptr;
  std::map<std::tuple<int64_t, int64_t, int64_t>, Plan> plans;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;

  ~Impl() {
    // Destructors must not throw; failures here only leak.
    for (auto& kv : plans) {
      cudnnDestroyTensorDescriptor(kv.second.x);
      cudnnDestroyTensorDescriptor(kv.second.y);
    }
    if (wdesc) cudnnDestroyFilterDescriptor(wdesc);
    if (cdesc) cudnnDestroyConvolutionDescriptor(cdesc);
    if (workspace) cudaFree(workspace);
  }

  // Descriptors and algorithms for one input shape, created on first use.
  Plan& plan(int64_t C, int64_t OC, int64_t N, int64_t H, int64_t W, int64_t Ho, int64_t Wo);

  void reserve(size_t bytes) {
    if (bytes <= workspace_bytes) return;
    if (workspace) DD_CUDA_CHECK(cudaFree(workspace));  // synchronizes: only when a new shape needs more
    workspace = nullptr;
    DD_CUDA_CHECK(cudaMalloc(&workspace, bytes));
    workspace_bytes = bytes;
  }
};

Conv2d::Conv2d(int64_t C, int64_t OC, int64_t k, int64_t stride, int64_t pad)
    : C_(C), OC_(OC), k_(k), stride_(stride), pad_(pad), impl_(std::make_unique<Impl>()) {
  if (C <= 0 || OC <= 0 || k <= 0 || stride <= 0 || pad < 0)
    throw UsageError("Conv2d: bad shape C=" + std::to_string(C) + " OC=" + std::to_string(OC) +
                     " k=" + std::to_string(k) + " stride=" + std::to_string(stride) + " pad=" + std::to_string(pad));
  using detail::to_int;
  DD_CUDNN_CHECK(cudnnCreateFilterDescriptor(&impl_->wdesc));
  DD_CUDNN_CHECK(cudnnSetFilter4dDescriptor(impl_->wdesc, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, to_int(OC, "OC"),
                                            to_int(C, "C"), to_int(k, "k"), to_int(k, "k")));
  DD_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&impl_->cdesc));
  // Cross-correlation (no kernel flip) is what PyTorch and oneDNN compute.
  DD_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(impl_->cdesc, to_int(pad, "pad"), to_int(pad, "pad"),
                                                 to_int(stride, "stride"), to_int(stride, "stride"), 1, 1,
                                                 CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  DD_CUDNN_CHECK(cudnnSetConvolutionMathType(impl_->cdesc, CUDNN_FMA_MATH));
}

Conv2d::~Conv2d() = default;

// Descriptors and algorithms for one input shape, created on first use.
Conv2d::Impl::Plan& Conv2d::Impl::plan(int64_t C, int64_t OC, int64_t N, int64_t H, int64_t W, int64_t Ho, int64_t Wo) {
  const auto key = std::make_tuple(N, H, W);
  auto it = plans.find(key);
  if (it != plans.end()) return it->second;
  using detail::to_int;
  Plan p;
  try {
    DD_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p.x));
    DD_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p.y));
    DD_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p.x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, to_int(N, "N"), to_int(C, "C"),
                                              to_int(H, "H"), to_int(W, "W")));
    int on = 0, oc = 0, oh = 0, ow = 0;
    DD_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(cdesc, p.x, wdesc, &on, &oc, &oh, &ow));
    if (on != N || oc != OC || oh != Ho || ow != Wo)
      throw std::runtime_error("Conv2d: cuDNN output shape " + std::to_string(on) + "x" + std::to_string(oc) + "x" +
                               std::to_string(oh) + "x" + std::to_string(ow) + " differs from the expected " +
                               std::to_string(N) + "x" + std::to_string(OC) + "x" + std::to_string(Ho) + "x" +
                               std::to_string(Wo));
    DD_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, on, oc, oh, ow));

    cudnnHandle_t hd = cudnn();
    size_t need = 0, b = 0;
    {
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      int got = 0;
      DD_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(hd, p.x, wdesc, cdesc, p.y,
                                                            CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf));
      p.fwd = pick(perf, got, "forward").algo;
      DD_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(hd, p.x, wdesc, cdesc, p.y, p.fwd, &b));
      need = b > need ? b : need;
    }
    {
      cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      int got = 0;
      DD_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(hd, wdesc, p.y, cdesc, p.x,
                                                                 CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, perf));
      p.bwd_data = pick(perf, got, "backward-data").algo;
      DD_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(hd, wdesc, p.y, cdesc, p.x, p.bwd_data, &b));
      need = b > need ? b : need;
    }
    {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
      int got = 0;
      DD_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
          hd, p.x, p.y, cdesc, wdesc, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, perf));
      p.bwd_filter = pick(perf, got, "backward-filter").algo;
      DD_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(hd, p.x, p.y, cdesc, wdesc, p.bwd_filter, &b));
      need = b > need ? b : need;
    }
    reserve(need);
  } catch (...) {
    if (p.x) cudnnDestroyTensorDescriptor(p.x);
    if (p.y) cudnnDestroyTensorDescriptor(p.y);
    throw;
  }
  return plans.emplace(key, p).first->second;
}

void Conv2d::forward(float* y, const float* x, const float* w, int64_t N, int64_t H, int64_t W) {
  if (N <= 0) return;
  Impl& im = *impl_;
  Impl::Plan& p = im.plan(C_, OC_, N, H, W, out_h(H), out_w(W));
  const float one = 1.f, zero = 0.f;
  DD_CUDNN_CHECK(cudnnConvolutionForward(cudnn(), &one, p.x, x, im.wdesc, w, im.cdesc, p.fwd, im.workspace,
                                         im.workspace_bytes, &zero, p.y, y));
}

void Conv2d::backward(float* dx, float* dw, const float* dy, const float* x, const float* w, int64_t N, int64_t H,
                      int64_t W) {
  if (N <= 0) return;
  Impl& im = *impl_;
  Impl::Plan& p = im.plan(C_, OC_, N, H, W, out_h(H), out_w(W));
  const float one = 1.f, zero = 0.f;
  cudnnHandle_t hd = cudnn();
  if (dw)  // beta = 1: weight gradients accumulate, as everywhere in dd::ops
    DD_CUDNN_CHECK(cudnnConvolutionBackwardFilter(hd, &one, p.x, x, p.y, dy, im.cdesc, p.bwd_filter, im.workspace,
                                                  im.workspace_bytes, &one, im.wdesc, dw));
  if (dx)
    DD_CUDNN_CHECK(cudnnConvolutionBackwardData(hd, &one, im.wdesc, w, p.y, dy, im.cdesc, p.bwd_data, im.workspace,
                                                im.workspace_bytes, &zero, p.x, dx));
}

}  // namespace dd::cuops
