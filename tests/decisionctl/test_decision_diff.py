"""The decision diff on the real SmolLM2 model over real HTTP (issue 31): artifacts that differ in a calibration, a
slot prior, the order-debiasing mode the adapter serves, or an option's wording in the suite, each recorded with
`decisionctl record-evaluation` against its own adapter and compared with `decisionctl decision-diff`.

Each expectation is derived independently of the diff code: a temperature T must turn every answer's
probabilities p into p^(1/T) renormalized and flip nothing; a slot prior over three slots must leave every other
question's answers exactly as they were; flips must be the cases whose top option differs in the two adapters'
own replies; a reworded case must be the one case whose content hash moved. Gates are checked on both sides of
each measured number.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from decision_spec import contract
from decision_spec.manifest import Calibration, Manifest, SlotPrior, calibration_sha256, write_manifest
from decision_spec.policy import Band, Certificate, Provenance, seal
from decisionctl.commands import cli
from decisionctl.core.bounds import upper_bound

from tests.app_support import start_app
from tests.conftest import MODEL_SHA256, copy_model, require_model

pytestmark = [pytest.mark.model, pytest.mark.slow]  # a module fixture of more than 15 s (pyproject.toml)

SUITE_IDS = (
    *(f"noul-refund-0{i}" for i in range(1, 5)),
    "noul-spam-01",
    "noul-spam-02",
    *(f"choice-team-0{i}" for i in range(1, 7)),
    "score-anger-01",
    "score-anger-02",
)
TEMPERATURE = 0.25  # sharpens: more answers pass a band's automate threshold, and ECE rises 0.18
REWORDED = "choice-team-03"


def _suite(path: Path, reword: bool = False) -> None:
    examples = Path(__file__).resolve().parents[2] / "tools/decisionctl/data/examples.jsonl"
    rows = {r["id"]: r for r in map(json.loads, examples.read_text().splitlines())}
    lines = []
    for cid in SUITE_IDS:
        row = rows[cid]
        if reword and cid == REWORDED:
            row = json.loads(json.dumps(row))
            row["question"]["criteria"]["Sales"] = "Questions about our weather forecasts"
        lines.append(json.dumps(row))
    path.write_text("# the test suite\n" + "\n".join(lines) + "\n")


def _policy(calibration: Calibration | None) -> Any:
    def band(at: float) -> Band:
        certificate = Certificate(
            method="fallback-clopper-pearson/1",
            max_error=0.3,
            confidence=0.8,
            labels_sha256="d" * 64,
            cases=40,
            automated=20,
            errors=2,
            bound=0.25,
        )
        return Band(automate_at_or_above=at, review_at_or_above=0.5, support=40, certificate=certificate)

    return seal(
        model_sha256=MODEL_SHA256,
        calibration_sha256=calibration_sha256(calibration),
        types={"noul": band(0.8), "choice": band(0.6)},
        provenance=Provenance(
            cases_file="suite.jsonl",
            cases_sha256="c" * 64,
            target_accuracy=0.9,
            min_support=5,
            review_accuracy=0.5,
            created="2026-12-02",
        ),
    )


def _artifact(root: Path, name: str, calibration: Calibration | None) -> Path:
    directory = copy_model(root / name)
    manifest = Manifest.model_validate_json((directory / "manifest.json").read_text())
    write_manifest(
        manifest.model_copy(update={"calibration": calibration, "policy": _policy(calibration)}),
        directory / "manifest.json",
    )
    return directory


class Project:
    """A cdk.json with dev's evaluation block over a suite, and a way to record an artifact through an adapter."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        _suite(root / "suite.jsonl")
        _suite(root / "reworded.jsonl", reword=True)
        gates = {"max_accuracy_drop_points": None, "max_flips": None, "max_ece_rise": None, "band_bound": False}
        environments = {
            env: {
                "evaluation": {
                    "suite": suite,
                    "record": f"records/{env}.json",
                    "enforce": "warn",
                    "tolerance": {"probability": 0.02, "flips": 0},
                    "gates": gates,
                }
            }
            for env, suite in (("dev", "suite.jsonl"), ("reworded", "reworded.jsonl"))
        }
        (root / "cdk.json").write_text(json.dumps({"context": {"environments": environments}}))
        self.replies: dict[str, dict[str, Any]] = {}

    def record(
        self, name: str, artifact: Path, env: dict[str, str] | None = None, suite: str = "dev", replies: bool = True
    ) -> Path:
        """Start an adapter on the artifact, record it, keep its own replies per case for the expectations (`replies`:
        the tests read them; asked again only where they do)."""
        adapter = start_app(model_dir=artifact, env=env or {})
        try:
            argv = ["record-evaluation", "--env", suite, "--artifact", str(artifact), "--url", adapter.url]
            assert cli.main([*argv, "--cdk-json", str(self.root / "cdk.json")]) == 0
            suite_file = self.root / ("suite.jsonl" if suite == "dev" else f"{suite}.jsonl")
            cases = [json.loads(line) for line in suite_file.read_text().splitlines()[1:]]
            if replies:
                self.replies[name] = {c["id"]: _ask(adapter.url, c) for c in cases}
        finally:
            adapter.stop()
        kept = self.root / f"{name}.json"
        shutil.copy(artifact / "evaluation.json", kept)
        assert (self.root / "records" / f"{suite}.json").read_bytes() == kept.read_bytes()
        return kept


