"""Every adapter setting is reachable from the right place (issue 37): those that change answers come with the
artifact (its evaluation record where it binds, `model.answer_settings` checked against it), those that do not
through one validated block per decision endpoint (`<section>.adapter`), the rest set by the stack, SageMaker or
the image, or never deployed: each setting's kind is the registry's (decision_spec/decision_settings.py). The
stacks' blocks are checked against the registry here, and one real synth of dev shows both kinds, and the settings
the stack writes itself, in the container environment."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import types
import typing
from pathlib import Path
from typing import Any

import annotated_types
import pytest
from decision_adapter.core.settings import AdapterSettings, load_adapter_settings
from decision_spec.adapter_options import AdapterOptions
from decision_spec.answer_settings import AnswerSettings, ArtifactAnswerSettings, shown, variable
from decision_spec.decision_settings import DecisionSettings, setting_kind, settings_of_kind
from decision_spec.environment_config import ConfigError, load_environment
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from app import build_app
from tests.answer_settings_support import CARRIED
from tests.cdk_support import cdk_context

DEV_MODEL_SHA = "c624c2bea4349b36453448197f53b3935a96da7934904c124a612716c348a8ff"
SUITE = "evaluation/support-suite.jsonl"
CANDIDATE_SHA = "ef" * 32
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
    "request_timeout_s": 45.0,
    "max_body_records": 200,
    "max_body_tokens": 20_000,
    "shared_endpoint": True,
}


def bounds(info: FieldInfo) -> tuple[type, list[Any]]:
    """A field's value type and its bounds, also where the bounded type is optional (`Tolerance | None`)."""
    kind, found = info.annotation, list(info.metadata)
    optional = typing.get_origin(info.annotation) in (typing.Union, types.UnionType)
    for arg in typing.get_args(info.annotation) if optional else ():
        if typing.get_origin(arg) is typing.Annotated:
            kind, *extra = typing.get_args(arg)
            found += [m for e in extra for m in (e.metadata if isinstance(e, FieldInfo) else [e])]
        elif arg is not type(None):
            kind = arg
    return kind, found


def edges(name: str) -> list[tuple[Any, bool]]:
    """Values at and just past each of a registry setting's bounds, with whether the registry takes each."""
    kind, found_bounds = bounds(DecisionSettings.model_fields[name])
    step = 1 if kind is int else 1e-6
    found: list[tuple[Any, bool]] = []
    for bound in found_bounds:
        if isinstance(bound, annotated_types.Ge):
            found += [(bound.ge, True), (bound.ge - step, False)]
        elif isinstance(bound, annotated_types.Gt):
            found += [(bound.gt, False), (bound.gt + step, True)]
        elif isinstance(bound, annotated_types.Le):
            found += [(bound.le, True), (bound.le + step, False)]
        elif isinstance(bound, annotated_types.Lt):
            found += [(bound.lt, False), (bound.lt - step, True)]
    return found


def takes(model: type[BaseModel], name: str, value: Any) -> bool:
    try:
        model.model_validate({name: value})
    except ValidationError:
        return False
    return True


def test_every_adapter_setting_has_one_kind_and_each_kind_its_one_home() -> None:
    """The registry tags every setting; cdk.json's two blocks hold exactly the kinds that are theirs, and the
    adapter reads every registry setting (and no other DECISION_* setting)."""
    assert {name: setting_kind(name) for name in DecisionSettings.model_fields}  # each tagged, or setting_kind fails
    assert set(AdapterSettings.model_fields) == set(DecisionSettings.model_fields)
    assert set(AnswerSettings.model_fields) == set(settings_of_kind("answers"))
    assert issubclass(ArtifactAnswerSettings, AnswerSettings) and not ArtifactAnswerSettings.__annotations__
    assert set(AdapterOptions.model_fields) == set(settings_of_kind("operational")) == set(OPTIONS)


@pytest.mark.parametrize("name", [*settings_of_kind("answers"), *settings_of_kind("operational")])
def test_each_copy_of_a_setting_takes_what_the_registry_takes(name: str) -> None:
    """The artifact's answer settings (cdk.json's, strict, are the same model) and the adapter block take a value
    exactly where the registry does, at every bound (their fields are the registry's types), with the same choices."""
    model: type[BaseModel] = AnswerSettings if name in AnswerSettings.model_fields else AdapterOptions
    if bounds(DecisionSettings.model_fields[name])[0] in (int, float):
        assert edges(name), f"{name}: a number without bounds in the registry"  # every numeric setting is bounded
    for value, taken in edges(name):
        assert takes(DecisionSettings, name, value) is taken, (name, value)
        assert takes(model, name, value) is taken, (model.__name__, name, value)
    assert choices(model.model_fields[name]) == choices(DecisionSettings.model_fields[name]), name


@pytest.mark.parametrize("name", ["max_concurrency", "max_queue"])
def test_the_sections_own_adapter_keys_take_what_the_registry_takes(name: str) -> None:
    for value, taken in edges(name):
        environments = copy.deepcopy(cdk_context()["environments"])
        environments["dev"]["cpu"][name] = value
        if taken:
            continue  # another key may refuse an inside value (max_queue against the scaling target)
        with pytest.raises(ConfigError, match=rf"environments\.dev\.cpu\.{name}"):
            load_environment(environments, "dev")


def choices(info: FieldInfo) -> set[Any]:
    """The values a Literal field (optional or not) allows; empty for other fields."""
    found: set[Any] = set()
    for arg in (info.annotation, *typing.get_args(info.annotation)):
        for inner in (arg, *typing.get_args(arg)):
            if typing.get_origin(inner) is typing.Literal:
                found |= set(typing.get_args(inner))
    return found


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
    dev["cpu"]["hosting"] = {"mode": "instances"}  # a shadow needs its model on a variant (hosting_config.py)
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
        assert {variable(name) for name in settings_of_kind("stack")} <= environment.keys()  # the stack's own
        never = settings_of_kind("platform") + settings_of_kind("local")  # SageMaker's or the image's, or local only
        assert not {variable(name) for name in never} & environment.keys()
        # the adapter reads every one of them back as the value cdk.json and the record hold
        for name in [n for n in os.environ if n.startswith("DECISION_")]:
            monkeypatch.delenv(name)
        for name, value in environment.items():
            if isinstance(value, str) and name.startswith("DECISION_"):
                monkeypatch.setenv(name, value)
        settings = load_adapter_settings()
        for name, value in {**answers, **OPTIONS}.items():
            assert getattr(settings, name) == value, name
