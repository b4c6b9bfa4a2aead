"""The container contract and failure behaviour: the app in this process over real HTTP (uvicorn on a thread,
tests/app_support.py) for the routes, and the `serve` entrypoint run as a process, as SageMaker runs it (Docker itself
is not available here), where the process is the subject: a start-up refusal, the runtime settings serve reads and
the ones it ignores, SIGTERM's drain."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.app_support import AppServer, app_server, shared_service
from tests.conftest import start_adapter

pytestmark = pytest.mark.model

TICKET = "I was charged twice for my March invoice and the refund has not arrived."
NOUL = {"type": "noul", "instructions": "Is the customer asking for money back?"}
DECISION = {"model": "jev-latest", "state": TICKET, "questions": {"refund": NOUL}}


def test_invocations_serves_decisions_and_chat_and_names_the_accepted_shapes(adapter_url: str) -> None:
    decision = httpx.post(f"{adapter_url}/invocations", json=DECISION, timeout=120)
    assert decision.status_code == 200 and decision.json()["answers"]["refund"]["type"] == "noul"
    chat = httpx.post(
        f"{adapter_url}/invocations",
        timeout=120,
        json={"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 4},
    )
    assert chat.status_code == 200, chat.text
    assert chat.json()["object"] == "chat.completion" and chat.json()["usage"]["completion_tokens"] >= 1
    # a decision after a chat completion (which moved the KV cache) is still exact
    again = httpx.post(f"{adapter_url}/invocations", json=DECISION, timeout=120)
    assert again.json()["answers"] == decision.json()["answers"]
    other = httpx.post(f"{adapter_url}/invocations", json={"prompt": "hi"}, timeout=30)
    assert other.status_code == 400
    assert "questions" in other.json()["detail"]["message"] and "messages" in other.json()["detail"]["message"]
    invalid = httpx.post(f"{adapter_url}/invocations", json={**DECISION, "questions": {}}, timeout=30)
    assert invalid.status_code == 422 and invalid.json()["detail"][0]["loc"][0] == "body"


def test_body_and_token_limits(adapter_url: str) -> None:
    big = httpx.post(
        f"{adapter_url}/v1/systemone",
        content=b"x" * (6 * 1024 * 1024 + 1),
        headers={"content-type": "application/json"},
        timeout=60,
    )
    assert big.status_code == 413 and big.json()["detail"]["error_type"] == "payload_too_large"
    long_state = "word " * 9000
    over = httpx.post(f"{adapter_url}/v1/systemone", json={**DECISION, "state": long_state}, timeout=120)
    assert over.status_code == 413
    assert over.json()["detail"]["error_type"] == "token_budget_exceeded" and "8192" in over.json()["detail"]["message"]
    unknown_model = httpx.post(f"{adapter_url}/v1/systemone", json={**DECISION, "model": "nope"}, timeout=30)
    assert unknown_model.status_code == 404 and unknown_model.json()["detail"]["error_type"] == "model_not_found"


def test_models_route_lists_the_served_model_and_the_alias(adapter_url: str) -> None:
    models = httpx.get(f"{adapter_url}/v1/models", timeout=10).json()["models"]
    assert {"jev-latest"} < {m["name"] for m in models}
    assert all(set(m) == {"name", "description", "release_date"} for m in models)


def test_request_logs_carry_identity_and_no_raw_text_by_default(adapter: AppServer) -> None:
    secret = "customer-secret-7731 charged twice"
    httpx.post(f"{adapter.url}/v1/systemone", json={**DECISION, "state": secret}, timeout=120).raise_for_status()
    time.sleep(0.2)
    assert secret not in adapter.log_text()
    decisions = [line for line in adapter.log_lines() if line.get("event") == "decision"]
    assert decisions and decisions[-1]["identity"]["model_sha256"].startswith("c624c2be")
    assert decisions[-1]["questions"][0]["id"] == "refund" and "latency_ms" in decisions[-1]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=st.one_of(
        st.binary(max_size=200),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
            lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
            max_leaves=12,
        ).map(lambda v: json.dumps(v).encode()),
        st.fixed_dictionaries(
            {
                "state": st.one_of(st.none(), st.integers(), st.text(max_size=30)),
                "questions": st.dictionaries(
                    st.text(max_size=5),
                    st.dictionaries(
                        st.sampled_from(["type", "criteria", "instructions"]),
                        st.one_of(
                            st.sampled_from(["noul", "choice", "score", "boolean"]),
                            st.none(),
                            st.lists(st.text(max_size=5), max_size=12),
                            st.dictionaries(st.text(max_size=5), st.none() | st.text(max_size=5), max_size=3),
                        ),
                    ),
                    max_size=2,
                ),
            }
        ).map(lambda v: json.dumps(v).encode()),
    )
)
def test_fuzzed_bodies_never_get_a_5xx(adapter_url: str, body: bytes) -> None:
    for route in ("/v1/systemone", "/invocations"):
        r = httpx.post(adapter_url + route, content=body, headers={"content-type": "application/json"}, timeout=120)
        assert r.status_code < 500, (route, body, r.status_code, r.text)
        assert r.headers["content-type"].startswith("application/json")


@pytest.mark.parametrize(
    "body",
    [
        b"Infinity",
        b"NaN",
        b"1e999",
        b'{"state": -Infinity, "questions": {"q": {"type": "noul"}}}',
        b'{"state": "x", "questions": {"q": {"type": "score", "criteria": ["low", NaN]}}}',
    ],
)
def test_non_finite_json_numbers_get_a_4xx_not_a_500(adapter_url: str, body: bytes) -> None:
    """Python's JSON reader accepts NaN and Infinity; echoing them in a 422 made the error unserializable (500)."""
    for route in ("/v1/systemone", "/invocations"):
        r = httpx.post(adapter_url + route, content=body, headers={"content-type": "application/json"}, timeout=60)
        assert 400 <= r.status_code < 500, (route, body, r.status_code, r.text)
        r.json()


