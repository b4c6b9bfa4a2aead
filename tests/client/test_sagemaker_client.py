"""The official SDK, unchanged, calling a SageMaker endpoint through decision_endpoints_client's transport, on the
real adapter and the real SmolLM2 model over real HTTP.

Stand-in, named as such: `SageMakerRuntimeStandIn` (tests/sagemaker_runtime_standin.py) plays the SageMaker
runtime, which cannot run here. botocore signs each request with fixed fake credentials and sends it to the
stand-in (`endpoint_url`), which checks the SigV4 headers' form, forwards to the adapter's /invocations and
wraps every non-2xx as a ModelError (424, the container's headers dropped).

One adapter for the module: one decision context, no queue, a 0.5 s admission wait (so a request that finds the
context busy gets its 429 at once) and a 64 KiB body limit (a 413 without model work).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections.abc import Iterator

import botocore.config
import botocore.session
import httpx
import httpx2
import pytest
from decision_endpoints_client import INFERENCE_ID, TARGET_VARIANT, AsyncSageMakerTransport, SageMakerTransport
from decision_endpoints_client.sdk import SIGV4_PLACEHOLDER_KEY, base_url
from typesafe_sdk import (
    AsyncTypeSafeClient,
    Choice,
    Noul,
    RetryPolicy,
    Score,
    TypeSafeAPIError,
    TypeSafeClient,
    TypeSafeRateLimitError,
    TypeSafeUnprocessableEntityError,
)

from tests.app_support import AppServer, start_app
from tests.conftest import require_model
from tests.sagemaker_runtime_standin import AUTHORIZATION, SageMakerRuntimeStandIn

pytestmark = pytest.mark.model

ENDPOINT, REGION, VARIANTS = "decision-test-cpu", "eu-west-1", ("AllTraffic", "canary")
BODY_LIMIT = 64 * 1024
MODULE_ENV = {
    "DECISION_MAX_CONCURRENCY": "1",
    "DECISION_MAX_QUEUE": "0",
    "DECISION_ADMISSION_WAIT_S": "0.5",
    "DECISION_MAX_BODY_BYTES": str(BODY_LIMIT),
    "DECISION_CHAT_CONTEXTS": "0",
}
TICKET = "I was charged twice for my March invoice and the refund has not arrived."
QUESTIONS = {
    "refund": Noul(instructions="Is the customer asking for money back?"),
    "team": Choice(instructions="Which team should handle this?", criteria={"Billing": "payments", "Sales": None}),
}
SENTENCE = "The customer says the March invoice was charged twice, the refund never came and the login fails. "


@pytest.fixture(scope="module")
def adapter(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppServer]:
    require_model()
    proc = start_app(env=MODULE_ENV)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def runtime(adapter: AppServer) -> Iterator[SageMakerRuntimeStandIn]:
    standin = SageMakerRuntimeStandIn(adapter.url, endpoint=ENDPOINT, region=REGION, variants=VARIANTS)
    yield standin
    standin.close()


def signing_client(runtime: SageMakerRuntimeStandIn):
    """A botocore sagemaker-runtime client as an application would make one, pointed at the stand-in."""
    session = botocore.session.get_session()
    session.set_credentials("AKIDEXAMPLESTANDIN", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    config = botocore.config.Config(retries={"total_max_attempts": 1}, read_timeout=70)
    return session.create_client("sagemaker-runtime", region_name=REGION, endpoint_url=runtime.url, config=config)


def sdk(runtime: SageMakerRuntimeStandIn, **options) -> TypeSafeClient:
    transport = SageMakerTransport(ENDPOINT, client=signing_client(runtime))
    return TypeSafeClient(api_key=SIGV4_PLACEHOLDER_KEY, base_url=base_url(ENDPOINT), transport=transport, **options)


def test_the_sdks_decision_call_succeeds_unchanged_and_equals_the_direct_answer(
    adapter: AppServer, runtime: SageMakerRuntimeStandIn
) -> None:
    before = len(runtime.seen)
    with sdk(runtime) as client:
        through = client.system_one(state=TICKET, questions=QUESTIONS)
    with TypeSafeClient(api_key="unused", base_url=adapter.url) as client:
        direct = client.system_one(state=TICKET, questions=QUESTIONS)
    assert 0.0 <= through.nouls["refund"].noul <= 1.0
    assert sum(through.choices["team"].probabilities.values()) == pytest.approx(1.0)
    assert through.nouls["refund"].noul == pytest.approx(direct.nouls["refund"].noul, abs=1e-9)
    assert through.choices["team"].probabilities == pytest.approx(direct.choices["team"].probabilities, abs=1e-9)
    (seen,) = runtime.seen[before:]
    assert seen.path == f"/endpoints/{ENDPOINT}/invocations" and seen.container_status == 200
    assert AUTHORIZATION.fullmatch(seen.headers["authorization"])  # SigV4, not the SDK's Bearer placeholder
    assert SIGV4_PLACEHOLDER_KEY not in json.dumps(seen.headers)
    assert (seen.headers["content-type"], seen.headers["accept"]) == ("application/json", "application/json")


def test_request_id_and_target_variant_pass_through(runtime: SageMakerRuntimeStandIn) -> None:
    """The SDK's extra headers become InvokeEndpoint's InferenceId and TargetVariant; the variant that answered
    and SageMaker's request id come back as response headers (the SDK reads the latter into its errors)."""
    transport = SageMakerTransport(ENDPOINT, client=signing_client(runtime))
    body = {"model": "jev-latest", "state": TICKET, "questions": {"refund": {"type": "noul", "instructions": "?"}}}
    with httpx2.Client(transport=transport) as http:
        reply = http.post(
            base_url(ENDPOINT) + "/v1/systemone",
            json=body,
            headers={TARGET_VARIANT: "canary", INFERENCE_ID: "ticket-4711"},
        )
    assert reply.status_code == 200, reply.text
    seen = runtime.seen[-1]
    assert (seen.headers["x-amzn-sagemaker-target-variant"], seen.headers["x-amzn-sagemaker-inference-id"]) == (
        "canary",
        "ticket-4711",
    )
    assert reply.headers["x-amzn-invoked-production-variant"] == "canary"
    assert reply.headers["x-typesafe-request-id"] == reply.headers["x-amzn-requestid"] != ""


