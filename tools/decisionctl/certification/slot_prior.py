"""Fitting the model's prior over option slots from unlabeled decision requests (PriDe's rotation average).

For every choice question of the input file (no expected answers: the fit never sees a label) the
question is sent once per cyclic rotation of its options, each with `x_slot_probabilities`, and the
raw slot distribution of the order as sent (the adapter's "given" order, before any prior or
temperature) is kept. Over the n rotations every option sits in every slot once, so what the options
say averages out of the mean slot distribution and what is left is the model's taste for the slots;
the prior of n options is that mean over the questions of n options. The adapter divides each order's
distribution by it (calibration.py). The fit reads raw distributions, so the endpoint's own mode,
temperature and prior do not matter; its model and prompt template are recorded and bind the prior.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from decision_spec.contract import DEFAULT_MODEL_ALIAS, SINGLE_LABEL_MAX
from decision_spec.manifest import SlotPrior, sha256_file

from decisionctl.transport import RetryPolicy, Sender, send_with_retries

Progress = Callable[[str], None]


class FitError(ValueError):
    """The input or the endpoint's replies cannot give a prior; the message says which line or reply."""


@dataclass(frozen=True)
class ChoiceItem:
    """One choice question of the input, with the state it is asked of."""

    line: int
    qid: str
    state: Any
    question: dict[str, Any]

    @property
    def options(self) -> list[str]:
        return list(self.question["criteria"])

    def rotated(self, r: int) -> dict[str, Any]:
        """The request for rotation r (option r shown first), asking for the slot distributions."""
        names = self.options
        order = names[r:] + names[:r]
        question = {
            **self.question,
            "criteria": {o: self.question["criteria"][o] for o in order},
            "x_slot_probabilities": True,
            "x_out_of_scope": False,
        }
        return {"model": DEFAULT_MODEL_ALIAS, "state": self.state, "questions": {self.qid: question}}


@dataclass
class PriorFit:
    """Per option count: the summed slot distributions of each question's rotations, and what produced them."""

    sums: dict[int, list[float]] = field(default_factory=dict)
    questions: dict[int, int] = field(default_factory=dict)
    reads: int = 0
    model_sha256: str | None = None
    prompt_template: str | None = None

    def add(self, n: int, mean_over_rotations: list[float]) -> None:
        total = self.sums.setdefault(n, [0.0] * n)
        for slot, p in enumerate(mean_over_rotations):
            total[slot] += p
        self.questions[n] = self.questions.get(n, 0) + 1

    def prior(self) -> dict[str, list[float]]:
        out = {}
        for n, total in sorted(self.sums.items()):
            norm = sum(total)
            out[str(n)] = [round(v / norm, 8) for v in total]
        return out


def choice_items(path: Path) -> Iterator[ChoiceItem]:
    """The choice questions of a JSON Lines file of decision requests ({"state", "questions"} a line). A line
    carrying an expected answer is refused: the prior is fitted from unlabeled traffic."""
    with path.open(encoding="utf-8") as f:
        for line_no, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise FitError(f"{path}:{line_no}: not JSON ({exc.msg})") from None
            if not isinstance(record, dict) or "state" not in record or not isinstance(record.get("questions"), dict):
                raise FitError(f"{path}:{line_no}: not a decision request (an object with state and questions)")
            if "expected" in record:
                raise FitError(
                    f"{path}:{line_no}: carries an expected answer; the slot prior is fitted from unlabeled "
                    "requests only (strip the labels)"
                )
            for qid, question in record["questions"].items():
                criteria = question.get("criteria") if isinstance(question, dict) else None
                if question.get("type") != "choice" or not isinstance(criteria, dict):
                    continue
                if 2 <= len(criteria) <= SINGLE_LABEL_MAX:  # two-letter codes read two tokens: another prior
                    yield ChoiceItem(line_no, str(qid), record["state"], question)


def fit_prior(sender: Sender, items: list[ChoiceItem], retry: RetryPolicy, progress: Progress) -> PriorFit:
    """Read every rotation of every item and average the given order's slot distribution (module doc)."""
    fit = PriorFit()
    total = sum(len(item.options) for item in items)
    for item in items:
        n = len(item.options)
        mean = [0.0] * n
        for r in range(n):
            slots, run = _given_slots(sender, item, r, retry)
            _check_run(fit, run, item)
            for slot, p in enumerate(slots):
                mean[slot] += p / n
            fit.reads += 1
            if fit.reads % 25 == 0 or fit.reads == total:
                progress(f"fit-prior: {fit.reads}/{total} reads ({len(fit.questions)} option counts so far)")
        fit.add(n, mean)
    return fit


def _given_slots(sender: Sender, item: ChoiceItem, r: int, retry: RetryPolicy) -> tuple[list[float], dict[str, Any]]:
    reply, _ = send_with_retries(sender, item.rotated(r), retry)
    where = f"line {item.line}, question {item.qid!r}, rotation {r}"
    if not reply.ok:
        raise FitError(f"{where}: {reply.describe_error()}")
    body = reply.json()
    answer = (body.get("answers") or {}).get(item.qid) or {}
    read, slots = answer.get("x_orders_read"), answer.get("x_slot_probabilities")
    if not read or read[0] != "given" or not slots or len(slots[0]) != len(item.options):
        raise FitError(
            f"{where}: the answer has no slot distribution of the given order (x_slot_probabilities); the "
            "endpoint's adapter predates them"
        )
    return [float(p) for p in slots[0]], dict(body.get("x_run") or {})


def _check_run(fit: PriorFit, run: dict[str, Any], item: ChoiceItem) -> None:
    """Every reply must come from one model and one prompt template: the prior is bound to both."""
    sha, template = run.get("model_sha256"), run.get("prompt_template")
    if not sha or not template:
        raise FitError(f"line {item.line}: the reply has no run identity (x_run.model_sha256, prompt_template)")
    if fit.model_sha256 is None:
        fit.model_sha256, fit.prompt_template = sha, template
    elif (sha, template) != (fit.model_sha256, fit.prompt_template):
        raise FitError(
            f"line {item.line}: the endpoint changed model or prompt template during the fit "
            f"({fit.model_sha256[:12]}/{fit.prompt_template} then {sha[:12]}/{template}); run it again"
        )


def to_slot_prior(fit: PriorFit, requests: Path, *, created: str) -> SlotPrior:
    """The manifest block, with its provenance: the input file and its checksum, what was read, and when."""
    if fit.model_sha256 is None or fit.prompt_template is None or not fit.sums:
        raise FitError(f"{requests} holds no choice question of 2 to {SINGLE_LABEL_MAX} options to fit from")
    return SlotPrior(
        model_sha256=fit.model_sha256,
        prompt_template=fit.prompt_template,
        slots=fit.prior(),
        fitted_on={
            "input_file": requests.name,
            "input_sha256": sha256_file(requests),
            "questions": {str(n): c for n, c in sorted(fit.questions.items())},
            "reads": fit.reads,
            "created": created,
        },
    )
