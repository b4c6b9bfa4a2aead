"""decisionctl's transports and retries, without AWS and without the model.

Stand-ins, named as such:
- `_ScriptedServer`, a local HTTP server answering a fixed script (429 then 200, or 400), stands in for
  an overloaded or a rejecting endpoint: the retry rules are about status codes, not decisions.
- botocore's Stubber and a `before-send` hook stand in for the SageMaker runtime API: the calls are
  checked (parameters, signature) and never leave the process.
"""

from __future__ import annotations

import io
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.response import StreamingBody
from botocore.stub import Stubber
from decision_endpoints_client.invocation import retry_after_seconds
from decisionctl.commands import cli
from decisionctl.transport import (
    HttpSender,
    RealTimeEndpointSender,
    Reply,
    RetryPolicy,
    aws_setup_failure,
    send_with_retries,
)

from tests.decisionctl_support import x_run

ANSWER = {
    "model": "m",
    "answers": {"q": {"type": "noul", "noul": 0.8}},
    "usage": {"input_tokens": 3, "output_tokens": 0},
}
REQUEST = {"model": "jev-latest", "state": "s", "questions": {"q": {"type": "noul", "instructions": "?"}}}


class _ScriptedServer:
    """Answers POSTs with the next (status, headers, body) of a script, repeating the last; records each request."""

    def __init__(self, script: list[tuple[int, dict[str, str], dict[str, Any]]]) -> None:
        self.script, self.requests = script, []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                outer.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "body": json.loads(self.rfile.read(length))}
                )
                status, headers, body = outer.script[min(len(outer.requests), len(outer.script)) - 1]
                data = json.dumps(body).encode()
                self.send_response(status)
                for k, v in {"Content-Type": "application/json", "Content-Length": str(len(data)), **headers}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture()
def scripted():
    servers: list[_ScriptedServer] = []

    def make(script):
        servers.append(_ScriptedServer(script))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


OVERLOADED = (429, {"Retry-After": "0"}, {"detail": {"error_type": "overloaded", "message": "queue full"}})


def test_429_is_retried_after_retry_after_then_succeeds(scripted) -> None:
    server = scripted([OVERLOADED, OVERLOADED, (200, {}, ANSWER)])
    waits: list[float] = []
    transport = HttpSender(server.url)
    reply, attempts = send_with_retries(transport, REQUEST, RetryPolicy(max_attempts=5, sleep=waits.append))
    transport.close()
    assert reply.ok and reply.json() == ANSWER
    assert attempts == 3 and len(server.requests) == 3
    assert waits == [0.0, 0.0]  # Retry-After: 0 is honoured, not replaced by a backoff guess
    assert all(r["path"] == "/v1/systemone" and r["body"] == REQUEST for r in server.requests)


def test_400_is_never_retried(scripted) -> None:
    server = scripted([(400, {}, {"detail": {"error_type": "invalid_request", "message": "bad"}}), (200, {}, ANSWER)])
    waits: list[float] = []
    transport = HttpSender(server.url)
    reply, attempts = send_with_retries(transport, REQUEST, RetryPolicy(max_attempts=5, sleep=waits.append))
    transport.close()
    assert (reply.status, attempts, len(server.requests), waits) == (400, 1, 1, [])
    assert reply.describe_error() == "HTTP 400 invalid_request: bad"


def test_422_is_never_retried_and_its_detail_is_readable(scripted) -> None:
    detail = [{"loc": ["body", "questions", "q", "criteria"], "msg": "too few options", "type": "value_error"}]
    server = scripted([(422, {}, {"detail": detail})])
    transport = HttpSender(server.url)
    reply, attempts = send_with_retries(transport, REQUEST, RetryPolicy(sleep=lambda s: None))
    transport.close()
    assert attempts == 1 and len(server.requests) == 1
    assert reply.describe_error() == "HTTP 422 invalid request: body.questions.q.criteria: too few options"


