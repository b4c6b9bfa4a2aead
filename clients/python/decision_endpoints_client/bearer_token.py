"""SageMaker bearer tokens for an endpoint's OpenAI-compatible route (`/openai/v1/chat/completions`), minted
locally with botocore from AWS credentials: no `sagemaker` package, no call to AWS.

A token is `sagemaker-api-key-` + base64 of a SigV4 query-signed `POST sagemaker.amazonaws.com/?Action=
CallWithBearerToken` (without its scheme) + `&Version=1`, the form the SageMaker Python SDK's token generator
writes (sagemaker-core 2.27.0, `sagemaker.core.token_generator`); using it needs sagemaker:CallWithBearerToken
and sagemaker:InvokeEndpoint. It is minted again before it or the credentials that signed it expire, and dropped
on a 401 or 403. No repr, log line or exception of this module holds it.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
from collections.abc import Callable, Generator
from typing import Any

import httpx2
from botocore.auth import SigV4QueryAuth
from botocore.awsrequest import AWSRequest

# the token format's constant parts, not secrets
TOKEN_PREFIX = "sagemaker-api-key-"  # noqa: S105
TOKEN_HOST = "sagemaker.amazonaws.com"  # noqa: S105
TOKEN_VERSION = "&Version=1"  # noqa: S105
MAX_LIFETIME_S = 12 * 3600  # SageMaker's longest token
DEFAULT_LIFETIME_S = 3600
REFRESH_MARGIN_S = 300  # minted again this long before it would expire
MIN_LIFETIME_S = 60  # credentials closer to expiry than this are refreshed first


class _Signing(logging.Filter):
    """Drops botocore.auth's debug lines (canonical request, signature) while this thread signs a token: with
    them a DEBUG log would hold everything the token is made of."""

    def __init__(self) -> None:
        super().__init__()
        self.here = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(self.here, "signing", False)


_SIGNING = _Signing()
logging.getLogger("botocore.auth").addFilter(_SIGNING)


def openai_route_base_url(endpoint_name: str, region: str, inference_component: str | None = None) -> str:
    """The OpenAI SDK's base URL for an endpoint's OpenAI-compatible route (the SDK appends /chat/completions); a
    components endpoint's route names the component."""
    component = f"/inference-components/{inference_component}" if inference_component else ""
    return f"https://runtime.sagemaker.{region}.amazonaws.com/endpoints/{endpoint_name}{component}/openai/v1"


class BearerToken:
    """The current token for one region. `credentials`: botocore credentials (refreshable or not); by default
    the standard chain's. `clock`: seconds since the epoch (tests freeze it)."""

    def __init__(
        self,
        region: str,
        *,
        credentials: Any = None,
        lifetime_s: int = DEFAULT_LIFETIME_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not 0 < lifetime_s <= MAX_LIFETIME_S:
            raise ValueError(f"lifetime_s must be in (0, {MAX_LIFETIME_S}], got {lifetime_s}")
        if credentials is None:
            import botocore.session

            credentials = botocore.session.get_session().get_credentials()
            if credentials is None:
                raise RuntimeError("no AWS credentials found on the standard chain")
        self.region, self.lifetime_s, self._credentials, self._clock = region, lifetime_s, credentials, clock
        self._token: str | None = None
        self.expires_at = 0.0  # when the current token stops working (seconds since the epoch); 0: none
        self.minted = 0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"BearerToken(region={self.region!r}, expires_at={self.expires_at:.0f}, minted={self.minted})"

    def value(self) -> str:
        """The token, minted now where there is none or it is within REFRESH_MARGIN_S of its expiry."""
        with self._lock:
            if self._token is None or self._clock() >= self.expires_at - REFRESH_MARGIN_S:
                self._token = self._mint()
            return self._token

    def drop(self) -> None:
        """Forget the token (the server refused it); the next `value()` mints another."""
        with self._lock:
            self._token, self.expires_at = None, 0.0

    def _mint(self) -> str:
        now = self._clock()
        frozen = self._credentials.get_frozen_credentials()
        lifetime = self.lifetime_s
        expiry = _credentials_expiry(self._credentials)
        if expiry is not None:
            # a token signed with session credentials stops working when they do
            lifetime = min(lifetime, int(expiry - now))
            if lifetime < MIN_LIFETIME_S:
                raise RuntimeError("the AWS credentials expire within a minute and were not refreshed")
        request = AWSRequest(
            method="POST",
            url=f"https://{TOKEN_HOST}/",
            headers={"host": TOKEN_HOST},
            params={"Action": "CallWithBearerToken"},
        )
        _SIGNING.here.signing = True
        try:
            SigV4QueryAuth(frozen, "sagemaker", self.region, expires=lifetime).add_auth(request)
        finally:
            _SIGNING.here.signing = False
        assert request.url is not None
        presigned = request.url.removeprefix("https://") + TOKEN_VERSION
        self.expires_at, self.minted = now + lifetime, self.minted + 1
        return TOKEN_PREFIX + base64.b64encode(presigned.encode()).decode()


def _credentials_expiry(credentials: Any) -> float | None:
    """When refreshable credentials expire (seconds since the epoch); None for long-term ones."""
    expiry = getattr(credentials, "_expiry_time", None)  # botocore's RefreshableCredentials keep it here
    return expiry.timestamp() if expiry is not None else None


class BearerAuth(httpx2.Auth):
    """For `httpx2.Client(auth=...)` under the `openai` SDK: each request carries the current token; a 401 or
    403 drops it and the request is sent once more with a new one."""

    def __init__(self, token: BearerToken) -> None:
        self.token = token

    def __repr__(self) -> str:
        return f"BearerAuth({self.token!r})"

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response, None]:
        request.headers["Authorization"] = f"Bearer {self.token.value()}"
        response = yield request
        if response.status_code in (401, 403):
            self.token.drop()
            request.headers["Authorization"] = f"Bearer {self.token.value()}"
            yield request