def test_a_non_finite_number_inside_a_state_object_is_just_text_to_the_model(adapter_url: str) -> None:
    body = b'{"state": {"temperature": Infinity, "note": "sensor fault"}, "questions": {"q": {"type": "noul"}}}'
    r = httpx.post(
        adapter_url + "/v1/systemone", content=body, headers={"content-type": "application/json"}, timeout=60
    )
    assert r.status_code == 200, r.text
    assert 0 < r.json()["answers"]["q"]["noul"] < 1


def test_validation_errors_say_where_and_why_without_echoing_the_input(adapter_url: str) -> None:
    secret = "Jane Roe, card ending 4471, wants a refund"
    body = {"state": secret, "questions": {"q": {"type": "boolean", "instructions": f"Does {secret} deserve it?"}}}
    for route in ("/v1/systemone", "/invocations"):
        r = httpx.post(adapter_url + route, json=body, timeout=60)
        assert r.status_code == 422, r.text
        detail = r.json()["detail"]
        assert detail and all(set(d) == {"loc", "msg", "type"} and d["loc"][0] == "body" for d in detail), detail
        assert secret not in r.text


def test_chat_content_in_openai_forms_is_text_and_other_parts_are_refused(adapter_url: str) -> None:
    def chat(content: object) -> httpx.Response:
        body = {"messages": [{"role": "user", "content": content}], "max_tokens": 4, "temperature": 0}
        return httpx.post(f"{adapter_url}/v1/chat/completions", json=body, timeout=120)

    plain = chat("Say hello.\nThen stop.")
    parts = chat([{"type": "text", "text": "Say hello."}, {"type": "text", "text": "Then stop."}])
    assert plain.status_code == parts.status_code == 200, parts.text
    assert parts.json()["choices"][0]["message"] == plain.json()["choices"][0]["message"]  # the same prompt
    assert plain.json()["model"] != "" and "/" not in plain.json()["model"]  # the served name, not a path
    assert chat(None).status_code == 200  # null content (an assistant turn that only called tools) is empty
    image = chat([{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}])
    assert image.status_code == 422 and "only text content parts are served, not 'image_url'" in image.text


PART = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "image_url", "input_audio", 3]), "text": st.none() | st.text(max_size=10)}
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    messages=st.lists(
        st.fixed_dictionaries(
            {
                "role": st.sampled_from(["system", "user", "assistant", "tool", ""]),
                "content": st.none() | st.text(max_size=20) | st.lists(PART, max_size=3) | st.integers(),
            }
        ),
        max_size=3,
    ),
    extra=st.dictionaries(
        st.sampled_from(["temperature", "top_p", "stop", "seed", "stream", "model"]),
        st.none() | st.floats(allow_nan=False, allow_infinity=False) | st.integers() | st.text(max_size=5),
        max_size=3,
    ),
)
def test_fuzzed_chat_bodies_never_get_a_5xx(adapter_url: str, messages: list[object], extra: dict) -> None:
    body = {"messages": messages, **extra, "max_tokens": 1}  # one token: the shapes are under test, not generation
    for route in ("/v1/chat/completions", "/invocations"):
        r = httpx.post(adapter_url + route, json=body, timeout=120)
        assert r.status_code < 500, (route, body, r.status_code, r.text)


def test_server_is_up_after_fuzzing(adapter_url: str) -> None:
    assert httpx.get(f"{adapter_url}/ping", timeout=10).status_code == 200


