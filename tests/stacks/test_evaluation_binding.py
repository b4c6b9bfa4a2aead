"""The evaluation bound to each model artifact (issue 31): the committed record names the artifact cdk.json deploys
and the suite as it is; where it does, the preflight checks the uploaded manifest and the serving stack outputs the
record's sha256; where it does not, synth refuses (enforce: refuse) or warns. Two synths in all, on a tmp root."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from app import build_app
from stacks.config import PLACEHOLDER_SHA256, load_environment
from stacks.evaluation_binding import WARNING_ID, EvaluationError, check_evaluation
from stacks.evaluation_config import RECORD_SCHEMA, EvaluationConfig, read_binding
from tests.cdk_support import cdk_context, variant_context

SUITE = "evaluation/support-suite.jsonl"
RECORD = "evaluation/dev.json"
MODEL_SHA = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
REAL_LOOKING_SHA = "ab" * 32
MANIFEST_SHA = "cd" * 32
FIX = "`decisionctl record-evaluation --env dev --url <adapter serving the artifact> --artifact <artifact dir>`"
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
    """A record as decisionctl record-evaluation writes it, computed from the suite under root."""
    suite = (root / SUITE).read_bytes()
    record: dict[str, Any] = {
        "schema": RECORD_SCHEMA,
        "artifact": {"model_sha256": model_sha256, "manifest_sha256": MANIFEST_SHA, "model_file": "m.gguf"},
        "suite": {"path": SUITE, "sha256": hashlib.sha256(suite).hexdigest(), "cases": len(SUITE_LINES)},
        "metrics": {"accuracy": 1.0},
        **changes,
    }
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