def _ask(url: str, case: dict[str, Any]) -> dict[str, float]:
    body = {"model": contract.DEFAULT_MODEL_ALIAS, "state": case["state"], "questions": {"q": case["question"]}}
    answer = httpx.post(f"{url}/v1/systemone", json=body, timeout=60).json()["answers"]["q"]
    if answer["type"] == "noul":
        return {"yes": answer["noul"], "no": 1 - answer["noul"]}
    return dict(answer["probabilities"])


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Project, dict[str, Path]]]:
    require_model()
    root = tmp_path_factory.mktemp("decision-diff")
    p = Project(root / "project")
    base = _artifact(root, "base", None)
    records = {"base": p.record("base", base)}
    records["reworded"] = p.record("reworded", base, suite="reworded", replies=False)
    records["debias_off"] = p.record("debias_off", base, env={"DECISION_ORDER_DEBIAS": "off"})
    tempered = Calibration(temperature={"noul": TEMPERATURE, "choice": TEMPERATURE, "score": TEMPERATURE})
    records["temperature"] = p.record("temperature", _artifact(root, "temperature", tempered), replies=False)
    template = json.loads(records["base"].read_text())["run"]["prompt_template"]
    prior = SlotPrior(model_sha256=MODEL_SHA256, prompt_template=template, slots={"3": [0.05, 0.9, 0.05]})
    records["slot_prior"] = p.record("slot_prior", _artifact(root, "slot_prior", Calibration(slot_prior=prior)))
    yield p, records


def _diff(records: dict[str, Path], new: str, tmp_path: Path, *gates: str) -> tuple[int, dict[str, Any], str]:
    out = tmp_path / f"{new}-{len(gates)}.json"
    md = tmp_path / f"{new}-{len(gates)}.md"
    argv = ["decision-diff", str(records["base"]), str(records[new]), "--json", str(out), "--markdown", str(md)]
    status = cli.main([*argv, "--band-bound", "off", *gates])
    return status, json.loads(out.read_text()), md.read_text()


def test_a_temperature_turns_p_into_p_to_the_1_over_t_and_flips_nothing(project, tmp_path: Path) -> None:
    _p, records = project
    status, report, markdown = _diff(records, "temperature", tmp_path, "--max-flips", "0")
    assert status == 0 and report["flips"] == [] and report["failed"] == []
    base = json.loads(records["base"].read_text())["answers"]
    new = json.loads(records["temperature"].read_text())["answers"]
    for cid, answer in base.items():
        sharpened = np.asarray(answer["probs"]) ** (1 / TEMPERATURE)
        np.testing.assert_allclose(new[cid]["probs"], sharpened / sharpened.sum(), atol=1e-6)
    assert report["base"]["artifact"]["manifest_sha256"] != report["new"]["artifact"]["manifest_sha256"]
    assert "calibration" in report["run_changes"] and report["max_probability_delta"] > 0.01
    # ECE moved: a gate just under the rise fails, one just over passes
    before, after = (report["metrics"][k]["overall"]["ece"] for k in ("base", "new"))
    rise = after - before
    assert rise > 0.1  # sharpening this model's answers makes them overconfident
    assert _diff(records, "temperature", tmp_path, "--max-ece-rise", f"{rise * 0.9:.6f}")[0] == 1
    assert _diff(records, "temperature", tmp_path, "--max-ece-rise", f"{rise + 1e-4:.6f}")[0] == 0
    assert "All gates pass." in markdown


