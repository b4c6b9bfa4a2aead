"""A decision request scored from logits (`DecisionEngine.score`): one state prefill, a suffix per question and order.

For each question the model reads header + state + question suffix; the answer is a softmax over
the logits of the option labels' tokens at the final position, or, where options are named, the chain
rule over each name's tokens (core/cloze.py), and nothing is generated. With
order-debiasing, each question is scored under several option orders (the scheme's: the given and
the reversed, or every rotation) and the per-option vectors are combined (the scheme's `combine`: the
mean of log-probabilities, or of probabilities for rotations), so a model's taste for a slot cannot
decide the answer; in adaptive mode the rotations are read until `adaptive.settled` says the rest
cannot change the answer beyond the tolerance. Calibration: a fitted slot prior (choice questions)
divides each order's slot distribution, renormalized, before the orders combine; then the combined
score is divided by the question type's temperature before the final softmax; then a yes/no answer's
intercept b, where one is in force, is added to its log-odds of yes: p_yes = sigmoid(z / T + b).

Two abstention signals come from the same logits: the label mass (the whole vocabulary's probability
on the offered labels, averaged over the orders) and, for an out-of-scope question, the probability
of the added "none of these" option, split off so that the declared options still sum to 1.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt
from decision_spec.contract import InputFlag, options_hash, shift_log_odds
from decision_spec.question_types import options_of
from decision_spec.schemas import AnyQuestion, Option, Text

from .adaptive import settled
from .asked import Asked
from .calibration import ActiveCalibration
from .core.cloze import Path, branch_points, cloze_logprobs
from .core.errors import InvalidRequest, RuntimeFailure, TokenBudgetExceeded, request_budget_exceeded
from .core.signals import label_mass, log_softmax, order_name, softmax, split_out_of_scope
from .deadline import Deadline
from .input_flags import flags_of, normalized_strings, state_flags
from .instruction_flags import flags_raised
from .outcomes import DecisionOutcome, Scored
from .prompting.base import OUT_OF_SCOPE, PromptScheme, single_token
from .runtime import LlamaRuntime, NeedsRestore, Unit
from .state_cache import Snapshot, StateCache, prefix_key

AnswerMemo = dict[str, Scored]


def memo_key(state: Text, qid: str, question: AnyQuestion) -> str:
    """Everything a question's answer depends on within one engine: the state, the question's id (prompt
    schemes may show it) and the question itself, canonical."""
    return json.dumps(
        [state, qid, question.model_dump(mode="json")], sort_keys=True, ensure_ascii=False, separators=(",", ":")
    )


REQUEST_CONTEXTS = 4  # the default request budget (DECISION_MAX_REQUEST_TOKENS): this many contexts' worth


class _Budget:
    """The tokens one request may still have evaluated (its state, every question's head and option orders)."""

    def __init__(self, limit: int, spent: int) -> None:
        self.limit, self.spent = limit, 0
        self.spend(spent)

    def spend(self, tokens: int) -> None:
        self.spent += tokens
        if self.spent > self.limit:
            raise request_budget_exceeded(f"more than {self.limit}", self.limit)


class DecisionEngine:
    """Owns one llama.cpp context. Not re-entrant: callers serialise access (the app's pool does)."""

    def __init__(
        self,
        runtime: LlamaRuntime,
        scheme: PromptScheme,
        *,
        model_sha256: str,
        calibration: ActiveCalibration,
        cache: StateCache,
        reuse_states: bool = True,
        out_of_scope: bool = False,
        max_request_tokens: int | None = None,
    ) -> None:
        self.rt = runtime
        self.scheme = scheme
        self.model_sha256 = model_sha256
        self.calibration = calibration
        self.cache = cache
        self.reuse_states = reuse_states
        self.out_of_scope = out_of_scope and scheme.supports_out_of_scope  # every question, not only those opting in
        self.max_request_tokens = max_request_tokens or REQUEST_CONTEXTS * runtime.n_ctx
        self._label_tokens: dict[str, int] = {}
        self._units_of_text: dict[str, Unit] = {}
        self._prefix_snapshot: tuple[tuple[Unit, ...], bytes] | None = None
        self._deadline = Deadline.never()  # the scoring request's (score sets it)

    # -- public
    def score(
        self, request: Asked, memo: AnswerMemo | None = None, deadline: Deadline | None = None
    ) -> DecisionOutcome:
        """`memo`: the answers of earlier records of one JSON Lines mini-batch; a question asked again of the
        same state is answered from it (the same computation, not repeated) and new answers go into it. `deadline`:
        checked between units of work (each text tokenized, prefill chunk, question); past it DeadlineExceeded."""
        self._deadline = deadline or Deadline.never()
        try:
            return self._score(request, memo)
        finally:
            self._deadline = Deadline.never()

    def _score(self, request: Asked, memo: AnswerMemo | None) -> DecisionOutcome:
        t0 = time.perf_counter()
        shown_state = request.shown_state  # what the scheme renders: every caller string marked (caller_text.py)
        prefix = self._prefix_units(shown_state)
        prefix_len = sum(len(u) for u in prefix)
        if prefix_len >= self.rt.n_ctx:  # the state alone leaves no room: no question is worth tokenizing
            raise self._context_exceeded(f"more than {prefix_len}")
        budget = _Budget(self.max_request_tokens, prefix_len)  # refused as soon as planning passes it
        plans = {qid: self._plan(request, qid, budget) for qid in request.questions}
        longest = max(len(p.head) + len(p.suffix) + p.reach for plan in plans.values() for p in plan.passes)
        if prefix_len + longest > self.rt.n_ctx:
            raise self._context_exceeded(str(prefix_len + longest))
        t1 = time.perf_counter()
        decoded_before = self.rt.tokens_decoded
        source = self._load_prefix(prefix)
        t2 = time.perf_counter()
        answers = {}
        flagged: frozenset[InputFlag] | None = None  # the state's flags, read at the first question not in the memo

        def fresh(qid: str, plan: DecisionEngine._Plan) -> Scored:
            nonlocal flagged
            if flagged is None:
                self._deadline.check("the input flags")
                lines = normalized_strings(request.state_strings)  # once, for both flags that read words
                flagged = state_flags(request.state_strings, lines, self.rt.has_control_string) | flags_raised(lines)
            return self._flagged(self._score_question(prefix, plan), flagged, request.strings[qid])

        for qid, plan in plans.items():
            self._deadline.check("the next question")
            if memo is None:
                answers[qid] = fresh(qid, plan)
                continue
            key = memo_key(request.state, qid, plan.question)
            if key not in memo:
                memo[key] = fresh(qid, plan)
            answers[qid] = memo[key]
        t3 = time.perf_counter()
        evaluated = self.rt.tokens_decoded - decoded_before
        input_tokens = prefix_len + sum(a.suffix_tokens for a in answers.values())
        timings = {"tokenize": (t1 - t0) * 1e3, "state": (t2 - t1) * 1e3, "questions": (t3 - t2) * 1e3}
        return DecisionOutcome(answers, input_tokens, evaluated, source, {k: round(v, 2) for k, v in timings.items()})

    def _context_exceeded(self, needed: str) -> TokenBudgetExceeded:
        return TokenBudgetExceeded(
            f"the request needs {needed} tokens of context but the model's budget is {self.rt.n_ctx} tokens "
            "(SM_LLAMA_CPP_CTX_SIZE); shorten the state or the options, or split the request"
        )

    def _flagged(self, scored: Scored, state_flagged: frozenset[InputFlag], strings: tuple[str, ...]) -> Scored:
        flags = flags_of(state_flagged, strings, self.rt.has_control_string)
        return replace(scored, input_flags=flags) if flags else scored

    # -- planning
    @dataclass(frozen=True)
    class _Pass:
        head: Unit  # shared by the passes of one question (may be empty)
        suffix: Unit
        order: list[int]
        codes: list[tuple[int, ...]]  # label tokens per slot: one, two for chain-rule codes, or a name's
        reach: int = 0  # the most tokens one read holds after the suffix (a label's, or a name's up to a branch)
        points: Mapping[Path, list[int]] | None = None  # codes are names: where they part (core/cloze.py)

    @dataclass(frozen=True)
    class _Plan:
        question: AnyQuestion
        options: list[Option]  # the declared ones, then OUT_OF_SCOPE where offered
        passes: list[DecisionEngine._Pass]
        out_of_scope: bool

    def _prefix_units(self, shown_state: Text) -> tuple[Unit, ...]:
        """The prefix's units for the state as the scheme renders it (marked: caller_text.mark)."""
        units = []
        for i, text in enumerate(self.scheme.prefix_texts(shown_state)):
            cached = self._units_of_text.get(text) if i == 0 else None  # the header repeats: tokenize it once
            if cached is None:
                self._deadline.check("tokenizing the state")
                cached = self.rt.tokenize(text, add_bos=self.scheme.add_bos and i == 0)
                if i == 0:
                    if len(self._units_of_text) >= 8:  # the header rarely changes; never let this grow with states
                        self._units_of_text.clear()
                    self._units_of_text[text] = cached
            units.append(cached)
        return tuple(units)

    def _plan(self, request: Asked, qid: str, budget: _Budget | None = None) -> DecisionEngine._Plan:
        """One question's passes, rendered from its marked copy (Asked.shown), what the scheme shows."""
        question, shown = request.questions[qid], request.shown[qid]
        options = options_of(question)
        shown_options = options_of(shown)
        out_of_scope = self.scheme.supports_out_of_scope and (self.out_of_scope or question.x_out_of_scope)
        if out_of_scope:
            options.append(OUT_OF_SCOPE)
            shown_options.append(OUT_OF_SCOPE)
        passes: list[DecisionEngine._Pass] = []
        specs = self.scheme.passes(
            shown, shown_options, qid=request.shown_ids[qid], state=request.shown_state, out_of_scope=out_of_scope
        )
        names: dict[str, Path] = {}  # a named question's names, and where they part: the same set in every order
        points: dict[Path, list[int]] | None = None
        if specs and specs[0].named:
            self._deadline.check("tokenizing the options' names")
            tail = self.rt.tokenize(self.scheme.tail)
            tokens = [self._name_tokens(c[0], tail) for c in specs[0].codes]
            points = self._branches(qid, tokens)  # refuses two options of one name
            names = {c[0]: t for c, t in zip(specs[0].codes, tokens, strict=True)}
            named_reads = sum(map(len, points)), max(map(len, points), default=0)  # every order reads them all
        for spec in specs:
            self._deadline.check("tokenizing a question")
            if points is not None:
                codes = [names[c[0]] for c in spec.codes]
                extra, reach = named_reads
            else:
                codes = [tuple(self._label_token(piece) for piece in code) for code in spec.codes]
                if len({len(c) for c in codes}) != 1 or len(codes[0]) > 2:
                    raise RuntimeFailure("labels of one question must all be one token or all be two")
                extra = reach = len(codes[0]) - 1
            head = self.rt.tokenize(spec.head_text) if spec.head_text else ()
            suffix = self.rt.tokenize(spec.suffix_text)
            if budget is not None:  # one head per question
                budget.spend((0 if passes else len(head)) + len(suffix) + extra)
            passes.append(DecisionEngine._Pass(head, suffix, spec.order, codes, reach, points))
        if len(passes) == 1 and passes[0].head:  # nothing to share: one read instead of two
            only = passes[0]
            passes = [replace(only, head=(), suffix=only.head + only.suffix)]
        return DecisionEngine._Plan(question, options, passes, out_of_scope)

    def _name_tokens(self, name: str, tail: Unit) -> Path:
        """The tokens the model reads for an option's name as its answer, right after the prompt's tail (`tail`, its
        tokens; the name alone where the tail's last token would merge with it)."""
        both = self.rt.tokenize(self.scheme.tail + self.scheme.label_sep + name)
        if both[: len(tail)] == tail and len(both) > len(tail):
            return tuple(both[len(tail) :])
        return tuple(self.rt.tokenize(self.scheme.label_sep + name))

    def _branches(self, qid: str, names: list[Path]) -> dict[Path, list[int]]:
        """Where the names part, each a read of its path's tokens beyond the suffix (() : the suffix's own logits);
        refused as the caller's where two options share a name."""
        try:
            return branch_points(names, self.rt.eos_token())
        except ValueError:
            raise InvalidRequest(
                [
                    {
                        "loc": ["questions", qid, "criteria"],
                        "msg": "with DECISION_OPTION_LABELS=names, options are answered by name, and two of this "
                        "question's options have the same name",
                        "type": "value_error",
                    }
                ]
            ) from None

    def _label_token(self, piece: str) -> int:
        tok = self._label_tokens.get(piece)
        if tok is None:
            tok = single_token(self.rt.tokenize, self.scheme.tail, self.scheme.label_sep + piece)
            if tok is None:
                raise RuntimeFailure(f"label {piece!r} is not a single token after the prompt for this model")
            self._label_tokens[piece] = tok
        return tok

    # -- evaluation
    def _load_prefix(self, prefix: tuple[Unit, ...]) -> str:
        if not self.reuse_states:
            self.rt.forget()
        elif self.rt.units[: len(prefix)] == list(prefix):
            return "resident"
        flat = tuple(t for u in prefix for t in u)
        key = prefix_key(self.model_sha256, self.scheme.version, flat)
        caching = bool(self.cache.budget_bytes) and self.reuse_states
        snap = self.cache.get(key, flat) if caching else None
        if snap is not None:
            self.rt.restore(prefix, snap.data)
            self._prefix_snapshot = (prefix, snap.data)
            return "cache"
        self._eval(list(prefix))
        if caching or not self.rt.partial_rewind:
            data = self.rt.snapshot()
            self._prefix_snapshot = (prefix, data)
            if caching:
                self.cache.put(key, Snapshot(flat, data))
        return "computed"

    def _eval(self, units: list[Unit]) -> npt.NDArray[np.float32]:
        try:
            return self.rt.eval_units(units, self._deadline)
        except NeedsRestore:
            snap = self._prefix_snapshot
            if snap is None or list(snap[0]) != units[: len(snap[0])]:
                self.rt.forget()
            else:
                self.rt.restore(snap[0], snap[1])
            return self.rt.eval_units(units, self._deadline)

    def _score_question(self, prefix: tuple[Unit, ...], plan: DecisionEngine._Plan) -> Scored:
        n = len(plan.options)
        declared = n - 1 if plan.out_of_scope else n
        qtype = plan.question.type
        temperature = self.calibration.temperature(qtype, declared)
        intercept = self.calibration.intercept(qtype)
        tolerance = self.scheme.adaptive_tolerance
        per_pass, masses, slot_probs, names = [], [], [], []
        read_sum = np.zeros(n)
        for i, p in enumerate(plan.passes):
            units = [*prefix, p.head, p.suffix] if p.head else [*prefix, p.suffix]
            if p.points is not None:
                logprob_by_slot, mass = self._name_logprobs(units, p.codes, p.points)
            else:
                logprob_by_slot, mass = self._slot_logprobs(units, p.codes)
            slot_probs.append([float(v) for v in np.exp(logprob_by_slot)])
            prior = None if plan.out_of_scope else self.calibration.prior_of(qtype, len(p.codes))
            if prior is not None:  # divide by the prior of the slots the options sat in, renormalize
                logprob_by_slot = log_softmax(logprob_by_slot - np.log(prior))
            lp = np.empty(n)
            lp[p.order] = logprob_by_slot
            per_pass.append(lp)
            masses.append(mass)
            names.append(order_name(p.order, declared) or f"pass:{i}")
            if tolerance is not None:
                read_sum += np.exp(lp)
                if settled(
                    read_sum,
                    i + 1,
                    len(plan.passes),
                    tolerance=tolerance,
                    temperature=temperature,
                    out_of_scope=plan.out_of_scope,
                    intercept=intercept,
                ):
                    break
        combined = self.scheme.combine(per_pass)
        p_out: float | None = None
        if plan.out_of_scope:
            probs, p_out = split_out_of_scope(combined, temperature)
        else:
            probs = softmax(combined / temperature)
        probs = np.nan_to_num(probs, nan=1.0 / declared)
        probs = probs / probs.sum()
        if intercept:  # yes/no: options yes, no (question_types.NoulKind); the out-of-scope share stays as it is
            probs = np.array(shift_log_odds(probs[0], probs[1], intercept))
        return Scored(
            [o.key for o in plan.options[:declared]],
            [float(p) for p in probs],
            options_hash(plan.question),
            len(plan.passes[0].head) + len(plan.passes[0].suffix),  # one order's render, its shared head included
            len(per_pass),
            label_mass=float(np.mean(masses)),
            out_of_scope=p_out,
            orders_read=names,
            slot_probabilities=slot_probs,
        )

    def _name_logprobs(
        self, units: list[Unit], names: list[Path], points: Mapping[Path, list[int]]
    ) -> tuple[npt.NDArray[np.float64], float]:
        """log P(name) for each slot's option name, by the chain rule where the names part (core/cloze.py), and the
        label mass, the same over the whole vocabulary."""

        def logits_after(path: Path) -> npt.NDArray[np.float64]:
            return self._eval([*units, path] if path else units).astype(np.float64)

        return cloze_logprobs(names, points, self.rt.eos_token(), logits_after)

    def _slot_logprobs(self, units: list[Unit], codes: list[tuple[int, ...]]) -> tuple[npt.NDArray[np.float64], float]:
        """log P(slot): a softmax over single label tokens, or the chain rule over two-token codes,
        P(code) = P(first | prompt) * P(second | prompt, first), each restricted to the declared codes; and the
        label mass, the same probabilities over the whole vocabulary summed over the codes."""
        logits = self._eval(units).astype(np.float64)
        if len(codes[0]) == 1:
            return log_softmax(logits[[c[0] for c in codes]]), label_mass(logits, codes)
        firsts = sorted({c[0] for c in codes}, key=[c[0] for c in codes].index)
        first = log_softmax(logits[firsts])
        out = np.empty(len(codes))
        after: dict[int, npt.NDArray[np.float64]] = {}
        for gi, head in enumerate(firsts):
            members = [i for i, c in enumerate(codes) if c[0] == head]
            inner = self._eval([*units, (head,)]).astype(np.float64)
            after[head] = inner
            out[members] = first[gi] + log_softmax(inner[[codes[i][1] for i in members]])
        return out, label_mass(logits, codes, after)
