"""A components endpoint through the client package (stand-in, named as such: botocore's Stubber plays the SageMaker
runtime, checks every request's parameters exactly and sends nothing): the component named on every call, and a call
at zero that waits through SageMaker's no-capacity refusals within its budget, with the sends it took reported.

The refusal is botocore's shape for it: a ClientError with code ValidationError, HTTP 400, and SageMaker's message
(quoted as SageMaker writes it in the scale-to-zero material AWS and others published)."""

from __future__ import annotations

import io
import json
from typing import Any

import botocore.session
import httpx2
import pytest
from botocore.response import StreamingBody
from botocore.stub import ANY, Stubber
from decision_endpoints_client import (
    INFERENCE_COMPONENT,
    NO_CAPACITY,
    CapacityProgress,
    CapacityWait,
    Invocation,
    RealTimeEndpoint,
    SageMakerTransport,
)
from decision_endpoints_client.bearer_token import openai_route_base_url
from decision_endpoints_client.sdk import sagemaker_client
from typesafe_sdk import Noul, RetryPolicy, TypeSafeAPIError

ENDPOINT, COMPONENT = "decision-dev-cpu", "decision-dev-cpu-model"
NO_CAPACITY_MESSAGE = (
    "Inference Component has no capacity to process this request. ApplicationAutoScaling may be in-progress (if "
    "configured) or try to increase the capacity by invoking UpdateInferenceComponentRuntimeConfig API."
)
ANSWER = {
    "model": "m",
    "answers": {"q": {"type": "noul", "noul": 0.8}},
    "usage": {"input_tokens": 3, "output_tokens": 0},
}
BODY = json.dumps({"model": "jev-latest", "state": "s", "questions": {"q": {"type": "noul"}}}).encode()
URL = f"https://runtime.sagemaker/endpoints/{ENDPOINT}/v1/systemone"
EXPECTED = {
    "EndpointName": ENDPOINT,
    "Body": BODY,
    "ContentType": "application/json",
    "Accept": "application/json",
    "InferenceComponentName": COMPONENT,
}


def runtime() -> Any:
    session = botocore.session.get_session()
    session.set_credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")  # fixed fakes: nothing is sent
    return session.create_client("sagemaker-runtime", region_name="us-west-2")


def answered() -> dict[str, Any]:
    data = json.dumps(ANSWER).encode()
    return {"Body": StreamingBody(io.BytesIO(data), len(data)), "ContentType": "application/json"}


def refuse(stub: Stubber, times: int, expected: dict[str, Any] = EXPECTED) -> None:
    for _ in range(times):
        stub.add_client_error(
            "invoke_endpoint",
            service_error_code="ValidationError",
            service_message=NO_CAPACITY_MESSAGE,
            http_status_code=400,
            expected_params=expected,
        )


