"""The statistics benchmarks/decider_eval.py reports: intervals (Wilson, a seeded bootstrap), the yes/no intercept
and the temperature fitted on one part and applied to another, a policy's actions on predictions it never saw, and
the two figures (reliability before and after, coverage against error)."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from decision_adapter.input_flags import addressed_to_classifier
from decision_adapter.instruction_flags import instructs_decider
from decision_spec.manifest import Manifest
from decision_spec.policy import Policy, verdict
from decisionctl.core import intercepts, metrics, temperatures
from decisionctl.core.bands import question_key
from decisionctl.core.bounds import upper_bound
from decisionctl.core.labeled import Prediction
from decisionctl.core.picks import reanswered
from decisionctl.core.search import golden_section

Z = 1.96


def wilson(k: int, n: int) -> tuple[float, float]:
    """The 95 % Wilson interval of k successes in n."""
    if n == 0:
        return (math.nan, math.nan)
    p = k / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / (1 + Z * Z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def bootstrap(preds: Sequence[Prediction], stat: Callable[[Sequence[Prediction]], float | None], n: int = 1000):
    """A seeded percentile bootstrap 95 % interval of stat over the cases."""
    rng = random.Random(0)  # noqa: S311 - a reproducible resample, not a secret
    values = sorted(v for _ in range(n) if (v := stat([rng.choice(preds) for _ in preds])) is not None)
    if not values:
        return (math.nan, math.nan)
    return (values[int(0.025 * len(values))], values[int(0.975 * len(values)) - 1])


def accuracy_row(preds: Sequence[Prediction]) -> dict[str, Any]:
    k = sum(p.correct for p in preds)
    row: dict[str, Any] = {"cases": len(preds), "accuracy": k / len(preds), "accuracy_ci": wilson(k, len(preds))}
    if preds and all(p.type == "choice" for p in preds):
        row["macro_f1"] = metrics.macro_f1(preds)
        row["macro_f1_ci"] = bootstrap(preds, metrics.macro_f1)
    return row


def shifted(pred: Prediction, intercept: float) -> Prediction:
    """A yes/no answer with `intercept` added to its log-odds of yes, its temperature kept (decisionctl's Platt map
    with an exponent of 1)."""
    return intercepts.platt(pred, 1.0, intercept)


def fit_intercept(preds: Sequence[Prediction]) -> float:
    """The log-odds shift of yes alone (the temperature kept) that minimises the negative log-likelihood on these
    yes/no cases."""
    return golden_section(lambda b: intercepts.nll(preds, 1.0, b), -6.0, 6.0)


def _biased(log_p: Sequence[float], bias: Sequence[float]) -> list[float]:
    """softmax(log p + bias), in log space so that tiny probabilities stay exact."""
    shifted = [v + b for v, b in zip(log_p, bias, strict=True)]
    top = max(shifted)
    weights = [math.exp(v - top) for v in shifted]
    total = sum(weights)
    return [w / total for w in weights]


def with_level_prior(pred: Prediction, bias: Sequence[float]) -> Prediction:
    """A score answer with log-bias `bias[i]` added to level i's log-probability, renormalised (its temperature
    kept): a prior on the levels, which moves picks, unlike a temperature."""
    probs = _biased([math.log(max(p, 1e-12)) for p in pred.probs], bias)
    return reanswered(pred, probs, temperature=pred.temperature)


def fit_level_prior(preds: Sequence[Prediction], iterations: int = 2000) -> list[float]:
    """The log-bias per level (level 0 held at 0, each within -8..8) that maximises the likelihood of these score
    answers' labels, all with the same number of levels. At the maximum each level's expected count under the
    biased answers equals its count among the labels, so each sweep adds log(labelled / expected) to every level's
    bias (iterative scaling) until no bias moves by 1e-7."""
    levels = len(preds[0].probs)
    if any(len(p.probs) != levels for p in preds):
        raise ValueError("a level prior is fitted per number of levels")
    labelled = [sum(p.expected_index == i for p in preds) for i in range(levels)]
    logs = [[math.log(max(q, 1e-12)) for q in p.probs] for p in preds]
    bias = [0.0] * levels
    for _ in range(iterations):
        expected = [sum(column) for column in zip(*(_biased(log_p, bias) for log_p in logs), strict=True)]
        step = [math.log(max(n, 1e-9) / e) for n, e in zip(labelled, expected, strict=True)]
        moved = [min(max(b + d - step[0], -8.0), 8.0) for b, d in zip(bias, step, strict=True)]
        if max(abs(m - b) for m, b in zip(moved, bias, strict=True)) < 1e-7:
            return moved
        bias = moved
    return bias


def auc(positive: Sequence[float], negative: Sequence[float]) -> float:
    """The area under the ROC curve: the chance that a positive's score is above a negative's (ties count half)."""
    wins = sum((a > b) + 0.5 * (a == b) for a in positive for b in negative)
    return wins / (len(positive) * len(negative))


def fit_temperatures(preds: Sequence[Prediction]) -> dict[str, float]:
    """Per type, the exponent a (T' = T / a) minimising the negative log-likelihood (decisionctl's fit, no split)."""
    return {t: temperatures.fit_exponent(g) for t, g in metrics.by_type(preds).items()}


def calibrated(preds: Sequence[Prediction], exponents: Mapping[str, float]) -> list[Prediction]:
    return [temperatures.rescale(p, exponents.get(p.type, 1.0)) for p in preds]


def served_under(
    preds: Sequence[Prediction], manifest: Manifest | None, served_intercept: float = 0.0
) -> list[Prediction]:
    """The predictions as an endpoint serving `manifest` would make them (None: no calibration, the model as
    packaged): each rescaled from the temperature it was served with to the manifest's for its type (a temperature
    is a power of the distribution, so this is exact), and a yes/no answer's log-odds shifted by the manifest's
    intercept, after the intercept the predictions were served with (`served_intercept`, their x_run's) is taken
    off (exact too); a slot prior cannot be applied afterwards, so a manifest with one is refused."""
    calibration = manifest.calibration if manifest is not None else None
    if calibration is not None and calibration.slot_prior is not None:
        raise SystemExit("the policy's manifest has a slot prior: score the test part under it instead")
    out = []
    for p in preds:
        served = intercepts.unshifted(p, served_intercept if p.type == "noul" else 0.0)
        temperature = calibration.for_type(p.type) if calibration is not None else 1.0
        intercept = calibration.intercept_for(p.type) if calibration is not None else 0.0
        exponent = p.temperature / temperature
        if intercept:
            out.append(intercepts.platt(served, exponent, intercept))
        else:
            out.append(served if exponent == 1.0 else temperatures.rescale(served, exponent))
    return out


def policy_actions(
    policy: Policy, preds: Sequence[Prediction], cases: Mapping[str, Mapping[str, Any]]
) -> dict[str, str]:
    """Each case's action under the policy, as the adapter decides it (its question's band, else its type's; an
    answer whose state raises an input flag goes to review where the policy says so). The flags are the state's
    addressed_to_classifier and instructs_decider, computed here as the adapter does; control_strings needs the
    model's tokenizer and is not computed (the suite's states hold no control token)."""
    out = {}
    for p in preds:
        case = cases[p.id]
        flags = [
            name
            for name, raised in (
                ("addressed_to_classifier", addressed_to_classifier(case["state"])),
                ("instructs_decider", instructs_decider(case["state"])),
            )
            if raised
        ]
        key = question_key(case["question"])
        out[p.id] = verdict(policy, p.type, p.probs, options_sha256=key, input_flags=flags).action
    return out


def action_summary(preds: Sequence[Prediction], actions: Mapping[str, str], level: float) -> dict[str, Any]:
    automated = [p for p in preds if actions[p.id] == "automate"]
    errors = sum(not p.correct for p in automated)
    shares = {a: sum(1 for p in preds if actions[p.id] == a) / len(preds) for a in ("automate", "review", "abstain")}
    reviewed = [p for p in preds if actions[p.id] == "review"]
    return {
        "cases": len(preds),
        "shares": shares,
        "reviewed": len(reviewed),
        "review_suggestions_right": sum(p.correct for p in reviewed),
        "automated": len(automated),
        "errors": errors,
        "observed_error": errors / len(automated) if automated else None,
        "error_upper_bound": upper_bound(errors, len(automated), level) if automated else None,
    }


def reliability_png(path: Path, curves: Mapping[str, Sequence[Prediction]], title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.2, 5.2))
    ax.plot([0, 1], [0, 1], ls=":", c="grey", lw=1)
    for label, preds in curves.items():
        bins = [b for b in metrics.reliability_bins(preds) if b.count]
        ax.plot(
            [b.mean_confidence for b in bins],
            [b.accuracy for b in bins],
            marker="o",
            label=f"{label} (ECE {metrics.ece(preds):.3f})",
        )
    ax.set(xlabel="confidence of the picked option", ylabel="accuracy", title=title, xlim=(0, 1), ylim=(0, 1))
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def coverage_png(path: Path, curves: Mapping[str, Sequence[Prediction]], points: Mapping[str, tuple[float, float]]):
    """Error among the answers at or above each confidence against the share they are, and the policies' points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.2))
    for label, preds in curves.items():
        ranked = sorted(preds, key=lambda p: -p.confidence)
        xs, ys, wrong = [], [], 0
        for i, p in enumerate(ranked, start=1):
            wrong += not p.correct
            if i >= 10:
                xs.append(i / len(ranked))
                ys.append(wrong / i)
        ax.plot(xs, ys, label=label)
    for label, (share, err) in points.items():
        ax.scatter([share], [err], marker="D", zorder=3, label=label)
    ax.axhline(0.05, ls=":", c="grey", lw=1)
    ax.axhline(0.10, ls=":", c="grey", lw=1)
    ax.set(xlabel="share of answers automated (most confident first)", ylabel="error among them", ylim=(0, 1))
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
