"""Capture reading, the outcomes join, band checks and the shadow comparison, on hand-built replies (no model).

Capture records come from tests/capture_support.py, a stand-in for SageMaker's capture writer; S3 is a
botocore Stubber standing in for AWS, checking the exact ListObjectsV2 and GetObject parameters. The real-model
end to end runs are in test_decisionctl_loop.py.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber
from decision_spec.schemas import DecisionRequest, DecisionResponse
from decisionctl.commands import cli
from decisionctl.core.cases import parse_case
from decisionctl.traffic import band_check, capture, joins, shadow
from pydantic import ValidationError

from tests import capture_support
from tests.decisionctl_support import x_run

SECRET = "account 4242-secret"


def body(answers: dict[str, Any], request_id: str, **run: Any) -> bytes:
    reply = {
        "model": "m",
        "answers": answers,
        "usage": {"input_tokens": 9, "output_tokens": 0},
        "x_run": {**x_run(**run), "request_id": request_id},
    }
    return json.dumps(reply).encode()


def noul(p: float, action: str | None = None) -> dict[str, Any]:
    a: dict[str, Any] = {"type": "noul", "noul": p, "x_options_sha256": "1" * 16}
    if action:
        a["x_action"] = action
    return a


def choice(probs: dict[str, float], action: str | None = None) -> dict[str, Any]:
    top = max(probs, key=lambda k: probs[k])
    a: dict[str, Any] = {"type": "choice", "choice": top, "probabilities": probs, "confidence": 0.5}
    if action:
        a["x_action"] = action
    return a


def score(probs: list[float]) -> dict[str, Any]:
    return {
        "type": "score",
        "score": sum(i * p for i, p in enumerate(probs)),
        "legend": {str(i): name for i, name in enumerate(["Calm", "Upset", "Furious"])},
        "probabilities": {str(i): p for i, p in enumerate(probs)},
        "confidence": 0.5,
    }


def test_capture_lines_become_answers_and_every_other_line_is_counted(tmp_path: Path) -> None:
    one = body({"u": noul(0.8)}, "r1")
    batch = b"\n".join(
        [
            json.dumps({"id": "a", **json.loads(body({"u": noul(0.2)}, "r2"))}).encode(),
            json.dumps({"id": "b", "error": {"status": 422, "message": "bad"}}).encode(),
        ]
    )
    records = [
        capture_support.record(one, inference_id="inf-1", request=json.dumps({"state": SECRET}).encode()),
        capture_support.record(one, encoding="BASE64", event_id="e-2"),
        capture_support.record(batch, content_type="application/jsonlines", event_id="e-3"),
        capture_support.record(b'{"detail": {"error_type": "overloaded", "message": "busy"}}', event_id="e-4"),
        {"captureData": {"endpointInput": {"data": SECRET, "encoding": "JSON"}}, "eventMetadata": {"eventId": "e-5"}},
        capture_support.record(b"text/csv,1", encoding="CSV", event_id="e-6"),
    ]
    path = capture_support.write(tmp_path, "ep", "AllTraffic", records)
    path.write_text(path.read_text() + "not json\n\n")
    found = capture.read_sources([str(tmp_path)])
    assert [(a.pair_key, a.request_id, a.variant) for a in found.answers] == [
        ("inf-1", "r1", "AllTraffic"),
        ("e-2", "r1", "AllTraffic"),
        ("e-3#a", "r2", "AllTraffic"),
    ]
    assert found.lines == 7 and found.input_captured == 2
    assert found.skipped == {
        "an error response": 2,
        "input only (no endpointOutput)": 1,
        "unreadable endpointOutput (encoding CSV, not JSON or BASE64)": 1,
        "not JSON": 1,
    }
    assert found.examples["not JSON"] == [f"{path}:7"]
    assert SECRET not in json.dumps(found.summary())  # locations and counts, never a line's content


def test_variant_comes_from_the_capture_layout() -> None:
    assert capture.variant_of("s3://b/capture/ep/Shadow-1/2026/12/01/17/x.jsonl") == "Shadow-1"
    assert capture.variant_of(capture_support.key("ep", "AllTraffic")) == "AllTraffic"
    assert capture.variant_of("/tmp/answers.jsonl") is None


def test_s3_prefix_is_listed_page_by_page_and_each_object_read() -> None:
    s3 = boto3.client("s3", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(s3)
    prefix = "capture/ep/"
    k1, k2 = prefix + capture_support.key("", "AllTraffic")[1:], prefix + capture_support.key("", "Shadow")[1:]
    line = json.dumps(capture_support.record(body({"u": noul(0.7)}, "r1"), inference_id="i1")).encode() + b"\n"
    stub.add_response(
        "list_objects_v2",
        {"Contents": [{"Key": k1}, {"Key": prefix + "notes.txt"}], "IsTruncated": True, "NextContinuationToken": "t"},
        {"Bucket": "bucket", "Prefix": prefix},
    )
    stub.add_response(
        "list_objects_v2",
        {"Contents": [{"Key": k2}], "IsTruncated": False},
        {"Bucket": "bucket", "Prefix": prefix, "ContinuationToken": "t"},
    )
    for k in (k1, k2):
        stub.add_response(
            "get_object", {"Body": StreamingBody(io.BytesIO(line), len(line))}, {"Bucket": "bucket", "Key": k}
        )
    with stub:
        found = capture.read_sources(["s3://bucket/" + prefix], s3_client=lambda: s3)
    stub.assert_no_pending_responses()
    assert [(a.variant, a.pair_key) for a in found.answers] == [("AllTraffic", "i1"), ("Shadow", "i1")]


def test_final_answers_name_options_in_each_type() -> None:
    n = DecisionResponse.model_validate(json.loads(body({"u": noul(0.4), "s": score([0.2, 0.5, 0.3])}, "r")))
    assert [joins.final_option(n.answers["u"], v) for v in (True, "false", "Yes", "0")] == ["yes", "no", "yes", "no"]
    assert [joins.final_option(n.answers["s"], v) for v in (2, "1", "Furious")] == ["2", "1", "2"]
    for bad in ("maybe", 3, "Angry"):
        with pytest.raises(ValueError):
            joins.final_option(n.answers["s" if bad != "maybe" else "u"], bad)


def captured(tmp_path: Path, variant: str, replies: list[tuple[str, str, bytes]]) -> list[capture.CapturedAnswer]:
    records = [capture_support.record(b, inference_id=i, event_id=e) for i, e, b in replies]
    capture_support.write(tmp_path / "cap", "ep", variant, records)
    return capture.read_sources([str(tmp_path / "cap" / "ep" / variant)]).answers


def test_join_counts_every_row_it_cannot_use(tmp_path: Path) -> None:
    answers = captured(
        tmp_path,
        "AllTraffic",
        [
            ("i1", "e1", body({"u": noul(0.9, "automate"), "t": choice({"A": 0.7, "B": 0.3}, "review")}, "r1")),
            ("i2", "e2", body({"u": noul(0.3, "automate")}, "r2")),
            ("i3", "e3", body({"u": noul(0.6, "automate")}, "r3")),
        ],
    )
    path = tmp_path / "outcomes.csv"
    path.write_text(
        "request_id,question_id,final_answer,reviewer\n"
        "r1,u,false,ann\n"  # automated yes, reversed
        "i1,t,B,ann\n"  # by InferenceId: reviewed A, changed to B
        "e2,u,true,bob\n"  # by eventId: superseded by the next row
        "e2,u,false,bob\n"  # automated no, kept
        "r9,u,true,bob\n"  # not captured (sampling)
        "r3,zz,true,bob\n"
        "r3,u,perhaps,bob\n"
        ",u,true,bob\n"
    )
    rows = joins.read_outcomes(path)
    result = joins.join(answers, rows)
    assert [(j.case_id, j.final, j.changed) for j in result.joined] == [
        ("r1/u", "no", True),
        ("r1/t", "B", True),
        ("r2/u", "no", False),
    ]
    assert rows.invalid == ["line 9: request_id and question_id must be non-empty strings"]
    assert result.superseded == 1 and result.without_outcome == 1
    assert result.unmatched == {
        "no captured answer has this request id": 1,
        "the captured answer has no such question id": 1,
        "final answer not an option (a noul final answer is true or false)": 1,
    }
    report = joins.reversal_report(result.joined)
    assert report["u"]["automated"] == 2 and report["u"]["reversed"] == 1 and report["u"]["reversal_rate"] == 0.5
    assert report["t"]["reversal_rate"] is None and report["t"]["actions"] == {"review": {"answers": 1, "changed": 1}}

    written = joins.write_join(result, tmp_path / "out")
    cases = [json.loads(line) for line in Path(written["cases"]).read_text().splitlines()]
    assert [(c["id"], c["state"], c["expected"]) for c in cases] == [
        ("r1/u", None, False),
        ("r1/t", None, "B"),
        ("r2/u", None, False),
    ]
    assert cases[1]["question"] == {"type": "choice", "criteria": {"A": None, "B": None}}
    with pytest.raises(ValidationError, match="state"):  # sent anyway, an empty case is refused, not answered
        DecisionRequest.model_validate(parse_case(1, cases[1]).request())


def test_outcomes_refuses_a_capture_of_two_variants(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reply = body({"u": noul(0.9)}, "r1")
    capture_support.write(tmp_path / "cap", "ep", "AllTraffic", [capture_support.record(reply, inference_id="i1")])
    capture_support.write(tmp_path / "cap", "ep", "Shadow", [capture_support.record(reply, inference_id="i1")])
    (tmp_path / "o.jsonl").write_text(json.dumps({"request_id": "i1", "question_id": "u", "final_answer": True}) + "\n")
    argv = ["outcomes", str(tmp_path / "cap"), "--outcomes", str(tmp_path / "o.jsonl"), "--out", str(tmp_path / "o")]
    assert cli.main(argv) == 1
    assert "AllTraffic: 1, Shadow: 1" in capsys.readouterr().err
    assert cli.main([*argv, "--variant", "Shadow"]) == 0


def test_a_promised_bound_is_read_when_the_band_records_one() -> None:
    assert band_check.promised({"automate_at_or_above": 0.9, "support": 40, "certificate": None}) is None
    promise = band_check.promised({"certificate": {"max_error": 0.05, "confidence": 0.9, "bound": 0.04}})
    assert promise == band_check.Promise(0.05, 0.9, 0.04)
    direct = sum(math.comb(20, k) * 0.05**k * 0.95 ** (20 - k) for k in range(3, 21))
    assert band_check.binomial_tail(3, 20, 0.05) == pytest.approx(direct, rel=1e-12)
    assert band_check.against_promise(1, 100, promise)["exceeded"] is False
    assert band_check.against_promise(12, 100, promise)["exceeded"] is True  # P(X >= 12 | 5 %) is 0.005
    assert band_check.against_promise(3, 10, None) == {"automated": 10, "errors": 3, "error": 0.3, "promised": None}
    assert band_check.against_promise(0, 0, promise)["exceeded"] is False


def test_shadow_pairs_by_inference_id_and_lists_disagreements(tmp_path: Path) -> None:
    base = [
        ("i1", "p1", body({"u": noul(0.9, "automate"), "t": choice({"A": 0.6, "B": 0.4})}, "pr1")),
        ("i2", "p2", body({"u": noul(0.2, "automate")}, "pr2")),
        ("i3", "p3", body({"u": noul(0.7, "review")}, "pr3")),
    ]
    new = [
        ("i1", "s1", body({"u": noul(0.4, "review"), "t": choice({"A": 0.7, "B": 0.3})}, "sr1")),
        ("i2", "s2", body({"u": noul(0.1, "automate")}, "sr2")),
        ("i4", "s4", body({"u": noul(0.5, "automate")}, "sr4")),
    ]
    production = shadow.side_of("base", captured(tmp_path / "a", "AllTraffic", base))
    candidate = shadow.side_of("new", captured(tmp_path / "b", "Shadow", new))
    report = shadow.compare(production, candidate)
    assert report["paired"] == 2 and report["unpaired"] == {"production": 1, "shadow": 1}
    assert [(d["key"], d["question_id"], d["production"], d["shadow"]) for d in report["disagreements"]] == [
        ("i1", "u", "yes", "no")
    ]
    assert report["disagreements"][0]["production_request_id"] == "pr1"
    u = report["questions"]["u"]
    assert u["agreement"] == 0.5 and u["mean_total_variation"] == pytest.approx((0.5 + 0.1) / 2)
    assert u["action_transitions"] == {"automate -> automate": 1, "automate -> review": 1}
    assert u["option_mix"] == {"production": {"no": 0.5, "yes": 0.5}, "shadow": {"no": 1.0}}
    assert report["questions"]["t"]["agreement"] == 1.0
    with pytest.raises(shadow.ShadowError, match="--production-variant"):
        shadow.split_variants(production.answers + candidate.answers, None)
    with pytest.raises(shadow.ShadowError, match="InferenceId"):
        shadow.compare(production, shadow.side_of("x", candidate.answers[2:]))
