"""Each setting that changes answers is carried from the artifact to the endpoint (issue 37), one row per setting
(tests/answer_settings_support.py): `package-model --answer-setting` records it in manifest.json and in the archive
SageMaker unpacks; the adapter adopts it at start and refuses a DECISION_ variable that says otherwise, naming both
values; the evaluation record holds it; synth's binding writes it into the container environment and refuses a
cdk.json value that says otherwise, naming both; the decision diff reports it changed and check-deployed a variant
serving another. No model loads here: a small file with the GGUF magic stands in where only bytes matter. The real
adapter serving an artifact's settings from a synthesized environment is tests/adapter/test_answer_settings_served.py.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import tarfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from decision_adapter.core.settings import AdapterSettings, SettingsError, adopt_answer_settings, load_adapter_settings
from decision_spec.answer_settings import REPORTED_AS, AnswerSettings, ArtifactAnswerSettings, shown, variable
from decision_spec.environment_config import load_environment
from decision_spec.manifest import Manifest, read_manifest, write_manifest
from decision_spec.policy import Provenance, seal
from decision_spec.schemas import RunIdentity
from decisionctl.commands import cli
from decisionctl.core.labeled import Prediction
from decisionctl.core.served_calibration import check_run_served
from decisionctl.review import decision_diff, deployed, recording, summary
from decisionctl.review import record as records

from stacks.adapter_settings import answer_environment
from stacks.evaluation_binding import AnswerSettingsContradicted, check_evaluation
from tests.answer_settings_support import CARRIED
from tests.cdk_support import cdk_context
from tests.decisionctl_support import x_run

DEV_MODEL_SHA = "c624c2bea4349b36453448197f53b3935a96da7934904c124a612716c348a8ff"  # cdk.json's dev model
SUITE = "evaluation/support-suite.jsonl"
PROVENANCE = Provenance(
    cases_file="cases.jsonl",
    cases_sha256="a" * 64,
    target_accuracy=0.9,
    min_support=5,
    review_accuracy=0.5,
    created="2026-12-02",
)
ROWS = pytest.mark.parametrize("name", list(CARRIED))
REPORTED_ROWS = pytest.mark.parametrize("name", list(REPORTED_AS))


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No DECISION_ variable of the test runner's leaks into the adapter settings built here."""
    for name in [n for n in os.environ if n.startswith("DECISION_")]:
        monkeypatch.delenv(name)


def package(tmp_path: Path, *answer_settings: str) -> int:
    """package-model on a small GGUF stand-in into tmp_path/artifact with these --answer-setting arguments."""
    gguf = tmp_path / "src" / "tiny.Q4_0.gguf"
    gguf.parent.mkdir(parents=True, exist_ok=True)
    gguf.write_bytes(b"GGUF" + b"weights" * 1000)
    argv = ["package-model", str(gguf), "--expected-sha256", hashlib.sha256(gguf.read_bytes()).hexdigest()]
    argv += ["--source", "test", "--license", "MIT", "--out", str(tmp_path / "artifact")]
    for setting in answer_settings:
        argv += ["--answer-setting", setting]
    return cli.main(argv)


def packaged(tmp_path: Path, *answer_settings: str) -> Path:
    """The artifact directory package-model wrote."""
    assert package(tmp_path, *answer_settings) == 0
    return tmp_path / "artifact"


def recorded(manifest: Manifest, identity: dict[str, Any]) -> dict[str, Any]:
    """The evaluation record record-evaluation writes for one scored case (the answers do not matter here)."""
    prediction = Prediction("c1", "noul", ["yes", "no"], [0.6, 0.4], 0, 0, 0.6, None, 1.0, manifest.sha256, 0.1)
    return records.build(
        predictions=[prediction],
        case_sha256={"c1": "0" * 64},
        keys={},
        identity=identity,
        manifest=manifest,
        manifest_bytes=manifest.model_dump_json().encode(),
        suite_path=SUITE,
        suite_bytes=b"{}\n",
        cases=1,
        created=datetime(2026, 12, 2, tzinfo=UTC),
    )


def test_x_run_has_a_field_for_every_answer_setting() -> None:
    """What a run served is read from its x_run (run_answer_settings), so the identity reports each setting."""
    reported = {REPORTED_AS.get(name, name) for name in AnswerSettings.model_fields}
    assert reported <= set(RunIdentity.model_fields), reported - set(RunIdentity.model_fields)


def test_every_answer_setting_has_a_row_and_its_value_is_not_the_default() -> None:
    assert set(CARRIED) == set(AnswerSettings.model_fields) == set(ArtifactAnswerSettings.model_fields)
    defaults = AdapterSettings()
    for name, (value, other) in CARRIED.items():
        assert value != getattr(defaults, name) and value != other, name


