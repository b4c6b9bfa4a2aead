"""Synth refuses an answer setting cdk.json states and the evaluation record does not (issue 46): the container would
adopt it over the policy's, and neither synth nor check-deployed would see the actions change."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app import build_app
from stacks.evaluation_binding import AnswerSettingsContradicted
from tests.cdk_support import ROOT

SUITE = "evaluation/support-suite.jsonl"


def repository(tmp: Path) -> tuple[Path, dict[str, Any]]:
    """cdk.json's context, the suite and dev's committed record, under a root of their own."""
    root = tmp / "repo"
    (root / "evaluation").mkdir(parents=True)
    for path in (SUITE, "evaluation/dev.json"):
        (root / path).write_bytes((ROOT / path).read_bytes())
    return root, json.loads((ROOT / "cdk.json").read_text(encoding="utf-8"))["context"]


def synth(root: Path, context: dict[str, Any], tmp: Path) -> None:
    build_app("dev", context={**context, "allow_placeholders": "true"}, outdir=str(tmp / "cdk.out"), root=root).synth()


def test_a_setting_the_bound_record_does_not_state_is_refused(tmp_path: Path) -> None:
    root, context = repository(tmp_path)
    record = json.loads((root / "evaluation/dev.json").read_text(encoding="utf-8"))
    assert "min_label_mass" not in record["answer_settings"]  # the shipped record's run served no floor
    context["environments"]["dev"]["model"]["answer_settings"] = {"min_label_mass": 0.3}
    with pytest.raises(AnswerSettingsContradicted) as caught:
        synth(root, context, tmp_path)
    message = str(caught.value)
    assert (
        "environments.dev.model.answer_settings.min_label_mass is 0.3, but evaluation/dev.json does not record it"
    ) in message
    assert "`--answer-setting min_label_mass=0.3`" in message
    print(message)


def test_a_setting_is_refused_where_no_record_binds_even_under_warn(tmp_path: Path) -> None:
    root, context = repository(tmp_path)
    dev = context["environments"]["dev"]
    assert dev["evaluation"]["enforce"] == "warn"
    dev["model"]["sha256"] = "ab" * 32  # another model: the record does not bind
    dev["model"]["answer_settings"] = {"out_of_scope": True}
    with pytest.raises(AnswerSettingsContradicted) as caught:
        synth(root, context, tmp_path)
    assert "out_of_scope is true, but evaluation/dev.json does not bind (it states nothing)" in str(caught.value)


def test_a_setting_the_record_states_with_the_same_value_is_kept(tmp_path: Path) -> None:
    root, context = repository(tmp_path)
    recorded = json.loads((root / "evaluation/dev.json").read_text(encoding="utf-8"))["answer_settings"]
    context["environments"]["dev"]["model"]["answer_settings"] = {"order_debias": recorded["order_debias"]}
    synth(root, context, tmp_path)
    template = json.loads((tmp_path / "cdk.out" / "DecisionEndpoints-dev-Serving.template.json").read_text())
    assert f'"DECISION_ORDER_DEBIAS": "{recorded["order_debias"]}"' in json.dumps(template)
