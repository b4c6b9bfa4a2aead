"""The evaluation record: what one model artifact answers on one suite of labeled cases, bound to the artifact.

`decisionctl record-evaluation` writes it beside the artifact's manifest.json (and `package-model --upload` puts
it beside manifest.json in S3) and at the path cdk.json names, where synth and the preflight check that the
artifact a stack deploys is the one evaluated (stacks/evaluation_binding.py). It holds no state text: per case
only the case id, the options and their probabilities, the expected option, the action the artifact's policy
takes and a hash of the case's content, so it can be committed and posted in a pull request.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from decision_spec.answer_settings import AnswerSettings, merged, run_answer_settings
from decision_spec.evaluation_record import RECORD_SCHEMA, parse_record
from decision_spec.manifest import Manifest
from decision_spec.policy import ACTIONS, Policy, verdict

from decisionctl.core import metrics
from decisionctl.core.bounds import upper_bound
from decisionctl.core.identity import IDENTITY_FIELDS
from decisionctl.core.labeled import Prediction

RUN_FIELDS = (*IDENTITY_FIELDS, "state_boundary")


class EvaluationRecordError(ValueError):
    """A record that cannot be written (the endpoint served another artifact) or read (not a record)."""


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def answer_settings_served(identity: Mapping[str, Any] | None, manifest: Manifest) -> AnswerSettings:
    """The settings that changed the recorded answers: those x_run reports (the debias mode, its tolerance under
    adaptive, the state boundary, the out-of-scope option, the minimum label mass, the option counts debiased and
    rotated) and those the manifest records, which the adapter adopted at start (check_served
    refuses a run that contradicts them). One neither names is not recorded: the evaluating adapter's default or
    environment decided it."""
    return merged(run_answer_settings(identity or {}), manifest.recorded_answer_settings())


def answer_settings_of(record: Mapping[str, Any]) -> AnswerSettings:
    """A record's answer settings (none recorded in a record written before it held them)."""
    return AnswerSettings.model_validate(record.get("answer_settings") or {})


def answer(prediction: Prediction, case_sha256: str, policy: Policy | None, key: str | None) -> dict[str, Any]:
    """One case's entry: its options and their probabilities, what was picked and expected, the action taken."""
    out: dict[str, Any] = {
        "type": prediction.type,
        "options": list(prediction.options),
        "probs": [float(p) for p in prediction.probs],
        "picked": prediction.options[prediction.predicted_index],
        "expected": prediction.options[prediction.expected_index],
        "correct": prediction.correct,
        "confidence": prediction.confidence,
        "case_sha256": case_sha256,
        "action": None,
        "band": None,
    }
    if policy is not None:
        band, source = policy.band_for(prediction.type, key)
        out["action"] = verdict(policy, prediction.type, prediction.probs, options_sha256=key).action
        out["band"] = None if band is None else band_name(source, prediction.type, key)
    return out


def band_name(source: str, qtype: str, key: str | None) -> str:
    """A policy band's name in records and diffs: "type noul" or "question <x_options_sha256>"."""
    return f"question {key}" if source == "question" else f"type {qtype}"


def predictions_of(answers: Mapping[str, Mapping[str, Any]]) -> list[Prediction]:
    """The record's answers as predictions, for the metrics (latency and temperature are not recorded)."""
    out = []
    for cid, a in answers.items():
        options = list(a["options"])
        picked = options.index(a["picked"])
        out.append(
            Prediction(
                cid,
                a["type"],
                options,
                list(a["probs"]),
                options.index(a["expected"]),
                picked,
                a["confidence"],
                None,
                1.0,
                "",
                0.0,
            )
        )
    return out


