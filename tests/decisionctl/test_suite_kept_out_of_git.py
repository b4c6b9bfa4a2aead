"""A suite kept out of git (issue 37): cdk.json names it outside the repository (`..` or an absolute path) and states
its sha256 (`evaluation.suite_sha256`); `decisionctl record-evaluation` scores it from there and records it as cdk.json
names it, with the sha256 of the bytes it scored, and synth's binding takes that record with the file gone. A suite
whose bytes are not the stated sha256 is refused before any case is sent.

No model loads: the artifact is package-model's on a small file with the GGUF magic, and a stand-in transport, named
as such, answers every case as an adapter serving that artifact would (its `x_run` names the artifact's model).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from decision_spec.evaluation_record import EvaluationConfig
from decision_spec.manifest import read_manifest
from decisionctl.commands import cli, record_evaluation
from decisionctl.core.labeled import QUESTION_ID
from decisionctl.transport import Reply

from stacks.evaluation_config import read_binding
from tests.decisionctl_support import x_run

EXAMPLES = Path(str(resources.files("decisionctl").joinpath("data", "examples.jsonl")))
SUITE_IDS = ("noul-refund-01", "noul-refund-02", "noul-refund-03", "noul-refund-04")
RECORD = "evaluation/dev.json"


class StandInAdapter:
    """A transport standing in for an adapter serving the artifact: every noul question answered 0.8 yes."""

    label = "stand-in"

    def __init__(self, model_sha256: str) -> None:
        self.model_sha256 = model_sha256
        self.sent = 0

    def send(self, body: Mapping[str, Any]) -> Reply:
        self.sent += 1
        answer = {"model": body["model"], "answers": {QUESTION_ID: {"type": "noul", "noul": 0.8}}}
        answer |= {"usage": {"input_tokens": 3, "output_tokens": 0}, "x_run": x_run(model_sha256=self.model_sha256)}
        return Reply(200, json.dumps(answer).encode(), 0.01)

    def close(self) -> None:
        pass


def artifact(tmp_path: Path) -> Path:
    """package-model's directory for a small GGUF stand-in."""
    gguf = tmp_path / "src" / "tiny.Q4_0.gguf"
    gguf.parent.mkdir(parents=True)
    gguf.write_bytes(b"GGUF" + b"weights" * 1000)
    argv = ["package-model", str(gguf), "--expected-sha256", hashlib.sha256(gguf.read_bytes()).hexdigest()]
    assert cli.main([*argv, "--source", "test", "--license", "MIT", "--out", str(tmp_path / "artifact")]) == 0
    return tmp_path / "artifact"


def kept_suite(path: Path) -> str:
    """The suite, written where the team keeps it (not under the repository); its sha256."""
    rows = [line for line in EXAMPLES.read_text().splitlines() if line.strip() and json.loads(line)["id"] in SUITE_IDS]
    assert len(rows) == len(SUITE_IDS)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(rows) + "\n")
    return hashlib.sha256(path.read_bytes()).hexdigest()


def evaluation(suite: str, suite_sha256: str) -> dict[str, Any]:
    return {
        "suite": suite,
        "suite_sha256": suite_sha256,
        "record": RECORD,
        "enforce": "refuse",
        "tolerance": {"probability": 0.02, "flips": 0},
        "gates": {"max_accuracy_drop_points": 2.0, "max_flips": 3, "max_ece_rise": 0.03, "band_bound": True},
    }


def repository(root: Path, block: dict[str, Any]) -> Path:
    root.mkdir(parents=True)
    cdk_json = root / "cdk.json"
    cdk_json.write_text(json.dumps({"context": {"environments": {"dev": {"evaluation": block}}}}))
    return cdk_json


def record(cdk_json: Path, art: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, StandInAdapter]:
    stand_in = StandInAdapter(read_manifest(art / "manifest.json").sha256)
    monkeypatch.setattr(record_evaluation, "sender", lambda args, max_connections: stand_in)
    argv = ["record-evaluation", "--env", "dev", "--artifact", str(art), "--url", "http://stand-in.invalid"]
    return cli.main([*argv, "--cdk-json", str(cdk_json)]), stand_in


@pytest.mark.parametrize("named", ["relative", "absolute"])
def test_record_evaluation_records_a_suite_outside_the_repository(
    named: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = tmp_path / "kept" / "support-suite.jsonl"
    sha = kept_suite(kept)
    suite = "../kept/support-suite.jsonl" if named == "relative" else str(kept)
    root = tmp_path / "repository"
    cdk_json = repository(root, evaluation(suite, sha))
    art = artifact(tmp_path)
    code, stand_in = record(cdk_json, art, monkeypatch)
    assert (code, stand_in.sent) == (0, len(SUITE_IDS))
    data = (root / RECORD).read_bytes()
    assert (art / "evaluation.json").read_bytes() == data
    written = json.loads(data)
    assert written["suite"] == {"path": suite, "sha256": sha, "cases": len(SUITE_IDS)}
    # synth in CI and the pipeline: the suite is not there, the record binds through cdk.json's sha256
    kept.unlink()
    config = EvaluationConfig.model_validate_json(json.dumps(evaluation(suite, sha)))
    binding = read_binding(root, "dev", config, written["artifact"]["model_sha256"])
    assert binding.problems == () and binding.record_sha256 == hashlib.sha256(data).hexdigest()


def test_a_suite_that_is_not_the_stated_one_is_refused_before_any_case_is_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    kept = tmp_path / "kept" / "support-suite.jsonl"
    sha = kept_suite(kept)
    cdk_json = repository(tmp_path / "repository", evaluation(str(kept), "ef" * 32))
    code, stand_in = record(cdk_json, artifact(tmp_path), monkeypatch)
    assert (code, stand_in.sent) == (1, 0)
    err = capsys.readouterr().err
    assert f"{kept} has sha256 {sha}, but environments.dev.evaluation.suite_sha256 is {'ef' * 32}" in err
    assert f"set environments.dev.evaluation.suite_sha256 to {sha}" in err
    assert not (tmp_path / "repository" / RECORD).exists()


def test_a_suite_outside_the_repository_without_its_sha256_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    kept = tmp_path / "kept" / "support-suite.jsonl"
    kept_suite(kept)
    block = evaluation("../kept/support-suite.jsonl", "")
    del block["suite_sha256"]
    code, stand_in = record(repository(tmp_path / "repository", block), artifact(tmp_path), monkeypatch)
    assert (code, stand_in.sent) == (1, 0)
    err = capsys.readouterr().err
    assert "environments.dev.evaluation: " in err and "set suite_sha256 to the suite's sha256" in err
