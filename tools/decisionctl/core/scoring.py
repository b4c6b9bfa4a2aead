"""Run a labeled set against an endpoint, resumably, and write what it shows.

Every prediction is appended to OUT/predictions.jsonl the moment it arrives, keyed by case id and
a hash of the case's content: a re-run skips what is already scored, and a case whose wording
changed is scored again. The state text is never written out.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from decision_spec.schemas import RequestRun
from pydantic import ValidationError
from tqdm import tqdm

from decisionctl.core.cases import case_digest, prediction_from_response, run_fingerprint
from decisionctl.core.labeled import IDENTITY, PREDICTIONS, Case, Prediction, Run
from decisionctl.core.replies import describe_invalid, read_response
from decisionctl.transport import Reply, RetryPolicy, Sender, send_with_retries


class IdentityChanged(RuntimeError):
    """The endpoint now serves another model or calibration than the one the saved predictions came from."""


class NotScored(RuntimeError):
    """Cases that no saved prediction answers, and no endpoint to send them to."""


class PredictionLog:
    """predictions.jsonl: append-only; a line torn by a kill mid-write is cut off when the log is reopened."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self, *, repair: bool = True) -> dict[str, dict[str, Any]]:
        """The latest record per case id; a torn last line is ignored, and with `repair` cut off the file."""
        if not self.path.exists():
            return {}
        data = self.path.read_bytes()
        end = data.rfind(b"\n") + 1
        if repair and end < len(data):
            with self.path.open("r+b") as f:
                f.truncate(end)
        records: dict[str, dict[str, Any]] = {}
        for line in data[:end].splitlines():
            if line.strip():
                record = json.loads(line)
                records[record["id"]] = record
        return records

    def append(self, record: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())


def _score(sender: Sender, case: Case, policy: RetryPolicy) -> tuple[Case, Reply]:
    reply, _ = send_with_retries(sender, case.request(), policy)
    return case, reply


def _read(case: Case, reply: Reply) -> tuple[Prediction, RequestRun | None]:
    """The case's prediction and the reply's run identity; a ValueError says why a reply cannot be read."""
    response = read_response(reply.json())
    try:
        return prediction_from_response(case, response, reply.latency_s), response.x_run
    except KeyError as exc:
        raise ValueError(f"no probability for option {exc}") from exc


def _hardware_of(case: Case, served: RequestRun | None) -> dict[str, dict[str, Any]]:
    """{case id: the hardware that answered it}: an instance pool's variant answers from more than one kind."""
    return {case.id: served.hardware.model_dump(mode="json")} if served is not None else {}


def _saved_fingerprint(identity: dict[str, Any], path: Path) -> dict[str, Any]:
    try:
        return run_fingerprint(RequestRun.model_validate(identity) if identity else None)
    except ValidationError as exc:
        raise IdentityChanged(
            f"{path} is not a run identity this decisionctl reads ({describe_invalid(exc)}); "
            "use a new --out directory or pass --restart"
        ) from exc


def _saved_and_pending(cases: Sequence[Case], log: PredictionLog) -> tuple[list[Prediction], list[Case]]:
    """The saved prediction of each case whose content is unchanged, and the cases still to score."""
    saved = log.load()
    done: list[Prediction] = []
    pending: list[Case] = []
    for case in cases:
        record = saved.get(case.id)
        if record is not None and record.get("case_sha256") == case_digest(case):
            done.append(Prediction.from_json(record))
        else:
            pending.append(case)
    return done, pending


def score_cases(
    cases: Sequence[Case],
    sender: Sender | None,
    out: Path,
    *,
    concurrency: int = 1,
    policy: RetryPolicy | None = None,
    restart: bool = False,
    progress: Callable[..., Any] = tqdm,
) -> Run:
    """Score every case not already in OUT/predictions.jsonl; stop at once if the endpoint's identity changed.
    Without a sender only the saved predictions are read (NotScored if a case has none)."""
    if sender is None and restart:
        raise ValueError("restart forgets the saved predictions: it needs a transport to score the cases again")
    if sender is not None:
        out.mkdir(parents=True, exist_ok=True)
    log, identity_path = PredictionLog(out / PREDICTIONS), out / IDENTITY
    if restart:
        log.path.unlink(missing_ok=True)
        identity_path.unlink(missing_ok=True)
    identity = json.loads(identity_path.read_text(encoding="utf-8")) if identity_path.exists() else None
    done, pending = _saved_and_pending(cases, log)
    run = Run(done, skipped=len(done), sent=0, identity=identity)
    if not pending:
        return run
    expected = None if identity is None else _saved_fingerprint(identity, identity_path)
    if sender is None:
        raise NotScored(f"{len(pending)} of {len(cases)} cases have no saved prediction in {log.path}")
    policy = policy or RetryPolicy()
    bar = progress(total=len(cases), initial=len(done), desc="evaluate", unit="case", disable=None)
    pool = ThreadPoolExecutor(max_workers=max(1, concurrency))
    futures: list[Future[tuple[Case, Reply]]] = [pool.submit(_score, sender, c, policy) for c in pending]
    try:
        for future in as_completed(futures):
            case, reply = future.result()
            run.sent += 1
            bar.update(1)
            if not reply.ok:
                run.errors.append({"id": case.id, "status": reply.status, "error": reply.describe_error()})
                continue
            try:
                prediction, served_run = _read(case, reply)
            except ValueError as exc:
                run.errors.append({"id": case.id, "status": reply.status, "error": f"unreadable answer: {exc}"})
                continue
            served = run_fingerprint(served_run)
            run.hardware.update(_hardware_of(case, served_run))
            if expected is None:
                expected = served
                run.identity = served_run.model_dump(mode="json") if served_run else {}
                identity_path.write_text(json.dumps(run.identity, indent=2, sort_keys=True) + "\n", encoding="utf-8")
            elif served != expected:
                raise IdentityChanged(
                    f"the endpoint's model or calibration changed since {log.path} was started "
                    f"(was {expected}, now {served}); use a new --out directory or pass --restart"
                )
            log.append({**prediction.to_json(), "case_sha256": case_digest(case)})
            run.predictions.append(prediction)
    except KeyboardInterrupt:
        run.interrupted = True
    finally:
        pool.shutdown(wait=not run.interrupted, cancel_futures=True)
        bar.close()
    order = {c.id: i for i, c in enumerate(cases)}
    run.predictions.sort(key=lambda p: order[p.id])
    return run