def test_503_without_retry_after_backs_off_with_jitter_and_gives_up(scripted) -> None:
    server = scripted([(503, {}, {"detail": {"error_type": "unavailable", "message": "loading"}})])
    waits: list[float] = []
    transport = HttpSender(server.url)
    policy = RetryPolicy(max_attempts=4, base_delay_s=0.5, max_delay_s=1.5, sleep=waits.append)
    reply, attempts = send_with_retries(transport, REQUEST, policy)
    transport.close()
    assert (reply.status, attempts, len(server.requests)) == (503, 4, 4)
    caps = [0.5, 1.0, 1.5]  # full jitter: uniform in [0, min(cap, base * 2^(n-1))]
    assert len(waits) == 3 and all(0 <= w <= c for w, c in zip(waits, caps, strict=True))


def test_refused_connection_is_retried() -> None:
    waits: list[float] = []
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    transport = HttpSender(f"http://127.0.0.1:{port}", timeout_s=2)
    reply, attempts = send_with_retries(transport, REQUEST, RetryPolicy(max_attempts=2, sleep=waits.append))
    transport.close()
    assert reply.status == 0 and attempts == 2 and len(waits) == 1
    assert reply.describe_error().startswith("no answer: ConnectError")


def test_retry_after_forms() -> None:
    """The client package's parser, the one the CLI's senders read Retry-After with."""
    assert retry_after_seconds("3") == 3.0
    assert retry_after_seconds(" 0 ") == 0.0
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412480.0 - 5) == pytest.approx(5.0)
    assert retry_after_seconds("soon") is None
    assert retry_after_seconds(None) is None
    policy = RetryPolicy(max_delay_s=10)
    wait = policy.delay(1, Reply(429, b"", 0.0, retry_after_s=2.0))
    assert 2.0 <= wait <= 2.5  # at least what the server asked, plus at most a quarter as jitter


def test_decide_cli_sends_bearer_key_retries_and_prints_answers(scripted, tmp_path, capsys, monkeypatch) -> None:
    server = scripted([OVERLOADED, (200, {}, {**ANSWER, "x_run": x_run(model_sha256="ab" * 32)})])
    request = tmp_path / "request.json"
    request.write_text(json.dumps(REQUEST))
    monkeypatch.setenv("DECISION_API_KEY", "k-123")
    assert cli.main(["decide", "--url", server.url, str(request), "--show-identity"]) == 0
    out, err = capsys.readouterr()
    assert [r["headers"].get("Authorization") for r in server.requests] == ["Bearer k-123", "Bearer k-123"]
    assert "attempt 1: HTTP 429 overloaded: queue full; retrying" in err
    row = next(line for line in out.splitlines() if line.startswith("q "))
    assert row.split()[:3] == ["q", "noul", "yes"] and "yes 0.800  no 0.200" in row
    assert '"model_sha256": "' + "ab" * 32 in out


def test_decide_cli_exits_non_zero_on_400_after_one_attempt(scripted, tmp_path, capsys) -> None:
    server = scripted([(400, {}, {"detail": {"error_type": "invalid_request", "message": "no questions"}})])
    request = tmp_path / "request.json"
    request.write_text(json.dumps(REQUEST))
    assert cli.main(["decide", "--url", server.url, str(request), "--json"]) == 1
    assert len(server.requests) == 1
    assert "HTTP 400 invalid_request: no questions" in capsys.readouterr().err


