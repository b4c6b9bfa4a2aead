"""The JSON Lines route of /invocations on the real SmolLM2 GGUF over real HTTP (issue 15, the contract of
docs/bulk.md): a 200-record mini-batch with repeated states and bad lines, every good record answered as it
is alone, error lines with the single route's error types, order and ids kept, no state text out; and
GET /execution-parameters."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from decision_adapter.bulk import execution_parameters
from decision_adapter.core.settings import AdapterSettings
from decision_spec import events

from tests.app_support import AppServer

pytestmark = [pytest.mark.model, pytest.mark.slow]  # a module fixture of more than 15 s (pyproject.toml)

JSON_LINES = "application/jsonlines"
SECRET = "acct-7731"  # in every state: must never reach an answer line or a log line
STATES: list[Any] = [
    f"{SECRET} ticket {i}: {text}"
    for i, text in enumerate(["charged twice", "cannot log in", "wants a quote", "app crashes", "refund late"])
]
STATES += [{"ticket": f"{SECRET} {i}", "body": "the invoice is wrong"} for i in range(3)]  # structured states
REFUND = {"type": "noul", "instructions": "Money back?"}
TEAM = {"type": "choice", "instructions": "Team?", "criteria": {"Billing": None, "Login": "sign-in", "Sales": None}}
URGENT = {"type": "choice", "instructions": "Urgent?", "criteria": {"Now": None, "Later": None}}
QUESTION_SETS = [{"refund": REFUND}, {"team": TEAM}, {"urgent": URGENT}]
IDS: list[Any] = ["a", 7, 2.5, True, None]  # every kind of scalar; None and a missing id both answer with null


def good_record(i: int) -> dict[str, Any]:
    """Record i: a state and a question set that repeat (8 states x 3 sets), ids of every scalar kind."""
    body: dict[str, Any] = {"state": STATES[(i * 7) % len(STATES)], "questions": QUESTION_SETS[i % 3]}
    if i % 6 != 5:
        body = {"id": IDS[i % 5] if i % 5 != 0 else f"r{i}", **body}
    return body


# Bad lines and what each gets: (line, id echoed, error_type, status).
OVER_BUDGET = {"id": "long", "state": f"{SECRET} " + "word " * 9000, "questions": {"refund": REFUND}}
BAD: list[tuple[str, Any, str, int]] = [
    ("{not json", None, "invalid_request", 422),
    ("[1, 2, 3]", None, "invalid_request", 422),
    (json.dumps({"id": "one-option", "state": SECRET, "questions": {"q": {"type": "choice", "criteria": {"A": None}}}}),
     "one-option", "invalid_request", 422),
    (json.dumps({"id": ["not", "scalar"], "state": SECRET, "questions": {"refund": REFUND}}),
     None, "invalid_request", 422),
    (json.dumps({"id": "other-model", "model": "gpt-9", "state": SECRET, "questions": {"refund": REFUND}}),
     "other-model", "model_not_found", 404),
    (json.dumps(OVER_BUDGET), "long", "token_budget_exceeded", 413),
]  # fmt: skip
BAD_AT = {17: 0, 40: 1, 41: 2, 99: 3, 150: 4, 180: 5}  # position in the body -> BAD index
RECORDS = 200


def body_lines() -> list[tuple[str, dict[str, Any] | None]]:
    """200 records: the good ones with their body, the bad ones with None."""
    out: list[tuple[str, dict[str, Any] | None]] = []
    good = 0
    for position in range(RECORDS):
        if position in BAD_AT:
            out.append((BAD[BAD_AT[position]][0], None))
        else:
            record = good_record(good)
            out.append((json.dumps(record), record))
            good += 1
    return out


def single(http: httpx.Client, url: str, record: dict[str, Any]) -> dict[str, Any]:
    body = {k: v for k, v in record.items() if k != "id"}
    r = http.post(url + "/invocations", json=body)
    assert r.status_code == 200, r.text
    return dict(r.json())


def close(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two answers are the same decision: equal keys and labels, numbers within 1e-6."""
    if a.keys() != b.keys():
        return False
    for key, value in a.items():
        other = b[key]
        if isinstance(value, dict):
            if not isinstance(other, dict) or not close(value, other):
                return False
        elif isinstance(value, float | int) and not isinstance(value, bool):
            if abs(value - other) > 1e-6:
                return False
        elif value != other:
            return False
    return True


@pytest.fixture(scope="module")
def mini_batch(adapter: AppServer) -> dict[str, Any]:
    lines = body_lines()
    payload = "\n".join(line for line, _ in lines[:100]) + "\n  \n\n" + "\r\n".join(line for line, _ in lines[100:])
    with httpx.Client(timeout=600) as http:
        r = http.post(adapter.url + "/invocations", content=payload.encode(), headers={"Content-Type": JSON_LINES})
        singles: dict[str, dict[str, Any]] = {}
        for _, record in lines:
            if record is not None:
                key = json.dumps({k: v for k, v in record.items() if k != "id"}, sort_keys=True)
                if key not in singles:
                    singles[key] = single(http, adapter.url, record)
    return {"response": r, "lines": lines, "singles": singles}


