"""decisionctl batch run: records streamed and joined, run state and resume, the AWS calls of both SageMaker paths.

S3, Step Functions, CloudFormation, SageMaker and the SageMaker runtime are botocore Stubbers standing in for
AWS (each stub checks the request's exact parameters; an unexpected call fails the test). The --url path is
tested against an in-process stand-in for the adapter that follows the JSON Lines contract (docs/bulk.md), and
once end to end on the bundled model through the real adapter's JSON Lines route (marked `model`).
"""

from __future__ import annotations

import hashlib
import io
import json
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from boto3.s3.transfer import TransferConfig
from botocore.response import StreamingBody
from botocore.stub import ANY, Stubber
from decisionctl.bulk import aws_calls, jobs
from decisionctl.bulk.records import InputRecordError, PartAnswers, chunks, join, read_records, scan
from decisionctl.bulk.run_outputs import finish
from decisionctl.bulk.run_state import (
    ANSWERS,
    EVALUATE_DIR,
    BatchRunError,
    RunAnswers,
    RunState,
    new_run_name,
    open_state,
)
from decisionctl.commands import cli
from decisionctl.core.cases import parse_case
from decisionctl.core.prices import PriceTable
from decisionctl.evaluation import comparison
from decisionctl.transport import RetryPolicy

from stacks import async_inference, batch_transform

REGION = "us-west-2"
BUCKET = "model-bucket"
MACHINE = f"arn:aws:states:{REGION}:123456789012:stateMachine:decision-dev-batch"
OUTPUTS = {
    "BatchStateMachineArn": MACHINE,
    "BatchInputUri": f"s3://{BUCKET}/batch/input/",
    "BatchOutputUri": f"s3://{BUCKET}/batch/output/",
}
PRICES = PriceTable({"ml.c6i.2xlarge": 0.36}, "USD", REGION, False, "test", "test prices")
SECRET_STATE = "the customer's account number is 4242"  # must never reach an output file
X_RUN = {
    "model_file": "m.gguf",
    "model_sha256": "ab" * 32,
    "model_name": "m",
    "llama_cpp_python": "0.3.36",
    "llama_cpp_build": "b1",
    "adapter": "1",
    "image_digest": "sha256:" + "0" * 64,
    "instance_types": "ml.c6i.2xlarge",
    "hardware": {"cpu": "x", "logical_cpus": 2, "threads": 2, "machine": "x86_64", "gpus": []},
    "n_gpu_layers": 0,
    "prompt_template": "generic-v2",
    "order_debias": True,
    "calibration": {"source": "identity", "temperature": {"noul": 1.0, "choice": 1.0, "score": 1.0}},
    "request_id": "r",
    "state_source": "computed",
}


# --- a stand-in adapter: one answer line per record, as the JSON Lines contract says --------------------


def _p(record_id: Any, salt: str) -> float:
    return 0.05 + 0.9 * int(hashlib.sha256(f"{record_id}{salt}".encode()).hexdigest()[:6], 16) / 0xFFFFFF


def answer_for(body: dict[str, Any], salt: str = "") -> dict[str, Any]:
    answers: dict[str, Any] = {}
    for qid, question in body["questions"].items():
        p = _p(body.get("id"), salt + qid)
        if question["type"] == "noul":
            answers[qid] = {"type": "noul", "noul": p}
            continue
        options = (
            list(question["criteria"])
            if question["type"] == "choice"
            else [str(i) for i in range(len(question["criteria"]))]
        )
        rest = (1 - p) / (len(options) - 1)
        probs = {o: (p if i == 0 else rest) for i, o in enumerate(options)}
        top = max(probs, key=lambda o: probs[o])
        if question["type"] == "choice":
            answers[qid] = {"type": "choice", "choice": top, "probabilities": probs, "confidence": 0.5}
        else:
            legend = {str(i): str(c) for i, c in enumerate(question["criteria"])}
            answers[qid] = {"type": "score", "score": 1.0, "legend": legend, "probabilities": probs, "confidence": 0.5}
    timing = {"tokenize": 1.0, "state": 2.0, "questions": 3.0, "total": 6.0}
    return {
        "id": body.get("id"),
        "model": "m",
        "answers": answers,
        "usage": {"input_tokens": 10},
        "x_run": X_RUN,
        "x_timing_ms": timing,
    }


