// Internal to dd_ops_cuda: cuBLAS loaded on first use (dlopen), not linked. Linked, cuBLAS and cuBLASLt (over half
// a gigabyte) are mapped, relocated and initialised at every start of every process, CPU runs and refused command
// lines included; loaded here, only a process that runs a GEMM on a GPU pays for them.
#pragma once
#include <cublas_v2.h>

namespace dd::cuops::detail {

// The cuBLAS entry points dd_ops_cuda calls, resolved from the library cuBLAS's headers name
// (libcublas.so.CUBLAS_VER_MAJOR): the types are the headers' own, so a mismatch does not compile.
struct CublasApi {
  decltype(&cublasCreate) create = nullptr;
  decltype(&cublasDestroy) destroy = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSetStream) set_stream = nullptr;
  decltype(&cublasSgemm) sgemm = nullptr;
  decltype(&cublasSgemmStridedBatched) sgemm_strided_batched = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
};

// The loaded table; loads it on the first call (thread-safe). Throws std::runtime_error naming the library and
// the loader's reason when it cannot be loaded or lacks an entry point.
const CublasApi& cublas_api();

}  // namespace dd::cuops::detail
