"""The floor under any policy for benchmarks/decider_eval.py: how far the decider's answers, ranked by confidence,
could be automated within an error bound, per part, type and best question (why a band can or cannot certify)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import decider_stats as st  # a sibling script, not a package
from decision_spec.manifest import Manifest
from decisionctl.core.bounds import upper_bound
from decisionctl.core.labeled import Prediction


def floor_lines(
    parts: dict[str, list[Prediction]],
    cases: dict[str, dict[str, Any]],
    shipped: Manifest | None,
    report: dict[str, Any],
) -> list[str]:
    """Where a band can certify, whatever the calibration: a policy automates the answers at or above a confidence
    threshold, so the best any threshold can do is set by how the answers rank. Per part, the question (task family)
    that ranks best, then each type: the most
    confident answers' hits, and the most answers a threshold chosen on those very answers (the most optimistic
    choice, with no share of the error budget spent on the grid) could automate with an exact upper bound at or
    under the error bound; beside it, how many answers in a row without an error a band needs."""
    level = 0.05
    needs = {e: next(n for n in range(1, 10_000) if upper_bound(0, n, level) <= e) for e in (0.05, 0.10)}
    lines = [
        "",
        f"the floor under any policy ({'the shipped calibration' if shipped else 'as packaged'}; a band needs "
        f"{needs[0.05]} automated answers without an error at 5 %, {needs[0.10]} at 10 %, at 95 % confidence):",
        "",
        "| part | type | answers | 10 most confident: right | 25 | 50 | most automated, threshold chosen on them, "
        "within 5 % | within 10 % |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for part in ("certify", "test"):
        served = st.served_under(parts[part], shipped)
        questions: dict[str, list[Prediction]] = defaultdict(list)
        for p in served:
            questions[cases[p.id]["family"]].append(p)
        family = max(questions, key=lambda f: most_automated(by_confidence(questions[f]), 0.10))
        groups = {f"the best question ({family})": questions[family]}
        groups |= {qtype: [p for p in served if p.type == qtype] for qtype in sorted({p.type for p in served})}
        for label, answers in groups.items():
            ranked = by_confidence(answers)
            right = [sum(p.correct for p in ranked[:k]) for k in (10, 25, 50)]
            best = {bound: most_automated(ranked, bound, level) for bound in (0.05, 0.10)}
            report.setdefault("floor", {}).setdefault(part, {})[label] = {
                "answers": len(ranked),
                "right_among_most_confident": dict(zip(("10", "25", "50"), right, strict=True)),
                "most_automated_within": {"0.05": best[0.05], "0.10": best[0.10]},
            }
            lines.append(
                f"| {part} | {label} | {len(ranked)} | {right[0]} | {right[1]} | {right[2]} | {best[0.05]} | "
                f"{best[0.10]} |"
            )
    return lines


def by_confidence(answers: list[Prediction]) -> list[Prediction]:
    return sorted(answers, key=lambda p: -p.confidence)


def most_automated(ranked: list[Prediction], bound: float, level: float = 0.05) -> int:
    """The most answers, taken from the most confident down, whose exact upper bound on the error is within `bound`
    (the threshold chosen on the answers themselves: an optimistic count, with no share of the error budget spent
    on a grid)."""
    wrong, best = 0, 0
    for n, p in enumerate(ranked, 1):
        wrong += not p.correct
        if upper_bound(wrong, n, level) <= bound:
            best = n
    return best
