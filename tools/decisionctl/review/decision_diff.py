"""The decision diff: what changes between two evaluation records of the same suite, and the gates it must pass.

Cases are matched by id. A case whose content hash differs (an option reworded in the suite) is still compared
and is listed as changed content. Metrics are recomputed on the cases both records hold, so a case added to or
dropped from the suite moves no number; those cases are listed by id.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from decision_spec.answer_settings import AnswerSettings
from decision_spec.evaluation_record import UNGATED, DecisionGates

from decisionctl.review import record as records
from decisionctl.review import settings as review_settings
from decisionctl.review import summary

RUN_NOTED = (
    "model_sha256",
    "llama_cpp_build",
    "adapter",
    "hardware",
    "instance_types",
    "n_gpu_layers",
    "prompt_template",
    "order_debias_mode",
    "state_boundary",
    "option_labels",
    "calibration",
    "policy",
)


def max_delta(base: Mapping[str, Any], new: Mapping[str, Any]) -> float | None:
    """The largest difference in one option's probability between two answers (None: the options differ)."""
    if set(base["options"]) != set(new["options"]):
        return None
    after = dict(zip(new["options"], new["probs"], strict=True))
    return max(abs(float(p) - float(after[o])) for o, p in zip(base["options"], base["probs"], strict=True))


def _probs(a: Mapping[str, Any]) -> dict[str, float]:
    return dict(zip(a["options"], a["probs"], strict=True))