def test_a_slot_prior_moves_only_the_three_option_choice_answers_and_its_flips_are_listed_by_id(
    project, tmp_path: Path
) -> None:
    p, records = project
    status, report, markdown = _diff(records, "slot_prior", tmp_path)
    assert status == 0  # no gate asked for
    base, new = (json.loads(records[k].read_text())["answers"] for k in ("base", "slot_prior"))
    for cid, answer in base.items():
        if not cid.startswith("choice-team"):
            assert new[cid]["probs"] == answer["probs"], cid
    in_record_order = json.loads(records["base"].read_text())["answers"]  # flips come in the base record's order
    expected = [cid for cid in in_record_order if _top(p.replies["base"][cid]) != _top(p.replies["slot_prior"][cid])]
    assert expected, "a 0.05/0.9/0.05 prior moves at least one three-way pick on these cases"
    assert [f["id"] for f in report["flips"]] == expected
    for flip in report["flips"]:
        assert flip["base"]["probs"] == pytest.approx(p.replies["base"][flip["id"]], abs=1e-9)
        assert flip["new"]["probs"] == pytest.approx(p.replies["slot_prior"][flip["id"]], abs=1e-9)
        assert f"`{flip['id']}`" in markdown
    flips = len(expected)
    assert _diff(records, "slot_prior", tmp_path, "--max-flips", str(flips - 1))[0] == 1
    assert _diff(records, "slot_prior", tmp_path, "--max-flips", str(flips))[0] == 0


def test_another_debias_mode_is_named_and_its_flips_are_the_adapters_own(project, tmp_path: Path) -> None:
    p, records = project
    _, report, _ = _diff(records, "debias_off", tmp_path)
    assert report["run_changes"]["order_debias_mode"] == {"base": "reverse", "new": "off"}
    assert report["base"]["artifact"] == report["new"]["artifact"]  # the same artifact, served another way
    in_record_order = json.loads(records["base"].read_text())["answers"]  # flips come in the base record's order
    expected = [cid for cid in in_record_order if _top(p.replies["base"][cid]) != _top(p.replies["debias_off"][cid])]
    assert [f["id"] for f in report["flips"]] == expected
    # the accuracy gate on both sides of the drop, the drop counted from the adapters' own replies
    labels = {cid: a["expected"] for cid, a in json.loads(records["base"].read_text())["answers"].items()}
    right = [sum(_top(p.replies[name][cid]) == labels[cid] for cid in SUITE_IDS) for name in ("base", "debias_off")]
    drop = 100 * (right[0] - right[1]) / len(SUITE_IDS)
    assert drop > 0 and report["metrics"]["new"]["overall"]["accuracy"] == right[1] / len(SUITE_IDS)
    status, failed, _ = _diff(records, "debias_off", tmp_path, "--max-accuracy-drop", f"{drop - 0.5:.3f}")
    assert status == 1 and failed["failed"][0].startswith(f"accuracy fell {drop:.1f} points")
    assert _diff(records, "debias_off", tmp_path, "--max-accuracy-drop", f"{drop + 0.5:.3f}")[0] == 0


def test_a_reworded_option_is_the_one_case_whose_content_changed(project, tmp_path: Path) -> None:
    _p, records = project
    _, report, markdown = _diff(records, "reworded", tmp_path)
    assert report["content_changed"] == [REWORDED]
    base, new = (json.loads(records[k].read_text())["answers"] for k in ("base", "reworded"))
    assert [cid for cid in base if base[cid]["probs"] != new[cid]["probs"]] == [REWORDED]
    assert report["base"]["suite"]["sha256"] != report["new"]["suite"]["sha256"]
    assert "1 cases reworded" in markdown


def test_the_band_gate_fails_when_a_bands_bound_goes_past_e_with_more_errors(project, tmp_path: Path) -> None:
    """The temperature sharpens answers past the noul and choice automate thresholds; the gate's verdict must be
    the rule applied to the bound recomputed here from the two records' answers."""
    _p, records = project
    base, new = (json.loads(records[k].read_text()) for k in ("base", "temperature"))
    expect_fail = False
    for qtype, at in (("noul", 0.8), ("choice", 0.6)):
        counts = []
        for record in (base, new):
            auto = [a for a in record["answers"].values() if a["type"] == qtype and a["confidence"] >= at - 1e-12]
            errors = sum(1 for a in auto if a["picked"] != a["expected"])
            counts.append((errors, upper_bound(errors, len(auto), 0.8) if auto else None))
            assert record["bands"][f"type {qtype}"]["bound"] == counts[-1][1]
        (was_errors, was), (errors, bound) = counts
        if bound is not None and bound > 0.3 and ((was is not None and was <= 0.3) or errors > was_errors):
            expect_fail = True
    argv = ["decision-diff", str(records["base"]), str(records["temperature"]), "--band-bound"]
    assert cli.main([*argv, "on"]) == (1 if expect_fail else 0)
    assert cli.main([*argv, "off"]) == 0
    assert base["actions"] is not None and abs(sum(base["actions"].values()) - 1) < 1e-9


def _top(probs: dict[str, float]) -> str:
    if set(probs) == {"yes", "no"}:
        return "yes" if probs["yes"] >= 0.5 else "no"
    return max(probs, key=lambda o: probs[o])