def test_overload_returns_429_with_retry_after_while_accepted_requests_complete() -> None:
    # no wait at admission: the overflow is refused at once (tests/adapter/test_adapter_load.py tests the wait)
    with app_server(
        env={"DECISION_MAX_QUEUE": "1", "DECISION_RETRY_AFTER_S": "2", "DECISION_ADMISSION_WAIT_S": "0"}
    ) as adapter:
        slow = {**DECISION, "questions": {f"q{i}": NOUL for i in range(3)}, "state": TICKET * 20}
        results: list[httpx.Response] = []

        def send() -> None:
            results.append(httpx.post(f"{adapter.url}/v1/systemone", json=slow, timeout=300))

        threads = [threading.Thread(target=send) for _ in range(6)]
        for t in threads:
            t.start()
            time.sleep(0.05)
        for t in threads:
            t.join()
        codes = sorted(r.status_code for r in results)
        assert codes.count(200) >= 2 and codes.count(429) >= 1 and set(codes) <= {200, 429}, codes
        rejected = next(r for r in results if r.status_code == 429)
        assert rejected.headers["retry-after"] == "2" and rejected.json()["detail"]["error_type"] == "overloaded"
        assert all(r.json()["answers"]["q0"]["type"] == "noul" for r in results if r.status_code == 200)
        assert any(line.get("event") == "overload_rejected" for line in adapter.log_lines())


def test_manifest_mismatch_refuses_to_start(model_copy: Path, tmp_path: Path) -> None:
    manifest_path = model_copy / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["sha256"] = "0" * 64
    manifest_path.write_text(json.dumps(manifest))
    adapter = start_adapter(tmp_path, model_dir=model_copy, wait=False)
    assert adapter.proc.wait(timeout=120) != 0
    failure = [line for line in adapter.log_lines() if line.get("event") == "model_checksum_mismatch"]
    assert failure, adapter.log_path.read_text()
    assert failure[0]["expected_sha256"] == "0" * 64
    assert failure[0]["actual_sha256"].startswith("c624c2be") and failure[0]["file"].endswith(".gguf")


def test_invalid_runtime_setting_stops_start_up_and_unknown_ones_are_ignored(tmp_path: Path, model_copy: Path) -> None:
    bad = start_adapter(tmp_path / "bad", model_dir=model_copy, wait=False, env={"SM_LLAMA_CPP_CTX_SIZE": "lots"})
    assert bad.proc.wait(timeout=60) != 0
    assert any("SM_LLAMA_CPP_CTX_SIZE" in str(line.get("message")) for line in bad.log_lines())
    ok = start_adapter(
        tmp_path / "ok", model_dir=model_copy, env={"SM_LLAMA_CPP_N_PARALLEL": "4", "SM_LLAMA_CPP_CTX_SIZE": "1024"}
    )
    try:
        ignored = [line for line in ok.log_lines() if line.get("event") == "setting_ignored"]
        assert [line["variable"] for line in ignored] == ["SM_LLAMA_CPP_N_PARALLEL"]
        over = httpx.post(f"{ok.url}/v1/systemone", json={**DECISION, "state": "word " * 1200}, timeout=60)
        assert over.status_code == 413 and "1024" in over.json()["detail"]["message"]
    finally:
        ok.stop()


def test_bearer_key_when_configured() -> None:
    with app_server(env={"DECISION_API_KEY": "s3cret"}, service=shared_service()) as adapter:  # the key is the app's
        url = f"{adapter.url}/v1/systemone"
        missing = httpx.post(url, json=DECISION, timeout=60)
        wrong = httpx.post(url, json=DECISION, headers={"Authorization": "Bearer nope"}, timeout=60)
        right = httpx.post(url, json=DECISION, headers={"Authorization": "Bearer s3cret"}, timeout=120)
        assert (missing.status_code, wrong.status_code, right.status_code) == (401, 401, 200)
        assert missing.json()["detail"]["error_type"] == "authentication_error"
        assert httpx.get(f"{adapter.url}/ping", timeout=10).status_code == 200  # SageMaker's health check has no key


@pytest.mark.slow
def test_sigterm_drains_in_flight_requests_then_exits(tmp_path: Path, model_copy: Path) -> None:
    adapter = start_adapter(tmp_path, model_dir=model_copy)
    result: list[httpx.Response] = []
    slow = {**DECISION, "questions": {f"q{i}": NOUL for i in range(6)}, "state": TICKET * 30}
    worker = threading.Thread(
        target=lambda: result.append(httpx.post(f"{adapter.url}/v1/systemone", json=slow, timeout=300))
    )
    worker.start()
    time.sleep(1.0)
    adapter.proc.send_signal(signal.SIGTERM)
    worker.join()
    assert result and result[0].status_code == 200
    # uvicorn re-raises the signal after draining, so the status is the conventional "ended by SIGTERM"
    assert adapter.proc.wait(timeout=60) in (0, -signal.SIGTERM)
    assert any("Finished server process" in str(line.get("message")) for line in adapter.log_lines())
