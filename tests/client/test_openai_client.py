"""The `openai` SDK's Decisions API (client.decisions.create) through decision_endpoints_client's SageMaker transport.

Stand-ins, named as such: botocore's Stubber replaces the SageMaker runtime API in the first tests (each
InvokeEndpoint call's parameters checked exactly, nothing leaves the process); `SageMakerRuntimeStandIn`
(tests/sagemaker_runtime_standin.py) plays the runtime in front of the real adapter on the real SmolLM2 model
over HTTP in the others (SigV4 headers' form checked, every non-2xx wrapped as a ModelError).
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Iterator
from typing import Any

import botocore.config
import botocore.session
import openai
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber
from decision_endpoints_client import async_openai_client, openai_client
from decision_endpoints_client.sdk import SIGV4_PLACEHOLDER_KEY

from tests.app_support import AppServer, start_app
from tests.conftest import require_model
from tests.sagemaker_runtime_standin import AUTHORIZATION, SageMakerRuntimeStandIn

ENDPOINT, REGION = "decision-test-cpu", "eu-west-1"
TICKET = "I was charged twice for my March invoice and the refund has not arrived."
QUESTIONS: list[Any] = [
    {"type": "predicate", "name": "refund", "instructions": "Is the customer asking for money back?"},
    {"type": "choice", "name": "paid", "instructions": "Is it paid?", "choices": [{"value": True}, {"value": "true"}]},
]
DECISION = {
    "model": "m",
    "answers": [{"type": "predicate", "name": "refund", "probability": 0.75}],
    "usage": {
        "input_tokens": 9,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 5},
        "output_tokens": 0,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 9,
    },
}


class JsonBody:
    """An expected InvokeEndpoint Body: equal to bytes that parse to this JSON (the SDK's spacing is its own)."""

    def __init__(self, expected: Any) -> None:
        self.expected = expected

    def __eq__(self, other: object) -> bool:
        return isinstance(other, bytes) and json.loads(other) == self.expected

    def __hash__(self) -> int:
        return hash(json.dumps(self.expected, sort_keys=True))

    def __repr__(self) -> str:
        return f"JsonBody({self.expected!r})"


def stubbed_runtime() -> Any:
    session = botocore.session.get_session()
    session.set_credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")  # fixed fake: nothing is sent
    return session.create_client("sagemaker-runtime", region_name=REGION)


def test_decisions_create_is_one_invoke_endpoint_call_of_the_sdks_body() -> None:
    runtime = stubbed_runtime()
    body = json.dumps(DECISION).encode()
    with Stubber(runtime) as stub:
        stub.add_response(
            "invoke_endpoint",
            {"Body": StreamingBody(io.BytesIO(body), len(body)), "ContentType": "application/json"},
            expected_params={
                "EndpointName": ENDPOINT,
                "Body": JsonBody({"model": "jev-latest", "input": TICKET, "questions": QUESTIONS[:1]}),
                "ContentType": "application/json",
                "Accept": "application/json",
            },
        )
        client = openai_client(ENDPOINT, client=runtime, max_retries=0)
        decision = client.decisions.create(model="jev-latest", input=TICKET, questions=QUESTIONS[:1])
        stub.assert_no_pending_responses()
    assert decision.answers[0].probability == 0.75 and decision.usage.input_tokens_details.cache_write_tokens == 5  # type: ignore[union-attr]


def test_a_model_error_in_openais_envelope_is_the_sdks_rate_limit_error_with_its_wait() -> None:
    runtime = stubbed_runtime()
    overloaded = {
        "error": {"message": "at capacity; retry after 3 s", "type": "rate_limit_error", "code": "overloaded"}
    }
    with Stubber(runtime) as stub:
        stub.add_client_error(
            "invoke_endpoint",
            service_error_code="ModelError",
            http_status_code=424,
            service_message="Received client error (429) from primary",
            modeled_fields={"OriginalStatusCode": 429, "OriginalMessage": json.dumps(overloaded)},
        )
        client = openai_client(ENDPOINT, client=runtime, max_retries=0)
        with pytest.raises(openai.RateLimitError) as refused:
            client.decisions.create(model="jev-latest", input=TICKET, questions=QUESTIONS[:1])
    assert refused.value.response.headers["retry-after"] == "3"
    assert refused.value.body == overloaded["error"]


@pytest.fixture(scope="module")
def adapter(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppServer]:
    require_model()
    proc = start_app(env={"DECISION_CHAT_CONTEXTS": "0"}, shared=True)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def standin(adapter: AppServer) -> Iterator[SageMakerRuntimeStandIn]:
    runtime = SageMakerRuntimeStandIn(adapter.url, endpoint=ENDPOINT, region=REGION, variants=("AllTraffic",))
    yield runtime
    runtime.close()


def signing_client(standin: SageMakerRuntimeStandIn) -> Any:
    session = botocore.session.get_session()
    session.set_credentials("AKIDEXAMPLESTANDIN", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    config = botocore.config.Config(retries={"total_max_attempts": 1}, read_timeout=70)
    return session.create_client("sagemaker-runtime", region_name=REGION, endpoint_url=standin.url, config=config)


@pytest.mark.model
def test_the_sdk_reaches_the_endpoint_sync_and_async_with_the_direct_answer(
    adapter: AppServer, standin: SageMakerRuntimeStandIn
) -> None:
    before = len(standin.seen)
    through = openai_client(ENDPOINT, client=signing_client(standin)).decisions.create(
        model="jev-latest", input=TICKET, questions=QUESTIONS
    )

    async def create_async() -> Any:
        client = async_openai_client(ENDPOINT, client=signing_client(standin))
        return await client.decisions.create(model="jev-latest", input=TICKET, questions=QUESTIONS)

    asynchronous = asyncio.run(create_async())
    direct = openai.OpenAI(base_url=f"{adapter.url}/v1", api_key="unused").decisions.create(
        model="jev-latest", input=TICKET, questions=QUESTIONS
    )
    for decision in (through, asynchronous):
        assert [a.type for a in decision.answers] == ["predicate", "choice"]
        assert decision.answers[0].probability == pytest.approx(direct.answers[0].probability, abs=1e-9)  # type: ignore[union-attr]
        probs = decision.answers[1].probabilities  # type: ignore[union-attr]
        assert [(p.value, type(p.value)) for p in probs] == [(True, bool), ("true", str)]
        assert [p.probability for p in probs] == pytest.approx(
            [p.probability for p in direct.answers[1].probabilities],  # type: ignore[union-attr]
            abs=1e-9,
        )
    seen = standin.seen[before:]
    assert [s.path for s in seen] == [f"/endpoints/{ENDPOINT}/invocations"] * 2
    assert all(AUTHORIZATION.fullmatch(s.headers["authorization"]) for s in seen)  # SigV4, not the placeholder
    assert SIGV4_PLACEHOLDER_KEY not in json.dumps([s.headers for s in seen])


@pytest.mark.model
def test_the_containers_errors_arrive_as_the_sdks_classes(standin: SageMakerRuntimeStandIn) -> None:
    client = openai_client(ENDPOINT, client=signing_client(standin), max_retries=0)
    with pytest.raises(openai.NotFoundError) as missing:
        client.decisions.create(model="gpt-6-luna", input=TICKET, questions=QUESTIONS[:1])
    assert missing.value.body["code"] == "model_not_found"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as bad:
        client.decisions.create(model="jev-latest", input=TICKET, questions=[])
    assert bad.value.body["param"] == "questions"  # type: ignore[index]
    assert standin.seen[-1].container_status == 400  # the container's own 400, through a ModelError
