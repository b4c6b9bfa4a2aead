#!/usr/bin/env bash
# Build llama-cpp-python (the version requirements.txt pins) with llama.cpp's CUDA backend, for the GPU checks
# (benchmarks/gpu_stage.sh, gpu_run.sh), on a machine with CUDA's compiler and no GPU. One architecture (ARCH,
# default 90: Hopper, the H100 and H200), flash-attention kernels left out (the adapter runs with flash attention
# off unless SM_LLAMA_CPP_FLASH_ATTN says), no CUDA virtual memory (no driver library is needed to link), the CPU
# part portable as ./dev builds it. cuBLAS comes from PyPI's nvidia-cublas for the toolkit's major version when the
# toolkit lacks it: its headers and libraries are copied into CUDA_HOME (which must be writable). About 50 minutes on
# 2 cores; the wheel lands in OUT (default .cache/wheels-cuda).
#   CUDA_HOME=/usr/local/cuda-13.0 bash benchmarks/gpu_wheel.sh
set -euo pipefail
cd "$(dirname "$0")/.."
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
ARCH=${ARCH:-90}
OUT=${OUT:-$PWD/.cache/wheels-cuda}
version=$(grep -i '^llama-cpp-python==' requirements.txt | cut -d= -f3)
major=$("$CUDA_HOME/bin/nvcc" --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
if [[ ! -f $CUDA_HOME/include/cublas_v2.h ]]; then
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps "nvidia-cublas>=$major,<$((major + 1))" -d "$tmp"
  (cd "$tmp" && unzip -q ./*.whl)
  cp "$tmp"/nvidia/cu"$major"/include/*.h "$CUDA_HOME/include/"
  cp "$tmp"/nvidia/cu"$major"/lib/libcublas*.so."$major" "$CUDA_HOME/lib64/"
  ln -sf "libcublas.so.$major" "$CUDA_HOME/lib64/libcublas.so"
  ln -sf "libcublasLt.so.$major" "$CUDA_HOME/lib64/libcublasLt.so"
  rm -rf "$tmp"
fi
export CUDACXX=$CUDA_HOME/bin/nvcc CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
export CMAKE_ARGS="-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=$ARCH-real -DGGML_CUDA_FA=OFF -DGGML_CUDA_NO_VMM=ON \
-DGGML_CUDA_NCCL=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
-DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAMA_BUILD_TESTS=OFF \
-DLLAMA_BUILD_EXAMPLES=OFF"
python3 -m pip wheel --no-deps --no-binary llama-cpp-python "llama-cpp-python==$version" -w "$OUT"
ls -l "$OUT"
