"""decisionctl batch run: a CASES.jsonl through Batch Transform, an asynchronous endpoint or a local adapter's
JSON Lines route, resumably, into OUT/answers.jsonl, OUT/summary.json and, for a labeled file, OUT/evaluate/.

The file is read as a stream (bounded memory: one part at a time) and cut into parts of JSON Lines; each
part is uploaded (boto3's managed transfer, multipart for large parts) or posted and answered; a mode returns
the answers it got back (run_state.RunAnswers), which run_outputs.finish joins back to their records by position.
OUT/run.json (run_state.py) makes an interrupted run go on where it stopped: a part already uploaded is not
uploaded again, and a job or invocation already started is not started again.
The JSON Lines contract of the adapter's /invocations route is docs/bulk.md's.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from decision_spec.names import JSON_LINES
from tqdm import tqdm

from decisionctl.bulk import aws_calls
from decisionctl.bulk.records import InputRecord, PartAnswers, chunks, error_line, read_records, scan, serialized
from decisionctl.bulk.run_state import PARTIAL, BatchRunError, RunAnswers, RunState, estimate, open_state
from decisionctl.core.cases import parse_case
from decisionctl.core.prices import BUILTIN, PriceTable, load_prices
from decisionctl.transport import HttpSender, RealTimeEndpointSender, Reply, RetryPolicy

BATCH_FAILED = "batch_failed"  # a whole mini-batch got no answer from the adapter (after retries)


class WaitTimedOut(BatchRunError):
    """The job or invocations still run after --wait-timeout; the same command goes on waiting."""


@dataclass(frozen=True)
class PartSize:
    records: int
    bytes: int


# Transform: few large objects (one instance takes whole objects); async: one request each; url: one POST each.
TRANSFORM_PARTS = PartSize(5000, 8 << 20)
ASYNC_PARTS = PartSize(200, 5 << 20)
URL_BATCHES = PartSize(50, 1 << 20)
REALTIME_BATCHES = PartSize(8, 1 << 20)  # a mini-batch must be answered within SageMaker's 60 s
REALTIME_TIMEOUT_S = 70.0  # SageMaker's 60 s, and a little more so that its own error arrives first
ASYNC_INVOCATION_TIMEOUT_S = 3600  # the most SageMaker allows a request: a part of 200 long records takes minutes


@dataclass
class Options:
    parts: PartSize | None = None  # None: the mode's default
    poll_s: float = 10.0
    wait_timeout_s: float | None = None
    invocation_timeout_s: int = ASYNC_INVOCATION_TIMEOUT_S
    prices: PriceTable = field(default_factory=lambda: load_prices(BUILTIN))
    thresholds: dict[str, float | int] = field(
        default_factory=lambda: {"target_accuracy": 0.9, "min_support": 5, "review_accuracy": 0.5}
    )
    restart: bool = False
    transfer_config: Any = None  # boto3.s3.transfer.TransferConfig; None: boto3's defaults
    progress: Callable[..., Any] = tqdm
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.time


@dataclass
class AwsClients:
    """boto3 clients; tests hand in stubbed ones."""

    s3: Any
    stepfunctions: Any = None
    cloudformation: Any = None
    sagemaker: Any = None
    runtime: Any = None

    @classmethod
    def create(cls, region: str | None) -> AwsClients:
        import boto3

        session = boto3.session.Session(region_name=region)
        names = ("s3", "stepfunctions", "cloudformation", "sagemaker", "sagemaker-runtime")
        s3, sfn, cfn, sm, runtime = (session.client(name) for name in names)
        return cls(s3, sfn, cfn, sm, runtime)


def _upload_parts(
    clients: AwsClients, state: RunState, cases: Path, out: Path, *, folder: aws_calls.S3Uri, size: PartSize, o: Options
) -> Iterator[tuple[int, list[InputRecord]]]:
    """Upload every part not uploaded yet (recorded in run.json at once); yields each part as it is done."""
    bar = o.progress(total=cases.stat().st_size, desc="upload", unit="B", unit_scale=True, disable=None)
    try:
        for index, part in enumerate(
            chunks(read_records(cases, parse_case), max_records=size.records, max_bytes=size.bytes)
        ):
            name = aws_calls.PART_NAME.format(index=index)
            if index < len(state.parts):
                yield index, part
                continue
            aws_calls.upload(
                clients.s3, folder.child(name), serialized(part), config=o.transfer_config, on_bytes=bar.update
            )
            state.parts.append({"name": name, "count": len(part), "uri": str(folder.child(name))})
            state.save(out)
            yield index, part
    finally:
        bar.close()
    state.parts_complete = True
    state.save(out)


def _wait(o: Options, state: RunState, desc: str, poll: Callable[[], tuple[bool, str]]) -> None:
    """Poll until `poll` says done; the bar shows its status line. Past --wait-timeout, stop (resumable)."""
    began = o.clock()
    bar = o.progress(total=None, desc=desc, unit="poll", disable=None)
    try:
        while True:
            done, status = poll()
            bar.set_postfix_str(status)
            bar.update(1)
            if done:
                return
            if o.wait_timeout_s is not None and o.clock() - began >= o.wait_timeout_s:
                raise WaitTimedOut(f"run {state.run} is still {status}; run the same command again to go on waiting")
            o.sleep(o.poll_s)
    finally:
        bar.close()


def run_transform(cases: Path, out: Path, *, environment: str, clients: AwsClients, options: Options) -> RunAnswers:
    o = options
    state = open_state(out, mode="transform", target=environment, summary=scan(cases, parse_case), restart=o.restart)
    outputs = aws_calls.batch_outputs(clients.cloudformation, environment)
    if not state.parts_complete:
        folder = aws_calls.transform_input(outputs, state.run)
        for _ in _upload_parts(clients, state, cases, out, folder=folder, size=o.parts or TRANSFORM_PARTS, o=o):
            pass
    if state.execution_arn is None:
        state.execution_arn = aws_calls.start_transform(
            clients.stepfunctions, outputs["BatchStateMachineArn"], state.run
        )
        state.started_s = o.clock()
        state.save(out)
    arn = state.execution_arn
    found: list[aws_calls.Execution] = []

    def poll() -> tuple[bool, str]:
        found[:] = [aws_calls.describe_execution(clients.stepfunctions, arn)]
        return not found[0].running, found[0].status

    _wait(o, state, "transform", poll)
    execution = found[0]
    reason = f"the execution {execution.status}: {execution.error}".strip(": ")

    def answers() -> Iterator[PartAnswers]:
        for part in state.parts:
            where = aws_calls.transform_answers(outputs, state.run, state.run, part["name"])
            lines = aws_calls.read_lines(clients.s3, where)
            yield PartAnswers(part["count"], lines, "" if lines is not None else f"no {where} ({reason})")

    seconds = execution.seconds()
    resources = execution.job.get("TransformResources") or {}
    cost = estimate(
        o.prices,
        str(resources.get("InstanceType", "")),
        int(resources.get("InstanceCount", 1)),
        seconds,
        "instances x the Transform job's run time (TransformStartTime to TransformEndTime)",
    )
    details = {
        "execution": {
            "arn": arn,
            "status": execution.status,
            "error": execution.error,
            "job": execution.job.get("TransformJobName"),
        }
    }
    return RunAnswers(state, answers(), seconds, cost, details)


def run_async(
    cases: Path, out: Path, *, endpoint: str, clients: AwsClients, options: Options, input_uri: str | None = None
) -> RunAnswers:
    o = options
    state = open_state(out, mode="async", target=endpoint, summary=scan(cases, parse_case), restart=o.restart)
    target = aws_calls.async_target(clients.sagemaker, endpoint, input_uri)
    folder = target.input.child(f"{state.run}/")
    if state.started_s is None:
        state.started_s = o.clock()
    if not state.parts_complete:
        for index, _ in _upload_parts(clients, state, cases, out, folder=folder, size=o.parts or ASYNC_PARTS, o=o):
            _invoke(clients, state, out, endpoint, index, timeout_s=o.invocation_timeout_s)
    for index in range(len(state.parts)):  # parts uploaded by an interrupted run but never queued
        _invoke(clients, state, out, endpoint, index, timeout_s=o.invocation_timeout_s)

    def poll() -> tuple[bool, str]:
        for part in state.parts:
            if "done" not in part:
                if aws_calls.exists(clients.s3, aws_calls.S3Uri.parse(part["output"])):
                    part["done"] = "answered"
                elif part["failure"] and aws_calls.exists(clients.s3, aws_calls.S3Uri.parse(part["failure"])):
                    part["done"] = "failed"
        state.save(out)
        done = sum("done" in p for p in state.parts)
        return done == len(state.parts), f"{done}/{len(state.parts)} parts answered"

    _wait(o, state, "async", poll)
    if state.finished_s is None:
        state.finished_s = o.clock()
        state.save(out)

    def answers() -> Iterator[PartAnswers]:
        for part in state.parts:
            if part["done"] == "answered":
                yield PartAnswers(
                    part["count"], aws_calls.read_lines(clients.s3, aws_calls.S3Uri.parse(part["output"]))
                )
            else:
                failure = aws_calls.read_text(clients.s3, aws_calls.S3Uri.parse(part["failure"]), limit=300)
                yield PartAnswers(part["count"], None, f"the asynchronous request failed: {failure}")

    seconds = state.finished_s - state.started_s
    instances = max(1, aws_calls.instance_count(clients.sagemaker, endpoint))
    cost = estimate(
        o.prices,
        target.instance_type,
        instances,
        seconds,
        "the endpoint's instances now x the run's wall time (the endpoint may serve others too)",
    )
    return RunAnswers(state, answers(), seconds, cost, {})


def _invoke(clients: AwsClients, state: RunState, out: Path, endpoint: str, index: int, *, timeout_s: int) -> None:
    part = state.parts[index]
    if "output" in part:
        return
    inference_id = f"{state.run}-{index:05d}"
    part["output"], part["failure"] = aws_calls.invoke_async(
        clients.runtime, endpoint, aws_calls.S3Uri.parse(part["uri"]), inference_id, timeout_s
    )
    state.save(out)


# --- a local adapter -------------------------------------------------------------------------------


class JsonLinesSender:
    """Mini-batches of JSON Lines to an adapter's /invocations through one of the decision senders: a local
    adapter's URL (HttpSender on /invocations) or a real-time endpoint (RealTimeEndpointSender, its inference
    component named and waited for while it scales from zero); the sender's own errors and retries apply."""

    def __init__(self, sender: HttpSender | RealTimeEndpointSender) -> None:
        self._sender = sender
        self.label = sender.label
        self.realtime = isinstance(sender, RealTimeEndpointSender)

    @classmethod
    def to_url(
        cls,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 600.0,
        transport: httpx.BaseTransport | None = None,
    ) -> JsonLinesSender:
        sender = HttpSender(base_url, route="/invocations", api_key=api_key, timeout_s=timeout_s, transport=transport)
        return cls(sender)

    def send(self, body: bytes) -> Reply:
        return self._sender.send_bytes(body, JSON_LINES)

    def close(self) -> None:
        self._sender.close()