def summary(answers: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Accuracy, ECE, Brier and mean confidence of these answers (metrics.summary), overall and per question type."""
    preds = predictions_of(answers)
    return {
        "overall": metrics.summary(preds),
        "by_type": {t: metrics.summary(g) for t, g in metrics.by_type(preds).items()},
    }


def action_shares(answers: Mapping[str, Mapping[str, Any]]) -> dict[str, float] | None:
    """The share of cases each action takes (None: the artifact has no policy)."""
    taken = [a["action"] for a in answers.values()]
    if not taken or any(t is None for t in taken):
        return None
    return {action: sum(1 for t in taken if t == action) / len(taken) for action in ACTIONS}


def measured_bands(answers: Mapping[str, Mapping[str, Any]], policy: Policy | None) -> dict[str, dict[str, Any]]:
    """Per policy band: its E and C, its certified bound, and what it does on this suite (the cases it decides,
    how many it automates, the errors among them, and the exact upper bound on their error rate at C)."""
    if policy is None:
        return {}
    bands: dict[str, dict[str, Any]] = {}
    named = [(f"type {t}", b) for t, b in policy.types.items()] + [
        (f"question {k}", b) for k, b in policy.questions.items()
    ]
    for name, band in named:
        decided = [a for a in answers.values() if a["band"] == name]
        automated = [a for a in decided if a["action"] == "automate"]
        errors = sum(1 for a in automated if not a["correct"])
        certificate = band.certificate
        level = certificate.confidence if certificate else None
        bands[name] = {
            "max_error": certificate.max_error if certificate else None,
            "confidence": level,
            "automate_at_or_above": band.automate_at_or_above,
            "review_at_or_above": band.review_at_or_above,
            "certified_bound": certificate.bound if certificate else None,
            "cases": len(decided),
            "automated": len(automated),
            "errors": errors,
            "automated_share": len(automated) / len(decided) if decided else None,
            "bound": upper_bound(errors, len(automated), level) if automated and level else None,
        }
    return bands


def build(
    *,
    predictions: Sequence[Prediction],
    case_sha256: Mapping[str, str],
    keys: Mapping[str, str],
    identity: Mapping[str, Any] | None,
    manifest: Manifest,
    manifest_bytes: bytes,
    suite_path: str,
    suite_bytes: bytes,
    cases: int,
    created: datetime,
) -> dict[str, Any]:
    """The record of `predictions`, scored on an endpoint serving `manifest` (check_served first)."""
    answers = {p.id: answer(p, case_sha256[p.id], manifest.policy, keys.get(p.id)) for p in predictions}
    run = identity or {}
    return {
        "schema": RECORD_SCHEMA,
        "created": created.isoformat(timespec="seconds"),
        "artifact": {
            "model_file": manifest.model_file,
            "model_sha256": manifest.sha256,
            "manifest_sha256": sha256_bytes(manifest_bytes),
            "calibration_sha256": manifest.calibration_sha256(),
            "policy_version": manifest.policy.version if manifest.policy else None,
            # what synth sizes memory from: the manifest's, which the record's manifest_sha256 covers
            "footprint": {"gguf_bytes": manifest.size_bytes, "kv_bytes_per_token": manifest.kv_bytes_per_token}
            if manifest.kv_bytes_per_token is not None
            else None,
        },
        "suite": {"path": suite_path, "sha256": sha256_bytes(suite_bytes), "cases": cases},
        "run": {k: run.get(k) for k in RUN_FIELDS},
        "answer_settings": answer_settings_served(identity, manifest).recorded(),
        "metrics": summary(answers),
        "bands": measured_bands(answers, manifest.policy),
        "actions": action_shares(answers),
        "answers": answers,
    }


def dumps(record: Mapping[str, Any]) -> bytes:
    """The record's bytes: the same record always gives the same bytes (its sha256 is what stacks bind to)."""
    return (json.dumps(record, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def read(path: Path) -> dict[str, Any]:
    """A record from disk; EvaluationRecordError names the file and what is wrong with it."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise EvaluationRecordError(f"{path}: no such file; write it with `decisionctl record-evaluation`") from None
    except OSError as exc:
        raise EvaluationRecordError(f"{path}: not readable ({exc})") from exc
    record, malformed = parse_record(data)
    if record is None:
        raise EvaluationRecordError(f"{path}: not an evaluation record ({malformed})")
    answers = record.get("answers")
    if not isinstance(answers, dict) or not answers:
        raise EvaluationRecordError(f"{path}: the record has no answers")
    for cid, a in answers.items():
        if not isinstance(a, dict) or not {"type", "options", "probs", "picked", "expected"} <= a.keys():
            raise EvaluationRecordError(f"{path}: case {cid!r} is not a recorded answer")
    return record