def test_decide_cli_reads_the_reply_with_the_response_models(scripted, tmp_path, capsys) -> None:
    """A 200 whose body is no decision response fails with where it departs; --json still prints it as sent."""
    broken = {**ANSWER, "answers": {"q": {"type": "noul", "p_yes": 0.8}}}
    server = scripted([(200, {}, broken), (200, {}, broken)])
    request = tmp_path / "request.json"
    request.write_text(json.dumps(REQUEST))
    assert cli.main(["decide", "--url", server.url, str(request)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "the reply is not a decision response: answers.q.noul.noul: Field required" in err
    assert cli.main(["decide", "--url", server.url, str(request), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == broken


def _sagemaker_client():
    # Fixed fake credentials: nothing is sent anywhere, the Stubber or the before-send hook answers.
    return boto3.client(
        "sagemaker-runtime",
        region_name="eu-west-1",
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
    )


def test_sagemaker_invoke_endpoint_parameters_with_stubber() -> None:
    """Stand-in: botocore's Stubber replaces the SageMaker runtime API and checks the call's parameters."""
    client = _sagemaker_client()
    payload = json.dumps(REQUEST).encode()
    with Stubber(client) as stub:
        stub.add_response(
            "invoke_endpoint",
            {
                "Body": StreamingBody(io.BytesIO(json.dumps(ANSWER).encode()), len(json.dumps(ANSWER))),
                "ContentType": "application/json",
                "InvokedProductionVariant": "AllTraffic",
            },
            expected_params={
                "EndpointName": "decisions-dev",
                "ContentType": "application/json",
                "Accept": "application/json",
                "Body": payload,
            },
        )
        reply = RealTimeEndpointSender("decisions-dev", client=client).send(REQUEST)
        stub.assert_no_pending_responses()
    assert reply.ok and reply.json() == ANSWER


def test_sagemaker_model_error_429_is_retried_and_validation_error_is_not() -> None:
    """Stand-in: the Stubber plays SageMaker relaying the container's 429 (ModelError), then an answer."""
    client = _sagemaker_client()
    overloaded = json.dumps(OVERLOADED[2])
    with Stubber(client) as stub:
        stub.add_client_error(
            "invoke_endpoint",
            service_error_code="ModelError",
            http_status_code=424,
            service_message="Received client error (429) from primary",
            modeled_fields={"OriginalStatusCode": 429, "OriginalMessage": overloaded},
        )
        stub.add_response("invoke_endpoint", {"Body": StreamingBody(io.BytesIO(b'{"answers": {}}'), 15)})
        stub.add_client_error(
            "invoke_endpoint",
            service_error_code="ValidationError",
            http_status_code=400,
            service_message="Endpoint nope of account 123 not found.",
        )
        waits: list[float] = []
        transport = RealTimeEndpointSender("decisions-dev", client=client)
        reply, attempts = send_with_retries(transport, REQUEST, RetryPolicy(sleep=waits.append))
        assert reply.ok and attempts == 2 and len(waits) == 1
        reply, attempts = send_with_retries(transport, REQUEST, RetryPolicy(sleep=waits.append))
        assert (reply.status, attempts) == (400, 1)
        assert reply.describe_error() == "HTTP 400 ValidationError: Endpoint nope of account 123 not found."
        stub.assert_no_pending_responses()


def test_sagemaker_request_is_signed_for_the_runtime_service() -> None:
    """Stand-in: a before-send hook answers instead of AWS, after botocore has built and signed the request."""
    client = _sagemaker_client()
    seen: dict[str, Any] = {}

    def answer(request: Any, **_: Any) -> AWSResponse:
        seen.update(url=request.url, headers=dict(request.headers), body=request.body)
        return AWSResponse(request.url, 200, {"Content-Type": "application/json"}, _Raw(json.dumps(ANSWER).encode()))

    client.meta.events.register("before-send.sagemaker-runtime.InvokeEndpoint", answer)
    reply = RealTimeEndpointSender("decisions-dev", client=client).send(REQUEST)
    assert reply.ok and reply.json() == ANSWER
    assert seen["url"] == "https://runtime.sagemaker.eu-west-1.amazonaws.com/endpoints/decisions-dev/invocations"
    auth = seen["headers"]["Authorization"]
    auth = auth.decode() if isinstance(auth, bytes) else auth
    assert auth.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-west-1/sagemaker/aws4_request" in auth and "Signature=" in auth
    assert json.loads(seen["body"]) == REQUEST


class _Raw(io.BytesIO):
    """The raw-stream surface AWSResponse reads a body from (read for streams, stream for the rest)."""

    def stream(self, **_: Any) -> Any:
        yield self.getvalue()


def test_sagemaker_transport_reads_the_wait_from_the_model_error_and_a_timeout_is_no_answer() -> None:
    """Stand-in: the Stubber plays SageMaker. The unwrapping is decision_endpoints_client's, as for the SDK:
    SageMaker drops the container's Retry-After, so the wait comes from the adapter's 429 message; a container
    that never answered (OriginalStatusCode 0) is no answer, retried as a timeout is."""
    client = _sagemaker_client()
    overloaded = json.dumps({"detail": {"error_type": "overloaded", "message": "at capacity; retry after 4 s"}})
    with Stubber(client) as stub:
        stub.add_client_error(
            "invoke_endpoint",
            service_error_code="ModelError",
            http_status_code=424,
            modeled_fields={"OriginalStatusCode": 429, "OriginalMessage": overloaded},
            expected_params={
                "EndpointName": "decisions-dev",
                "ContentType": "application/json",
                "Accept": "application/json",
                "Body": json.dumps(REQUEST).encode(),
                "TargetVariant": "canary",
            },
        )
        stub.add_client_error(
            "invoke_endpoint",
            service_error_code="ModelError",
            http_status_code=424,
            service_message="Your invocation timed out while waiting for a response from container primary.",
            modeled_fields={"OriginalStatusCode": 0},
        )
        transport = RealTimeEndpointSender("decisions-dev", client=client, target_variant="canary")
        refused, timed_out = transport.send(REQUEST), transport.send(REQUEST)
        stub.assert_no_pending_responses()
    assert (refused.status, refused.retry_after_s) == (429, 4.0)
    assert refused.describe_error() == "HTTP 429 overloaded: at capacity; retry after 4 s"
    assert timed_out.status == 0 and timed_out.retryable
    assert timed_out.describe_error().startswith("no answer: InvocationTimeout: Your invocation timed out")


@pytest.fixture()
def no_aws_credentials(monkeypatch, tmp_path):
    """This machine's AWS set-up emptied: no keys in the environment, empty shared files, no instance metadata."""
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_ROLE_ARN",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
    ):
        monkeypatch.delenv(name, raising=False)
    empty = tmp_path / "aws-empty"
    empty.write_text("")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(empty))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(empty))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    request = tmp_path / "request.json"
    request.write_text(json.dumps(REQUEST))
    return request


def test_decide_without_aws_credentials_stops_at_the_first_call(no_aws_credentials, monkeypatch, capsys) -> None:
    """A real botocore client finds no credentials: one call, no retry, one line saying so (not "no answer")."""
    sends = []
    send = RealTimeEndpointSender.send
    monkeypatch.setattr(RealTimeEndpointSender, "send", lambda self, body: sends.append(body) or send(self, body))
    args = ["decide", "--sagemaker-endpoint", "decision-dev-cpu", "--region", "us-west-2", str(no_aws_credentials)]
    assert cli.main(args) == 1
    err = capsys.readouterr().err
    assert len(sends) == 1
    assert "no usable AWS credentials: Unable to locate credentials" in err
    assert "retrying" not in err and "no answer" not in err
    assert cli.main([*args[:3], str(no_aws_credentials)]) == 1  # nor a region: said before any call
    assert "no AWS region" in capsys.readouterr().err and len(sends) == 1


def test_a_credentials_error_is_raised_not_retried(no_aws_credentials) -> None:
    """The transport raises botocore's error instead of replying "no answer", so send_with_retries never waits."""
    from botocore.exceptions import NoCredentialsError

    waits: list[float] = []
    transport = RealTimeEndpointSender("decision-dev-cpu", region="us-west-2")
    with pytest.raises(NoCredentialsError) as raised:
        send_with_retries(transport, REQUEST, RetryPolicy(sleep=waits.append))
    transport.close()
    assert waits == []
    assert aws_setup_failure(raised.value) is not None
    assert aws_setup_failure(ConnectionError("reset")) is None
