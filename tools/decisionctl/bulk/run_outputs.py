"""What a finished bulk run writes, rewritten whole each time a run finishes (so a repeated finish gives the same
files): answers.jsonl (each record's answer line in input order), the evaluate directory of a labeled file
(predictions.jsonl, identity.json, results.json and its figures, as `evaluate` writes them) and summary.json."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from decisionctl.bulk.records import join, read_records
from decisionctl.bulk.run_state import ANSWERS, EVALUATE_DIR, FAILED_EXAMPLES, SUMMARY, RunAnswers
from decisionctl.core import run_plots
from decisionctl.core.cases import case_digest, parse_case, prediction_from_response, run_fingerprint
from decisionctl.core.labeled import IDENTITY, PREDICTIONS, Prediction, Run
from decisionctl.core.replies import read_response
from decisionctl.core.results import evaluation_results, write_results


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
        run = Run(self.predictions, skipped=0, sent=records, errors=self.errors, identity=self.identity)
        results = evaluation_results(
            run,
            records,
            cases_path,
            target_accuracy=float(thresholds["target_accuracy"]),
            min_support=int(thresholds["min_support"]),
            review_accuracy=float(thresholds["review_accuracy"]),
        )
        write_results(self.out, results)
        run_plots.write_plots(self.out, self.predictions, results["recommendation"]["overall"])
        return results


def finish(cases_path: Path, out: Path, answered: RunAnswers, *, thresholds: dict[str, float | int]) -> dict[str, Any]:
    """Join answers to records into answers.jsonl (and the evaluate directory), then write summary.json."""
    state, seconds = answered.state, answered.seconds
    tally = Tally()
    writer = EvaluateWriter(out / EVALUATE_DIR) if state.labeled else None
    with (out / ANSWERS).open("w", encoding="utf-8") as answers:
        for record, answer in join(read_records(cases_path, parse_case), answered.parts):
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
        "cost": answered.cost,
        "answers": ANSWERS,
        "evaluate": evaluate_note,
        **answered.details,
    }
    (out / SUMMARY).write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return summary
