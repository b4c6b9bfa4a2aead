"""Captured answers joined with what people finally decided: labeled cases `evaluate` reads without the text,
the human-reversal rate of automated answers, and the error of a policy's automate bands on traffic.

An outcomes file names a decision by the request id its caller got back (`x_run.request_id`), the InferenceId
it passed to InvokeEndpoint, or SageMaker's eventId, and gives the final answer per question: noul true/false,
choice the option's name, score the level's index or its text. CSV (a header row with request_id, question_id,
final_answer; other columns are not read) or JSON Lines (objects with those keys).

The join writes OUT/cases.jsonl, one labeled case per (request, question) in the format `evaluate` reads, with
`state` null (the capture holds no text), and OUT/evaluate/predictions.jsonl and identity.json: the captured
answers as evaluate's own saved predictions, keyed by each case's content hash. `decisionctl evaluate
OUT/cases.jsonl --out OUT/evaluate ...` then finds every case already scored, sends nothing, and reports and
writes a policy (--write-policy) from traffic. A case sent anyway (another --out) is refused by any endpoint
(a decision needs a state), so no answer can be made up from an empty request.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from decision_spec.schemas import Answer

from decisionctl.core.cases import case_digest, parse_case, prediction_from_response, run_fingerprint
from decisionctl.core.labeled import IDENTITY, PREDICTIONS, QUESTION_ID
from decisionctl.readback import readback_of
from decisionctl.traffic.capture import CapturedAnswer, Joined

CASES = "cases.jsonl"
EVALUATE_DIR = "evaluate"
REPORT = "outcomes.json"
COLUMNS = ("request_id", "question_id", "final_answer")
EXAMPLES_KEPT = 5


class OutcomesError(ValueError):
    """An outcomes file that cannot be read at all (missing columns, not CSV or JSON Lines)."""


@dataclass(frozen=True)
class Outcome:
    line: int
    request_id: str
    question_id: str
    final: Any


@dataclass
class OutcomeRead:
    rows: list[Outcome] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)  # "line N: why", never the row's other columns


def read_outcomes(path: Path) -> OutcomeRead:
    """Every outcome row; rows without the three fields are listed as invalid with their line number."""
    text = path.read_text(encoding="utf-8-sig")
    found = OutcomeRead()
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(io.StringIO(text))
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise OutcomesError(f"{path}: the header row lacks {', '.join(missing)} (needs {', '.join(COLUMNS)})")
        items: Iterable[tuple[int, Any]] = ((reader.line_num, row) for row in reader)
    else:
        items = _json_lines(path, text)
    for line, row in items:
        if not isinstance(row, dict):
            found.invalid.append(f"line {line}: not an object")
            continue
        rid, qid, final = (row.get(c) for c in COLUMNS)
        if not isinstance(rid, str) or not rid or not isinstance(qid, str) or not qid:
            found.invalid.append(f"line {line}: request_id and question_id must be non-empty strings")
        elif final is None or final == "":
            found.invalid.append(f"line {line}: no final_answer")
        else:
            found.rows.append(Outcome(line, rid, qid, final))
    return found


def _json_lines(path: Path, text: str) -> Iterable[tuple[int, Any]]:
    for n, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                yield n, json.loads(line)
            except ValueError as exc:
                raise OutcomesError(f"{path}: line {n} is not JSON; an outcomes file is CSV or JSON Lines") from exc


def final_option(answer: Answer, final: Any) -> str:
    """The option a final answer names, in `pick`'s terms; ValueError says why it names none."""
    return readback_of(answer.type).final_option(answer, final)


@dataclass
class Join:
    joined: list[Joined] = field(default_factory=list)
    unmatched: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)
    superseded: int = 0  # rows replaced by a later row for the same request and question
    without_outcome: int = 0  # captured answers no outcome row names (normal: not every decision is reviewed)

    def miss(self, reason: str, line: int) -> None:
        self.unmatched[reason] += 1
        kept = self.examples.setdefault(reason, [])
        if len(kept) < EXAMPLES_KEPT:
            kept.append(f"line {line}")


def join(captured: Sequence[CapturedAnswer], outcomes: OutcomeRead) -> Join:
    """Each outcome row with the captured answer it names; every row that names none is counted under why.
    Of several rows for one decision's question (by any of its ids), the last in the file counts."""
    by_id: dict[str, list[CapturedAnswer]] = defaultdict(list)
    for c in captured:
        for i in set(c.ids):
            by_id[i].append(c)
    result = Join()
    latest: dict[tuple[int, str], tuple[Outcome, CapturedAnswer, Answer]] = {}
    for row in outcomes.rows:
        matches = by_id.get(row.request_id, [])
        if not matches:
            result.miss("no captured answer has this request id", row.line)
            continue
        if len(matches) > 1:
            result.miss("several captured answers have this id (name one by its request_id)", row.line)
            continue
        (match,) = matches
        answer = match.answers.get(row.question_id)
        if answer is None:
            result.miss("the captured answer has no such question id", row.line)
            continue
        result.superseded += (id(match), row.question_id) in latest
        latest[(id(match), row.question_id)] = (row, match, answer)
    named: set[int] = set()
    for row, match, answer in latest.values():
        try:
            final = final_option(answer, row.final)
        except ValueError as exc:
            result.miss(f"final answer not an option ({exc})", row.line)
            continue
        named.add(id(match))
        result.joined.append(Joined(match, row.question_id, answer, final, row.line))
    result.without_outcome = sum(1 for c in captured if id(c) not in named)
    return result


