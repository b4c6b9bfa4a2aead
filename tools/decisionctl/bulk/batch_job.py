"""The batch run use case: a JSONL file of decisions answered through Batch Transform, an asynchronous endpoint, a
real-time endpoint or a local adapter, resumably; the text to print and the exit status returned."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from decisionctl.bulk import jobs
from decisionctl.bulk.aws_calls import BulkAwsError
from decisionctl.bulk.records import InputRecordError
from decisionctl.bulk.run_outputs import finish
from decisionctl.bulk.run_state import SUMMARY, BatchRunError, RunAnswers, describe
from decisionctl.core.prices import BUILTIN, load_prices
from decisionctl.exit_codes import EXIT_FAILED, EXIT_INTERRUPTED
from decisionctl.transport import RealTimeEndpointSender, RetryPolicy

DEFAULT_PARTS = {
    "transform": jobs.TRANSFORM_PARTS,
    "async": jobs.ASYNC_PARTS,
    "url": jobs.URL_BATCHES,
    "realtime": jobs.REALTIME_BATCHES,
}


def invocation_timeout_arg(text: str) -> int:
    """--invocation-timeout: whole seconds in SageMaker's range for an asynchronous request."""
    try:
        seconds = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"whole seconds expected: {text!r}") from exc
    if not 1 <= seconds <= 3600:
        raise argparse.ArgumentTypeError(f"SageMaker allows 1 to 3600 seconds per asynchronous request: {seconds}")
    return seconds


@dataclass(frozen=True)
class BatchOptions:
    """What `decisionctl batch run` was asked, as plain values (its arguments' names); one target of the four."""

    cases: str
    out: str
    transform: str | None = None
    async_endpoint: str | None = None
    url: str | None = None
    sagemaker_endpoint: str | None = None
    inference_component: str | None = None
    region: str | None = None
    input_uri: str | None = None
    api_key: str | None = None
    part_records: int | None = None
    invocation_timeout: int = jobs.ASYNC_INVOCATION_TIMEOUT_S
    poll: float = 10.0
    wait_timeout: float | None = None
    prices: str = BUILTIN
    restart: bool = False
    target_accuracy: float = 0.9
    min_support: int = 5
    review_accuracy: float = 0.5

    @property
    def mode(self) -> str:
        if self.transform:
            return "transform"
        return "async" if self.async_endpoint else "realtime" if self.sagemaker_endpoint else "url"


@dataclass(frozen=True)
class BatchResult:
    text: str
    status: int


def _answered(o: BatchOptions, options: jobs.Options, policy: RetryPolicy, capacity_wait: Any) -> RunAnswers:
    cases, out = Path(o.cases), Path(o.out)
    if o.mode == "url":
        client = jobs.JsonLinesSender.to_url(o.url or "", api_key=o.api_key)
        return jobs.run_url(cases, out, url=o.url or "", options=options, client=client, policy=policy)
    if o.mode == "realtime":
        assert o.sagemaker_endpoint is not None
        endpoint = RealTimeEndpointSender(
            o.sagemaker_endpoint,
            region=o.region,
            timeout_s=jobs.REALTIME_TIMEOUT_S,
            inference_component=o.inference_component,
            capacity_wait=capacity_wait,
        )
        realtime = jobs.JsonLinesSender(endpoint)
        return jobs.run_url(cases, out, url=realtime.label, options=options, client=realtime, policy=policy)
    clients = jobs.AwsClients.create(o.region)
    if o.mode == "transform":
        assert o.transform is not None
        return jobs.run_transform(cases, out, environment=o.transform, clients=clients, options=options)
    assert o.async_endpoint is not None
    return jobs.run_async(
        cases, out, endpoint=o.async_endpoint, clients=clients, options=options, input_uri=o.input_uri
    )


def run_batch(o: BatchOptions, *, policy: RetryPolicy, capacity_wait: Any, say: Callable[[str], None]) -> BatchResult:
    """Answer every record of `o.cases` into `o.out` (answers.jsonl, summary.json, an evaluate directory for labeled
    cases), going on from the run state there; `capacity_wait` is the client package's wait for a real-time
    endpoint scaled to zero; `say` hears the failures."""
    size = DEFAULT_PARTS[o.mode]
    options = jobs.Options(
        parts=jobs.PartSize(o.part_records, size.bytes) if o.part_records else size,
        poll_s=o.poll,
        wait_timeout_s=o.wait_timeout,
        invocation_timeout_s=o.invocation_timeout,
        prices=load_prices(o.prices),
        thresholds={
            "target_accuracy": o.target_accuracy,
            "min_support": o.min_support,
            "review_accuracy": o.review_accuracy,
        },
        restart=o.restart,
    )
    out = Path(o.out)
    try:
        answered = _answered(o, options, policy, capacity_wait)
        summary = finish(Path(o.cases), out, answered, thresholds=options.thresholds)
    except (InputRecordError, BatchRunError, BulkAwsError) as exc:
        say(str(exc))
        return BatchResult("", EXIT_FAILED)
    except KeyboardInterrupt:
        say(f"interrupted: run the same command again to go on (the run state is in {out})")
        return BatchResult("", EXIT_INTERRUPTED)
    written = [out / summary["answers"], out / SUMMARY]
    if summary["evaluate"] and summary["evaluate"]["written"]:
        written.append(out / summary["evaluate"]["directory"])
    text = describe(summary) + "\nwrote " + ", ".join(str(w) for w in written) + "\n"
    finished = summary.get("execution", {}).get("status", "SUCCEEDED") == "SUCCEEDED"
    return BatchResult(text, 0 if summary["failed"] == 0 and finished else EXIT_FAILED)
