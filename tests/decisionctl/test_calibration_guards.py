"""evaluate --fit-calibration and --write-policy refuse predictions made under another slot prior than the manifest
they write into (issue 46): byom.md's step 5 skipped, on the real adapter and the bundled model. The same commands
pass once the adapter is restarted on the manifest."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
from decision_spec.manifest import read_manifest
from decisionctl.commands import cli
from decisionctl.commands.options import shipped

from tests.app_support import start_app
from tests.cdk_support import ROOT
from tests.conftest import copy_model, require_model

pytestmark = [pytest.mark.model]

PRIOR_LINES = (0, 3, 14)  # unlabeled three-option requests of the shipped prior file (as test_byom)
CASES = ("choice-team-01", "choice-team-02", "choice-team-04", "noul-refund-01", "noul-spam-01", "score-anger-01")


def decisionctl(*argv: str) -> tuple[int, str]:
    """Its status and what it said on stderr."""
    said = io.StringIO()
    with contextlib.redirect_stderr(said), contextlib.redirect_stdout(io.StringIO()):
        status = cli.main(list(argv))
    return status, said.getvalue()


def test_predictions_under_another_prior_are_refused_and_nothing_is_written(tmp_path: Path) -> None:
    require_model()
    model = copy_model(tmp_path / "model")
    manifest = model / "manifest.json"
    requests, cases = tmp_path / "requests.jsonl", tmp_path / "cases.jsonl"
    lines = shipped("prior_requests.jsonl").read_text(encoding="utf-8").splitlines()
    requests.write_text("".join(lines[i] + "\n" for i in PRIOR_LINES), encoding="utf-8")
    suite = {
        json.loads(line)["id"]: line
        for line in (ROOT / "evaluation/support-suite.jsonl").read_text(encoding="utf-8").splitlines()
        if line.startswith("{")
    }
    cases.write_text("".join(suite[i] + "\n" for i in CASES), encoding="utf-8")

    adapter = start_app(model_dir=model)  # the app in this process: it reads the manifest as it starts, as `serve` does
    try:
        status, said = decisionctl("fit-prior", str(requests), "--url", adapter.url, "--manifest", str(manifest))
        assert status == 0, said
        fitted = manifest.read_bytes()
        prior = read_manifest(manifest).calibration
        assert prior is not None and prior.slot_prior is not None
        # byom.md step 5 skipped: the adapter still serves no prior
        policy_status, policy_said = decisionctl(
            "evaluate", str(cases), "--url", adapter.url, "--out", str(tmp_path / "policy"), "--write-policy",
            str(manifest),
        )  # fmt: skip
        fit_status, fit_said = decisionctl(
            "evaluate", str(cases), "--url", adapter.url, "--out", str(tmp_path / "fit"), "--fit-calibration",
            "--manifest", str(manifest),
        )  # fmt: skip
    finally:
        adapter.stop()
    print(policy_said, fit_said, sep="\n")
    assert (policy_status, fit_status) == (1, 1)
    held = json.dumps({k: [round(p, 6) for p in v] for k, v in prior.slot_prior.slots.items()}).replace('"', "'")
    for said in (policy_said, fit_said):
        assert f"the cases were scored under the slot prior none, but the manifest holds {held}" in said
    assert manifest.read_bytes() == fitted  # neither wrote

    restarted = start_app(model_dir=model)
    try:
        status, said = decisionctl(
            "evaluate", str(cases), "--url", restarted.url, "--out", str(tmp_path / "policy-after"), "--write-policy",
            str(manifest),
        )  # fmt: skip
    finally:
        restarted.stop()
    assert status == 0, said
    written = read_manifest(manifest)
    assert written.policy is not None and written.calibration == prior