def _hold_the_context(adapter: AppServer, tag: str) -> threading.Thread:
    """A long decision (about 750 new tokens, three questions: seconds here) sent straight to the adapter."""
    body = {
        "model": "jev-latest",
        "state": f"Ticket {tag}. " + SENTENCE * 40,
        "questions": {f"q{i}": {"type": "noul", "instructions": "Refund?"} for i in range(3)},
    }
    thread = threading.Thread(target=lambda: httpx.post(adapter.url + "/v1/systemone", json=body, timeout=300))
    thread.start()
    for _ in range(500):
        if httpx.get(adapter.url + "/metrics", timeout=30).json()["lanes"]["decisions"]["admitted"] >= 1:
            return thread
        time.sleep(0.02)
    raise AssertionError("the long decision was never admitted")


def test_a_429_reaches_the_sdk_as_a_429_with_its_retry_after(
    adapter: AppServer, runtime: SageMakerRuntimeStandIn
) -> None:
    """SageMaker hands the adapter's 429 over as a 424 and drops its Retry-After header; the transport gives the
    SDK the 429 again, with the wait the adapter asked for (stated in its body)."""
    holder = _hold_the_context(adapter, "no-retry")
    with sdk(runtime, retry=RetryPolicy(max_retries=0)) as client, pytest.raises(TypeSafeRateLimitError) as refused:
        client.system_one(state=TICKET + " (while busy)", questions=QUESTIONS)
    holder.join(timeout=300)
    seen = runtime.seen[-1]
    assert seen.container_status == 429 and "retry-after" in seen.container_headers  # what SageMaker dropped
    assert refused.value.status == 429
    assert refused.value.retry_after_ms == float(seen.container_headers["retry-after"]) * 1000
    assert refused.value.request_id is not None  # SageMaker's request id, for a support case


def test_the_sdks_retry_policy_waits_the_retry_after_and_then_succeeds(
    adapter: AppServer, runtime: SageMakerRuntimeStandIn
) -> None:
    holder = _hold_the_context(adapter, "retried")
    before = len(runtime.seen)
    with sdk(runtime, retry=RetryPolicy(max_retries=5, timeout=120)) as client:
        result = client.system_one(state=TICKET + " (retried)", questions=QUESTIONS)
    holder.join(timeout=300)
    attempts = runtime.seen[before:]
    assert 0.0 <= result.nouls["refund"].noul <= 1.0
    assert [a.container_status for a in attempts][-1] == 200 and attempts[0].container_status == 429
    for refused, following in itertools.pairwise(attempts):
        asked = float(refused.container_headers["retry-after"])
        assert following.at - refused.at >= asked - 0.05  # the SDK waited what the adapter asked, no less


def test_a_413_and_a_422_arrive_as_themselves(runtime: SageMakerRuntimeStandIn) -> None:
    with sdk(runtime, retry=RetryPolicy(max_retries=0)) as client:
        with pytest.raises(TypeSafeAPIError) as too_large:
            client.system_one(state="x" * (BODY_LIMIT + 1), questions=QUESTIONS)
        with pytest.raises(TypeSafeUnprocessableEntityError) as invalid:
            client.system_one(state=TICKET, questions={"anger": Score(instructions="How angry?", criteria=["Calm"])})
    assert too_large.value.status == 413 and too_large.value.body["detail"]["error_type"] == "payload_too_large"
    assert invalid.value.status == 422
    assert [d["loc"][:3] for d in invalid.value.body["detail"]] == [["body", "questions", "anger"]]
    assert [s.container_status for s in runtime.seen[-2:]] == [413, 422]


def test_the_async_sdk_client_through_the_async_transport(runtime: SageMakerRuntimeStandIn) -> None:
    async def noul_async() -> float:
        transport = AsyncSageMakerTransport(ENDPOINT, client=signing_client(runtime))
        async with AsyncTypeSafeClient(
            api_key=SIGV4_PLACEHOLDER_KEY, base_url=base_url(ENDPOINT), transport=transport
        ) as client:
            result = await client.system_one(state=TICKET, questions=QUESTIONS)
        return result.nouls["refund"].noul

    assert 0.0 <= asyncio.run(noul_async()) <= 1.0
    assert runtime.seen[-1].container_status == 200
