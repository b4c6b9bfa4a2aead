"""The option a prediction picks (the adapter's rule, per type), and a prediction answered again with other
probabilities: what the calibration fits and the benchmarks re-read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from decision_spec.question_types import kind_of

from decisionctl.core.labeled import Prediction


def predicted_index(qtype: str, probs: Sequence[float]) -> int:
    """The option an answer picks: noul yes when p(yes) >= 0.5, otherwise the most probable option."""
    picked: int = kind_of(qtype).pick(probs)
    return picked


def reanswered(pred: Prediction, probs: list[float], *, temperature: float) -> Prediction:
    """The prediction as the endpoint would make it with these probabilities, served under `temperature` (its pick
    and confidence follow; the contract's own confidence is not recomputed)."""
    picked = predicted_index(pred.type, probs)
    return replace(
        pred,
        probs=probs,
        predicted_index=picked,
        confidence=probs[picked],
        temperature=temperature,
        contract_confidence=None,
    )