def flips(base: Mapping[str, Mapping[str, Any]], new: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The cases (in `base`'s order) whose picked option differs, with both distributions."""
    out = []
    for cid, b in base.items():
        n = new.get(cid)
        if n is None or b["picked"] == n["picked"]:
            continue
        out.append(
            {
                "id": cid,
                "type": b["type"],
                "expected": n["expected"],
                "base": {"picked": b["picked"], "probs": _probs(b), "correct": b["picked"] == b["expected"]},
                "new": {"picked": n["picked"], "probs": _probs(n), "correct": n["picked"] == n["expected"]},
                "content_changed": b.get("case_sha256") != n.get("case_sha256"),
            }
        )
    return out


def _band_rows(base: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    fields = ("max_error", "confidence", "automate_at_or_above", "automated_share", "automated", "errors", "bound")
    rows = {}
    for name in sorted(base.keys() | new.keys()):
        b, n = base.get(name), new.get(name)
        row = {f: {"base": b.get(f) if b else None, "new": n.get(f) if n else None} for f in fields}
        rows[name] = {"added": b is None, "removed": n is None, **row}
    return rows


def answer_settings_changes(base: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The answer settings the two records hold with different values (None: not recorded), in the model's order."""
    b, n = records.answer_settings_of(base).recorded(), records.answer_settings_of(new).recorded()
    names = [name for name in AnswerSettings.model_fields if b.get(name) != n.get(name)]
    return {name: {"base": b.get(name), "new": n.get(name)} for name in names}


def diff(base: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """Everything the review needs about two records, JSON-ready (no text of any case)."""
    base_answers, new_answers = base["answers"], new["answers"]
    common = [cid for cid in base_answers if cid in new_answers]
    if not common:
        raise records.EvaluationRecordError("the two records have no case id in common: they are not of the same suite")
    b = {cid: base_answers[cid] for cid in common}
    n = {cid: new_answers[cid] for cid in common}
    deltas = [d for cid in common if (d := max_delta(b[cid], n[cid])) is not None]
    before, after = records.summary(b), records.summary(n)
    run_b, run_n = base.get("run") or {}, new.get("run") or {}
    actions_b, actions_n = records.action_shares(b), records.action_shares(n)
    return {
        "base": {"artifact": base.get("artifact"), "suite": base.get("suite"), "created": base.get("created")},
        "new": {"artifact": new.get("artifact"), "suite": new.get("suite"), "created": new.get("created")},
        "run_changes": {
            k: {"base": run_b.get(k), "new": run_n.get(k)} for k in RUN_NOTED if run_b.get(k) != run_n.get(k)
        },
        "answer_settings_changes": answer_settings_changes(base, new),
        "cases": len(common),
        "only_in_base": [cid for cid in base_answers if cid not in new_answers],
        "only_in_new": [cid for cid in new_answers if cid not in base_answers],
        "content_changed": [cid for cid in common if b[cid].get("case_sha256") != n[cid].get("case_sha256")],
        "flips": flips(b, n),
        "max_probability_delta": max(deltas) if deltas else None,
        "metrics": {"base": before, "new": after},
        "bands": _band_rows(base.get("bands") or {}, new.get("bands") or {}),
        "actions": {"base": actions_b, "new": actions_n},
        "action_changes": [
            {"id": cid, "base": b[cid].get("action"), "new": n[cid].get("action")}
            for cid in common
            if b[cid].get("action") != n[cid].get("action")
        ],
    }


def failures(report: Mapping[str, Any], gates: DecisionGates) -> list[str]:
    """Each gate the diff fails, as a sentence with the numbers."""
    failed = []
    before, after = report["metrics"]["base"]["overall"], report["metrics"]["new"]["overall"]
    if gates.max_accuracy_drop_points is not None and before["accuracy"] is not None:
        drop = 100.0 * (before["accuracy"] - after["accuracy"])
        if drop > gates.max_accuracy_drop_points + 1e-9:
            failed.append(
                f"accuracy fell {drop:.1f} points ({before['accuracy']:.1%} to {after['accuracy']:.1%}), "
                f"more than {gates.max_accuracy_drop_points:g}"
            )
    if gates.max_flips is not None and len(report["flips"]) > gates.max_flips:
        failed.append(f"{len(report['flips'])} answers flipped, more than {gates.max_flips}")
    if gates.max_ece_rise is not None and before["ece"] is not None and after["ece"] is not None:
        rise = after["ece"] - before["ece"]
        if rise > gates.max_ece_rise + 1e-12:
            failed.append(
                f"ECE rose {rise:.3f} ({before['ece']:.3f} to {after['ece']:.3f}), more than {gates.max_ece_rise:g}"
            )
    if gates.band_bound:
        failed += _band_failures(report["bands"])
    return failed


def _band_failures(bands: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Bands whose error bound on the suite is past their E where it was not, or is past it with more errors among
    the automated answers than before. A bound past E on a suite too small to certify E alone fails nothing: the
    bound of a few error-free cases is above a small E."""
    failed = []
    for name, row in bands.items():
        bound, e, was = row["bound"]["new"], row["max_error"]["new"], row["bound"]["base"]
        if bound is None or e is None or bound <= e:
            continue
        rose_past = was is not None and was <= e
        more_errors = (row["errors"]["new"] or 0) > (row["errors"]["base"] or 0)
        if rose_past or more_errors:
            shown = "none" if was is None else f"{was:.3f}"
            failed.append(
                f"band {name}: its error bound on the suite is {bound:.3f} (was {shown}), past its E {e:g}, with "
                f"{row['errors']['new']} errors among {row['automated']['new']} automated answers "
                f"(were {row['errors']['base'] or 0})"
            )
    return failed


@dataclass(frozen=True)
class Review:
    """A decision diff as the command reports it: the Markdown, the JSON report and the gates that failed; or why
    the two records could not be compared (`refused`)."""

    markdown: str = ""
    report: dict[str, Any] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)
    refused: str | None = None


def review_records(
    base_path: Path,
    new_path: Path,
    *,
    env: str | None,
    cdk_json: Path,
    overrides: Mapping[str, Any],
    missing_base_is_new: bool,
    title: str,
) -> Review:
    """The decision-diff use case: the gates (cdk.json's for `env`, else none but the band bound, each of
    `overrides` replacing one), both records read and diffed; a missing base with `missing_base_is_new` reports
    the candidate alone, ungated. EvaluationRecordError where the candidate cannot be read."""
    limits = review_settings.load(cdk_json, env).gates if env else UNGATED
    for name, value in overrides.items():
        limits = limits.model_copy(update={name: value})
    new = records.read(new_path)
    if not base_path.exists() and missing_base_is_new:
        text = summary.new_record(new, title=title, base=str(base_path))
        return Review(text, {"base": None, "new": new_path.name, "failed": []})
    try:
        report = diff(records.read(base_path), new)
    except records.EvaluationRecordError as exc:
        return Review(refused=str(exc))
    failed = failures(report, limits)
    return Review(summary.decision_diff(report, failed, title=title), {**report, "failed": failed}, failed)
