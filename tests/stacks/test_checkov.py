"""checkov and cfn-lint over every synthesized variant; each remaining checkov failure is acknowledged, with its
reason, in checkov_acknowledged.yaml.

Variants: the session's dev, prod and variant (tests/cdk_support.py), each hosting mode's (HOSTING_VARIANTS), and
"full": prod with Batch Transform, the asynchronous endpoint, capture, a shadow, decision shift and the GitHub
stack, synthesized once here (cfn-lint sees the others in test_cfn_lint.py, the full variant here). checkov
3.3.30 runs from its own venv, .cache/checkov, which `./dev setup` installs; it scans the templates offline
(--skip-download).
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pytest
import yaml
from cfnlint.api import ManualArgs, lint_file  # type: ignore[import-untyped]

from app import build_app
from tests.cdk_support import ASYNC, BATCH, HOSTING_VARIANTS, ROOT, VARIANTS, loop_context, synthesize

pytestmark = pytest.mark.slow  # the full variant's synth and checkov over ten variants: about 25 s

CHECKOV = ROOT / ".cache" / "checkov" / "bin" / "checkov"
ACKNOWLEDGED = Path(__file__).with_name("checkov_acknowledged.yaml")
FULL = "full"
SCANNED = (*VARIANTS, *HOSTING_VARIANTS, FULL)


@dataclass(frozen=True)
class Failure:
    variant: str
    check: str
    resource: str  # "<Type>.<LogicalId>"
    template: str


def full_context() -> dict[str, Any]:
    context = loop_context()
    prod = context["environments"]["prod"]
    prod["batch"], prod["async"] = copy.deepcopy(BATCH), copy.deepcopy(ASYNC)
    context["github"] = {"owner": "example-org", "repository": "decision-endpoints", "create_oidc_provider": True}
    context["environments"]["prod"]["account"] = "111122223333"  # the pipeline needs an account per environment
    context["environments"]["dev"]["account"] = "444455556666"
    return context


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """<tmp>/<variant>/*.template.json for every variant (templates only: the asset folders hold no templates)."""
    root = tmp_path_factory.mktemp("checkov")
    full = Path(tempfile.mkdtemp(prefix="cdk-full-"))
    try:
        build_app("prod", context=full_context(), outdir=str(full)).synth()  # raises on any cdk-nag finding
        outdirs = {**{v: synthesize(v).outdir for v in (*VARIANTS, *HOSTING_VARIANTS)}, FULL: full}
        for variant, outdir in outdirs.items():
            (root / variant).mkdir()
            for template in outdir.glob("*.template.json"):
                shutil.copy(template, root / variant / template.name)
    finally:
        shutil.rmtree(full, ignore_errors=True)
    return root


@pytest.fixture(scope="module")
def scanned(templates: Path) -> tuple[list[Failure], dict[str, tuple[int, int]]]:
    """checkov's failures, and (passed, failed) per variant."""
    assert CHECKOV.is_file(), f"{CHECKOV} is missing: run ./dev setup (it installs checkov into .cache/checkov)"
    run = subprocess.run(
        [str(CHECKOV), "-d", str(templates), "--framework", "cloudformation", "-o", "json", "--skip-download"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode in (0, 1), run.stderr[-2000:]  # 1: some check failed
    report = json.loads(run.stdout)
    results = (report[0] if isinstance(report, list) else report)["results"]
    counts: dict[str, tuple[int, int]] = {}
    failures = []
    for kind in ("passed_checks", "failed_checks"):
        for check in results[kind]:
            variant = Path(check["file_path"]).parent.name
            passed, failed = counts.get(variant, (0, 0))
            counts[variant] = (passed + 1, failed) if kind == "passed_checks" else (passed, failed + 1)
            if kind == "failed_checks":
                failures.append(Failure(variant, check["check_id"], check["resource"], Path(check["file_path"]).name))
    return failures, counts


def _acknowledgements() -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = yaml.safe_load(ACKNOWLEDGED.read_text(encoding="utf-8"))
    return entries


def _covers(entry: dict[str, Any], failure: Failure) -> bool:
    return (
        entry["check"] == failure.check
        and any(fnmatchcase(failure.resource, pattern) for pattern in entry["resources"])
        and failure.variant in entry.get("variants", SCANNED)
    )


def test_every_acknowledgement_has_a_check_resources_and_a_reason() -> None:
    for entry in _acknowledgements():
        assert set(entry) <= {"check", "resources", "variants", "reason"}, entry
        assert entry["check"].startswith("CKV") and entry["resources"], entry
        assert len(entry["reason"]) >= 80, entry  # a reason a reviewer can check, not a label
        assert set(entry.get("variants", [])) <= set(SCANNED), entry


def test_every_variant_is_scanned(scanned: tuple[list[Failure], dict[str, tuple[int, int]]]) -> None:
    _, counts = scanned
    assert set(counts) == set(SCANNED)
    assert all(passed > 150 for passed, _ in counts.values()), counts  # the templates were read, not skipped


def test_no_checkov_failure_is_unacknowledged(scanned: tuple[list[Failure], dict[str, tuple[int, int]]]) -> None:
    failures, _ = scanned
    entries = _acknowledgements()
    new = [f for f in failures if not any(_covers(e, f) for e in entries)]
    assert new == [], (
        "checkov failures not in checkov_acknowledged.yaml (fix them, or acknowledge with a reason):\n"
        + ("\n".join(f"{f.variant} {f.template} {f.check} {f.resource}" for f in new))
    )


def test_no_acknowledgement_is_stale(scanned: tuple[list[Failure], dict[str, tuple[int, int]]]) -> None:
    failures, _ = scanned
    stale = [e for e in _acknowledgements() if not any(_covers(e, f) for f in failures)]
    assert stale == [], f"acknowledged but no longer failing (remove them): {stale}"


def test_the_full_variant_has_no_cfn_lint_errors(templates: Path) -> None:
    files = sorted((templates / FULL).glob("*.template.json"))
    assert len(files) == 3  # Foundation, Serving and the GitHub stack
    for path in files:
        matches = lint_file(path, ManualArgs(regions=["us-west-2"]))
        errors = [f"{m.rule.id} {m.path_string}: {m.message}" for m in matches if m.rule.id.startswith("E")]
        assert errors == [], f"{path.name}:\n" + "\n".join(errors)
