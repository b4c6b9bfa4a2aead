"""Decisions from logits: one state prefill per request, a short suffix per question and order.

For each question the model reads header + state + question suffix; the answer is a softmax over
the logits of the option labels' tokens at the final position, and nothing is generated. With
order-debiasing, each question is scored under the given and the reversed option order and the
two log-probability vectors are averaged per option (a product of experts), so a model's taste
for the first label cannot decide the answer. Calibration divides the combined score by the
question type's temperature before the final softmax.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from . import contract
from .prompt import LETTERS, SINGLE_LABEL_MAX, TEMPLATE_VERSION, AnyQuestion, Option, PromptTemplate, labels, options_of, question_text
from .runtime import LlamaRuntime, NeedsRestore, Unit
from .schemas import ChoiceQuestion, DecisionRequest, NoulQuestion, ScoreQuestion
from .state_cache import Snapshot, StateCache, prefix_key


class TokenBudgetExceeded(ValueError):
    def __init__(self, needed: int, budget: int) -> None:
        super().__init__(f"the request needs {needed} tokens of context but the model's budget is {budget} tokens "
                         f"(SM_LLAMA_CPP_CTX_SIZE); shorten the state or the options, or split the request")
        self.needed, self.budget = needed, budget


@dataclass(frozen=True)
class Scored:
    """One question's answer before serialisation."""

    qtype: str
    keys: list[str]
    probs: list[float]
    options_sha256: str
    suffix_tokens: int
    orders: int


@dataclass
class DecisionOutcome:
    answers: dict[str, Scored]
    input_tokens: int
    evaluated_tokens: int
    state_source: str  # "resident" | "cache" | "computed"
    timings_ms: dict[str, float] = field(default_factory=dict)