class FrozenTime:
    """The wait's clock and sleep: sleeping moves the clock, nothing really waits."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []
        self.progress: list[CapacityProgress] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def wait(self, budget_s: float, interval_s: float = 15.0) -> CapacityWait:
        return CapacityWait(
            budget_s=budget_s,
            interval_s=interval_s,
            on_wait=self.progress.append,
            sleep=self.sleep,
            clock=lambda: self.now,
        )


def test_a_component_is_named_on_every_call_by_the_endpoint_or_the_request() -> None:
    client = runtime()
    with Stubber(client) as stub:
        stub.add_response("invoke_endpoint", answered(), expected_params=EXPECTED)
        stub.add_response("invoke_endpoint", answered(), expected_params=EXPECTED)
        transport = SageMakerTransport(ENDPOINT, client=client, inference_component=COMPONENT)
        with httpx2.Client(transport=transport) as http:
            headers = {"content-type": "application/json", "accept": "application/json"}
            assert http.post(URL, content=BODY, headers=headers).status_code == 200
        plain = RealTimeEndpoint(ENDPOINT, client=client)  # the component from the request's own header
        headers = {"content-type": "application/json", "accept": "application/json", INFERENCE_COMPONENT: COMPONENT}
        assert plain.invoke(Invocation.from_headers(BODY, headers)).status == 200
        stub.assert_no_pending_responses()


def test_a_call_at_zero_waits_through_the_refusals_and_is_answered() -> None:
    time = FrozenTime()
    client = runtime()
    with Stubber(client) as stub:
        refuse(stub, 4)
        stub.add_response("invoke_endpoint", answered(), expected_params=EXPECTED)
        endpoint = RealTimeEndpoint(
            ENDPOINT, client=client, inference_component=COMPONENT, capacity_wait=time.wait(budget_s=600)
        )
        answer = endpoint.invoke(Invocation(BODY))
        stub.assert_no_pending_responses()
    assert answer.status == 200 and json.loads(answer.body) == ANSWER
    assert answer.sends == 5  # one accepted decision, five sends: four refusals a fixed 15 s apart, then the answer
    assert time.sleeps == [15.0, 15.0, 15.0, 15.0]
    assert [p.sends for p in time.progress] == [1, 2, 3, 4]
    assert time.progress[-1] == CapacityProgress(f"sagemaker:{ENDPOINT}/{COMPONENT}", 45.0, 600, 4)
    assert time.progress[-1].line() == (
        f"sagemaker:{ENDPOINT}/{COMPONENT}: no capacity yet (scaling from zero); waited 45 s of 600 s, 4 send(s)"
    )


def test_the_budget_is_respected_and_a_spent_wait_is_refused_at_once() -> None:
    time = FrozenTime()
    client = runtime()
    with Stubber(client) as stub:
        refuse(stub, 4 + 1)  # 40 s of budget at 15 s: sends at 0, 15, 30 and 40 s; then one more call
        endpoint = RealTimeEndpoint(
            ENDPOINT, client=client, inference_component=COMPONENT, capacity_wait=time.wait(budget_s=40)
        )
        spent = endpoint.invoke(Invocation(BODY))
        assert sum(time.sleeps) == 40.0 and time.sleeps == [15.0, 15.0, 10.0]
        assert spent.status == 503 and spent.sends == 4
        detail = json.loads(spent.body)["detail"]
        assert detail["error_type"] == NO_CAPACITY
        assert "no capacity after 40 s of waiting (budget 40 s; this call 4 send(s))" in detail["message"]
        time.now += 2.0  # a retry policy asking again at once: the episode's budget is spent, no second wait
        again = endpoint.invoke(Invocation(BODY))
        assert again.status == 503 and again.sends == 1 and sum(time.sleeps) == 40.0
        stub.assert_no_pending_responses()


def test_no_waiting_answers_the_refusal_at_once() -> None:
    client = runtime()
    with Stubber(client) as stub:
        refuse(stub, 1)
        endpoint = RealTimeEndpoint(ENDPOINT, client=client, inference_component=COMPONENT, capacity_wait=None)
        answer = endpoint.invoke(Invocation(BODY))
        stub.assert_no_pending_responses()
    assert answer.status == 503 and json.loads(answer.body)["detail"]["error_type"] == NO_CAPACITY


@pytest.mark.parametrize("max_retries", [0, 2])
def test_the_sdk_waits_once_and_its_retries_cost_one_send_each(max_retries: int) -> None:
    """Through the official SDK: its retry policy retries the spent wait's 503, each retry one send, not another
    budget; sends per call stay within budget / interval + 1 + retries."""
    time = FrozenTime()
    client = runtime()
    with Stubber(client) as stub:
        # budget 30 s at 15 s: sends at 0, 15 and 30 s; the body is the SDK's own
        refuse(stub, 3 + max_retries, {**EXPECTED, "Body": ANY})
        sdk = sagemaker_client(
            ENDPOINT,
            client=client,
            inference_component=COMPONENT,
            capacity_wait=time.wait(budget_s=30),
            retry=RetryPolicy(max_retries=max_retries, backoff_initial=0.0, backoff_max=0.0),
        )
        with sdk, pytest.raises(TypeSafeAPIError) as caught:
            sdk.system_one(state="s", questions={"q": Noul(instructions="Refund?")})
        stub.assert_no_pending_responses()
    assert caught.value.status == 503 and caught.value.body["detail"]["error_type"] == NO_CAPACITY
    assert sum(time.sleeps) == 30.0  # one budget, whatever the retries


def test_the_openai_route_of_a_component_has_its_own_path() -> None:
    assert openai_route_base_url(ENDPOINT, "us-west-2", COMPONENT) == (
        f"https://runtime.sagemaker.us-west-2.amazonaws.com/endpoints/{ENDPOINT}/inference-components/{COMPONENT}"
        "/openai/v1"
    )
    assert openai_route_base_url(ENDPOINT, "us-west-2").endswith(f"/endpoints/{ENDPOINT}/openai/v1")
