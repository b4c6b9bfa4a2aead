"""The generic prompt's choices for an instruction model, compared on the decider suite's fit part (never on test).

A probe beside the adapter, not through it: the adapter's own template pieces (prompting/generic.py, boundary.py)
rendered in the GGUF's chat template and read with llama-cpp-python directly, so one process tries every variant
on the same cases: the label alphabet (letters A.., as served, or digits 1..), the state boundary (`off`, as
served, or `sandwiched`: the question's instructions restated after the state) and the system prompt (the
adapter's, as served, or the model's own default, Qwen's "You are Qwen, created by Alibaba Cloud..."), each in the
given order and with the reversed order averaged in (`reverse`, as served). It prints the accuracy of each variant
per question type.

    flock /tmp/cpu.lock .venv/bin/python benchmarks/prompt_choices.py 45   # the first 45 cases of fit, ~12 min

Measured 2026-12-04 on the decider (2 threads, alone): see docs/decider.md.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
from decision_adapter.prompting import base, generic
from decision_spec.question_types import options_of
from decision_spec.schemas import DecisionRequest
from llama_cpp import Llama

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / ".cache/models/qwen2.5-coder-1.5b/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
FIT = ROOT / "evaluation/decider/fit.jsonl"
DIGITS = [(str(i + 1),) for i in range(30)]
QWEN_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."  # its chat template's default
VARIANTS = [  # (state boundary, label alphabet, system prompt); the first is the adapter as served
    ("off", "letters", "adapter"),
    ("off", "letters", "model default"),
    ("off", "digits", "adapter"),
    ("sandwiched", "letters", "adapter"),
    ("sandwiched", "digits", "adapter"),
]


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 45
    llm = Llama(str(MODEL), n_ctx=4096, n_threads=2, logits_all=True, verbose=False)
    chat_template = llm.metadata.get("tokenizer.chat_template")
    cases = [json.loads(line) for line in FIT.read_text().splitlines() if line.strip() and line[0] != "#"][:n]

    def last_logits(tokens: list[int]) -> np.ndarray:
        keep, held = 0, llm.input_ids[: llm.n_tokens].tolist()
        while keep < min(len(held), len(tokens) - 1) and held[keep] == tokens[keep]:
            keep += 1  # reuse the evaluated prefix (the state shared by a state's three questions)
        llm.n_tokens = keep
        llm.eval(tokens[keep:])
        return np.array(llm.scores[llm.n_tokens - 1])

    served_system = generic.SYSTEM_PROMPT
    for boundary, alphabet, system in VARIANTS:
        codes_of = (lambda k: DIGITS[:k]) if alphabet == "digits" else base.labels
        generic.labels = codes_of  # the options block reads its codes from here
        generic.SYSTEM_PROMPT = QWEN_SYSTEM if system == "model default" else served_system
        template = generic.build_template(
            chat_template, bos_text="", eos_text="<|im_end|>", add_bos=False, boundary=boundary
        )
        right = {"given": 0, "reverse": 0}
        by_type: dict[str, list[int]] = {}
        started = time.perf_counter()
        for case in cases:
            request = DecisionRequest.model_validate({"state": case["state"], "questions": {"q": case["question"]}})
            question = request.questions["q"]
            options = options_of(question)
            k = len(options)
            keys = [o.key for o in options]
            want = case["expected"]
            expected = keys.index(str(want).lower() if isinstance(want, bool) else str(want))
            passes = []
            for order in (list(range(k)), list(range(k))[::-1]):
                text = template.header + template.state_part(request.state)
                text += template.suffix(generic.question_text(question, order, options))
                logits = last_logits(llm.tokenize(text.encode(), add_bos=False, special=True))
                ids = [llm.tokenize("".join(c).encode(), add_bos=False, special=False)[0] for c in codes_of(k)]
                lp = logits[ids] - np.logaddexp.reduce(logits[ids])
                back = np.empty(k)
                back[order] = lp
                passes.append(back)
            right["given"] += int(passes[0].argmax() == expected)
            hit = int(np.mean(passes, axis=0).argmax() == expected)
            right["reverse"] += hit
            by_type.setdefault(question.type, [0, 0])
            by_type[question.type][0] += hit
            by_type[question.type][1] += 1
        print(
            f"{boundary:10} {alphabet:7} {system:13} given {right['given']}/{len(cases)} "
            f"reverse {right['reverse']}/{len(cases)} "
            f"by type (reverse) {by_type} {time.perf_counter() - started:.0f} s",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
