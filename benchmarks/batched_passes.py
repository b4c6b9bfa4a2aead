"""Can a request's question passes share one llama_decode? Per-sequence KV streams against sequential evaluation.

    .venv/bin/python benchmarks/batched_passes.py [--requests 8] [--max-passes 8] [--seed 0] [--threads 2]

Sequential is the adapter's way (runtime.eval_units): one context with one sequence, the prefix units (header,
state) decoded once, then each pass's suffix decoded alone after a rewind to the prefix. Batched: a context with
`--max-passes` sequences on a non-unified KV cache (kv_unified=False: each sequence's cells in a stream of its
own, where they would be alone), flash attention off, the same prefix decoded on sequence 0 and copied to the
others, then every pass's suffix in one llama_decode, each on its own sequence. Requests are random (state
length, passes, option counts). Prints whether each pass's logits are bit-identical, the largest difference,
decode calls per request and the time ratio. Issue 16's rule: batching ships only if every answer is
bit-identical.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

import llama_cpp
import numpy as np
import numpy.typing as npt
from llama_cpp import Llama

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / ".cache" / "models" / "smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"
N_CTX = 2048
N_BATCH = 512  # the adapter's (SM_LLAMA_CPP_BATCH_SIZE): Llama.eval decodes a unit in chunks of it
WORDS = [
    "invoice",
    "refund",
    "charged",
    "twice",
    "login",
    "error",
    "password",
    "reset",
    "shipping",
    "delayed",
    "package",
    "damaged",
    "cancel",
    "plan",
    "upgrade",
    "price",
    "discount",
    "account",
    "locked",
    "billing",
    "team",
    "technical",
    "sales",
    "urgent",
    "calm",
    "angry",
]
HEADER = "<|im_start|>system\nYou answer with the letter of one option.<|im_end|>\n<|im_start|>user\n"
Logits = npt.NDArray[np.float32]


class Sequential:
    """The adapter's evaluation: one sequence, prefix once, each suffix alone after a rewind."""

    def __init__(self, llm: Llama) -> None:
        self.llm = llm
        self.calls = 0

    def logits(self, prefix: list[list[int]], suffixes: list[list[int]]) -> list[Logits]:
        ctx = self.llm._ctx.ctx
        memory = llama_cpp.llama_get_memory(ctx)
        llama_cpp.llama_memory_clear(memory, False)
        self.llm.n_tokens = 0
        for unit in prefix:
            self.llm.eval(unit)
            self.calls += -(-len(unit) // N_BATCH)
        start, out = self.llm.n_tokens, []
        for suffix in suffixes:
            llama_cpp.llama_memory_seq_rm(memory, -1, start, -1)
            self.llm.n_tokens = start
            self.llm.eval(suffix)
            self.calls += 1
            out.append(
                np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, -1), shape=(self.llm.n_vocab(),)).copy()
            )
        return out


