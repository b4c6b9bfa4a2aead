"""The run state of a bulk run (OUT/run.json), the answers a mode got back (RunAnswers) and the summary's text; what a
finished run writes from them is run_outputs.py's.

run.json says which file (by sha256), target and run name the directory belongs to, which parts are
uploaded, which job or invocations were started, and how far a `--url` run got; a re-run reads it and
goes on from there, so nothing uploaded is uploaded again and nothing started is started again. It holds
no record content.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from decisionctl.bulk.records import InputSummary, PartAnswers

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
class RunAnswers:
    """What a mode (jobs.py) got back for a run: its answer lines part by part (read as they are joined), how long it
    took, what it cost and what the summary says of it beside the counts."""

    state: RunState
    parts: Iterable[PartAnswers]
    seconds: float | None
    cost: dict[str, Any] | None
    details: dict[str, Any]


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
