"""`decisionctl compare` on two evaluation directories written here case by case, so every count is known, and
the band changes between the policies two runs wrote.
(The same command on two real evaluate runs against the adapter is in test_decisionctl_evaluate.py.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from decision_spec.policy import Band, Certificate, Provenance, QuestionBand, seal
from decisionctl.commands import cli
from decisionctl.core.labeled import Prediction
from decisionctl.evaluation.comparison import CompareError, compare, load_run, mcnemar_p

NOUL, ABC, LEVELS = ["yes", "no"], ["a", "b", "c"], ["0", "1", "2"]


def pred(cid: str, qtype: str, options: list[str], probs: list[float], expected: str) -> Prediction:
    best = max(range(len(probs)), key=probs.__getitem__)
    return Prediction(
        id=cid,
        type=qtype,
        options=options,
        probs=probs,
        expected_index=options.index(expected),
        predicted_index=best,
        confidence=probs[best],
        contract_confidence=None,
        temperature=1.0,
        model_sha256="",
        latency_s=0.1,
    )


def write_run(
    path: Path, preds: list[Prediction], *, identity: dict[str, Any], automate_at: float | None, hashes: dict[str, str]
) -> Path:
    path.mkdir(parents=True)
    results = {
        "identity": identity,
        "recommendation": {"overall": {"automate_at_or_above": automate_at}},
        "predictions": [p.to_json() for p in preds],
    }
    (path / "results.json").write_text(json.dumps(results))
    lines = [json.dumps({**p.to_json(), "case_sha256": hashes.get(p.id, "h-" + p.id)}) for p in preds]
    (path / "predictions.jsonl").write_text("\n".join(lines) + '\n{"id": "torn')  # a killed run's last line
    return path


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    base = [
        pred("c1", "noul", NOUL, [0.9, 0.1], "yes"),  # right, automated at 0.8
        pred("c2", "noul", NOUL, [0.3, 0.7], "yes"),  # wrong
        pred("c3", "choice", ABC, [0.5, 0.3, 0.2], "b"),  # wrong
        pred("c4", "choice", ABC, [0.2, 0.7, 0.1], "b"),  # right
        pred("c5", "score", LEVELS, [0.1, 0.2, 0.7], "2"),  # right
        pred("c6", "noul", NOUL, [0.5, 0.5], "no"),  # only in the baseline
    ]
    new = [
        pred("c1", "noul", NOUL, [0.9, 0.1], "yes"),  # unchanged
        pred("c2", "noul", NOUL, [0.6, 0.4], "yes"),  # fixed, TV 0.3
        pred("c3", "choice", ["c", "a", "b"], [0.1, 0.3, 0.6], "b"),  # options reordered; fixed, TV 0.3
        pred("c4", "choice", ABC, [0.85, 0.1, 0.05], "b"),  # broken and now automated, TV 0.65
        pred("c5", "score", LEVELS, [0.1, 0.2, 0.7], "2"),  # reworded (another case hash), same answer
        pred("c7", "noul", NOUL, [0.5, 0.5], "no"),  # only in the candidate
    ]
    return (
        write_run(
            tmp_path / "base",
            base,
            identity={"model_sha256": "aa", "prompt_template": "generic-v2"},
            automate_at=0.8,
            hashes={},
        ),
        write_run(
            tmp_path / "new",
            new,
            identity={"model_sha256": "bb", "prompt_template": "generic-v2"},
            automate_at=None,
            hashes={"c5": "x"},
        ),
    )


def test_compare_counts_changed_fixed_broken_shift_and_automation(runs: tuple[Path, Path]) -> None:
    logs = [run / "predictions.jsonl" for run in runs]
    before = [log.read_bytes() for log in logs]
    result = compare(load_run(runs[0]), load_run(runs[1]))
    assert [log.read_bytes() for log in logs] == before  # another run's torn log is read, never cut
    report, overall = result.report, result.report["overall"]
    assert (report["only_in_base"], report["only_in_new"]) == (["c6"], ["c7"])
    assert report["identity_changes"] == {"model_sha256": {"base": "aa", "new": "bb"}}
    assert overall["cases"] == 5 and overall["content_changed"] == 1
    assert (overall["accuracy_base"], overall["accuracy_new"]) == (0.6, 0.8)
    assert (overall["decisions_changed"], overall["fixed"], overall["broken"]) == (3, 2, 1)
    assert overall["mcnemar_p"] == 1.0
    assert overall["mean_total_variation"] == pytest.approx(0.25) and overall["max_total_variation"] == 0.65
    assert overall["automate"] == {  # the baseline's recommended threshold, 0.8
        "threshold": 0.8,
        "base": 1,
        "new": 2,
        "newly_automated": 1,
        "no_longer_automated": 0,
        "wrong_automated_base": 0,
        "wrong_automated_new": 1,
    }
    assert [c["id"] for c in report["most_changed"]] == ["c4", "c2", "c3"]
    assert (
        report["by_type"]["choice"]["decisions_changed"] == 2 and report["by_type"]["score"]["decisions_changed"] == 0
    )
    points = result.points()
    assert points == [
        (0.9, 0.9, "same"),
        (0.7, 0.4, "fixed"),
        (0.5, 0.3, "fixed"),
        (0.7, 0.1, "broken"),
        (0.7, 0.7, "same"),
    ]


def test_mcnemar_exact_two_sided() -> None:
    assert mcnemar_p(0, 6) == pytest.approx(2 / 64)
    assert mcnemar_p(1, 5) == pytest.approx(2 * 7 / 64)
    assert mcnemar_p(0, 0) == 1.0 and mcnemar_p(4, 4) == 1.0
    assert 0 < mcnemar_p(900, 1200) < 1e-9  # large counts stay exact integers until one division


def test_cli_writes_report_and_figure_and_gates_on_the_changed_rate(
    runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, new = (str(p) for p in runs)
    out = tmp_path / "cmp"
    assert cli.main(["compare", base, new, "--out", str(out), "--threshold", "0.65"]) == 0
    printed = capsys.readouterr().out
    assert "3 (60.0%)" in printed and "+2 / -1" in printed and "model_sha256 aa -> bb" in printed
    report = json.loads((out / "comparison.json").read_text())
    assert report["overall"]["automate"]["threshold"] == 0.65
    assert (out / "comparison.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert cli.main(["compare", base, new, "--out", str(out), "--max-changed-rate", "0.6"]) == 0
    assert cli.main(["compare", base, new, "--out", str(out), "--max-changed-rate", "0.5"]) == 1
    assert "60.0% of decisions changed" in capsys.readouterr().err


def test_missing_or_incompatible_runs_are_refused_with_the_reason(
    runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["compare", str(runs[0]), str(tmp_path / "nowhere"), "--out", str(tmp_path / "x")]) == 1
    assert "no results.json; run `decisionctl evaluate" in capsys.readouterr().err
    other = write_run(
        tmp_path / "other",
        [pred("c1", "choice", ABC, [0.2, 0.7, 0.1], "b")],
        identity={},
        automate_at=None,
        hashes={},
    )
    with pytest.raises(CompareError, match="'c1' is a noul question"):
        compare(load_run(runs[0]), load_run(other))
    disjoint = write_run(
        tmp_path / "disjoint", [pred("z", "noul", NOUL, [0.5, 0.5], "no")], identity={}, automate_at=None, hashes={}
    )
    with pytest.raises(CompareError, match="no case id in common"):
        compare(load_run(runs[0]), load_run(disjoint))


def sealed(noul_at: float | None, bound: float | None, questions: dict[str, float | None]) -> dict[str, Any]:
    """A decision-policy/2 block as evaluate --write-policy writes it into results.json."""

    def band(at: float | None, bound_: float | None, **extra: Any) -> dict[str, Any]:
        certificate = Certificate(
            method="fallback-clopper-pearson/1",
            max_error=0.05,
            confidence=0.95,
            labels_sha256="d" * 64,
            cases=200,
            automated=80 if at is not None else 0,
            errors=1 if at is not None else 0,
            bound=bound_ if at is not None else None,
        )
        return {"automate_at_or_above": at, "support": 200, "certificate": certificate, **extra}

    policy = seal(
        model_sha256="a" * 64,
        calibration_sha256="b" * 64,
        types={"noul": Band(**band(noul_at, bound))},
        questions={k: QuestionBand(**band(at, 0.03, type="noul")) for k, at in questions.items()},
        provenance=Provenance(
            cases_file="c.jsonl",
            cases_sha256="c" * 64,
            target_accuracy=0.95,
            min_support=5,
            review_accuracy=0.5,
            created="2026-12-01",
        ),
    )
    return policy.model_dump(by_alias=True, mode="json")


def test_compare_lists_the_bands_that_changed_between_the_two_policies(
    runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base_policy = sealed(0.9, 0.04, {"1" * 16: 0.95, "2" * 16: None})
    new_policy = sealed(0.85, 0.045, {"1" * 16: 0.95, "3" * 16: 0.99})
    for run, policy in zip(runs, (base_policy, new_policy), strict=True):
        results = json.loads((run / "results.json").read_text())
        (run / "results.json").write_text(json.dumps({**results, "policy": policy}))
    out = tmp_path / "cmp"
    assert cli.main(["compare", str(runs[0]), str(runs[1]), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    changes = json.loads((out / "comparison.json").read_text())["band_changes"]
    assert (changes["base_version"], changes["new_version"]) == (base_policy["version"], new_policy["version"])
    assert changes["added"] == ["question " + "3" * 16] and changes["removed"] == ["question " + "2" * 16]
    assert changes["unchanged"] == 1  # question 111...: the same band
    noul = changes["changed"]["type noul"]
    assert noul == {"automate_at_or_above": {"base": 0.9, "new": 0.85}, "bound": {"base": 0.04, "new": 0.045}}
    assert f"policy {base_policy['version']} -> {new_policy['version']}: 1 bands changed, 1 added" in printed
    assert "changed type noul: automate_at_or_above 0.9 -> 0.85; bound 0.04 -> 0.045" in printed
    # a run that wrote no policy: nothing to compare the bands with
    results = json.loads((runs[1] / "results.json").read_text())
    (runs[1] / "results.json").write_text(json.dumps({k: v for k, v in results.items() if k != "policy"}))
    assert compare(load_run(runs[0]), load_run(runs[1])).report["band_changes"] is None
    assert cli.main(["compare", str(runs[0]), str(runs[1]), "--out", str(out)]) == 0
    assert "bands changed" not in capsys.readouterr().out