def options_hash(question: AnyQuestion) -> str:
    """A hash of what defines the options (type, instructions, criteria): changed wording = changed hash."""
    canon = json.dumps(question.model_dump(mode="json"), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()[:16]


def log_softmax(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    m = float(np.max(x))
    return x - (m + float(np.log(np.sum(np.exp(x - m)))))


def softmax(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    e = np.exp(x - np.max(x))
    return e / np.sum(e)  # type: ignore[no-any-return]


class DecisionEngine:
    """Owns one llama.cpp context. Not re-entrant: callers serialise access (the app's pool does)."""

    def __init__(self, runtime: LlamaRuntime, template: PromptTemplate, *, model_sha256: str,
                 temperatures: dict[str, float], order_debias: bool, cache: StateCache,
                 debias_max_options: int = SINGLE_LABEL_MAX) -> None:
        self.rt = runtime
        self.template = template
        self.model_sha256 = model_sha256
        self.temperatures = temperatures
        self.order_debias = order_debias
        self.debias_max_options = debias_max_options
        self.cache = cache
        self.header: Unit = runtime.tokenize(template.header, add_bos=template.add_bos)
        self.letter_tokens = runtime.label_tokens(template.tail, template.label_sep, list(LETTERS))
        self._token_of = dict(zip(LETTERS, self.letter_tokens, strict=True))
        self.chain_letter_tokens = self._chain_tokens()
        self._prefix_snapshot: tuple[tuple[Unit, ...], bytes] | None = None

    def _chain_tokens(self) -> dict[str, Unit]:
        """The unit appended after a group letter for two-letter codes: the letter's own token."""
        return {letter: (tok,) for letter, tok in self._token_of.items()}

    # -- public
    def decide(self, request: DecisionRequest) -> DecisionOutcome:
        t0 = time.perf_counter()
        state_unit = self.rt.tokenize(self.template.state_part(request.state))
        prefix = (self.header, state_unit)
        plans = {qid: self._plan(q) for qid, q in request.questions.items()}
        longest = max(len(suffix) + (1 if len(plan.options) > SINGLE_LABEL_MAX else 0)
                      for plan in plans.values() for suffix, _, _ in plan.passes)
        needed = len(self.header) + len(state_unit) + longest
        if needed > self.rt.n_ctx:
            raise TokenBudgetExceeded(needed, self.rt.n_ctx)
        t1 = time.perf_counter()
        source = self._load_prefix(prefix)
        t2 = time.perf_counter()
        evaluated = 0 if source != "computed" else len(state_unit)
        answers: dict[str, Scored] = {}
        for qid, plan in plans.items():
            answers[qid], n = self._score(prefix, plan)
            evaluated += n
        t3 = time.perf_counter()
        input_tokens = len(self.header) + len(state_unit) + sum(a.suffix_tokens for a in answers.values())
        timings = {"tokenize": (t1 - t0) * 1e3, "state": (t2 - t1) * 1e3, "questions": (t3 - t2) * 1e3}
        return DecisionOutcome(answers, input_tokens, evaluated, source, {k: round(v, 2) for k, v in timings.items()})

    def counters(self) -> dict[str, int]:
        return self.cache.counters()

    # -- planning
    @dataclass(frozen=True)
    class _Plan:
        question: AnyQuestion
        options: list[Option]
        passes: list[tuple[Unit, list[int], str]]  # (suffix tokens, order, text)

    def _plan(self, question: AnyQuestion) -> DecisionEngine._Plan:
        options = options_of(question)
        n = len(options)
        orders = [list(range(n))]
        if self.order_debias and n <= self.debias_max_options:
            orders.append(list(reversed(range(n))))
        passes = []
        for order in orders:
            text = self.template.suffix(question_text(question, order, options))
            passes.append((self.rt.tokenize(text), order, text))
        return DecisionEngine._Plan(question, options, passes)

    # -- evaluation
    def _load_prefix(self, prefix: tuple[Unit, Unit]) -> str:
        if self.rt.units[:2] == list(prefix):
            return "resident"
        key = prefix_key(self.model_sha256, TEMPLATE_VERSION, prefix[0] + prefix[1])
        snap = self.cache.get(key, prefix[0] + prefix[1]) if self.cache.budget_bytes else None
        if snap is not None:
            self.rt.restore(prefix, snap.data)
            self._prefix_snapshot = (prefix, snap.data)
            return "cache"
        self._eval(list(prefix))
        if self.cache.budget_bytes or not self.rt._partial_rewind:
            data = self.rt.snapshot()
            self._prefix_snapshot = (prefix, data)
            if self.cache.budget_bytes:
                self.cache.put(key, Snapshot(prefix[0] + prefix[1], data))
        return "computed"

    def _eval(self, units: list[Unit]) -> npt.NDArray[np.float32]:
        try:
            return self.rt.eval_units(units)
        except NeedsRestore:
            if self._prefix_snapshot is None or list(self._prefix_snapshot[0]) != units[:2]:
                self.rt.forget()
                return self.rt.eval_units(units)
            self.rt.restore(self._prefix_snapshot[0], self._prefix_snapshot[1])
            return self.rt.eval_units(units)

    def _score(self, prefix: tuple[Unit, Unit], plan: DecisionEngine._Plan) -> tuple[Scored, int]:
        n = len(plan.options)
        per_pass = []
        evaluated = 0
        for suffix, order, _ in plan.passes:
            logprob_by_slot, cost = self._slot_logprobs([*prefix, suffix], n)
            evaluated += len(suffix) + cost
            lp = np.empty(n)
            for slot, idx in enumerate(order):
                lp[idx] = logprob_by_slot[slot]
            per_pass.append(lp)
        combined = np.mean(per_pass, axis=0)
        temperature = self.temperatures.get(plan.question.type, 1.0)
        probs = softmax(combined / temperature)
        probs = np.nan_to_num(probs, nan=1.0 / n)
        probs = probs / probs.sum()
        keys = [o.key for o in plan.options]
        scored = Scored(plan.question.type, keys, [float(p) for p in probs], options_hash(plan.question),
                        len(plan.passes[0][0]), len(plan.passes))
        return scored, evaluated

    def _slot_logprobs(self, units: list[Unit], n: int) -> tuple[npt.NDArray[np.float64], int]:
        """log P(slot) for slots 0..n-1; single letters, or the chain rule over two-letter codes."""
        logits = self._eval(units).astype(np.float64)
        codes = labels(n)
        if len(codes[0]) == 1:
            ids = [self._token_of[c[0]] for c in codes]
            return log_softmax(logits[ids]), 0
        groups = sorted({c[0] for c in codes})
        first = log_softmax(logits[[self._token_of[g] for g in groups]])
        out = np.empty(n)
        for gi, group in enumerate(groups):
            members = [i for i, c in enumerate(codes) if c[0] == group]
            inner = self._eval([*units, self.chain_letter_tokens[group]]).astype(np.float64)
            second = log_softmax(inner[[self._token_of[codes[i][1]] for i in members]])
            out[members] = first[gi] + second
        return out, len(groups)


def answer_json(scored: Scored, question: AnyQuestion, *, with_extensions: bool = True) -> dict[str, Any]:
    """The contract's answer object for one question (decision-api.md, Response)."""
    probs = scored.probs
    ext: dict[str, Any] = {}
    if with_extensions:
        ext = {"x_margin": round(contract.margin(probs), 6), "x_options_sha256": scored.options_sha256,
               "x_orders": scored.orders}
    if isinstance(question, NoulQuestion):
        return {"type": "noul", "noul": probs[0], **ext}
    if isinstance(question, ChoiceQuestion):
        distribution = dict(zip(scored.keys, probs, strict=True))
        best = scored.keys[int(np.argmax(probs))]
        return {"type": "choice", "choice": best, "probabilities": distribution,
                "confidence": contract.choice_confidence(probs), **ext}
    assert isinstance(question, ScoreQuestion)
    legend = {str(i): (level if isinstance(level, str) else json.dumps(level, ensure_ascii=False))
              for i, level in enumerate(question.criteria)}
    return {"type": "score", "score": contract.score_expectation(probs), "legend": legend,
            "probabilities": {str(i): p for i, p in enumerate(probs)},
            "confidence": contract.score_confidence(probs), **ext}
