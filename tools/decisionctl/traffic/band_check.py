"""A policy's automate bands measured on traffic: per band, the answers it automated, how many people
reversed, and that error against the bound the policy promised where the policy records one.

The bands are the policy's own verdicts recomputed from each captured answer (its probabilities, options
hash, label mass and out-of-scope probability), so a candidate policy can be measured on traffic another one
served. An environment's DECISION_MIN_LABEL_MASS, which overrides the policy's, is not in the capture.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from decision_spec.policy import Band, Policy, verdict

from decisionctl.traffic.capture import Joined, probabilities


@dataclass(frozen=True)
class Promise:
    """What a band's certificate promised: error at most `max_error` among what it automates, with probability
    `confidence`, and the exact bound at `confidence` the labeled cases gave (None: none certified)."""

    max_error: float
    confidence: float
    bound: float | None = None


def promised(band: Band | Mapping[str, Any]) -> Promise | None:
    """The promise a band's certificate records (decision-policy/2), or None for a band without one."""
    fields = band.model_dump() if isinstance(band, Band) else dict(band)
    certificate = fields.get("certificate")
    if not isinstance(certificate, Mapping):
        return None
    bound = certificate.get("bound")
    return Promise(
        float(certificate["max_error"]), float(certificate["confidence"]), None if bound is None else float(bound)
    )


def binomial_tail(errors: int, n: int, p: float) -> float:
    """P(X >= errors) for X ~ Binomial(n, p), exact (summed in log space so large n does not overflow)."""
    if errors <= 0:
        return 1.0
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    logs = [
        math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * math.log(p) + (n - k) * math.log1p(-p)
        for k in range(errors, n + 1)
    ]
    top = max(logs)
    return min(1.0, math.exp(top) * sum(math.exp(v - top) for v in logs))


def against_promise(errors: int, n: int, promise: Promise | None) -> dict[str, Any]:
    """The measured error and, with a promise, whether traffic contradicts it: the chance of this many errors
    or more if the band's error rate were exactly E, and `exceeded` when that chance is below 1 - C."""
    out: dict[str, Any] = {"automated": n, "errors": errors, "error": errors / n if n else None}
    if promise is None:
        out["promised"] = None
        return out
    p_value = binomial_tail(errors, n, promise.max_error) if n else 1.0
    out["promised"] = {"max_error": promise.max_error, "confidence": promise.confidence, "bound": promise.bound}
    out["p_value"] = p_value
    out["exceeded"] = bool(n) and p_value < 1.0 - promise.confidence
    return out


def band_report(joined: Sequence[Joined], policy: Policy) -> dict[str, Any]:
    """Per band of `policy`: the traffic answers it automates and their error against its promise."""
    groups: dict[str, list[Joined]] = defaultdict(list)
    bands: dict[str, tuple[Band, str]] = {}
    actions: dict[str, int] = defaultdict(int)
    for j in joined:
        answer = j.answer
        taken = verdict(
            policy,
            answer.type,
            probabilities(answer),
            options_sha256=answer.x_options_sha256,
            label_mass=answer.x_label_mass,
            out_of_scope=answer.x_out_of_scope,
        )
        actions[taken.action] += 1
        band, source = policy.band_for(answer.type, answer.x_options_sha256)
        if taken.action != "automate" or band is None:
            continue
        key = f"question {answer.x_options_sha256}" if source == "question" else f"type {answer.type}"
        groups[key].append(j)
        bands[key] = (band, source)
    report: dict[str, Any] = {}
    for key in sorted(groups):
        members, (band, _) = groups[key], bands[key]
        errors = sum(j.changed for j in members)
        report[key] = {
            "automate_at_or_above": band.automate_at_or_above,
            "support": band.support,
            "question_ids": sorted({j.question_id for j in members}),
            **against_promise(errors, len(members), promised(band)),
        }
    return {"policy": policy.version, "actions": dict(sorted(actions.items())), "bands": report}
