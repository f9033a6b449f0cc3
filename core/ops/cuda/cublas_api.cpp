// cuBLAS resolved at first use with dlopen/dlsym (cublas_api.h says why it is not linked).
#include "core/ops/cuda/cublas_api.h"

#include <dlfcn.h>

#include <stdexcept>
#include <string>

namespace dd::cuops::detail {

namespace {

std::string library_name() { return "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR); }

template <class F>
void resolve(void* lib, const char* symbol, F& out) {
  void* p = dlsym(lib, symbol);
  if (!p)
    throw std::runtime_error("dd::cuops: " + library_name() + " has no entry point " + symbol +
                             " (a cuBLAS older than the headers this was built with?)");
  out = reinterpret_cast<F>(p);
}

CublasApi load() {
  // RTLD_LOCAL: cuBLAS's symbols stay out of the global scope (nothing else in the process resolves against them).
  void* lib = dlopen(library_name().c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    throw std::runtime_error("dd::cuops: cannot load cuBLAS (" + library_name() + "): " + (why ? why : "unknown") +
                             "; put the CUDA toolkit's library folder on LD_LIBRARY_PATH");
  }
  CublasApi api;
  resolve(lib, "cublasCreate_v2", api.create);
  resolve(lib, "cublasDestroy_v2", api.destroy);
  resolve(lib, "cublasSetMathMode", api.set_math_mode);
  resolve(lib, "cublasSetStream_v2", api.set_stream);
  resolve(lib, "cublasSgemm_v2", api.sgemm);
  resolve(lib, "cublasSgemmStridedBatched", api.sgemm_strided_batched);
  resolve(lib, "cublasGetStatusString", api.status_string);
  return api;  // the library stays loaded for the life of the process
}

}  // namespace

const CublasApi& cublas_api() {
  static const CublasApi api = load();  // a throw leaves it unset, so a later call tries again
  return api;
}

}  // namespace dd::cuops::detail