class Batched:
    """All suffixes in one llama_decode, each on its own sequence of a non-unified KV cache."""

    def __init__(self, llm: Llama, n_seq: int, threads: int) -> None:
        params = llama_cpp.llama_context_default_params()
        params.n_ctx, params.n_seq_max, params.kv_unified = N_CTX * n_seq, n_seq, False
        params.n_batch = params.n_ubatch = N_BATCH * n_seq
        params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        params.n_threads = params.n_threads_batch = threads
        self.ctx = llama_cpp.llama_init_from_model(llm._model.model, params)
        if not self.ctx:
            raise SystemExit("llama_init_from_model failed")
        self.batch = llama_cpp.llama_batch_init(N_BATCH * n_seq, 0, n_seq)
        self.n_vocab = llm.n_vocab()
        self.calls = 0

    def _decode(self, entries: list[tuple[int, int, int, bool]]) -> None:
        self.batch.n_tokens = len(entries)
        for i, (token, pos, seq, wants_logits) in enumerate(entries):
            self.batch.token[i], self.batch.pos[i], self.batch.n_seq_id[i] = token, pos, 1
            self.batch.seq_id[i][0], self.batch.logits[i] = seq, int(wants_logits)
        if llama_cpp.llama_decode(self.ctx, self.batch) != 0:
            raise SystemExit("llama_decode failed")
        self.calls += 1

    def logits(self, prefix: list[list[int]], suffixes: list[list[int]]) -> list[Logits]:
        memory = llama_cpp.llama_get_memory(self.ctx)
        llama_cpp.llama_memory_clear(memory, False)
        pos = 0
        for unit in prefix:  # chunked as Llama.eval chunks it, so the prefix's cells are the sequential run's
            for at in range(0, len(unit), N_BATCH):
                chunk = unit[at : at + N_BATCH]
                self._decode([(t, pos + j, 0, j == len(chunk) - 1) for j, t in enumerate(chunk)])
                pos += len(chunk)
        for seq in range(1, len(suffixes)):
            llama_cpp.llama_memory_seq_cp(memory, 0, seq, -1, -1)  # across streams: the whole stream is copied
        entries, last = [], []
        for seq, suffix in enumerate(suffixes):
            entries += [(t, pos + j, seq, j == len(suffix) - 1) for j, t in enumerate(suffix)]
            last.append(len(entries) - 1)
        self._decode(entries)
        return [
            np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(self.ctx, i), shape=(self.n_vocab,)).copy()
            for i in last
        ]


def random_request(rng: random.Random, tokenize: Any, max_passes: int) -> tuple[list[list[int]], list[list[int]]]:
    state = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 300)))
    suffixes = []
    for _ in range(rng.randint(1, max_passes)):
        stem = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 30)))
        options = "\n".join(f"{chr(65 + i)}. {rng.choice(WORDS)}" for i in range(rng.randint(2, 6)))
        suffixes.append(tokenize(f"\nQuestion: {stem}?\n{options}<|im_end|>\n<|im_start|>assistant\nAnswer:"))
    return [tokenize(HEADER), tokenize(state)], suffixes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--max-passes", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    llm = Llama(str(MODEL), n_ctx=N_CTX, n_batch=N_BATCH, n_threads=args.threads, n_threads_batch=args.threads,
                logits_all=False, verbose=False)  # fmt: skip

    def tokenize(text: str) -> list[int]:
        return list(llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    sequential, batched = Sequential(llm), Batched(llm, args.max_passes, args.threads)
    rng = random.Random(args.seed)  # noqa: S311 - reproducible test requests, not secrets
    same = total = 0
    worst = 0.0
    seconds = {"sequential": 0.0, "batched": 0.0}
    for n in range(args.requests):
        prefix, suffixes = random_request(rng, tokenize, args.max_passes)
        t0 = time.perf_counter()
        alone = sequential.logits(prefix, suffixes)
        t1 = time.perf_counter()
        together = batched.logits(prefix, suffixes)
        seconds["sequential"] += t1 - t0
        seconds["batched"] += time.perf_counter() - t1
        identical = [bool(np.array_equal(a, b)) for a, b in zip(alone, together, strict=True)]
        diff = max(float(np.max(np.abs(a - b))) for a, b in zip(alone, together, strict=True))
        same, total, worst = same + sum(identical), total + len(identical), max(worst, diff)
        lengths = [len(s) for s in suffixes]
        print(
            f"request {n}: state {len(prefix[1])} tokens, suffixes {lengths}, identical {identical}, max |d| {diff:.3g}"
        )
    print(
        f"bit-identical passes {same}/{total}, largest logit difference {worst:.3g}; decode calls "
        f"{sequential.calls / args.requests:.1f} -> {batched.calls / args.requests:.1f} per request; "
        f"time batched/sequential {seconds['batched'] / seconds['sequential']:.3f}"
    )
    return 0 if same == total else 1


if __name__ == "__main__":
    sys.exit(main())
