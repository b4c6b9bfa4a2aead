"""decisionctl's callers of a components endpoint at zero: decide, evaluate, bench and batch run name the inference
component on every call and wait through SageMaker's no-capacity refusals with a progress line, within --capacity-wait;
check-deployed takes the component from cdk deploy's outputs. Stand-in, named as such: SageMakerRuntimeStandIn
(tests/sagemaker_runtime_standin.py) plays InvokeEndpoint in front of the real adapter on the bundled model, refusing
the first invocations as a component with no copy is refused; the CLI reaches it through botocore's
AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME with fake credentials."""

from __future__ import annotations

import json
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from decision_spec.names import stack_name
from decisionctl.commands import check_deployed, cli, options
from decisionctl.review import deployed

from tests.app_support import AppServer
from tests.sagemaker_runtime_standin import COMPONENT_HEADER, SageMakerRuntimeStandIn

REGION, ENDPOINT, COMPONENT = "us-west-2", "decision-dev-cpu", "decision-dev-cpu-model"
EXAMPLES = Path(str(resources.files("decisionctl").joinpath("data", "examples.jsonl")))
REQUEST = {
    "state": "I was charged twice for one order.",
    "questions": {"refund": {"type": "noul", "instructions": "Refund?"}},
}
WAITING = "no capacity yet (scaling from zero)"


@pytest.fixture()
def runtime(adapter: AppServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[SageMakerRuntimeStandIn]:
    """A components endpoint at zero: its first three invocations are refused for want of a copy."""
    standin = SageMakerRuntimeStandIn(
        adapter.url, endpoint=ENDPOINT, region=REGION, variants=("AllTraffic",), component=COMPONENT, no_capacity=3
    )
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", standin.url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLESTANDIN")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setattr(options, "CAPACITY_INTERVAL_S", 0.05)  # the 15 s of a real wait, shortened
    yield standin
    standin.close()


def _target(*extra: str) -> list[str]:
    return ["--sagemaker-endpoint", ENDPOINT, "--inference-component", COMPONENT, *extra]


def _components_seen(runtime: SageMakerRuntimeStandIn) -> set[str | None]:
    return {seen.headers.get(COMPONENT_HEADER) for seen in runtime.seen}


def test_decide_waits_through_the_refusals_with_a_progress_line(runtime, tmp_path, capsys) -> None:
    request = tmp_path / "request.json"
    request.write_text(json.dumps(REQUEST))
    assert cli.main(["decide", str(request), *_target()]) == 0
    out, err = capsys.readouterr()
    assert "refund" in out
    progress = [line for line in err.splitlines() if WAITING in line]
    assert len(progress) == 3 and progress[0].startswith(f"sagemaker:{ENDPOINT}/{COMPONENT}: ")
    assert "1 send(s)" in progress[0] and "3 send(s)" in progress[2]
    assert len(runtime.seen) == 4 and _components_seen(runtime) == {COMPONENT}  # sends per accepted decision: 4


def test_a_spent_wait_fails_once_without_a_retry_storm(runtime, tmp_path, capsys) -> None:
    runtime.no_capacity = 1000
    request = tmp_path / "request.json"
    request.write_text(json.dumps(REQUEST))
    status = cli.main(["decide", str(request), *_target("--capacity-wait", "0.12", "--max-attempts", "5")])
    _, err = capsys.readouterr()
    assert status == 1
    assert "HTTP 503 no_capacity" in err and "had no capacity after" in err
    # 0.12 s at 0.05 s: sends at 0, 0.05, 0.10 and 0.12 s, and decide's retries are not spent on it
    assert len(runtime.seen) <= 4


def test_a_component_is_required_where_one_is_hosted(runtime, tmp_path, capsys) -> None:
    request = tmp_path / "request.json"
    request.write_text(json.dumps(REQUEST))
    assert cli.main(["decide", str(request), "--sagemaker-endpoint", ENDPOINT]) == 1
    assert f"Inference component None of endpoint {ENDPOINT} not found" in capsys.readouterr().err
    assert len(runtime.seen) == 1  # a bad call is not retried


def test_evaluate_names_the_component_and_waits(runtime, tmp_path) -> None:
    cases = tmp_path / "cases.jsonl"
    cases.write_text("\n".join(EXAMPLES.read_text().splitlines()[:3]) + "\n")
    out = tmp_path / "evaluate"
    assert cli.main(["evaluate", str(cases), "--out", str(out), *_target()]) == 0
    predictions = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert len(predictions) == 3 and all("error" not in p for p in predictions)
    assert len(runtime.seen) == 3 + 3 and _components_seen(runtime) == {COMPONENT}


def test_bench_wakes_the_component_in_its_warm_up_and_counts_the_sends(runtime, tmp_path, capsys) -> None:
    out = tmp_path / "bench"
    argv = ["bench", *_target(), "--concurrency", "1", "--count", "3", "--out", str(out)]
    assert cli.main(argv) == 0
    assert WAITING in capsys.readouterr().err
    report = json.loads((out / "bench.json").read_text())
    (level,) = report["targets"][0]["levels"]
    assert (level["accepted"], level["decisions"], level["sends"]) == (3, 3, 3)  # measured warm: one send each
    assert _components_seen(runtime) == {COMPONENT}


def test_batch_run_sends_json_lines_to_the_component_and_waits(runtime, tmp_path) -> None:
    cases = tmp_path / "records.jsonl"
    records = [{"id": f"r{i}", **REQUEST} for i in range(3)]
    cases.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "batch"
    assert cli.main(["batch", "run", str(cases), "--out", str(out), *_target()]) == 0
    answers = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
    assert [a["id"] for a in answers] == ["r0", "r1", "r2"] and all("error" not in a for a in answers)
    assert len(runtime.seen) == 4  # one mini-batch, after three refusals
    assert {seen.headers["content-type"] for seen in runtime.seen} == {"application/jsonlines"}
    assert _components_seen(runtime) == {COMPONENT}
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["mode"], summary["target"]) == ("realtime", f"sagemaker:{ENDPOINT}/{COMPONENT}")


def _args(**given: Any) -> Any:
    defaults = {"inference_component": None, "endpoint": None, "outputs": None, "url": None, "env": "dev"}
    return type("Args", (), {**defaults, **given})()


def test_check_deployed_takes_each_component_from_the_outputs(tmp_path) -> None:
    outputs = tmp_path / "outputs.json"
    stack = stack_name("dev", "Serving")
    written = {"CpuEndpointName": ENDPOINT, "CpuInferenceComponentName": COMPONENT, "GpuEndpointName": "g"}
    outputs.write_text(json.dumps({stack: written}))
    assert deployed.endpoints_from_outputs(outputs, "dev") == [ENDPOINT, "g"]
    assert deployed.component_names(None, outputs, "dev", None) == {ENDPOINT: COMPONENT}
    assert deployed.component_names([ENDPOINT], None, "dev", COMPONENT) == {ENDPOINT: COMPONENT}
    with pytest.raises(options.UsageError, match="names the component of one --endpoint"):
        check_deployed.run(_args(endpoint=[ENDPOINT, "g"], inference_component=COMPONENT))