def labeled_case(j: Joined) -> dict[str, Any]:
    """One joined decision as a labeled case in evaluate's format, with no state (see the module doc)."""
    answer, c = j.answer, j.captured
    fields, expected = readback_of(answer.type).case_question(answer, j.final)
    question: dict[str, Any] = {"type": answer.type, **fields}
    if answer.x_options_sha256:
        question["x_options_sha256"] = answer.x_options_sha256
    return {
        "id": j.case_id,
        "state": None,
        "question": question,
        "expected": expected,
        "x_capture": {
            "request_id": c.request_id,
            "inference_id": c.inference_id,
            "event_id": c.event_id,
            "variant": c.variant,
            "inference_time": c.inference_time,
            "question_id": j.question_id,
            "action": answer.x_action,
        },
    }


def write_join(result: Join, out: Path) -> dict[str, Any]:
    """OUT/cases.jsonl, and OUT/evaluate/ as evaluate's saved predictions when the answers share one run
    identity (evaluate refuses to mix models or calibrations in one run); what was written and why not."""
    out.mkdir(parents=True, exist_ok=True)
    lines, seen = [], set()
    for j in result.joined:
        line = labeled_case(j)
        if line["id"] in seen:
            raise OutcomesError(f"two joined decisions make the same case id {line['id']!r}")
        seen.add(line["id"])
        lines.append(line)
    # key order kept: a choice question's options are in its criteria's order, which the case hash covers
    (out / CASES).write_text("".join(json.dumps(v) + "\n" for v in lines), encoding="utf-8")
    runs = Counter(json.dumps(run_fingerprint(j.captured.run), sort_keys=True) for j in result.joined)
    written: dict[str, Any] = {"cases": str(out / CASES), "evaluate": None, "runs": len(runs)}
    if len(runs) != 1:
        written["evaluate_refused"] = f"the answers come from {len(runs)} model/calibration runs; keep one --variant"
        return written
    directory = out / EVALUATE_DIR
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    with (directory / PREDICTIONS).open("w", encoding="utf-8") as log:
        for n, (line, j) in enumerate(zip(lines, result.joined, strict=True), start=1):
            case = parse_case(n, line)
            response = j.captured.response.model_copy(update={"answers": {QUESTION_ID: j.answer}})
            timing = response.x_timing_ms
            prediction = prediction_from_response(case, response, timing.total / 1000.0 if timing else 0.0)
            record = {**prediction.to_json(), "case_sha256": case_digest(case)}
            record["options_sha256"] = j.answer.x_options_sha256
            log.write(json.dumps(record, sort_keys=True) + "\n")
    run = result.joined[0].captured.run
    identity = run.model_dump(mode="json") if run else {}
    (directory / IDENTITY).write_text(json.dumps(identity, indent=2, sort_keys=True) + "\n", "utf-8")
    written["evaluate"] = str(directory)
    return written


def reversal_report(joined: Sequence[Joined]) -> dict[str, dict[str, Any]]:
    """Per question id: how many answers took each served action and how many of those people changed; the
    reversal rate is the changed share of the automated ones (None where nothing was automated)."""
    report: dict[str, dict[str, Any]] = {}
    for qid in sorted({j.question_id for j in joined}):
        group = [j for j in joined if j.question_id == qid]
        actions: dict[str, dict[str, int]] = {}
        for j in group:
            counts = actions.setdefault(j.action, {"answers": 0, "changed": 0})
            counts["answers"] += 1
            counts["changed"] += j.changed
        automated = actions.get("automate", {"answers": 0, "changed": 0})
        report[qid] = {
            "type": group[0].answer.type,
            "joined": len(group),
            "agreed": sum(not j.changed for j in group),
            "actions": dict(sorted(actions.items())),
            "automated": automated["answers"],
            "reversed": automated["changed"],
            "reversal_rate": automated["changed"] / automated["answers"] if automated["answers"] else None,
            "options_sha256": sorted({j.answer.x_options_sha256 or "" for j in group}),
            "policies": sorted({(j.captured.run.policy if j.captured.run else None) or "none" for j in group}),
        }
    return report