def test_one_line_per_record_in_order_with_ids_and_no_state_text(mini_batch: dict[str, Any]) -> None:
    r = mini_batch["response"]
    assert r.status_code == 200 and r.headers["content-type"].startswith(JSON_LINES)
    answers = [json.loads(line) for line in r.text.splitlines()]
    assert len(answers) == RECORDS  # blank lines are no records; \r\n endings are line ends
    for (_, record), answer in zip(mini_batch["lines"], answers, strict=True):
        assert next(iter(answer)) == "id"
        if record is not None:
            assert answer["id"] == record.get("id") and "error" not in answer, answer
        assert "state" not in answer
    assert SECRET not in r.text and "Money back" not in r.text


def test_every_good_record_equals_its_single_request_answer(mini_batch: dict[str, Any]) -> None:
    answers = [json.loads(line) for line in mini_batch["response"].text.splitlines()]
    compared = 0
    for (_, record), answer in zip(mini_batch["lines"], answers, strict=True):
        if record is None:
            continue
        key = json.dumps({k: v for k, v in record.items() if k != "id"}, sort_keys=True)
        alone = mini_batch["singles"][key]
        assert close(answer["answers"], alone["answers"]), (answer["answers"], alone["answers"])
        assert answer["model"] == alone["model"] and answer["usage"] == alone["usage"]
        assert set(answer) - {"id"} == set(alone)  # the single route's fields, id added
        compared += 1
    assert compared == RECORDS - len(BAD)
    sources = {json.loads(line)["x_run"]["state_source"] for line in mini_batch["response"].text.splitlines()
               if "x_run" in json.loads(line)}  # fmt: skip
    assert "resident" in sources  # records that share a state are not prefilled again
    # 8 states x 3 question sets repeat with period 24: each pair is evaluated once, its repeats read nothing
    evaluated = [a["x_evaluated_tokens"] for a in answers if "x_evaluated_tokens" in a]
    assert len(evaluated) == RECORDS - len(BAD) and evaluated.count(0) == RECORDS - len(BAD) - 24


def test_bad_records_get_the_single_routes_error_and_the_others_are_answered(
    mini_batch: dict[str, Any], adapter: AppServer
) -> None:
    answers = [json.loads(line) for line in mini_batch["response"].text.splitlines()]
    for position, index in BAD_AT.items():
        _, record_id, error_type, status = BAD[index]
        line = answers[position]
        assert line["id"] == record_id and set(line) == {"id", "error"}, line
        assert (line["error"]["error_type"], line["error"]["status"]) == (error_type, status)
        assert line["error"]["message"] and "\n" not in line["error"]["message"]
    one_option = answers[41]["error"]
    alone = httpx.post(adapter.url + "/invocations", content=BAD[2][0], headers={"Content-Type": "application/json"})
    assert alone.status_code == 422 and one_option["detail"] == alone.json()["detail"]
    assert one_option["message"] == "; ".join(
        f"{'.'.join(map(str, d['loc']))}: {d['msg']}" for d in alone.json()["detail"]
    )
    not_json = answers[17]["error"]  # malformed JSON: the single routes' 422 json_invalid, one answer everywhere
    assert [d["type"] for d in not_json["detail"]] == ["json_invalid"] and not_json["detail"][0]["loc"] == ["body", 1]
    for route in ("/invocations", "/v1/systemone"):
        alone = httpx.post(adapter.url + route, content=BAD[0][0], headers={"Content-Type": "application/json"})
        assert alone.status_code == 422 and [d["type"] for d in alone.json()["detail"]] == ["json_invalid"], alone.text
        assert alone.json()["detail"][0]["loc"] == ["body", 1]
    too_long = httpx.post(adapter.url + "/invocations", json=OVER_BUDGET, timeout=60)
    assert too_long.status_code == 413
    assert {k: answers[180]["error"][k] for k in ("error_type", "message")} == too_long.json()["detail"]


def test_each_answered_record_logs_one_decision_line_and_no_text(
    mini_batch: dict[str, Any], adapter: AppServer
) -> None:
    answers = [json.loads(line) for line in mini_batch["response"].text.splitlines()]
    request_ids = {a["x_run"]["request_id"] for a in answers if "x_run" in a}
    logged = [line for line in adapter.log_lines() if line.get("request_id") in request_ids]
    assert len(request_ids) == RECORDS - len(BAD) and sorted(line["request_id"] for line in logged) == sorted(
        request_ids
    )
    assert {line["event"] for line in logged} == {events.DECISION}
    budget = [line for line in adapter.log_lines() if line.get("event") == events.TOKEN_BUDGET_EXCEEDED]
    assert budget and budget[-1]["route"] == "/invocations"
    assert SECRET not in adapter.log_text()


def test_execution_parameters_follow_the_settings(adapter: AppServer) -> None:
    r = httpx.get(adapter.url + "/execution-parameters")
    assert r.status_code == 200
    assert r.json() == {"MaxConcurrentTransforms": 1, "BatchStrategy": "MultiRecord", "MaxPayloadInMB": 6}
    mib = 1 << 20
    cases = [(dict(max_concurrency=3, max_body_bytes=300 * mib), 3, 100), (dict(max_body_bytes=mib + mib // 2), 1, 1),
             (dict(max_body_bytes=4096), 1, 1)]  # fmt: skip
    for overrides, concurrency, payload_mb in cases:
        params = execution_parameters(AdapterSettings(**overrides))  # type: ignore[arg-type]
        assert (params["MaxConcurrentTransforms"], params["MaxPayloadInMB"]) == (concurrency, payload_mb)
