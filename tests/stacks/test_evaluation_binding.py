"""The evaluation bound to each model artifact (issue 31): the committed record names the artifact cdk.json deploys
and the suite as it is; where it does, the preflight checks the uploaded manifest and the serving stack outputs the
record's sha256; where it does not, synth refuses (enforce: refuse) or warns. A suite kept out of git (issue 37)
binds through the sha256 cdk.json states for it, with the file absent at synth. Three synths in all, on a tmp root."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from decision_spec.environment_config import PLACEHOLDER_SHA256, load_environment
from decision_spec.evaluation_record import RECORD_SCHEMA, EvaluationConfig
from pydantic import ValidationError

from app import build_app
from stacks.evaluation_binding import WARNING_ID, EvaluationError, check_evaluation
from stacks.evaluation_config import read_binding
from tests.cdk_support import cdk_context, variant_context

SUITE = "evaluation/support-suite.jsonl"
RECORD = "evaluation/dev.json"
MODEL_SHA = "c624c2bea4349b36453448197f53b3935a96da7934904c124a612716c348a8ff"
REAL_LOOKING_SHA = "ab" * 32
MANIFEST_SHA = "cd" * 32
FIX = "`decisionctl record-evaluation --env dev --url <adapter serving the artifact> --artifact <artifact dir>`"
SHA = "ef" * 32
SUITE_LINES = [
    {"id": "refund-1", "question": "route", "text": "I want my money back", "label": "refunds"},
    {"id": "login-1", "question": "route", "text": "I cannot sign in", "label": "accounts"},
]


def evaluation(record: str = RECORD, enforce: str = "warn") -> dict[str, Any]:
    return {
        "suite": SUITE,
        "record": record,
        "enforce": enforce,
        "tolerance": {"probability": 0.02, "flips": 0},
        "gates": {"max_accuracy_drop_points": 2.0, "max_flips": 3, "max_ece_rise": 0.03, "band_bound": True},
    }


def write_suite(root: Path) -> bytes:
    data = "".join(json.dumps(line, sort_keys=True) + "\n" for line in SUITE_LINES).encode()
    (root / SUITE).parent.mkdir(parents=True, exist_ok=True)
    (root / SUITE).write_bytes(data)
    return data


def write_record(root: Path, model_sha256: str = MODEL_SHA, **changes: Any) -> bytes:
    """A record as decisionctl record-evaluation writes it, computed from the suite under root unless `suite` says."""
    record: dict[str, Any] = {
        "schema": RECORD_SCHEMA,
        "artifact": {"model_sha256": model_sha256, "manifest_sha256": MANIFEST_SHA, "model_file": "m.gguf"},
        "metrics": {"accuracy": 1.0},
        **changes,
    }
    if "suite" not in record:
        suite = (root / SUITE).read_bytes()
        record["suite"] = {"path": SUITE, "sha256": hashlib.sha256(suite).hexdigest(), "cases": len(SUITE_LINES)}
    data = json.dumps(record, indent=2, sort_keys=True).encode()
    (root / RECORD).write_bytes(data)
    return data


def bind(root: Path, model_sha256: str = MODEL_SHA) -> tuple[str | None, str | None, tuple[str, ...]]:
    binding = read_binding(root, "dev", EvaluationConfig.model_validate_json(json.dumps(evaluation())), model_sha256)
    return binding.record_sha256, binding.manifest_sha256, binding.problems


# --- the config and the record ------------------------------------------------------------------


def test_cdk_json_binds_both_environments_to_one_suite() -> None:
    environments = cdk_context()["environments"]
    dev, prod = (load_environment(environments, name).evaluation for name in ("dev", "prod"))
    assert dev is not None and prod is not None
    assert (dev.suite, dev.record, dev.enforce) == (SUITE, "evaluation/dev.json", "warn")
    assert (prod.suite, prod.record, prod.enforce) == (SUITE, "evaluation/prod.json", "refuse")


@pytest.mark.parametrize(
    ("key", "value"),
    [("suite", "../outside.jsonl"), ("suite", "/abs/suite.jsonl"), ("suite", "suite.json"), ("record", "r.jsonl")],
)
def test_paths_stay_in_the_repository(key: str, value: str) -> None:
    with pytest.raises(ValidationError, match="relative to the repository root"):
        EvaluationConfig.model_validate_json(json.dumps({**evaluation(), key: value}))


def test_a_suite_with_its_sha256_stated_may_live_outside_the_repository() -> None:
    for suite in ("/srv/suites/support.jsonl", "../support-suites/support.jsonl"):
        config = EvaluationConfig.model_validate_json(json.dumps({**evaluation(), "suite": suite, "suite_sha256": SHA}))
        assert (config.suite, config.suite_sha256) == (suite, SHA)


def test_a_suite_outside_the_repository_without_its_sha256_names_the_fix() -> None:
    with pytest.raises(ValidationError) as refused:
        EvaluationConfig.model_validate_json(json.dumps({**evaluation(), "suite": "/srv/suites/support.jsonl"}))
    message = str(refused.value)
    assert "suite /srv/suites/support.jsonl is not a path relative to the repository root" in message
    assert "set suite_sha256 to the suite's sha256" in message


@pytest.mark.parametrize(
    ("changes", "wrong"),
    [
        ({"suite_sha256": "AB" * 32}, "suite_sha256"),
        ({"suite_sha256": "ab" * 31}, "suite_sha256"),
        ({"suite": "/srv/suite.json", "suite_sha256": SHA}, "ending .jsonl"),
        ({"record": "/srv/dev.json", "suite_sha256": SHA}, "relative to the repository root"),
    ],
)
def test_a_stated_sha256_is_64_lowercase_hex_and_frees_only_the_suite(changes: dict[str, Any], wrong: str) -> None:
    with pytest.raises(ValidationError, match=wrong):
        EvaluationConfig.model_validate_json(json.dumps({**evaluation(), **changes}))


def test_a_bound_record_gives_its_sha256_and_the_evaluated_manifest(tmp_path: Path) -> None:
    write_suite(tmp_path)
    data = write_record(tmp_path)
    assert bind(tmp_path) == (hashlib.sha256(data).hexdigest(), MANIFEST_SHA, ())


def test_a_missing_record_names_the_path_and_the_command(tmp_path: Path) -> None:
    write_suite(tmp_path)
    record_sha, manifest_sha, problems = bind(tmp_path)
    assert (record_sha, manifest_sha) == (None, None)
    (problem,) = problems
    assert problem.startswith(f"environments.dev.evaluation.record: {RECORD} cannot be read")
    assert FIX in problem and problem.endswith("commit the record.")


def test_a_missing_suite_is_named(tmp_path: Path) -> None:
    write_suite(tmp_path)
    write_record(tmp_path)
    (tmp_path / SUITE).unlink()
    (problem,) = bind(tmp_path)[2]
    assert problem.startswith(f"environments.dev.evaluation.suite: {SUITE} cannot be read")


def test_the_record_of_another_model_names_both_checksums(tmp_path: Path) -> None:
    write_suite(tmp_path)
    write_record(tmp_path, model_sha256=REAL_LOOKING_SHA)
    (problem,) = bind(tmp_path)[2]
    assert f"{RECORD} evaluates the GGUF with sha256 {REAL_LOOKING_SHA}" in problem
    assert f"environments.dev.model.sha256 is {MODEL_SHA}" in problem and FIX in problem


def test_a_suite_changed_since_the_record_is_named(tmp_path: Path) -> None:
    write_suite(tmp_path)
    write_record(tmp_path)
    with (tmp_path / SUITE).open("a", encoding="utf-8") as suite:
        suite.write(json.dumps({"id": "new-1", "question": "route", "text": "?", "label": "accounts"}) + "\n")
    (problem,) = bind(tmp_path)[2]
    assert f"{SUITE} changed since {RECORD} was recorded" in problem and FIX in problem


def test_a_record_on_another_suite_is_named(tmp_path: Path) -> None:
    write_suite(tmp_path)
    write_record(tmp_path, suite={"path": "evaluation/other.jsonl", "sha256": "ef" * 32, "cases": 2})
    (problem,) = bind(tmp_path)[2]
    assert f"measured on the suite evaluation/other.jsonl, but environments.dev.evaluation.suite is {SUITE}" in problem


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"schema": "decision-endpoints/evaluation/v0"}, "schema is 'decision-endpoints/evaluation/v0'"),
        ({"artifact": {"model_sha256": MODEL_SHA}}, "artifact needs model_sha256 and manifest_sha256"),
        ({"suite": {"path": SUITE, "sha256": "x", "cases": 2}}, "suite needs path, a 64-hex sha256"),
    ],
)
def test_a_malformed_record_says_what_is_wrong(tmp_path: Path, changes: dict[str, Any], reason: str) -> None:
    write_suite(tmp_path)
    write_record(tmp_path, **changes)
    (problem,) = bind(tmp_path)[2]
    assert problem.startswith(f"environments.dev.evaluation.record: {RECORD} is not an evaluation record ({reason}")
    assert FIX in problem


def test_a_record_that_is_not_json_is_named(tmp_path: Path) -> None:
    write_suite(tmp_path)
    (tmp_path / RECORD).write_text("<html>", encoding="utf-8")
    (problem,) = bind(tmp_path)[2]
    assert "is not an evaluation record (not JSON)" in problem


# --- a suite kept out of git: cdk.json states its sha256 -----------------------------------------


def outside(tmp_path: Path) -> tuple[Path, Path, str]:
    """The repository root, and beside it a suite out of it, named the way cdk.json names it (with `..`)."""
    root = tmp_path / "repository"
    (root / "evaluation").mkdir(parents=True)
    write_suite(tmp_path / "kept")
    return root, tmp_path / "kept" / SUITE, f"../kept/{SUITE}"


def stated(suite: str, suite_sha256: str, record: str = RECORD, enforce: str = "warn") -> EvaluationConfig:
    block = {**evaluation(record, enforce), "suite": suite, "suite_sha256": suite_sha256}
    return EvaluationConfig.model_validate_json(json.dumps(block))


def record_on(root: Path, suite: str, suite_sha256: str, record: str = RECORD, model_sha256: str = MODEL_SHA) -> bytes:
    """A record as record-evaluation writes it for a suite out of the repository: its path as cdk.json names it."""
    entry = {"path": suite, "sha256": suite_sha256, "cases": len(SUITE_LINES)}
    data = write_record(root, model_sha256, suite=entry)
    if record != RECORD:
        (root / record).write_bytes(data)
    return data


def test_a_stated_suite_binds_with_the_file_there_and_with_it_absent(tmp_path: Path) -> None:
    root, kept, suite = outside(tmp_path)
    sha = hashlib.sha256(kept.read_bytes()).hexdigest()
    data = record_on(root, suite, sha)
    binding = read_binding(root, "dev", stated(suite, sha), MODEL_SHA)
    assert (binding.record_sha256, binding.manifest_sha256, binding.problems) == (
        hashlib.sha256(data).hexdigest(),
        MANIFEST_SHA,
        (),
    )
    kept.unlink()  # CI and the pipeline: the file is not there, its sha256 in cdk.json is
    assert read_binding(root, "dev", stated(suite, sha), MODEL_SHA).problems == ()


def test_a_record_of_another_suite_than_the_stated_sha256_is_named(tmp_path: Path) -> None:
    root, kept, suite = outside(tmp_path)
    sha = hashlib.sha256(kept.read_bytes()).hexdigest()
    record_on(root, suite, sha)
    kept.unlink()
    (problem,) = read_binding(root, "dev", stated(suite, SHA), MODEL_SHA).problems
    assert problem == (
        f"environments.dev.evaluation.record: {RECORD} was measured on the suite with sha256 {sha}, but "
        f"environments.dev.evaluation.suite_sha256 is {SHA}: record the evaluation on the suite with that sha256 "
        f"with {FIX}."
    )


def test_a_stated_suite_that_is_there_must_have_its_sha256(tmp_path: Path) -> None:
    root, kept, suite = outside(tmp_path)
    sha = hashlib.sha256(kept.read_bytes()).hexdigest()
    record_on(root, suite, sha)
    with kept.open("a", encoding="utf-8") as edited:
        edited.write(json.dumps({"id": "new-1", "question": "route", "text": "?", "label": "accounts"}) + "\n")
    edited_sha = hashlib.sha256(kept.read_bytes()).hexdigest()
    (problem,) = read_binding(root, "dev", stated(suite, sha), MODEL_SHA).problems
    assert problem.startswith(
        f"environments.dev.evaluation.suite: {suite} has sha256 {edited_sha}, but "
        f"environments.dev.evaluation.suite_sha256 is {sha}: put the suite with that sha256 there"
    )
    assert f"set environments.dev.evaluation.suite_sha256 to {edited_sha}" in problem and FIX in problem


def test_an_absolute_suite_path_is_read_where_it_points(tmp_path: Path) -> None:
    root, kept, _ = outside(tmp_path)
    sha = hashlib.sha256(kept.read_bytes()).hexdigest()
    record_on(root, str(kept), sha)
    assert read_binding(root, "dev", stated(str(kept), sha), MODEL_SHA).problems == ()
    kept.write_bytes(b"{}\n")
    (problem,) = read_binding(root, "dev", stated(str(kept), sha), MODEL_SHA).problems
    assert problem.startswith(f"environments.dev.evaluation.suite: {kept} has sha256 ")


def test_a_mismatching_stated_sha256_stops_a_refusing_synth(tmp_path: Path) -> None:
    root, kept, suite = outside(tmp_path)
    record_on(root, suite, hashlib.sha256(kept.read_bytes()).hexdigest(), "evaluation/prod.json", REAL_LOOKING_SHA)
    kept.unlink()
    context = prod_context("refuse")
    context["environments"]["prod"]["evaluation"] |= {"suite": suite, "suite_sha256": SHA}
    with pytest.raises(EvaluationError) as caught:
        check_evaluation(load_environment(context["environments"], "prod"), root)
    assert f"environments.prod.evaluation.suite_sha256 is {SHA}" in str(caught.value)


def test_a_refusing_synth_binds_a_stated_suite_it_cannot_read(tmp_path: Path) -> None:
    root, kept, suite = outside(tmp_path)
    sha = hashlib.sha256(kept.read_bytes()).hexdigest()
    record = record_on(root, suite, sha, "evaluation/prod.json", REAL_LOOKING_SHA)
    kept.unlink()
    context = prod_context("refuse")
    context["environments"]["prod"]["evaluation"] |= {"suite": suite, "suite_sha256": sha}
    out = tmp_path / "out"
    assembly = build_app("prod", context=context, outdir=str(out), root=root).synth()
    serving = assembly.get_stack_by_name("DecisionEndpoints-prod-Serving")
    assert not [m for m in serving.messages if WARNING_ID in str(m.entry.data)]
    template = json.loads((out / "DecisionEndpoints-prod-Serving.template.json").read_text(encoding="utf-8"))
    assert template["Outputs"]["EvaluationRecordSha256"]["Value"] == hashlib.sha256(record).hexdigest()
    (preflight,) = (r for r in template["Resources"].values() if r["Type"] == "Custom::ModelPreflight")
    assert preflight["Properties"]["EvaluatedManifestSha256"] == MANIFEST_SHA


# --- the synth check ----------------------------------------------------------------------------


def test_an_environment_without_the_block_is_warned_not_refused(tmp_path: Path) -> None:
    environments = cdk_context()["environments"]
    del environments["dev"]["evaluation"]
    binding = check_evaluation(load_environment(environments, "dev"), tmp_path)
    assert binding is not None
    (problem,) = binding.problems
    assert problem.startswith("environments.dev.evaluation is not configured") and FIX in problem


def test_an_environment_without_decision_endpoints_has_nothing_to_bind(tmp_path: Path) -> None:
    environments = variant_context()["environments"]
    environments["dev"]["cpu"]["enabled"] = environments["dev"]["gpu"]["enabled"] = False
    for section in ("batch", "async", "data_capture", "decision_shift"):
        environments["dev"].pop(section, None)
    assert check_evaluation(load_environment(environments, "dev"), tmp_path) is None


def prod_context(enforce: str) -> dict[str, Any]:
    context = cdk_context()
    prod = context["environments"]["prod"]
    prod["model"]["sha256"] = REAL_LOOKING_SHA
    prod["evaluation"] = {**evaluation("evaluation/prod.json", enforce)}
    return context


def test_refuse_stops_synth_with_every_problem_and_the_fix(tmp_path: Path) -> None:
    write_suite(tmp_path)
    with pytest.raises(EvaluationError) as caught:
        build_app("prod", context=prod_context("refuse"), outdir=str(tmp_path / "out"), root=tmp_path)
    message = str(caught.value)
    assert message.startswith("environments.prod.evaluation.enforce is refuse")
    assert "environments.prod.evaluation.record: evaluation/prod.json cannot be read" in message
    assert "`decisionctl record-evaluation --env prod --url <adapter serving the artifact>" in message
    assert not list((tmp_path / "out").glob("*.template.json"))


def test_refuse_lets_a_placeholder_model_through_to_its_own_refusal(tmp_path: Path) -> None:
    context = prod_context("refuse")
    context["environments"]["prod"]["model"]["sha256"] = PLACEHOLDER_SHA256
    binding = check_evaluation(load_environment(context["environments"], "prod"), tmp_path)
    assert binding is not None and binding.problems  # allow_placeholders already warns; the preflight stops it


def test_warn_synthesizes_with_a_warning_and_no_record_output(tmp_path: Path) -> None:
    write_suite(tmp_path)
    out = tmp_path / "out"
    assembly = build_app("prod", context=prod_context("warn"), outdir=str(out), root=tmp_path).synth()
    serving = assembly.get_stack_by_name("DecisionEndpoints-prod-Serving")
    warnings = [str(m.entry.data) for m in serving.messages if WARNING_ID in str(m.entry.data)]
    assert len(warnings) == 1 and "evaluation/prod.json cannot be read" in warnings[0]
    template = json.loads((out / "DecisionEndpoints-prod-Serving.template.json").read_text(encoding="utf-8"))
    assert "EvaluationRecordSha256" not in template["Outputs"]
    (preflight,) = (r for r in template["Resources"].values() if r["Type"] == "Custom::ModelPreflight")
    assert "EvaluatedManifestSha256" not in preflight["Properties"]


def test_a_bound_record_reaches_the_preflight_and_the_outputs(tmp_path: Path) -> None:
    write_suite(tmp_path)
    record = write_record(tmp_path)
    out = tmp_path / "out"
    assembly = build_app("dev", context=cdk_context(), outdir=str(out), root=tmp_path).synth()
    serving = assembly.get_stack_by_name("DecisionEndpoints-dev-Serving")
    assert not [m for m in serving.messages if WARNING_ID in str(m.entry.data)]
    template = json.loads((out / "DecisionEndpoints-dev-Serving.template.json").read_text(encoding="utf-8"))
    assert template["Outputs"]["EvaluationRecordSha256"]["Value"] == hashlib.sha256(record).hexdigest()
    (preflight,) = (r for r in template["Resources"].values() if r["Type"] == "Custom::ModelPreflight")
    assert preflight["Properties"]["EvaluatedManifestSha256"] == MANIFEST_SHA
    assert preflight["Properties"]["EvaluationRecord"] == RECORD
