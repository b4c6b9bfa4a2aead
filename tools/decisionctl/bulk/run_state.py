"""The run state of a bulk run (OUT/run.json) and what a finished run writes: answers, summary, evaluate output.

run.json says which file (by sha256), target and run name the directory belongs to, which parts are
uploaded, which job or invocations were started, and how far a `--url` run got; a re-run reads it and
goes on from there, so nothing uploaded is uploaded again and nothing started is started again. It holds
no record content. answers.jsonl and the evaluate directory are rewritten whole from the answers each
time a run finishes, so a repeated finish gives the same files.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from decisionctl.bulk.records import InputSummary, PartAnswers, join, read_records
from decisionctl.certification.results import evaluation_results
from decisionctl.evaluation import scoring
from decisionctl.evaluation.cases import (
    IDENTITY,
    PREDICTIONS,
    Prediction,
    case_digest,
    prediction_from_response,
    read_response,
    run_fingerprint,
)

STATE = "run.json"
ANSWERS = "answers.jsonl"
SUMMARY = "summary.json"
EVALUATE_DIR = "evaluate"
PARTIAL = "answers.partial.jsonl"  # --url: answer lines in input order as they arrive
STATE_VERSION = 1
FAILED_EXAMPLES = 10


class BatchRunError(RuntimeError):
    """The run cannot start or go on; the message says what to do."""


def new_run_name() -> str:
    """A run (and execution) name: sortable, unique, and valid for Step Functions and Transform job names."""
    return f"{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(4)}"


@dataclass
class RunState:
    mode: str
    target: str
    input_sha256: str
    records: int
    labeled: bool
    run: str
    parts: list[dict[str, Any]] = field(default_factory=list)  # {"name", "count", then mode-specific keys}
    parts_complete: bool = False
    execution_arn: str | None = None
    started_s: float | None = None
    finished_s: float | None = None
    records_done: int = 0
    partial_bytes: int = 0
    busy_s: float = 0.0
    version: int = STATE_VERSION

    def save(self, out: Path) -> None:
        tmp = out / (STATE + ".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, out / STATE)

    @classmethod
    def load(cls, out: Path) -> RunState | None:
        path = out / STATE
        if not path.exists():
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def open_state(out: Path, *, mode: str, target: str, summary: InputSummary, restart: bool) -> RunState:
    """The directory's run of this file on this target, resumed; a new one if there is none (or --restart)."""
    out.mkdir(parents=True, exist_ok=True)
    if restart:
        for name in (STATE, ANSWERS, SUMMARY, PARTIAL):
            (out / name).unlink(missing_ok=True)
        shutil.rmtree(out / EVALUATE_DIR, ignore_errors=True)
    state = RunState.load(out)
    if state is None:
        state = RunState(mode, target, summary.sha256, summary.records, summary.labeled, new_run_name())
        state.save(out)
        return state
    if (state.mode, state.target, state.input_sha256) != (mode, target, summary.sha256):
        raise BatchRunError(
            f"{out} holds run {state.run} of another file or target ({state.mode} {state.target}); "
            "use a new --out directory, or --restart to forget it"
        )
    return state


@dataclass
class Tally:
    records: int = 0
    answered: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    examples: list[dict[str, Any]] = field(default_factory=list)

    def add(self, record_id: Any, line_no: int, answer: dict[str, Any]) -> None:
        self.records += 1
        error = answer.get("error")
        if error is None:
            self.answered += 1
            return
        kind = str(error.get("error_type", "unknown")) if isinstance(error, dict) else "unknown"
        self.failures[kind] += 1
        if len(self.examples) < FAILED_EXAMPLES:
            message = str(error.get("message", "")) if isinstance(error, dict) else str(error)
            self.examples.append({"id": record_id, "line": line_no, "error_type": kind, "message": message[:300]})


