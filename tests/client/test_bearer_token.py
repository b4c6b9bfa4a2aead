"""decision_endpoints_client.bearer_token: SageMaker bearer tokens minted with botocore from frozen credentials and
a frozen clock (no AWS: nothing is sent anywhere but to an httpx2 MockTransport, a stand-in for SageMaker's
OpenAI-compatible route)."""

from __future__ import annotations

import base64
import logging
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import httpx2
import openai
import pytest
from botocore.credentials import Credentials, RefreshableCredentials
from decision_endpoints_client.bearer_token import (
    MAX_LIFETIME_S,
    REFRESH_MARGIN_S,
    TOKEN_PREFIX,
    BearerAuth,
    BearerToken,
    openai_route_base_url,
)

NOW = 1_800_000_000.0  # 2027-01-15, frozen
KEY, SECRET, SESSION = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "session-token-example"


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def presigned(token: str) -> dict[str, list[str]]:
    assert token.startswith(TOKEN_PREFIX)
    url = base64.b64decode(token.removeprefix(TOKEN_PREFIX)).decode()
    assert url.startswith("sagemaker.amazonaws.com/?Action=CallWithBearerToken&") and url.endswith("&Version=1")
    return parse_qs(urlsplit("https://" + url).query)


def test_the_token_is_a_presigned_call_with_bearer_token() -> None:
    token = BearerToken("eu-west-1", credentials=Credentials(KEY, SECRET, SESSION), clock=Clock())
    query = presigned(token.value())
    assert query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"] and query["X-Amz-SignedHeaders"] == ["host"]
    key, _, region, service, terminal = query["X-Amz-Credential"][0].split("/")
    assert (key, region, service, terminal) == (KEY, "eu-west-1", "sagemaker", "aws4_request")
    assert query["X-Amz-Expires"] == ["3600"] and query["X-Amz-Security-Token"] == [SESSION]
    assert len(query["X-Amz-Signature"][0]) == 64 and token.expires_at == NOW + 3600
    with pytest.raises(ValueError, match="lifetime_s"):
        BearerToken("eu-west-1", credentials=Credentials(KEY, SECRET), lifetime_s=MAX_LIFETIME_S + 1)


def test_refreshed_before_it_or_its_credentials_expire() -> None:
    clock = Clock()
    expiry = datetime.fromtimestamp(NOW + 1800, tz=UTC)
    credentials = RefreshableCredentials(
        KEY, SECRET, SESSION, expiry, refresh_using=lambda: {}, method="test"
    )  # expire in 30 min: the token may not outlive them
    token = BearerToken("eu-west-1", credentials=credentials, lifetime_s=3600, clock=clock)
    first = token.value()
    assert presigned(first)["X-Amz-Expires"] == [str(int(expiry.timestamp() - NOW))]
    assert token.value() == first and token.minted == 1  # reused while it is good
    clock.now = token.expires_at - REFRESH_MARGIN_S  # within the margin: minted again
    credentials._expiry_time = expiry + timedelta(hours=1)  # as a refresh would leave them
    token.value()
    assert token.minted == 2


def test_dropped_on_401_and_never_in_logs_reprs_or_exceptions(caplog: pytest.LogCaptureFixture) -> None:
    token = BearerToken("eu-west-1", credentials=Credentials(KEY, SECRET, SESSION), clock=Clock())
    seen: list[str] = []

    def route(request: httpx2.Request) -> httpx2.Response:  # stand-in for SageMaker's /openai/v1 route
        seen.append(request.headers["authorization"])
        if len(seen) in (1, 3, 4):  # refuse the first token, then every token
            return httpx2.Response(401, json={"error": {"message": "token refused", "type": "authentication_error"}})
        body = {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}],
        }
        return httpx2.Response(200, json=body)

    auth = BearerAuth(token)
    client = openai.OpenAI(
        api_key="unused",
        base_url=openai_route_base_url("chat-dev-cpu", "eu-west-1"),
        http_client=httpx2.Client(transport=httpx2.MockTransport(route), auth=auth),
        max_retries=0,
    )
    caplog.set_level(logging.DEBUG)
    reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert reply.choices[0].message.content == "ok"
    assert token.minted == 2 and len(seen) == 2  # the refused token was dropped, one minted again and sent
    assert all(h.startswith(f"Bearer {TOKEN_PREFIX}") for h in seen)
    with pytest.raises(openai.AuthenticationError) as refused:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    tokens = {h.removeprefix("Bearer ") for h in seen}
    shown = [caplog.text, repr(token), repr(auth), repr(client), str(refused.value), repr(refused.value)]
    assert not any(t in text for t in tokens for text in shown)
    assert SECRET not in caplog.text and SESSION not in caplog.text