@ROWS
def test_package_model_records_it_and_the_adapter_adopts_it(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    value, other = CARRIED[name]
    artifact = packaged(tmp_path, f"{name}={shown(value)}")
    manifest = read_manifest(artifact / "manifest.json")
    assert manifest.answer_settings is not None and manifest.answer_settings.recorded() == {name: value}
    with tarfile.open(artifact / "model.tar.gz", "r:gz") as tar:  # what SageMaker unpacks into /opt/ml/model
        member = tar.extractfile("manifest.json")
        assert member is not None and json.loads(member.read())["answer_settings"] == {name: value}
    # the variable unset: the adapter takes the artifact's value
    adopted = adopt_answer_settings(load_adapter_settings(), manifest.recorded_answer_settings())
    assert getattr(adopted, name) == value
    # set to the same value: served; set to another: refused, both values named
    monkeypatch.setenv(variable(name), shown(value))
    assert getattr(adopt_answer_settings(load_adapter_settings(), manifest.recorded_answer_settings()), name) == value
    monkeypatch.setenv(variable(name), shown(other))
    with pytest.raises(SettingsError) as refused:
        adopt_answer_settings(load_adapter_settings(), manifest.recorded_answer_settings())
    assert f"{variable(name)}={shown(other)}" in str(refused.value)
    assert f"records {name} {shown(value)}" in str(refused.value)


@ROWS
def test_packaging_again_keeps_it(name: str, tmp_path: Path) -> None:
    value, _ = CARRIED[name]
    first = read_manifest(packaged(tmp_path, f"{name}={shown(value)}") / "manifest.json").answer_settings
    assert read_manifest(packaged(tmp_path) / "manifest.json").answer_settings == first  # no --answer-setting


@REPORTED_ROWS
def test_a_policy_carries_what_it_was_measured_under_and_packaging_refuses_another(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A policy records the debias mode, its tolerance (adaptive) and the boundary it was measured under: the adapter
    adopts them from it, and package-model refuses to record another value beside it."""
    value, other = CARRIED[name]
    path = packaged(tmp_path) / "manifest.json"
    manifest = read_manifest(path)
    measured = {"order_debias_mode": "adaptive", REPORTED_AS[name]: value}
    policy = seal(
        model_sha256=manifest.sha256,
        calibration_sha256=manifest.calibration_sha256(),
        types={},
        provenance=PROVENANCE,
        **measured,
    )
    write_manifest(manifest.model_copy(update={"policy": policy}), path)
    assert read_manifest(path).recorded_answer_settings().recorded()[name] == value
    assert (
        adopt_answer_settings(load_adapter_settings(), read_manifest(path).recorded_answer_settings()).model_dump()[
            name
        ]
        == value
    )
    capsys.readouterr()
    assert package(tmp_path, f"{name}={shown(other)}") == 1
    err = capsys.readouterr().err
    assert f"{name} {shown(other)} (the policy: {shown(value)})" in err and policy.version in err
    assert read_manifest(path).answer_settings is None  # nothing written
    # a run under another value is not the artifact's: not recorded; a policy measured again under it may replace it
    other_run = {**x_run(model_sha256=manifest.sha256), **measured, REPORTED_AS[name]: other, "policy": policy.version}
    with pytest.raises(records.EvaluationRecordError, match=rf"{name} {other} \(the artifact's: {value}\)"):
        recording.check_served(other_run, read_manifest(path))
    check_run_served(other_run, read_manifest(path))


def test_package_model_refuses_what_is_not_an_answer_setting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF" + b"w" * 100)
    base = ["package-model", str(gguf), "--expected-sha256", hashlib.sha256(gguf.read_bytes()).hexdigest()]
    base += ["--source", "t", "--license", "MIT", "--out", str(tmp_path / "out")]
    assert cli.main([*base, "--answer-setting", "max_queue=4"]) == 1
    assert "max_queue: not a setting that changes answers" in capsys.readouterr().err
    assert cli.main([*base, "--answer-setting", "order_debias=sideways"]) == 1
    assert "order_debias=sideways" in capsys.readouterr().err
    assert cli.main([*base, "--answer-setting", "rotations"]) == 1
    assert "NAME=VALUE" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@ROWS
def test_the_evaluation_record_holds_it(name: str, tmp_path: Path) -> None:
    value, _ = CARRIED[name]
    manifest = read_manifest(packaged(tmp_path, f"{name}={shown(value)}") / "manifest.json")
    identity = x_run(model_sha256=manifest.sha256)  # reports no debias mode or boundary: a GGUF scheme of its own
    recording.check_served(identity, manifest)
    assert recorded(manifest, identity)["answer_settings"] == {name: value}


@ROWS
def test_a_run_that_served_a_setting_the_manifest_does_not_record_records_it(name: str, tmp_path: Path) -> None:
    """x_run reports every answer setting in force (the out-of-scope option, the minimum label mass and the option
    counts under their own names), so a setting evaluated from the environment alone is recorded too, and the stacks
    then deploy it; a run under another value than the manifest's is refused."""
    value, other = CARRIED[name]
    manifest = read_manifest(packaged(tmp_path) / "manifest.json")  # records nothing
    identity = {**x_run(model_sha256=manifest.sha256), "order_debias_mode": "adaptive"}
    identity[REPORTED_AS.get(name, name)] = value
    recording.check_served(identity, manifest)
    assert recorded(manifest, identity)["answer_settings"][name] == value
    pinned = read_manifest(packaged(tmp_path, f"{name}={shown(other)}") / "manifest.json")
    with pytest.raises(records.EvaluationRecordError):
        recording.check_served({**identity, "model_sha256": pinned.sha256}, pinned)


@REPORTED_ROWS
def test_a_run_that_served_another_value_is_not_recorded(name: str, tmp_path: Path) -> None:
    """x_run reports the debias mode, its tolerance (adaptive) and the boundary: a run under another one is refused."""
    value, other = CARRIED[name]
    manifest = read_manifest(packaged(tmp_path, f"{name}={shown(value)}") / "manifest.json")
    identity = {**x_run(model_sha256=manifest.sha256), "order_debias_mode": "adaptive", REPORTED_AS[name]: other}
    with pytest.raises(records.EvaluationRecordError) as refused:
        recording.check_served(identity, manifest)
    assert f"under {name} {other}" in str(refused.value) and f"records {name} {value}" in str(refused.value)


def bound_root(tmp_path: Path, answer_settings: dict[str, Any]) -> Path:
    """A repository root whose dev record (cdk.json's paths) binds to dev's model and holds these answer settings."""
    root = tmp_path / "root"
    (root / "evaluation").mkdir(parents=True)
    suite = b'{"id": "c1"}\n'
    (root / SUITE).write_bytes(suite)
    record = {
        "schema": "decision-endpoints/evaluation/v1",
        "artifact": {"model_sha256": DEV_MODEL_SHA, "manifest_sha256": "cd" * 32},
        "suite": {"path": SUITE, "sha256": hashlib.sha256(suite).hexdigest(), "cases": 1},
        "answer_settings": answer_settings,
    }
    (root / "evaluation" / "dev.json").write_text(json.dumps(record), encoding="utf-8")
    return root


def dev_with(model_answer_settings: dict[str, Any] | None) -> Any:
    environments = copy.deepcopy(cdk_context()["environments"])
    if model_answer_settings is not None:
        environments["dev"]["model"]["answer_settings"] = model_answer_settings
    return load_environment(environments, "dev")


@ROWS
def test_synth_writes_the_recorded_value_and_refuses_cdk_json_saying_otherwise(name: str, tmp_path: Path) -> None:
    value, other = CARRIED[name]
    root = bound_root(tmp_path, {name: value})
    binding = check_evaluation(dev_with(None), root)
    assert binding is not None and not binding.problems
    assert answer_environment(None, binding.answer_settings) == {variable(name): shown(value)}
    # cdk.json may state the same value
    same = dev_with({name: value})
    binding = check_evaluation(same, root)
    assert binding is not None
    assert answer_environment(same.model.answer_settings, binding.answer_settings) == {variable(name): shown(value)}
    # another value stops synth, naming both
    with pytest.raises(AnswerSettingsContradicted) as refused:
        check_evaluation(dev_with({name: other}), root)
    message = str(refused.value)
    assert f"environments.dev.model.answer_settings.{name} is {shown(other)}" in message
    assert f"evaluation/dev.json records {name} {shown(value)}" in message


@ROWS
def test_the_decision_diff_reports_it_changed(name: str, tmp_path: Path) -> None:
    value, _ = CARRIED[name]
    manifest = read_manifest(packaged(tmp_path, f"{name}={shown(value)}") / "manifest.json")
    identity = x_run(model_sha256=manifest.sha256)
    base = recorded(manifest.model_copy(update={"answer_settings": None}), identity)
    new = recorded(manifest, identity)
    report = decision_diff.diff(base, new)
    assert report["answer_settings_changes"] == {name: {"base": None, "new": value}}
    assert f"`{name}` not recorded to {shown(value)}" in summary.decision_diff(report, [], title="t")


@REPORTED_ROWS
def test_check_deployed_fails_a_variant_serving_another_value(name: str, tmp_path: Path) -> None:
    value, other = CARRIED[name]
    manifest = read_manifest(packaged(tmp_path, f"{name}={shown(value)}") / "manifest.json")
    record = recorded(manifest, x_run(model_sha256=manifest.sha256))
    served = {**x_run(model_sha256=manifest.sha256), "order_debias_mode": "adaptive", REPORTED_AS[name]: other}
    assert deployed.artifact_mismatches(served, record)[-1] == (
        f"serves other answer settings: {name} {shown(other)}, the record's {shown(value)}"
    )
