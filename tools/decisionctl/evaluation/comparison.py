"""What changed between two evaluation runs of the same labeled cases: a baseline and a candidate (another
model file, llama.cpp build, instance type, calibration, or option wording).

Reads what `decisionctl evaluate` wrote into each run's directory (results.json, and predictions.jsonl for
the hash of each case's content); it calls no endpoint and never sees state text. Cases are matched by id.
A case whose content hash differs between the runs is still compared (a wording change is what such a
comparison is for) and is counted as changed content. Where both runs wrote a policy (evaluate
--write-policy), the bands that changed between the two are listed: thresholds, certified bound, share
automated, E and C, and the label set they were measured on.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from decisionctl import plots
from decisionctl.core import metrics
from decisionctl.core.identity import IDENTITY_FIELDS
from decisionctl.core.labeled import PREDICTIONS, Prediction
from decisionctl.core.results import RESULTS
from decisionctl.core.scoring import PredictionLog

COMPARISON_JSON = "comparison.json"
COMPARISON_PNG = "comparison.png"


class CompareError(ValueError):
    """A directory that does not hold a finished evaluation, or two runs with no case in common."""


@dataclass(frozen=True)
class EvaluationRun:
    path: Path
    predictions: dict[str, Prediction]  # by case id, in the cases file's order
    case_sha256: dict[str, str]
    identity: dict[str, Any]
    automate_at: float | None  # the run's recommended automate threshold, if it had one
    policy: dict[str, Any] | None = None  # the policy block the run wrote (evaluate --write-policy), if it did


@dataclass(frozen=True)
class CasePair:
    base: Prediction
    new: Prediction  # same id and question type as base (pair_cases checks)
    content_changed: bool

    @property
    def id(self) -> str:
        return self.base.id

    @property
    def type(self) -> str:
        return self.base.type

    @property
    def base_choice(self) -> str:
        return self.base.options[self.base.predicted_index]

    @property
    def new_choice(self) -> str:
        return self.new.options[self.new.predicted_index]

    @property
    def changed(self) -> bool:
        return self.base_choice != self.new_choice

    @cached_property  # read by the summaries, the ranking and the report
    def total_variation(self) -> float | None:
        """Half the L1 distance between the two distributions, matched by option; None if the options differ."""
        if set(self.base.options) != set(self.new.options):
            return None
        new = dict(zip(self.new.options, self.new.probs, strict=True))
        return 0.5 * sum(abs(p - new[o]) for o, p in zip(self.base.options, self.base.probs, strict=True))

    def new_prob_of_base_choice(self) -> float | None:
        if self.base_choice not in self.new.options:
            return None
        return self.new.probs[self.new.options.index(self.base_choice)]


def load_run(path: Path) -> EvaluationRun:
    results_path = path / RESULTS
    if not results_path.is_file():
        raise CompareError(f"{path}: no {RESULTS}; run `decisionctl evaluate ... --out {path}` first")
    try:
        results = json.loads(results_path.read_text(encoding="utf-8"))
        predictions = [Prediction.from_json(p) for p in results["predictions"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise CompareError(f"{results_path}: not an evaluation's results ({exc})") from exc
    records = PredictionLog(path / PREDICTIONS).load(repair=False)  # another run's log: read, never cut
    hashes = {cid: r["case_sha256"] for cid, r in records.items() if "case_sha256" in r}
    overall = (results.get("recommendation") or {}).get("overall") or {}
    return EvaluationRun(
        path=path,
        predictions={p.id: p for p in predictions},
        case_sha256=hashes,
        identity=results.get("identity") or {},
        automate_at=overall.get("automate_at_or_above"),
        policy=results.get("policy"),
    )


def pair_cases(base: EvaluationRun, new: EvaluationRun) -> list[CasePair]:
    pairs = []
    for cid, b in base.predictions.items():
        n = new.predictions.get(cid)
        if n is None:
            continue
        if b.type != n.type:
            raise CompareError(f"case {cid!r} is a {b.type} question in {base.path} but a {n.type} in {new.path}")
        hb, hn = base.case_sha256.get(cid), new.case_sha256.get(cid)
        pairs.append(CasePair(b, n, content_changed=hb is not None and hn is not None and hb != hn))
    if not pairs:
        raise CompareError(f"{base.path} and {new.path} have no case id in common")
    return pairs


def mcnemar_p(fixed: int, broken: int) -> float:
    """Exact two-sided McNemar test: how likely a split this uneven of the cases that changed correctness
    is if the two runs were equally accurate (1.0 when none changed)."""
    n = fixed + broken
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(fixed, broken) + 1)) / (1 << n)  # exact integers, one rounding
    return min(1.0, 2 * tail)


def summarize(pairs: Sequence[CasePair], threshold: float | None) -> dict[str, Any]:
    n = len(pairs)
    fixed = sum(1 for p in pairs if p.new.correct and not p.base.correct)
    broken = sum(1 for p in pairs if p.base.correct and not p.new.correct)
    changed = sum(1 for p in pairs if p.changed)
    tvs = [tv for p in pairs if (tv := p.total_variation) is not None]
    out: dict[str, Any] = {
        "cases": n,
        "content_changed": sum(1 for p in pairs if p.content_changed),
        "accuracy_base": sum(p.base.correct for p in pairs) / n,
        "accuracy_new": sum(p.new.correct for p in pairs) / n,
        "decisions_changed": changed,
        "decisions_changed_rate": changed / n,
        "fixed": fixed,
        "broken": broken,
        "mcnemar_p": mcnemar_p(fixed, broken),
        "mean_total_variation": sum(tvs) / len(tvs) if tvs else None,
        "max_total_variation": max(tvs) if tvs else None,
        "ece_base": metrics.ece([p.base for p in pairs]),
        "ece_new": metrics.ece([p.new for p in pairs]),
    }
    if threshold is not None:
        auto_b = [p.base.confidence >= threshold for p in pairs]
        auto_n = [p.new.confidence >= threshold for p in pairs]
        out["automate"] = {
            "threshold": threshold,
            "base": sum(auto_b),
            "new": sum(auto_n),
            "newly_automated": sum(1 for b, a in zip(auto_b, auto_n, strict=True) if a and not b),
            "no_longer_automated": sum(1 for b, a in zip(auto_b, auto_n, strict=True) if b and not a),
            "wrong_automated_base": sum(1 for p, b in zip(pairs, auto_b, strict=True) if b and not p.base.correct),
            "wrong_automated_new": sum(1 for p, a in zip(pairs, auto_n, strict=True) if a and not p.new.correct),
        }
    return out


BAND_FIELDS = ("automate_at_or_above", "review_at_or_above", "support")
CERTIFICATE_FIELDS = ("bound", "automated", "errors", "max_error", "confidence", "method", "labels_sha256")


def _bands(policy: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A policy block's bands by name ("type noul", "question <x_options_sha256>"), flattened for comparison."""
    out: dict[str, dict[str, Any]] = {}
    for group, prefix in (("types", "type"), ("questions", "question")):
        for key, band in (policy.get(group) or {}).items():
            certificate = band.get("certificate") or {}
            row = {f: band.get(f) for f in BAND_FIELDS} | {f: certificate.get(f) for f in CERTIFICATE_FIELDS}
            cases = certificate.get("cases") or band.get("support") or 0
            row["automated_share"] = (certificate.get("automated") or 0) / cases if certificate and cases else None
            out[f"{prefix} {key}"] = row
    return out