def _post(client: JsonLinesSender, part: list[InputRecord], policy: RetryPolicy) -> list[bytes]:
    """The answer lines of one mini-batch; error lines for every record if the adapter gave none."""
    attempt = 0
    while True:
        attempt += 1
        reply = client.send(serialized(part))
        if reply.ok or not reply.retryable or attempt >= policy.max_attempts:
            break
        policy.sleep(policy.delay(attempt, reply))
    lines = [line for line in reply.body.splitlines() if line.strip()] if reply.ok else []
    if reply.ok and len(lines) == len(part):
        return lines
    message = reply.describe_error() if not reply.ok else f"{len(lines)} answer lines for {len(part)} records"
    return [json.dumps(error_line(r.id, BATCH_FAILED, message)).encode("utf-8") for r in part]


def run_url(
    cases: Path,
    out: Path,
    *,
    url: str,
    options: Options,
    client: JsonLinesSender | None = None,
    policy: RetryPolicy | None = None,
) -> RunAnswers:
    """Mini-batches posted to a local adapter (`url`), or sent to a real-time endpoint by a JsonLinesSender over a
    RealTimeEndpointSender (`url` is then its label, sagemaker:<endpoint>[/<component>])."""
    o = options
    realtime = client is not None and client.realtime
    state = open_state(
        out, mode="realtime" if realtime else "url", target=url, summary=scan(cases, parse_case), restart=o.restart
    )
    size = o.parts or (REALTIME_BATCHES if realtime else URL_BATCHES)
    client = client or JsonLinesSender.to_url(url)
    policy = policy or RetryPolicy()
    partial = out / PARTIAL
    with partial.open("ab") as f:
        f.truncate(state.partial_bytes)  # a batch written after the last save is written again
    bar = o.progress(total=state.records, initial=state.records_done, desc="batch", unit="record", disable=None)
    try:
        remaining = itertools.islice(read_records(cases, parse_case), state.records_done, None)
        with partial.open("ab") as f:
            for part in chunks(remaining, max_records=size.records, max_bytes=size.bytes):
                began = time.perf_counter()
                lines = _post(client, part, policy)
                f.write(b"".join(line + b"\n" for line in lines))
                f.flush()
                os.fsync(f.fileno())
                state.busy_s += time.perf_counter() - began
                state.records_done += len(part)
                state.partial_bytes = f.tell()
                state.save(out)
                bar.update(len(part))
    finally:
        bar.close()
        client.close()

    def answers() -> Iterator[PartAnswers]:
        with partial.open("rb") as f:
            yield PartAnswers(state.records, iter(f))

    seconds = state.busy_s or None
    return RunAnswers(state, answers(), seconds, None, {})
