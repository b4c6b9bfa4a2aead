"""The slot prior on the real model over HTTP: `decisionctl fit-prior` fits it from unlabeled requests, the adapter
divides it out, and a prior fitted under another model is refused at start.

The fit runs against the session's default adapter; one adapter serves the fitted prior and one start is refused.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from decision_adapter.calibration import SlotPriorMismatch, checked_prior
from decision_spec.manifest import SlotPrior, read_manifest, write_manifest
from decisionctl.commands.cli import main as decisionctl

from tests.app_support import AppServer, start_app
from tests.conftest import MODEL_SHA256, copy_model, require_model, start_adapter

pytestmark = pytest.mark.model

REQUESTS = [
    {
        "state": "I was billed twice for March.",
        "questions": {
            "team": {
                "type": "choice",
                "instructions": "Which team?",
                "criteria": {"Billing": None, "Tech": None, "Sales": None},
            },
            "urgent": {"type": "noul", "instructions": "Is it urgent?"},
        },
    },
    {
        "state": "The app crashes on start.",
        "questions": {
            "area": {
                "type": "choice",
                "instructions": "Which area?",
                "criteria": {"Login": None, "Payments": None, "Search": None, "Reports": None},
            }
        },
    },
]
ASKED = {
    "type": "choice",
    "instructions": "Which team should take it?",
    "criteria": {"Billing": "payments", "Tech": "bugs", "Sales": "pricing"},
    "x_slot_probabilities": True,
}


@pytest.fixture(scope="module")
def fitted(adapter: AppServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """fit-prior on two unlabeled requests (a 3- and a 4-option choice) into a private model directory."""
    require_model()
    root = tmp_path_factory.mktemp("prior")
    model_dir = copy_model(root / "model")
    requests = root / "unlabeled.jsonl"
    requests.write_text("".join(json.dumps(r) + "\n" for r in REQUESTS), encoding="utf-8")
    code = decisionctl(
        ["fit-prior", str(requests), "--url", adapter.url, "--manifest", str(model_dir / "manifest.json")]
    )
    assert code == 0
    return {"model_dir": model_dir, "requests": requests, "root": root}


@pytest.fixture(scope="module")
def served(fitted: dict[str, Any]) -> Iterator[AppServer]:
    proc = start_app(model_dir=fitted["model_dir"])
    yield proc
    proc.stop()


def test_the_prior_is_the_mean_slot_distribution_over_every_rotation_with_its_provenance(
    fitted: dict[str, Any], adapter: AppServer
) -> None:
    calibration = read_manifest(fitted["model_dir"] / "manifest.json").calibration
    assert calibration is not None and calibration.slot_prior is not None
    prior = calibration.slot_prior
    assert prior.model_sha256 == MODEL_SHA256 and prior.prompt_template.startswith("generic-v2/")
    assert prior.fitted_on["input_sha256"] == hashlib.sha256(fitted["requests"].read_bytes()).hexdigest()
    assert prior.fitted_on["questions"] == {"3": 1, "4": 1} and prior.fitted_on["reads"] == 7  # the noul is not read
    criteria = REQUESTS[0]["questions"]["team"]["criteria"]  # type: ignore[index]
    names = list(criteria)
    mean = np.zeros(3)
    with httpx.Client(timeout=300) as client:
        for r in range(3):
            order = names[r:] + names[:r]
            q = {
                "type": "choice",
                "instructions": "Which team?",
                "criteria": dict.fromkeys(order),
                "x_slot_probabilities": True,
            }
            body = client.post(
                adapter.url + "/v1/systemone", json={"state": REQUESTS[0]["state"], "questions": {"team": q}}
            )
            mean += np.array(body.json()["answers"]["team"]["x_slot_probabilities"][0]) / 3
    assert np.allclose(prior.slots["3"], mean / mean.sum(), atol=1e-7)
    assert sum(prior.slots["4"]) == pytest.approx(1.0, abs=1e-6) and len(prior.slots["4"]) == 4


def test_labeled_input_is_refused_and_nothing_is_written(adapter: AppServer, tmp_path: Path) -> None:
    model_dir = copy_model(tmp_path / "model")
    before = (model_dir / "manifest.json").read_text(encoding="utf-8")
    labeled = tmp_path / "labeled.jsonl"
    labeled.write_text(json.dumps({**REQUESTS[0], "expected": "Billing"}) + "\n", encoding="utf-8")
    code = decisionctl(
        ["fit-prior", str(labeled), "--url", adapter.url, "--manifest", str(model_dir / "manifest.json")]
    )
    assert code == 1 and (model_dir / "manifest.json").read_text(encoding="utf-8") == before


def test_the_adapter_divides_each_order_by_the_prior_then_renormalizes(
    served: AppServer, fitted: dict[str, Any]
) -> None:
    prior = np.array(read_manifest(fitted["model_dir"] / "manifest.json").calibration.slot_prior.slots["3"])  # type: ignore[union-attr]
    body = httpx.post(
        served.url + "/v1/systemone", json={"state": "Refund my order, please.", "questions": {"q": ASKED}}, timeout=300
    )
    got = body.json()
    answer = got["answers"]["q"]
    assert got["x_run"]["calibration"]["slot_prior"]["3"] == pytest.approx(prior.tolist(), abs=1e-6)
    assert got["x_run"]["order_debias_mode"] == "reverse" and answer["x_orders_read"] == ["given", "reversed"]
    by_option = [
        np.array(s) if name == "given" else np.array(s)[::-1]
        for name, s in zip(answer["x_orders_read"], answer["x_slot_probabilities"], strict=True)
    ]  # slot s of the reversed order shows option 2 - s
    order_prior = {"given": prior, "reversed": prior[::-1]}
    debiased = [p / order_prior[name] for p, name in zip(by_option, answer["x_orders_read"], strict=True)]
    expected = softmax_of_mean_log([d / d.sum() for d in debiased])  # reverse: the mean of log-probabilities
    assert [answer["probabilities"][k] for k in ASKED["criteria"]] == pytest.approx(expected.tolist(), abs=1e-9)
    assert np.max(np.abs(softmax_of_mean_log(by_option) - expected)) > 1e-3  # the prior did move the answer


def softmax_of_mean_log(distributions: list[np.ndarray]) -> np.ndarray:
    combined = np.mean([np.log(d) for d in distributions], axis=0)
    out = np.exp(combined - combined.max())
    return np.asarray(out / out.sum())


def test_a_prior_from_another_model_is_refused_at_start(fitted: dict[str, Any], tmp_path: Path) -> None:
    model_dir = copy_model(tmp_path / "model")
    manifest = read_manifest(fitted["model_dir"] / "manifest.json")
    assert manifest.calibration is not None and manifest.calibration.slot_prior is not None
    foreign = manifest.calibration.slot_prior.model_copy(update={"model_sha256": "0" * 64})
    write_manifest(
        manifest.model_copy(update={"calibration": manifest.calibration.model_copy(update={"slot_prior": foreign})}),
        model_dir / "manifest.json",
    )
    with pytest.raises(RuntimeError, match=r"slot prior was fitted on the model with sha256 0{64}") as refused:
        start_adapter(tmp_path / "refused", model_dir=model_dir)
    assert '"event": "model_not_loaded"' in str(refused.value)


def test_a_prior_from_another_prompt_template_is_refused() -> None:
    prior = SlotPrior(model_sha256=MODEL_SHA256, prompt_template="generic-v1/plain", slots={"2": [0.6, 0.4]})
    assert checked_prior(prior, model_sha256=MODEL_SHA256, template="generic-v1/plain")[2].tolist() == [0.6, 0.4]
    with pytest.raises(SlotPriorMismatch, match="prompt template 'generic-v1/plain'"):
        checked_prior(prior, model_sha256=MODEL_SHA256, template="generic-v2/gguf-chat-template")