def band_changes(base: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """What changed between two policies, band by band: added, removed, and per changed band each field's
    value before and after."""
    before, after = _bands(base), _bands(new)
    changed = {}
    for name in sorted(before.keys() & after.keys()):
        fields = {f: {"base": v, "new": after[name][f]} for f, v in before[name].items() if after[name][f] != v}
        if fields:
            changed[name] = fields
    return {
        "base_version": base.get("version"),
        "new_version": new.get("version"),
        "added": sorted(after.keys() - before.keys()),
        "removed": sorted(before.keys() - after.keys()),
        "changed": changed,
        "unchanged": sum(1 for n in before.keys() & after.keys() if n not in changed),
    }


def identity_changes(base: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: {"base": base.get(k), "new": new.get(k)} for k in IDENTITY_FIELDS if base.get(k) != new.get(k)}


@dataclass(frozen=True)
class Comparison:
    report: dict[str, Any]  # JSON-ready
    pairs: list[CasePair]
    threshold: float | None

    def points(self) -> list[tuple[float, float, str]]:
        """(baseline's probability of its decision, candidate's probability of that option, category) per case."""
        out = []
        for p in self.pairs:
            y = p.new_prob_of_base_choice()
            if y is None:
                continue
            if not p.changed:
                category = "same"
            elif p.new.correct:
                category = "fixed"
            elif p.base.correct:
                category = "broken"
            else:
                category = "other"
            out.append((p.base.confidence, y, category))
        return out


def compare(base: EvaluationRun, new: EvaluationRun, *, threshold: float | None = None, top: int = 10) -> Comparison:
    """Pair the runs' cases and summarize; `threshold` defaults to the baseline's recommended automate threshold."""
    pairs = pair_cases(base, new)
    if threshold is None:
        threshold = base.automate_at
    by_type: dict[str, list[CasePair]] = {}
    for p in pairs:
        by_type.setdefault(p.type, []).append(p)
    # changed decisions first, then by distance; ties (to 1e-9) keep the cases file's order
    ranked = sorted(pairs, key=lambda p: (not p.changed, -round(p.total_variation or 0.0, 9)))
    report = {
        "base": str(base.path),
        "new": str(new.path),
        "only_in_base": sorted(set(base.predictions) - set(new.predictions)),
        "only_in_new": sorted(set(new.predictions) - set(base.predictions)),
        "identity_changes": identity_changes(base.identity, new.identity),
        "band_changes": band_changes(base.policy, new.policy) if base.policy and new.policy else None,
        "total_variation": "half the L1 distance between a case's two distributions, 0 (same) to 1 (disjoint)",
        "overall": summarize(pairs, threshold),
        "by_type": {t: summarize(ps, threshold) for t, ps in sorted(by_type.items())},
        "most_changed": [
            {
                "id": p.id,
                "type": p.type,
                "base_choice": p.base_choice,
                "new_choice": p.new_choice,
                "base_confidence": p.base.confidence,
                "new_confidence": p.new.confidence,
                "total_variation": p.total_variation,
                "base_correct": p.base.correct,
                "new_correct": p.new.correct,
                "content_changed": p.content_changed,
            }
            for p in ranked[:top]
            if p.changed or (p.total_variation or 0.0) > 0
        ],
        "cases": [
            {
                "id": p.id,
                "changed": p.changed,
                "total_variation": p.total_variation,
                "content_changed": p.content_changed,
            }
            for p in pairs
        ],
    }
    return Comparison(report, pairs, threshold)


def write_comparison(result: Comparison, out: Path) -> list[Path]:
    """comparison.json and the scatter of each case's probability before and after, in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    json_path, png_path = out / COMPARISON_JSON, out / COMPARISON_PNG
    report = result.report
    json_path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    base, new, overall = Path(report["base"]), Path(report["new"]), report["overall"]
    plots.comparison_scatter(
        png_path,
        result.points(),
        title=f"{new.name or new} against {base.name or base}: {overall['decisions_changed']} of "
        f"{overall['cases']} decisions changed",
        threshold=result.threshold,
    )
    return [json_path, png_path]


def compare_runs(
    base: Path, new: Path, out: Path, *, threshold: float | None, top: int
) -> tuple[Comparison, list[Path]]:
    """The compare use case: two evaluate directories compared, and comparison.json and .png written into `out`
    (CompareError where a directory holds no finished evaluation or the runs share no case)."""
    result = compare(load_run(base), load_run(new), threshold=threshold, top=top)
    return result, write_comparison(result, out)
