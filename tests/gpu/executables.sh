# tests/gpu/executables.sh (sourced): the executables the GPU check runs, by CMake target, with their paths in a
# build folder. device_check.sh builds and runs these; pack_prebuilt.sh packs these, so an archive holds exactly
# what the check runs.
declare -A GPU_CHECK_EXES=(
  [bench_gpu_step]=core/models/cuda/bench_gpu_step
  [test_gpu_kernels]=tests/gpu/test_gpu_kernels
  [test_models_gpu]=tests/gpu/test_models_gpu
  [test_train_gpu]=tests/gpu/test_train_gpu
  [test_backends_nccl]=tests/backends/test_backends_nccl
  [dreamddp]=dreamddp
)
