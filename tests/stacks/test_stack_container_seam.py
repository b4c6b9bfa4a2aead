"""The seam between the stacks and the container: every variable a synthesized decision model sets is one the
adapter reads, and every literal value parses into the adapter's settings.

A cdk.json setting travels config class -> construct -> container environment string -> `settings.py`. The
adapter ignores a `DECISION_*` name it does not know (pydantic's `extra="ignore"`) and only reports an unknown
`SM_LLAMA_CPP_*` one, so a misspelled variable in a stack would deploy and change nothing; this test is where it
fails instead. docs/architecture.md ("Stacks") maps each key.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from decision_adapter.core.settings import (
    SM_PREFIX,
    AdapterSettings,
    SettingsError,
    load_adapter_settings,
    runtime_from_env,
)
from pydantic import AliasChoices

from tests.cdk_support import VARIANTS, synthesize

# Values CloudFormation fills in at deploy time (a token, not a string, in the template), as the adapter gets them.
DEPLOY_TIME_VALUES = {"DECISION_IMAGE_DIGEST": "sha256:" + "0" * 64}


def adapter_variables() -> set[str]:
    """Every environment variable name the adapter reads."""
    names: set[str] = set()
    prefix = AdapterSettings.model_config.get("env_prefix", "")
    for field_name, info in AdapterSettings.model_fields.items():
        alias = info.validation_alias
        if isinstance(alias, AliasChoices):
            names.update(str(choice) for choice in alias.choices)
        elif isinstance(alias, str):
            names.add(alias)
        else:
            names.add(f"{prefix}{field_name}".upper())
    return names


def runtime_reads(name: str, value: str) -> bool:
    """Whether the runtime settings read an SM_LLAMA_CPP_* variable (an unknown one is listed as ignored)."""
    try:
        return name not in runtime_from_env({name: value}).ignored
    except SettingsError:
        return True  # read, and refused: the value is checked below


def unread_variables(environment: Mapping[str, Any]) -> list[str]:
    """The names in a container environment that the adapter would not read."""
    known = adapter_variables()
    return sorted(
        name
        for name, value in environment.items()
        if name not in known and not (name.startswith(SM_PREFIX) and runtime_reads(name, str(value)))
    )


def decision_environments() -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(variant, model logical id, environment) of every model that runs the decision image, in every variant."""
    for variant in VARIANTS:
        synth = synthesize(variant)
        resources = synth.template_json("Serving")["Resources"]
        for logical, resource in resources.items():
            if resource["Type"] != "AWS::SageMaker::Model":
                continue
            containers = [resource["Properties"].get("PrimaryContainer"), *resource["Properties"].get("Containers", [])]
            for container in filter(None, containers):
                image = container.get("Image")
                built = isinstance(image, dict) and "Fn::GetAtt" in image
                if built and resources[image["Fn::GetAtt"][0]]["Type"] == "Custom::DecisionImage":
                    yield variant, logical, container.get("Environment", {})


def test_every_variable_a_decision_model_sets_is_read_by_the_adapter(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = list(decision_environments())
    assert {variant for variant, _, _ in seen} == set(VARIANTS)  # every variant has decision models to check
    for variant, logical, environment in seen:
        assert not unread_variables(environment), (
            f"{variant} {logical} sets {unread_variables(environment)}, which the adapter does not read "
            "(a misspelled variable deploys and changes nothing)"
        )
        values = {}
        for name, value in environment.items():
            if isinstance(value, str):
                values[name] = value
            else:
                assert name in DEPLOY_TIME_VALUES, f"{variant} {logical}: {name} is {value}, not a string"
                values[name] = DEPLOY_TIME_VALUES[name]
        for name in [n for n in os.environ if n.startswith(("DECISION_", "SM_LLAMA_CPP_"))]:
            monkeypatch.delenv(name)
        for name, value in values.items():
            monkeypatch.setenv(name, value)
        settings = load_adapter_settings()  # raises SettingsError naming a variable whose value does not parse
        runtime = runtime_from_env(values)
        assert runtime.ignored == ()
        # the literal values arrive: spot-check what each decision endpoint must set
        assert settings.chat_contexts == int(values["DECISION_CHAT_CONTEXTS"])
        assert settings.max_concurrency == int(values["DECISION_MAX_CONCURRENCY"])
        assert runtime.n_ctx == int(values["SM_LLAMA_CPP_CTX_SIZE"])


def test_a_misspelled_variable_is_found() -> None:
    assert unread_variables({"DECISION_MAX_CONCURRENCY": "2", "DECISION_MAX_CONCURENCY": "2"}) == [
        "DECISION_MAX_CONCURENCY"
    ]
    assert unread_variables({"SM_LLAMA_CPP_CTX_SIZE": "4096", "SM_LLAMA_CPP_CTX": "4096"}) == ["SM_LLAMA_CPP_CTX"]
    assert unread_variables({"SAGEMAKER_BIND_TO_PORT": "8080", "DECISION_PORT": "8080"}) == []


def test_a_value_that_does_not_parse_names_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECISION_MAX_CONCURRENCY", "many")
    with pytest.raises(SettingsError, match="DECISION_MAX_CONCURRENCY"):
        load_adapter_settings()
