#!/usr/bin/env bash
# The GPU checks, run on a machine with an NVIDIA GPU and no network (the workplace's device machine), from the
# repository root, with what benchmarks/gpu_stage.sh put under STAGE (default /tmp/stage): a CUDA build of
# llama-cpp-python and the adapter's runtime packages as wheels, and the models in parts.
#   1. installs the wheels into /tmp/site (the machine's own python3 and packages otherwise);
#   2. joins each staged model's parts in its env's model directory and checks its sha256 against its manifest;
#   3. benchmarks/gpu_bench.py: CPU against GPU, agreement with the committed record, latency side by side;
#   4. the adapter's decision tests with every layer offloaded (TEST_GPU_LAYERS, tests/app_support.py).
# 1 and 2 run every time (a second run reuses them); GPU_STEPS picks among 3 and 4 (default "bench tests"), or is
# "check": 1 alone, before the model's parts have all arrived.
# GPU_BENCH_ENVS: the envs gpu_bench runs on (default dev; "dev prod" where the decider was staged too), each with
# GPU_BENCH_ARGS_<env> (e.g. GPU_BENCH_ARGS_prod="--requests 10").
# What it writes goes to $OUT (default /tmp/gpu-out): gpu-ENV.json, the logs.
#   STAGE=/tmp/stage GPU_STEPS=bench bash benchmarks/gpu_run.sh
set -uo pipefail
STAGE=${STAGE:-/tmp/stage}
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
step() { printf '\n==> %s (%s)\n' "$*" "$(date -u +%H:%M:%S)"; }

step "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || echo "no nvidia-smi"
python3 --version; nproc

step "wheels"
if [[ ! -d /tmp/site/llama_cpp ]]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$STAGE"/wheels/*.whl \
    && tar xzf "$STAGE"/wheels/llama_cpp.tar.gz -C /tmp/site || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD/containers:$PWD/tools:$PWD/clients/python:$PWD
# llama.cpp's CUDA backend needs the CUDA runtime and cuBLAS of the major version it was built with (13)
libs=$(find /usr/local /usr/lib /opt \( -name 'libcublas.so.13' -o -name 'libcudart.so.13' -o -name 'libcuda.so.1' \) \
  -printf '%h\n' 2>/dev/null | sort -u | paste -sd:)
export LD_LIBRARY_PATH=${libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
# REQUIRE_GPU=0 rehearses the script on a CPU build (everything then runs on the CPU)
python3 -c 'import llama_cpp, sys; ok = llama_cpp.llama_supports_gpu_offload()
print("llama-cpp-python", llama_cpp.__version__, "gpu offload:", ok); sys.exit(not ok)' \
  || [[ ${REQUIRE_GPU:-1} == 0 ]] || exit 1

STEPS=${GPU_STEPS:-bench tests}
[[ $STEPS == check ]] && { step "checked: the wheels load"; exit 0; }

step "models"
# each staged env's parts joined in its model directory, checked against its manifest by the adapter's own verifier
python3 - "$STAGE" <<'PY' || exit 1
import shutil, sys
from pathlib import Path
from decision_adapter.launcher import MODEL_DIRS
from decision_spec.manifest import MANIFEST_NAME, read_manifest, verify_model

for staged in sorted(Path(sys.argv[1]).glob("model-*")):
    env, manifest = staged.name.removeprefix("model-"), read_manifest(staged / MANIFEST_NAME)
    target = MODEL_DIRS[env]
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy(staged / MANIFEST_NAME, target / MANIFEST_NAME)
    gguf = target / manifest.model_file
    with gguf.open("wb") as out:  # joined again on every run: a bad join is never kept
        for part in sorted(staged.glob("part.*")):
            with part.open("rb") as f:
                shutil.copyfileobj(f, out)
    print(env, gguf, "sha256", verify_model(gguf).sha256, "(as its manifest)")
PY

if [[ " $STEPS " == *" bench "* ]]; then
  step "gpu_bench: agreement and latency, CPU against GPU"
  for env in ${GPU_BENCH_ENVS:-dev}; do
    args=GPU_BENCH_ARGS_$env  # e.g. GPU_BENCH_ARGS_prod="--requests 10"
    read -ra extra <<< "${!args:-}"
    PYTHONUNBUFFERED=1 python3 benchmarks/gpu_bench.py --env "$env" --out "$OUT/gpu-$env.json" "${extra[@]}" \
      2>&1 | tee "$OUT/gpu_bench-$env.log"
  done
fi
if [[ " $STEPS " == *" tests "* ]]; then
  # the adapter's tests that answer on the model (the app in the test process offloads every layer; an adapter a
  # test starts as a process stays on the CPU); the model-free ones have nothing to show here
  step "the adapter's model tests, every layer on the GPU"
  tests=(adapter_decisions adaptive_debias state_cache adapter_contract_edges adapter_jsonlines caller_text
    injection_defense_tokens intercept_served gguf_schemes jevcompat bounded_work deadline)
  tests=("${tests[@]/#/tests/adapter/test_}") && tests=("${tests[@]/%/.py}")
  [[ -z ${GPU_TESTS:-} ]] || read -ra tests <<< "$GPU_TESTS"
  TEST_GPU_LAYERS=999 PYTHONUNBUFFERED=1 timeout "${TEST_TIMEOUT_S:-300}" python3 -m pytest -v -p no:cacheprovider \
    --timeout 120 "${tests[@]}" > "$OUT/tests.log" 2>&1
  echo "pytest exit $?"; grep -E "FAILED|ERROR|passed|failed" "$OUT/tests.log" | tail -n 30
fi
step "done"
