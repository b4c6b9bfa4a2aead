"""The middle step of measuring a trained checker on model_flag_bench.py's sets (issue 48): the decider's own reading of
a text, its mean-pooled embedding (llama.cpp's, the decider GGUF), with a logistic regression on top, trained on the
attacks the word lists were tuned on (the 60 tuned paraphrases and the payload families) against benign states.

Nothing it is measured on is trained on: the held-out paraphrases and the decider suite's planted instructions are
never in training, and every training text (attack or benign) is scored by a model fitted without it (5 folds).
With `--sentences` a text's score is the highest of its own and its sentences' (each sentence embedded alone, by the
same model): an instruction planted in a long state is not averaged away. Run alone (about 15 minutes on 2 cores for
the texts, as long again for their sentences):

    .venv/bin/python benchmarks/model_flag_bench.py --texts-out .cache/flag-texts.jsonl
    flock /tmp/cpu.lock .venv/bin/python benchmarks/embedding_flag.py .cache/flag-texts.jsonl \
        .cache/embedding-scores.jsonl
    .venv/bin/python benchmarks/model_flag_bench.py --scores .cache/embedding-scores.jsonl \
        --scorer "decider embedding + logistic regression" --out benchmarks/model_flags_embedding.json
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parents[1]
GGUF = ROOT / ".cache/models/qwen2.5-coder-1.5b/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
TRAIN_ATTACKS = ("paraphrases:tuned", "payload:")  # a set name equal to, or starting with, one of these
NEVER_TRAINED = ("paraphrases:held_out", "decider_suite_planted")
FOLDS = 5
SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|\n+")
Matrix = npt.NDArray[np.float64]


def embeddings(texts: list[str], cache: Path) -> Matrix:
    """One mean-pooled, L2-normalized embedding per text (cached beside the scores: the prefill is the cost)."""
    if cache.exists():
        found: Matrix = np.load(cache)
        if len(found) == len(texts):
            return found
    from llama_cpp import LLAMA_POOLING_TYPE_MEAN, Llama

    llm = Llama(str(GGUF), embedding=True, pooling_type=LLAMA_POOLING_TYPE_MEAN, n_ctx=2048, n_batch=512,
                n_threads=2, verbose=False)  # fmt: skip
    rows = []
    for i, text in enumerate(texts):
        tokens = llm.tokenize(text.encode("utf-8"), add_bos=True)[:2048]
        vector = np.asarray(llm.embed(llm.detokenize(tokens).decode("utf-8", "ignore")), dtype=np.float64)
        rows.append(vector / (np.linalg.norm(vector) or 1.0))
        if i % 50 == 0:
            print(f"embedded {i + 1}/{len(texts)}", flush=True)
    matrix = np.vstack(rows)
    np.save(cache, matrix)
    return matrix


def fit(x: Matrix, y: npt.NDArray[np.float64], l2: float = 1.0, steps: int = 2000) -> tuple[Matrix, float, Matrix]:
    """L2-regularized logistic regression (full-batch gradient descent on standardized features): weights, bias and
    the standardization (mean, scale) rows."""
    mean, scale = x.mean(axis=0), x.std(axis=0) + 1e-9
    z = (x - mean) / scale
    w, b = np.zeros(x.shape[1]), 0.0
    positive = y.mean()
    weights = np.where(y == 1, 0.5 / positive, 0.5 / (1 - positive))  # the classes weigh alike
    for _ in range(steps):
        p = 1 / (1 + np.exp(-(z @ w + b)))
        g = weights * (p - y)
        w -= 0.1 * (z.T @ g / len(y) + l2 * w / len(y))
        b -= 0.1 * float(g.mean())
    return w, b, np.vstack([mean, scale])


def score(model: tuple[Matrix, float, Matrix], x: Matrix) -> npt.NDArray[np.float64]:
    w, b, norm = model
    result: npt.NDArray[np.float64] = 1 / (1 + np.exp(-(((x - norm[0]) / norm[1]) @ w + b)))
    return result


def sentences(text: str) -> list[str]:
    """A text's sentences and lines (a structured state's JSON as one text), the empty ones left out."""
    return [piece.strip() for piece in SENTENCE_END.split(text) if piece.strip()] or [text]


def main(argv: list[str]) -> int:
    by_sentence = "--sentences" in argv
    argv = [a for a in argv if a != "--sentences"]
    if len(argv) != 2:
        print("usage: embedding_flag.py [--sentences] TEXTS.jsonl SCORES.jsonl", file=sys.stderr)
        return 2
    rows: list[dict[str, Any]] = [json.loads(line) for line in Path(argv[0]).read_text().splitlines() if line]
    texts = [r["text"] if isinstance(r["text"], str) else json.dumps(r["text"], ensure_ascii=False) for r in rows]
    sets = [r["set"] for r in rows]
    x = embeddings(texts, Path(argv[0]).with_suffix(".embeddings.npy"))
    parts: list[list[int]] = []  # --sentences: each text's rows in the sentence matrix
    if by_sentence:
        pieces = [sentences(t) for t in texts]
        flat = [p for ps in pieces for p in ps]
        xs = embeddings(flat, Path(argv[0]).with_suffix(".sentences.npy"))
        start = 0
        for ps in pieces:
            parts.append(list(range(start, start + len(ps))))
            start += len(ps)

    def scored(model: tuple[Matrix, float, Matrix], which: npt.NDArray[np.bool_]) -> npt.NDArray[np.float64]:
        """The texts' scores: the text's own, or with --sentences the highest of its sentences' and its own."""
        whole = score(model, x[which])
        if not by_sentence:
            return whole
        return np.array(
            [max(w, float(score(model, xs[parts[i]]).max())) for w, i in zip(whole, np.flatnonzero(which), strict=True)]
        )

    attack = np.array([any(s == t or s.startswith(t) for t in TRAIN_ATTACKS) for s in sets])
    unseen = np.array([s in NEVER_TRAINED for s in sets])
    trainable = ~unseen
    y = attack.astype(np.float64)
    scores = np.zeros(len(rows))
    fold = np.arange(len(rows)) % FOLDS
    for k in range(FOLDS):  # each training text scored by a model that did not see it
        train = trainable & (fold != k)
        model = fit(x[train], y[train])
        held = trainable & (fold == k)
        scores[held] = scored(model, held)
    scores[unseen] = scored(fit(x[trainable], y[trainable]), unseen)
    with Path(argv[1]).open("w", encoding="utf-8") as out:
        for value in scores:
            out.write(json.dumps({"score": round(float(value), 6)}) + "\n")
    print(f"scored {len(rows)} texts into {argv[1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
