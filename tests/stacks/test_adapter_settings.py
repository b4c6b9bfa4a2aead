"""Every adapter setting is reachable from the right place (issue 37): those that change answers come with the
artifact (its evaluation record where it binds, `model.answer_settings` checked against it), those that do not
through one validated block per decision endpoint (`<section>.adapter`), the rest set by the stack, SageMaker or
the image, or left out for a stated reason. The stacks' copies (stacks/adapter_settings.py) are checked against the
adapter's settings here, and one real synth of dev shows both kinds in the container environment."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import typing
from pathlib import Path
from typing import Any

import pytest
from decision_adapter.core.settings import AdapterSettings, load_adapter_settings
from decision_spec.answer_settings import AnswerSettings, shown, variable
from pydantic.fields import FieldInfo

from app import build_app
from stacks.adapter_settings import AdapterOptions, ArtifactAnswerSettings
from stacks.config import ConfigError, load_environment
from tests.answer_settings_support import CARRIED
from tests.cdk_support import cdk_context

DEV_MODEL_SHA = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
SUITE = "evaluation/support-suite.jsonl"
CANDIDATE_SHA = "ef" * 32
# Written into every decision model by serving_stack.decision_environment from the endpoint's own keys and the build.
SET_BY_THE_STACK = {
    "image_digest",
    "expected_model_sha256",
    "instance_types",
    "max_concurrency",
    "max_queue",
    "chat_contexts",
}
SET_BY_SAGEMAKER_OR_THE_IMAGE = {"model_dir", "host", "port", "llama_cpp_build"}
LEFT_OUT = {
    "api_key": "a secret in a template is readable by anyone who may describe the model; SageMaker signs callers",
    "chat_max_queue": "the decision endpoints run no chat context (DECISION_CHAT_CONTEXTS=0): chat has its endpoint",
    # issue 43's limits: their defaults are SageMaker's (60 s an invocation); <section>.adapter does not carry them yet
    "request_timeout_s": "the default is SageMaker's real-time limit; not yet a <section>.adapter key",
    "max_body_records": "JSON Lines bodies' default suits Batch Transform's payloads; not yet a <section>.adapter key",
    "max_body_tokens": "defaults to DECISION_MAX_REQUEST_TOKENS, which <section>.adapter sets",
}
OPTIONS = {
    "admission_wait_s": 2.5,
    "retry_after_s": 3,
    "state_cache_mb": 256,
    "max_body_bytes": 1 << 20,
    "state_reuse": False,
    "log_text": True,
    "drain_timeout_s": 40,
    "model_name": "support-router",
    "max_questions": 16,
    "max_options": 40,
    "max_request_tokens": 8192,
    "shared_endpoint": True,
}


def bounds(info: FieldInfo) -> list[str]:
    return sorted(repr(m) for m in info.metadata)


def choices(info: FieldInfo) -> set[Any]:
    """The values a Literal field (optional or not) allows; empty for other fields."""
    found: set[Any] = set()
    for arg in (info.annotation, *typing.get_args(info.annotation)):
        for inner in (arg, *typing.get_args(arg)):
            if typing.get_origin(inner) is typing.Literal:
                found |= set(typing.get_args(inner))
    return found


def test_every_adapter_setting_is_reachable_or_left_out_for_a_reason() -> None:
    kinds = [set(ArtifactAnswerSettings.model_fields), set(AdapterOptions.model_fields)]
    kinds += [SET_BY_THE_STACK, SET_BY_SAGEMAKER_OR_THE_IMAGE, set(LEFT_OUT)]
    for i, kind in enumerate(kinds):
        for other in kinds[i + 1 :]:
            assert not kind & other, kind & other
    unplaced = set(AdapterSettings.model_fields) - set().union(*kinds)
    assert not unplaced, f"say where these adapter settings come from (stacks/adapter_settings.py): {sorted(unplaced)}"
    placed = set().union(*kinds[:4])
    assert placed <= set(AdapterSettings.model_fields), placed - set(AdapterSettings.model_fields)


def test_the_answer_settings_and_the_adapter_options_have_the_adapters_names_choices_and_bounds() -> None:
    """cdk.json's answer settings are the shared model itself (a strict subclass, no field of its own); its bounds
    and choices are the adapter's settings' (settings.py reads the same variables)."""
    assert issubclass(ArtifactAnswerSettings, AnswerSettings) and not ArtifactAnswerSettings.__annotations__
    assert list(ArtifactAnswerSettings.model_fields) == list(AnswerSettings.model_fields)
    for name, info in AnswerSettings.model_fields.items():
        adapter = AdapterSettings.model_fields[name]
        assert bounds(info) == bounds(adapter) and choices(info) == choices(adapter), name
    for name, info in AdapterOptions.model_fields.items():
        adapter_bounds = bounds(AdapterSettings.model_fields[name])
        assert set(adapter_bounds) <= set(bounds(info)), name  # as tight as the adapter's, or tighter
        assert name not in AnswerSettings.model_fields


def test_the_adapter_block_is_validated_not_a_free_form_map() -> None:
    environments = copy.deepcopy(cdk_context()["environments"])
    environments["dev"]["cpu"]["adapter"] = {"admission_wait_s": 90}
    with pytest.raises(ConfigError, match=r"environments\.dev\.cpu\.adapter\.admission_wait_s: .*55"):
        load_environment(environments, "dev")
    environments["dev"]["cpu"]["adapter"] = {"DECISION_ORDER_DEBIAS": "off"}
    with pytest.raises(ConfigError, match=r"environments\.dev\.cpu\.adapter\.DECISION_ORDER_DEBIAS: Extra inputs"):
        load_environment(environments, "dev")
    environments["dev"]["cpu"]["adapter"] = {"order_debias": "off"}  # an answer setting comes with the artifact
    with pytest.raises(ConfigError, match=r"environments\.dev\.cpu\.adapter\.order_debias: Extra inputs"):
        load_environment(environments, "dev")


def decision_model_environments(template: dict[str, Any]) -> list[dict[str, Any]]:
    resources = template["Resources"]
    found = []
    for resource in resources.values():
        if resource["Type"] != "AWS::SageMaker::Model":
            continue
        container = resource["Properties"].get("PrimaryContainer") or {}
        image = container.get("Image")
        source = image.get("Fn::GetAtt", [None])[0] if isinstance(image, dict) else None
        if source is not None and resources[source]["Type"] == "Custom::DecisionImage":
            found.append(container.get("Environment", {}))
    return found


def test_synth_writes_both_kinds_into_the_decision_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One synth of dev: a record holding every answer setting, cdk.json stating them too, every adapter option, and
    a shadow candidate."""
    answers = {name: value for name, (value, _) in CARRIED.items()}
    root = tmp_path / "root"
    (root / "evaluation").mkdir(parents=True)
    shutil.copy(Path(__file__).resolve().parents[2] / SUITE, root / SUITE)
    suite = (root / SUITE).read_bytes()
    record = {
        "schema": "decision-endpoints/evaluation/v1",
        "artifact": {"model_sha256": DEV_MODEL_SHA, "manifest_sha256": "cd" * 32},
        "suite": {"path": SUITE, "sha256": hashlib.sha256(suite).hexdigest(), "cases": 51},
        "answer_settings": answers,
    }
    (root / "evaluation" / "dev.json").write_text(json.dumps(record), encoding="utf-8")
    context = cdk_context()
    dev = context["environments"]["dev"]
    dev["model"]["answer_settings"] = answers
    dev["cpu"]["adapter"] = OPTIONS
    dev["cpu"]["shadow"] = {"s3_key": "models/candidate/model.tar.gz", "sha256": CANDIDATE_SHA, "sampling_percent": 10}
    dev["cpu"]["hosting"] = {"mode": "instances"}  # a shadow needs its model on a variant (stacks/hosting.py)
    dev["cpu"]["autoscaling"]["min_instances"] = 1
    outdir = tmp_path / "cdk.out"
    build_app("dev", context=context, outdir=str(outdir), root=root).synth()
    template = json.loads((outdir / "DecisionEndpoints-dev-Serving.template.json").read_text(encoding="utf-8"))
    environments = decision_model_environments(template)
    shadows = [e for e in environments if e["DECISION_EXPECTED_MODEL_SHA256"] == CANDIDATE_SHA]
    production = [e for e in environments if e["DECISION_EXPECTED_MODEL_SHA256"] == DEV_MODEL_SHA]
    assert len(shadows) == 1 and production, "dev has a decision model and its shadow candidate's"
    # the candidate is another artifact: it brings its own answer settings, and takes the endpoint's options
    assert not {variable(name) for name in answers} & shadows[0].keys()
    assert all(shadows[0][f"DECISION_{name.upper()}"] == shown(value) for name, value in OPTIONS.items())
    for environment in production:
        for name, value in answers.items():
            assert environment[variable(name)] == shown(value), name
        for name, value in OPTIONS.items():
            assert environment[f"DECISION_{name.upper()}"] == shown(value), name
        # the adapter reads every one of them back as the value cdk.json and the record hold
        for name in [n for n in os.environ if n.startswith("DECISION_")]:
            monkeypatch.delenv(name)
        for name, value in environment.items():
            if isinstance(value, str) and name.startswith("DECISION_"):
                monkeypatch.setenv(name, value)
        settings = load_adapter_settings()
        for name, value in {**answers, **OPTIONS}.items():
            assert getattr(settings, name) == value, name