@dataclass
class EvaluateWriter:
    """The evaluate directory of a labeled run: predictions.jsonl, identity.json, results.json and plots."""

    out: Path
    predictions: list[Prediction] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    identity: dict[str, Any] | None = None
    identity_changed: bool = False
    _fingerprint: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        shutil.rmtree(self.out, ignore_errors=True)
        self.out.mkdir(parents=True)
        self._log = (self.out / PREDICTIONS).open("w", encoding="utf-8")

    def add(self, record: Any, answer: dict[str, Any]) -> None:
        case = record.case
        if "error" in answer:
            error = answer["error"] if isinstance(answer["error"], dict) else {}
            self.errors.append({"id": case.id, "status": error.get("status", 0), "error": error.get("message", "")})
            return
        try:
            response = read_response({k: v for k, v in answer.items() if k != "id"})
            latency = float((answer.get("x_timing_ms") or {}).get("total", 0.0)) / 1000.0
            prediction = prediction_from_response(case, response, latency)
        except (ValueError, KeyError) as exc:
            self.errors.append({"id": case.id, "status": 200, "error": f"unreadable answer: {exc}"})
            return
        served = run_fingerprint(response.x_run)
        if self.identity is None:
            self._fingerprint = served
            self.identity = response.x_run.model_dump(mode="json") if response.x_run else {}
        elif served != self._fingerprint:
            self.identity_changed = True
        self._log.write(json.dumps({**prediction.to_json(), "case_sha256": case_digest(case)}, sort_keys=True) + "\n")
        self.predictions.append(prediction)

    def close(self, cases_path: Path, records: int, thresholds: dict[str, float | int]) -> dict[str, Any] | None:
        self._log.close()
        if self.identity_changed or not self.predictions:
            return None
        (self.out / IDENTITY).write_text(json.dumps(self.identity, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        run = scoring.Run(self.predictions, skipped=0, sent=records, errors=self.errors, identity=self.identity)
        results = evaluation_results(
            run,
            records,
            cases_path,
            target_accuracy=float(thresholds["target_accuracy"]),
            min_support=int(thresholds["min_support"]),
            review_accuracy=float(thresholds["review_accuracy"]),
        )
        scoring.write_results(self.out, results)
        scoring.write_plots(self.out, self.predictions, results["recommendation"]["overall"])
        return results


def finish(
    cases_path: Path,
    out: Path,
    state: RunState,
    parts: Iterable[PartAnswers],
    *,
    seconds: float | None,
    cost: dict[str, Any] | None,
    details: dict[str, Any],
    thresholds: dict[str, float | int],
) -> dict[str, Any]:
    """Join answers to records into answers.jsonl (and the evaluate directory), then write summary.json."""
    tally = Tally()
    writer = EvaluateWriter(out / EVALUATE_DIR) if state.labeled else None
    with (out / ANSWERS).open("w", encoding="utf-8") as answers:
        for record, answer in join(read_records(cases_path), parts):
            answers.write(json.dumps(answer, ensure_ascii=False, separators=(",", ":")) + "\n")
            tally.add(record.id, record.line_no, answer)
            if writer is not None:
                writer.add(record, answer)
    results = writer.close(cases_path, state.records, thresholds) if writer is not None else None
    evaluate_note: dict[str, Any] | None = None
    if writer is not None:
        evaluate_note = {"directory": EVALUATE_DIR, "written": results is not None}
        if writer.identity_changed:
            evaluate_note["reason"] = "the model or calibration changed during the run: no results.json written"
    summary = {
        "run": state.run,
        "mode": state.mode,
        "target": state.target,
        "input": str(cases_path),
        "input_sha256": state.input_sha256,
        "records": tally.records,
        "answered": tally.answered,
        "failed": tally.records - tally.answered,
        "failures": dict(sorted(tally.failures.items())),
        "failed_examples": tally.examples,
        "seconds": seconds,
        "records_per_s": tally.records / seconds if seconds else None,
        "cost": cost,
        "answers": ANSWERS,
        "evaluate": evaluate_note,
        **details,
    }
    (out / SUMMARY).write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return summary


def estimate(
    prices: Any, instance_type: str, instances: int, seconds: float | None, basis: str
) -> dict[str, Any] | None:
    """Cost of `instances` instances of `instance_type` for `seconds`, from the price table; None if unpriced."""
    if seconds is None or not instance_type or instance_type not in prices.hourly:
        return None
    hourly = prices.price(instance_type)
    return {
        "estimate": hourly * instances * seconds / 3600.0,
        "currency": prices.currency,
        "instance_type": instance_type,
        "instances": instances,
        "hourly_price": hourly,
        "basis": basis,
        "prices": prices.source,
        "prices_checked": prices.checked,
    }


def describe(summary: dict[str, Any]) -> str:
    """The summary in a few lines for the terminal."""
    lines = [
        f"run {summary['run']} ({summary['mode']} {summary['target']}): {summary['answered']} of "
        f"{summary['records']} records answered, {summary['failed']} failed"
    ]
    for kind, count in summary["failures"].items():
        lines.append(f"  {count} {kind}")
    if summary["records_per_s"]:
        lines.append(f"{summary['records_per_s']:.2f} records/s over {summary['seconds']:.0f} s")
    cost = summary["cost"]
    if cost:
        checked = "" if cost["prices_checked"] else " (EXAMPLE prices: check them)"
        lines.append(f"cost about {cost['estimate']:.4f} {cost['currency']}: {cost['basis']}{checked}")
    execution = summary.get("execution")
    if execution and execution["status"] != "SUCCEEDED":
        lines.append(f"the execution {execution['status']}: {execution['error']}")
    evaluate = summary["evaluate"]
    if evaluate and not evaluate["written"]:
        lines.append(f"no evaluate results: {evaluate.get('reason', 'no case was answered')}")
    return "\n".join(lines)