def answer_lines(payload: bytes, salt: str = "", bad_ids: frozenset[Any] = frozenset()) -> bytes:
    out = []
    for line in payload.splitlines():
        if not line.strip():
            continue
        body = json.loads(line)
        if body["id"] in bad_ids:
            error = {"error_type": "token_budget_exceeded", "message": "too long", "status": 413}
            out.append(json.dumps({"id": body["id"], "error": error}))
        else:
            out.append(json.dumps(answer_for(body, salt)))
    return ("\n".join(out) + "\n").encode()


# --- files ---------------------------------------------------------------------------------------


def labeled_file(path: Path, n: int = 6) -> Path:
    lines = []
    for i in range(n):
        if i % 3 == 0:
            question: dict[str, Any] = {"type": "noul", "instructions": "Refund?"}
            expected: Any = i % 2 == 0
        elif i % 3 == 1:
            question = {"type": "choice", "instructions": "Team?", "criteria": {"Billing": None, "Tech": None}}
            expected = "Billing"
        else:
            question = {"type": "score", "instructions": "Anger?", "criteria": ["calm", "angry", "furious"]}
            expected = 1
        lines.append(
            json.dumps({"id": f"c{i}", "state": f"{SECRET_STATE} #{i}", "question": question, "expected": expected})
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def bodies_file(path: Path, n: int) -> Path:
    with path.open("w", encoding="utf-8") as f:
        f.write("# decision bodies\n\n")
        for i in range(n):
            record: dict[str, Any] = {
                "state": f"{SECRET_STATE} {i}",
                "questions": {"q": {"type": "noul", "instructions": "Refund?"}},
            }
            if i % 2 == 0:
                record["id"] = f"t-{i}"
            f.write(json.dumps(record) + "\n")
    return path


def no_state_text(out: Path) -> None:
    for path in out.rglob("*"):
        if path.is_file() and path.suffix != ".png":
            assert SECRET_STATE not in path.read_text(encoding="utf-8", errors="replace"), path


def finished(mode: Callable[..., RunAnswers], cases: Path, out: Path, **kw: Any) -> dict[str, Any]:
    """A mode run and its answers joined and written, as `batch run` does (jobs.run_*, then run_outputs.finish)."""
    return finish(cases, out, mode(cases, out, **kw), thresholds=kw["options"].thresholds)


def options(**kw: Any) -> jobs.Options:
    quiet = {"progress": lambda *a, **k: _Bar(), "sleep": lambda s: None, "prices": PRICES, "poll_s": 0.0}
    return jobs.Options(**{**quiet, **kw})


class _Bar:
    def update(self, n: int = 1) -> None: ...
    def set_postfix_str(self, s: str) -> None: ...
    def close(self) -> None: ...


# --- records -------------------------------------------------------------------------------------


def test_ids_are_kept_or_assigned_from_the_line_number(tmp_path: Path) -> None:
    records = list(read_records(bodies_file(tmp_path / "b.jsonl", 4), parse_case))
    assert [r.id for r in records] == ["t-0", 4, "t-2", 6]  # lines 1-2 are a comment and a blank line
    assert all(r.case is None and next(iter(r.body)) == "id" for r in records)
    labeled = list(read_records(labeled_file(tmp_path / "l.jsonl", 3), parse_case))
    assert [r.id for r in labeled] == ["c0", "c1", "c2"] and labeled[1].case is not None
    assert labeled[1].body["questions"]["q"]["type"] == "choice" and "expected" not in labeled[1].body


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"id": [1], "questions": {}}'], "JSON scalar"),
        (['{"state": "x"}'], "neither a decision body"),
        (["not json"], "not JSON"),
        (['{"questions": {}}', '{"id": "a", "state": "s", "question": {"type": "noul"}, "expected": true}'], "mixes"),
        (['{"id": "a", "state": "s", "question": {"type": "noul"}, "expected": true}'] * 2, "duplicate case id"),
    ],
)
def test_a_bad_file_is_refused_before_anything_is_sent(tmp_path: Path, lines: list[str], message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        scan(path, parse_case)


def test_answers_join_by_position_and_check_the_echoed_id(tmp_path: Path) -> None:
    records = list(read_records(bodies_file(tmp_path / "b.jsonl", 3), parse_case))
    good = answer_for(records[0].body)
    swapped = {**answer_for(records[1].body), "id": "someone-else", "state": SECRET_STATE}
    parts = [PartAnswers(2, [json.dumps(good).encode(), json.dumps(swapped).encode()]), PartAnswers(1, None, "gone")]
    joined = [answer for _, answer in join(records, parts)]
    assert joined[0]["id"] == "t-0" and "answers" in joined[0]
    assert joined[1]["error"]["error_type"] == "answer_mismatch" and joined[1]["id"] == 4
    assert joined[2]["error"] == {"error_type": "missing_answer", "message": "gone", "status": 0}
    with pytest.raises(InputRecordError, match="more records"):
        list(join(records, [PartAnswers(1, [json.dumps(good).encode()])]))


def test_parts_respect_record_and_byte_limits(tmp_path: Path) -> None:
    records = list(read_records(bodies_file(tmp_path / "b.jsonl", 10), parse_case))
    size = len(records[0].line())
    parts = list(chunks(records, max_records=4, max_bytes=10 * size))
    assert [len(p) for p in parts] == [4, 4, 2]
    assert [len(p) for p in chunks(records, max_records=100, max_bytes=3 * size + 2)] == [3, 3, 3, 1]


def peak_memory_of_a_run(tmp_path: Path, records: int) -> int:
    cases = bodies_file(tmp_path / f"{records}.jsonl", records)

    def adapter(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=answer_lines(request.content))

    client = jobs.JsonLinesSender.to_url("http://adapter", transport=httpx.MockTransport(adapter))
    tracemalloc.start()
    try:
        summary = finished(
            jobs.run_url,
            cases,
            tmp_path / f"out-{records}",
            url="http://adapter",
            client=client,
            options=options(parts=jobs.PartSize(250, 1 << 20)),
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (summary["records"], summary["answered"]) == (records, records)
    return peak


def test_a_runs_memory_does_not_grow_with_the_file(tmp_path: Path) -> None:
    # Streamed: four times the records, the same peak (the file is never held; one mini-batch at a time).
    small, large = peak_memory_of_a_run(tmp_path, 1500), peak_memory_of_a_run(tmp_path, 6000)
    assert large < small * 1.25 + (512 << 10), (
        f"{small / 2**20:.1f} MiB for 1,500 records, {large / 2**20:.1f} for 6,000"
    )
    assert large < 8 << 20


# --- --url against a stand-in adapter ------------------------------------------------------------


def stand_in(calls: list[bytes], *, overloaded_first: bool = False, bad_ids: frozenset[Any] = frozenset()) -> Any:
    def handle(request: httpx.Request) -> httpx.Response:
        assert request.headers["content-type"] == "application/jsonlines"
        calls.append(request.content)
        if overloaded_first and len(calls) == 1:
            return httpx.Response(429, headers={"Retry-After": "0"}, json={"detail": {"error_type": "overloaded"}})
        return httpx.Response(200, content=answer_lines(request.content, bad_ids=bad_ids))

    return jobs.JsonLinesSender.to_url("http://adapter", transport=httpx.MockTransport(handle))


def test_url_mode_answers_every_record_and_writes_an_evaluate_run(tmp_path: Path) -> None:
    cases, out, calls = labeled_file(tmp_path / "cases.jsonl", 9), tmp_path / "out", []
    summary = finished(
        jobs.run_url,
        cases,
        out,
        url="http://adapter",
        client=stand_in(calls, overloaded_first=True, bad_ids=frozenset({"c4"})),
        options=options(parts=jobs.PartSize(4, 1 << 20)),
        policy=RetryPolicy(sleep=lambda s: None),
    )
    assert len(calls) == 4  # three mini-batches of 4, 4 and 1 records; the first retried after its 429
    lines = [json.loads(line) for line in (out / ANSWERS).read_text().splitlines()]
    assert [line["id"] for line in lines] == [f"c{i}" for i in range(9)]
    assert lines[4]["error"]["error_type"] == "token_budget_exceeded"
    assert (summary["answered"], summary["failed"], summary["failures"]) == (8, 1, {"token_budget_exceeded": 1})
    results = json.loads((out / EVALUATE_DIR / "results.json").read_text())
    assert (results["cases"], results["scored"]) == (9, 8)
    run = comparison.load_run(out / EVALUATE_DIR)
    assert set(run.predictions) == {f"c{i}" for i in range(9)} - {"c4"} and len(run.case_sha256) == 8
    no_state_text(out)


def test_an_interrupted_url_run_sends_only_the_rest(tmp_path: Path) -> None:
    cases, out = bodies_file(tmp_path / "b.jsonl", 10), tmp_path / "out"
    first: list[bytes] = []
    client = stand_in(first)
    sent = client.send

    def fail_third(body: bytes) -> Any:
        if len(first) == 2:
            raise KeyboardInterrupt
        return sent(body)

    client.send = fail_third
    with pytest.raises(KeyboardInterrupt):
        finished(
            jobs.run_url,
            cases,
            out,
            url="http://adapter",
            client=client,
            options=options(parts=jobs.PartSize(3, 1 << 20)),
        )
    assert RunState.load(out) is not None and RunState.load(out).records_done == 6  # type: ignore[union-attr]
    again: list[bytes] = []
    summary = finished(
        jobs.run_url,
        cases,
        out,
        url="http://adapter",
        client=stand_in(again),
        options=options(parts=jobs.PartSize(3, 1 << 20)),
    )
    assert sum(len(b.splitlines()) for b in again) == 4
    assert summary["answered"] == 10
    ids = [json.loads(line)["id"] for line in (out / ANSWERS).read_text().splitlines()]
    assert ids == [r.id for r in read_records(cases, parse_case)]


def test_another_file_in_the_same_directory_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    finished(
        jobs.run_url,
        bodies_file(tmp_path / "a.jsonl", 2),
        out,
        url="http://adapter",
        client=stand_in([]),
        options=options(),
    )
    with pytest.raises(BatchRunError, match="another file or target"):
        finished(
            jobs.run_url,
            bodies_file(tmp_path / "b.jsonl", 3),
            out,
            url="http://adapter",
            client=stand_in([]),
            options=options(),
        )
    summary = finished(
        jobs.run_url,
        bodies_file(tmp_path / "b.jsonl", 3),
        out,
        url="http://adapter",
        client=stand_in([]),
        options=options(restart=True),
    )
    assert summary["records"] == 3


# --- AWS stand-ins ---------------------------------------------------------------------------------


def client(name: str) -> Any:
    return boto3.client(name, region_name=REGION, aws_access_key_id="stand-in", aws_secret_access_key="stand-in")


def body(data: bytes) -> dict[str, Any]:
    return {"Body": StreamingBody(io.BytesIO(data), len(data))}


class Aws:
    """Stubbed clients and the payloads uploaded through them."""

    def __init__(self) -> None:
        self.clients = jobs.AwsClients(
            client("s3"),
            client("stepfunctions"),
            client("cloudformation"),
            client("sagemaker"),
            client("sagemaker-runtime"),
        )
        self.stubs = {
            k: Stubber(getattr(self.clients, k))
            for k in ("s3", "stepfunctions", "cloudformation", "sagemaker", "runtime")
        }
        self.uploads: dict[str, bytes] = {}
        for stub in self.stubs.values():
            stub.activate()
        capture = self.uploads

        def keep(params: dict[str, Any], **_: Any) -> None:
            capture[params["Key"]] = params["Body"].read() if hasattr(params["Body"], "read") else bytes(params["Body"])
            if hasattr(params["Body"], "seek"):
                params["Body"].seek(0)

        self.clients.s3.meta.events.register("before-parameter-build.s3.PutObject", keep)

    def put(self, key: str) -> None:
        self.stubs["s3"].add_response(
            "put_object",
            {"ETag": '"e"'},
            {
                "Bucket": BUCKET,
                "Key": key,
                "Body": ANY,
                "ContentType": "application/jsonlines",
                "ChecksumAlgorithm": ANY,
            },
        )

    def done(self) -> None:
        for stub in self.stubs.values():
            stub.assert_no_pending_responses()


def outputs_response() -> dict[str, Any]:
    outputs = [{"OutputKey": k, "OutputValue": v} for k, v in OUTPUTS.items()]
    return {
        "Stacks": [
            {
                "StackName": "DecisionEndpoints-dev-Serving",
                "CreationTime": "2026-01-01T00:00:00Z",
                "StackStatus": "CREATE_COMPLETE",
                "Outputs": outputs,
            }
        ]
    }


def execution(status: str, run: str) -> dict[str, Any]:
    found: dict[str, Any] = {
        "executionArn": aws_calls.execution_arn(MACHINE, run),
        "stateMachineArn": MACHINE,
        "status": status,
        "startDate": "2026-01-01T00:00:00Z",
    }
    if status == "SUCCEEDED":
        found["stopDate"] = "2026-01-01T00:30:00Z"
        found["output"] = json.dumps(
            {
                "TransformJobName": f"dev-batch-{run}",
                "TransformJobStatus": "Completed",
                "TransformStartTime": 1_767_225_600_000,
                "TransformEndTime": 1_767_225_600_000 + 1_800_000,
                "TransformResources": {"InstanceType": "ml.c6i.2xlarge", "InstanceCount": 2},
            }
        )
    return found


def test_transform_uploads_starts_the_state_machine_waits_and_joins(tmp_path: Path) -> None:
    cases, out, aws = labeled_file(tmp_path / "cases.jsonl", 7), tmp_path / "out", Aws()
    state = open_state(out, mode="transform", target="dev", summary=scan(cases, parse_case), restart=False)
    run = state.run
    aws.stubs["cloudformation"].add_response(
        "describe_stacks", outputs_response(), {"StackName": "DecisionEndpoints-dev-Serving"}
    )
    for index in range(2):
        aws.put(f"batch/input/{run}/part-{index:05d}.jsonl")
    aws.stubs["stepfunctions"].add_response(
        "start_execution",
        {"executionArn": aws_calls.execution_arn(MACHINE, run), "startDate": "2026-01-01T00:00:00Z"},
        {"stateMachineArn": MACHINE, "name": run, "input": json.dumps({"run": run})},
    )
    arn = {"executionArn": aws_calls.execution_arn(MACHINE, run)}
    aws.stubs["stepfunctions"].add_response("describe_execution", execution("RUNNING", run), arn)
    with pytest.raises(jobs.WaitTimedOut):
        finished(
            jobs.run_transform,
            cases,
            out,
            environment="dev",
            clients=aws.clients,
            options=options(parts=jobs.PartSize(4, 1 << 20), wait_timeout_s=0),
        )
    aws.done()
    assert len(aws.uploads) == 2 and all(SECRET_STATE in u.decode() for u in aws.uploads.values())

    # the same command again: nothing is uploaded or started again; it waits, downloads and joins
    aws.stubs["cloudformation"].add_response(
        "describe_stacks", outputs_response(), {"StackName": "DecisionEndpoints-dev-Serving"}
    )
    aws.stubs["stepfunctions"].add_response("describe_execution", execution("SUCCEEDED", run), arn)
    for index in range(2):
        key = f"batch/output/{run}/{run}/part-{index:05d}.jsonl.out"
        payload = answer_lines(aws.uploads[f"batch/input/{run}/part-{index:05d}.jsonl"])
        aws.stubs["s3"].add_response("get_object", body(payload), {"Bucket": BUCKET, "Key": key})
    summary = finished(jobs.run_transform, cases, out, environment="dev", clients=aws.clients, options=options())
    aws.done()
    assert (summary["records"], summary["answered"], summary["seconds"]) == (7, 7, 1800.0)
    assert summary["cost"]["estimate"] == pytest.approx(0.36 * 2 * 0.5)  # two instances for half an hour
    assert summary["execution"]["job"] == f"dev-batch-{run}"
    assert [json.loads(x)["id"] for x in (out / ANSWERS).read_text().splitlines()] == [f"c{i}" for i in range(7)]
    assert comparison.load_run(out / EVALUATE_DIR).identity["model_sha256"] == "ab" * 32
    no_state_text(out)


def test_an_execution_started_before_a_crash_is_not_started_twice(tmp_path: Path) -> None:
    aws = Aws()
    aws.stubs["stepfunctions"].add_client_error(
        "start_execution",
        service_error_code="ExecutionAlreadyExists",
        expected_params={"stateMachineArn": MACHINE, "name": "r1", "input": '{"run": "r1"}'},
    )
    assert aws_calls.start_transform(aws.clients.stepfunctions, MACHINE, "r1") == (
        f"arn:aws:states:{REGION}:123456789012:execution:decision-dev-batch:r1"
    )
    aws.done()


def test_a_failed_execution_leaves_its_records_failed_with_the_reason(tmp_path: Path) -> None:
    cases, out, aws = bodies_file(tmp_path / "b.jsonl", 3), tmp_path / "out", Aws()
    run = open_state(out, mode="transform", target="dev", summary=scan(cases, parse_case), restart=False).run
    aws.stubs["cloudformation"].add_response(
        "describe_stacks", outputs_response(), {"StackName": "DecisionEndpoints-dev-Serving"}
    )
    aws.put(f"batch/input/{run}/part-00000.jsonl")
    aws.stubs["stepfunctions"].add_response(
        "start_execution",
        {"executionArn": "arn:x", "startDate": "2026-01-01T00:00:00Z"},
        {"stateMachineArn": MACHINE, "name": run, "input": json.dumps({"run": run})},
    )
    failed = {**execution("RUNNING", run), "status": "FAILED", "error": "SageMaker.ClientError", "cause": "capacity"}
    aws.stubs["stepfunctions"].add_response("describe_execution", failed, {"executionArn": "arn:x"})
    aws.stubs["s3"].add_client_error("get_object", service_error_code="NoSuchKey", http_status_code=404)
    summary = finished(jobs.run_transform, cases, out, environment="dev", clients=aws.clients, options=options())
    assert (summary["answered"], summary["failures"]) == (0, {"missing_answer": 3})
    assert "capacity" in summary["failed_examples"][0]["message"] and summary["execution"]["status"] == "FAILED"


def test_large_parts_go_up_in_multipart_uploads(tmp_path: Path) -> None:
    aws = Aws()
    target = aws_calls.S3Uri(BUCKET, "batch/input/r/part-00000.jsonl")
    s3 = aws.stubs["s3"]
    s3.add_response(
        "create_multipart_upload",
        {"UploadId": "u1"},
        {"Bucket": BUCKET, "Key": target.key, "ContentType": "application/jsonlines", "ChecksumAlgorithm": ANY},
    )
    s3.add_response(
        "upload_part",
        {"ETag": '"p1"'},
        {"Bucket": BUCKET, "Key": target.key, "UploadId": "u1", "PartNumber": 1, "Body": ANY, "ChecksumAlgorithm": ANY},
    )
    s3.add_response(
        "complete_multipart_upload", {}, {"Bucket": BUCKET, "Key": target.key, "UploadId": "u1", "MultipartUpload": ANY}
    )
    config = TransferConfig(multipart_threshold=1024, use_threads=False)
    aws_calls.upload(aws.clients.s3, target, b"x" * 4096, config=config, on_bytes=lambda n: None)
    aws.done()  # create, one part, complete: the managed transfer went multipart above its threshold


# --- asynchronous endpoint -------------------------------------------------------------------------


def test_async_queues_each_part_once_polls_and_joins(tmp_path: Path) -> None:
    cases, out, aws = bodies_file(tmp_path / "b.jsonl", 5), tmp_path / "out", Aws()
    run = open_state(out, mode="async", target="decision-dev-async", summary=scan(cases, parse_case), restart=False).run
    sm, runtime, s3 = aws.stubs["sagemaker"], aws.stubs["runtime"], aws.stubs["s3"]

    def describe() -> None:
        sm.add_response(
            "describe_endpoint",
            {
                "EndpointName": "decision-dev-async",
                "EndpointArn": f"arn:aws:sagemaker:{REGION}:123456789012:endpoint/decision-dev-async",
                "EndpointConfigName": "cfg",
                "EndpointStatus": "InService",
                "CreationTime": "2026-01-01T00:00:00Z",
                "LastModifiedTime": "2026-01-01T00:00:00Z",
            },
            {"EndpointName": "decision-dev-async"},
        )
        sm.add_response(
            "describe_endpoint_config",
            {
                "EndpointConfigName": "cfg",
                "EndpointConfigArn": f"arn:aws:sagemaker:{REGION}:123456789012:endpoint-config/cfg",
                "CreationTime": "2026-01-01T00:00:00Z",
                "ProductionVariants": [{"VariantName": "AllTraffic", "InstanceType": "ml.c6i.2xlarge"}],
                "AsyncInferenceConfig": {"OutputConfig": {"S3OutputPath": f"s3://{BUCKET}/async/output/"}},
            },
            {"EndpointConfigName": "cfg"},
        )

    describe()
    for index in range(2):
        key = f"async/input/{run}/part-{index:05d}.jsonl"
        aws.put(key)
        runtime.add_response(
            "invoke_endpoint_async",
            {
                "InferenceId": f"{run}-{index:05d}",
                "OutputLocation": f"s3://{BUCKET}/async/output/o{index}.out",
                "FailureLocation": f"s3://{BUCKET}/async/failure/o{index}-error.out",
            },
            {
                "EndpointName": "decision-dev-async",
                "InputLocation": f"s3://{BUCKET}/{key}",
                "ContentType": "application/jsonlines",
                "Accept": "application/jsonlines",
                "InferenceId": f"{run}-{index:05d}",
                "InvocationTimeoutSeconds": 3600,
            },
        )
    for key in ("output/o0.out", "failure/o0-error.out", "output/o1.out", "failure/o1-error.out"):
        s3.add_client_error(
            "head_object",
            service_error_code="404",
            http_status_code=404,
            expected_params={"Bucket": BUCKET, "Key": f"async/{key}"},
        )
    with pytest.raises(jobs.WaitTimedOut):
        finished(
            jobs.run_async,
            cases,
            out,
            endpoint="decision-dev-async",
            clients=aws.clients,
            options=options(parts=jobs.PartSize(3, 1 << 20), wait_timeout_s=0),
        )
    aws.done()

    # again: no part is uploaded or queued again; part 0 is answered, part 1 failed
    describe()
    s3.add_response("head_object", {}, {"Bucket": BUCKET, "Key": "async/output/o0.out"})
    s3.add_client_error(
        "head_object",
        service_error_code="404",
        http_status_code=404,
        expected_params={"Bucket": BUCKET, "Key": "async/output/o1.out"},
    )
    s3.add_response("head_object", {}, {"Bucket": BUCKET, "Key": "async/failure/o1-error.out"})
    payload = answer_lines(aws.uploads[f"async/input/{run}/part-00000.jsonl"])
    s3.add_response("get_object", body(payload), {"Bucket": BUCKET, "Key": "async/output/o0.out"})
    s3.add_response(
        "get_object",
        body(b"Received server error (500) from primary"),
        {"Bucket": BUCKET, "Key": "async/failure/o1-error.out"},
    )
    sm.add_response(
        "describe_endpoint",
        {
            "EndpointName": "decision-dev-async",
            "EndpointArn": f"arn:aws:sagemaker:{REGION}:123456789012:endpoint/decision-dev-async",
            "EndpointConfigName": "cfg",
            "EndpointStatus": "InService",
            "CreationTime": "2026-01-01T00:00:00Z",
            "LastModifiedTime": "2026-01-01T00:00:00Z",
            "ProductionVariants": [{"VariantName": "AllTraffic", "CurrentInstanceCount": 1}],
        },
        {"EndpointName": "decision-dev-async"},
    )
    summary = finished(
        jobs.run_async, cases, out, endpoint="decision-dev-async", clients=aws.clients, options=options()
    )
    aws.done()
    assert (summary["answered"], summary["failed"]) == (3, 2)
    assert "server error (500)" in summary["failed_examples"][0]["message"]
    assert summary["cost"]["instance_type"] == "ml.c6i.2xlarge"
    no_state_text(out)


# --- the layout the stacks define ------------------------------------------------------------------


def test_the_cli_reads_and_writes_where_the_stacks_grant() -> None:
    assert OUTPUTS["BatchInputUri"].endswith(batch_transform.INPUT_PREFIX)
    answers = aws_calls.transform_answers(OUTPUTS, "run1", "run1", "part-00000.jsonl")
    # the state machine's TransformOutput: <output prefix><run>/<execution name>/, the job appends <object>.out
    assert answers.key == f"{batch_transform.OUTPUT_PREFIX}run1/run1/part-00000.jsonl.out"
    output = async_inference.OUTPUT_PREFIX
    assert output.removesuffix(aws_calls.ASYNC_OUTPUT_DIR) + aws_calls.ASYNC_INPUT_DIR == async_inference.INPUT_PREFIX
    assert jobs.URL_BATCHES.bytes <= 6 << 20 and jobs.ASYNC_PARTS.bytes <= 6 << 20  # the adapter's body limit
    assert len(batch_transform.job_name_prefix("a" * 16) + new_run_name()) <= 63


# --- --url end to end on the bundled model ------------------------------------------------------------


@pytest.mark.model
def test_url_run_on_the_bundled_model_answers_as_single_requests_and_writes_an_evaluate_run(
    adapter_url: str, tmp_path: Path
) -> None:
    """`decisionctl batch run --url` through the real adapter's JSON Lines route (mini-batches of 4): every
    case answered, each answer the one its case gets alone, an evaluate directory compare reads, no state text."""
    cases, out = labeled_file(tmp_path / "cases.jsonl", 9), tmp_path / "out"
    argv = ["batch", "run", str(cases), "--url", adapter_url, "--out", str(out), "--part-records", "4"]
    assert cli.main(argv) == 0
    lines = [json.loads(line) for line in (out / ANSWERS).read_text().splitlines()]
    records = list(read_records(cases, parse_case))
    assert [line["id"] for line in lines] == [r.id for r in records] and all("answers" in line for line in lines)
    for record, line in zip(records[:3], lines[:3], strict=True):  # one of each question type
        assert record.case is not None
        alone = httpx.post(adapter_url + "/invocations", json=record.case.request(), timeout=120).json()
        (qid, answer), (_, expected) = next(iter(line["answers"].items())), next(iter(alone["answers"].items()))
        assert answer["type"] == expected["type"] and qid in alone["answers"]
        got = [answer["noul"]] if answer["type"] == "noul" else list(answer["probabilities"].values())
        want = [expected["noul"]] if expected["type"] == "noul" else list(expected["probabilities"].values())
        assert got == pytest.approx(want, abs=1e-6)
    results = json.loads((out / EVALUATE_DIR / "results.json").read_text())
    assert (results["cases"], results["scored"]) == (9, 9)
    run = comparison.load_run(out / EVALUATE_DIR)
    assert set(run.predictions) == {f"c{i}" for i in range(9)}
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["records"], summary["answered"], summary["failed"]) == (9, 9, 0)
    no_state_text(out)
