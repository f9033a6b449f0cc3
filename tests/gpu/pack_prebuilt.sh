#!/usr/bin/env bash
# tests/gpu/pack_prebuilt.sh: pack the GPU check's executables, built on this machine, with the shared libraries
# they load, into one archive that `tests/gpu/device_check.sh --prebuilt ARCHIVE` runs on a GPU machine whose
# image has the NVIDIA driver, CUDA, cuBLAS, cuDNN and NCCL but not this project's build packages (Gloo, HDF5,
# oneDNN, Boost, SimGrid, Open MPI).
#
#   tests/gpu/pack_prebuilt.sh OUT.tar.xz        (BUILD_DIR: the build folder, default <repo>/build)
#
# Left out of the archive: the C and C++ runtimes (glibc, libstdc++, libgcc_s; the GPU machine's own are newer)
# and the NVIDIA libraries (cudart, cuBLAS, cuDNN, NCCL; the GPU machine's must match its driver). The build must
# have CUDA on (DREAMDDP_HAVE_CUDA); its CUDA code runs on newer GPUs through the PTX that nvcc embeds.
# The executables are tests/gpu/executables.sh's. Exit: 0 packed, 1 a missing executable or library, 2 bad usage.
set -euo pipefail
case ${1-} in
  -h|--help) sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
  ''|-*) echo "usage: tests/gpu/pack_prebuilt.sh OUT.tar.xz" >&2; exit 2 ;;
esac
out=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${BUILD_DIR:-$root/build}

. "$here/executables.sh"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
for name in "${!GPU_CHECK_EXES[@]}"; do
  path=$build/${GPU_CHECK_EXES[$name]}
  [[ -x $path ]] || { echo "pack_prebuilt: no executable $path (build it first)" >&2; exit 1; }
  cp "$path" "$stage/bin/$name"
done

# The runtimes and the NVIDIA libraries stay behind (see the header).
runtimes='libc|libm|libdl|libpthread|librt|libresolv|libutil|ld-linux-x86-64|libstdc\+\+|libgcc_s'
nvidia='libcuda|libcudart|libcublas|libcublasLt|libcudnn.*|libnccl|libnvrtc.*|libnvJitLink'
skip="^($runtimes|$nvidia)\\.so"
missing=0
while read -r lib path; do
  [[ $lib =~ $skip ]] && continue
  if [[ $path == "not" ]]; then echo "pack_prebuilt: $lib not found here" >&2; missing=1; continue; fi
  cp -L "$path" "$stage/lib/$lib"
done < <(for f in "$stage"/bin/*; do ldd "$f"; done | awk '/=>/ {print $1, $3}' | sort -u)
(( missing == 0 )) || exit 1

# What the executables were built from (device_check.sh records it with the results it writes).
git -C "$root" rev-parse --short HEAD > "$stage/COMMIT" 2>/dev/null || echo unknown > "$stage/COMMIT"
if [[ -z $(git -C "$root" status --porcelain 2>/dev/null) ]]; then echo 1; else echo 0; fi > "$stage/TREE_CLEAN"
tar -C "$stage" -cJf "$out" .
echo "pack_prebuilt: $(ls "$stage/bin" | wc -l) executables, $(ls "$stage/lib" | wc -l) libraries," \
     "$(du -h "$out" | cut -f1) in $out"
