// GpuModel: device arenas in the CPU model's layout, per-layer ready events, device optimizer state, and the
// dispatch to the per-architecture forward/backward of gpu_<model>.cpp.
#include "core/models/cuda/gpu_model.h"

#include "core/common/error.h"
#include "core/models/cuda/gpu_arch.h"

namespace dd::models::gpu {

bool gpu_available() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device / no driver" status so later checks start clean
    return false;
  }
  return n > 0;
}

static float* device_floats(int64_t n) {
  float* p = nullptr;
  if (n > 0) DD_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), sizeof(float) * size_t(n)));
  return p;
}

static void copy(float* dst, const float* src, int64_t n, cudaMemcpyKind kind) {
  if (n > 0)
    DD_CUDA_CHECK(cudaMemcpyAsync(dst, src, sizeof(float) * size_t(n), kind, cuops::stream()));
}

GpuModel::GpuModel(const Model& cpu, const optim::OptimConfig& opt) : name_(cpu.name()), opt_(opt) {
  if (opt.kind != "sgd" && opt.kind != "adamw")
    throw UsageError("unknown optimizer '" + opt.kind + "' (expected sgd or adamw)");
  if (!gpu_available()) throw UsageError("--device cuda: no CUDA device is visible to this process");
  if (name_ != "mlp" && name_ != "cnn" && name_ != "gpt-mini")
    throw UsageError("model '" + name_ + "' has no GPU path yet (GPU models: mlp, cnn, gpt-mini)");
  for (const nn::Layer* l : cpu.layers()) {
    offsets_.push_back(l->param_offset());
    counts_.push_back(l->num_params());
    num_params_ += l->num_params();
    num_buffers_ += l->num_buffers();
  }
  const int slots = opt.kind == "adamw" ? 2 : 1;
  params_ = device_floats(num_params_);
  grads_ = device_floats(num_params_);
  buffers_ = device_floats(num_buffers_);
  state_ = device_floats(num_params_ * slots);
  steps_.assign(offsets_.size(), 0);
  ready_.resize(offsets_.size());
  for (auto& e : ready_) DD_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  // Model is const here but its arenas are only read; the accessors are non-const for the trainer's sake.
  auto& m = const_cast<Model&>(cpu);
  copy(params_, m.params().data(), num_params_, cudaMemcpyHostToDevice);
  copy(buffers_, m.buffers().data(), num_buffers_, cudaMemcpyHostToDevice);
  if (num_params_) {
    DD_CUDA_CHECK(cudaMemsetAsync(grads_, 0, sizeof(float) * size_t(num_params_), cuops::stream()));
    DD_CUDA_CHECK(cudaMemsetAsync(state_, 0, sizeof(float) * size_t(num_params_ * slots), cuops::stream()));
  }
  synchronize();
  const DeviceArenas a{params_, grads_, buffers_};
  arch_ = name_ == "mlp" ? make_gpu_mlp(cpu, a) : name_ == "cnn" ? make_gpu_cnn(cpu, a) : make_gpu_gpt_mini(cpu, a);
  arch_->set_ready_events(&ready_);
}

GpuModel::~GpuModel() {
  arch_.reset();
  for (auto e : ready_) cudaEventDestroy(e);
  cudaFree(params_);
  cudaFree(grads_);
  cudaFree(buffers_);
  cudaFree(state_);
}

ForwardResult GpuModel::forward(const Input& in, bool train) { return arch_->forward(in, train); }

void GpuModel::backward(nn::BackwardHook* hook, float scale) { arch_->backward(hook, scale); }

void GpuModel::update_layer(int layer, float lr) {
  DD_CHECK(layer >= 0 && layer < num_layers(), "update_layer: layer " + std::to_string(layer) + " out of range");
  const int64_t off = offsets_[size_t(layer)], n = counts_[size_t(layer)];
  const int64_t step = ++steps_[size_t(layer)];
  float* p = params_ + off;
  float* g = grads_ + off;
  if (opt_.kind == "sgd") {
    cuops::sgd_update(p, g, state_ + off, n, lr, opt_.momentum, opt_.nesterov, opt_.weight_decay);
  } else {
    cuops::adamw_update(p, g, state_ + off, state_ + num_params_ + off, n, lr, opt_.beta1, opt_.beta2, opt_.eps,
                        opt_.weight_decay, step);
  }
}

void GpuModel::zero_grads() {
  if (num_params_)
    DD_CUDA_CHECK(cudaMemsetAsync(grads_, 0, sizeof(float) * size_t(num_params_), cuops::stream()));
}

static void check_same_layout(const GpuModel& g, const Model& cpu) {
  DD_CHECK(cpu.num_params() == g.num_params() && cpu.num_layers() == g.num_layers(),
           "GPU model '" + g.name() + "' and host model '" + cpu.name() + "' have different layouts");
}

void GpuModel::copy_params_to_host(Model& cpu) const {
  check_same_layout(*this, cpu);
  DD_CHECK(int64_t(cpu.buffers().size()) == num_buffers_, "host model has a different buffer arena size");
  copy(cpu.params().data(), params_, num_params_, cudaMemcpyDeviceToHost);
  copy(cpu.buffers().data(), buffers_, num_buffers_, cudaMemcpyDeviceToHost);
  synchronize();
}

void GpuModel::copy_grads_to_host(Model& cpu) const {
  check_same_layout(*this, cpu);
  copy(cpu.grads().data(), grads_, num_params_, cudaMemcpyDeviceToHost);
  synchronize();
}

void GpuModel::copy_params_from_host(const Model& cpu) {
  check_same_layout(*this, cpu);
  auto& m = const_cast<Model&>(cpu);
  copy(params_, m.params().data(), num_params_, cudaMemcpyHostToDevice);
  copy(buffers_, m.buffers().data(), num_buffers_, cudaMemcpyHostToDevice);
  synchronize();
}

void GpuModel::synchronize() const { DD_CUDA_CHECK(cudaStreamSynchronize(cuops::stream())); }

}  // namespace dd::models::gpu
