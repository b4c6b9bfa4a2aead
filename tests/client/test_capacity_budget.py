"""The capacity waiter's budget holds when each refused call takes longer than the interval (issue 43): a slow
upload of a large body, or a short interval. Through the real botocore client, stubbed (Stubber), each refused
round trip moving a frozen clock by its duration (an `after-call` hook on the client's own events); before the
fix each gap between refusals (interval + call) exceeded twice the interval, every refusal started a new episode,
and the call never stopped (16 s calls at 15 s: 646 sends over 20,000 s and still waiting)."""

from __future__ import annotations

import json
from typing import Any

import botocore.session
import pytest
from botocore.stub import Stubber
from decision_endpoints_client import NO_CAPACITY, CapacityWait, Invocation, RealTimeEndpoint

ENDPOINT, COMPONENT = "decision-dev-cpu", "decision-dev-cpu-model"
BODY = json.dumps({"model": "jev-latest", "state": "s", "questions": {"q": {"type": "noul"}}}).encode()
NO_CAPACITY_MESSAGE = "Inference Component has no capacity to process this request."


class SlowCalls:
    """A frozen clock that sleeping and each call to SageMaker move."""

    def __init__(self, call_s: float) -> None:
        self.now, self.call_s, self.sends = 0.0, call_s, 0

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def after_call(self, **_: Any) -> None:
        self.now += self.call_s
        self.sends += 1


def slow_endpoint(clock: SlowCalls, *, budget_s: float, interval_s: float, refusals: int) -> tuple[Any, Stubber]:
    session = botocore.session.get_session()
    session.set_credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")  # fixed fakes: nothing is sent
    client = session.create_client("sagemaker-runtime", region_name="us-west-2")
    client.meta.events.register("after-call.sagemaker-runtime.InvokeEndpoint", clock.after_call)
    stub = Stubber(client)
    for _ in range(refusals):
        stub.add_client_error(
            "invoke_endpoint",
            service_error_code="ValidationError",
            service_message=NO_CAPACITY_MESSAGE,
            http_status_code=400,
        )
    wait = CapacityWait(budget_s=budget_s, interval_s=interval_s, sleep=clock.sleep, clock=lambda: clock.now)
    endpoint = RealTimeEndpoint(ENDPOINT, client=client, inference_component=COMPONENT, capacity_wait=wait)
    return endpoint, stub


@pytest.mark.parametrize(("call_s", "interval_s"), [(16.0, 15.0), (40.0, 15.0), (3.0, 1.0)])
def test_the_budget_holds_when_each_refused_call_is_slower_than_the_interval(call_s: float, interval_s: float) -> None:
    clock = SlowCalls(call_s)
    budget = 600.0
    endpoint, stub = slow_endpoint(clock, budget_s=budget, interval_s=interval_s, refusals=1000)
    with stub:
        spent = endpoint.invoke(Invocation(BODY))
    assert spent.status == 503 and json.loads(spent.body)["detail"]["error_type"] == NO_CAPACITY
    # the wait stops once its own elapsed time reaches the budget: at most one more pause and one more call
    assert budget <= clock.now <= budget + interval_s + call_s, clock.now
    assert spent.sends == clock.sends <= budget / interval_s + 1
    assert spent.sends >= budget // (interval_s + call_s)  # it did wait, one send per interval and call
    assert f"budget {budget:.0f} s" in json.loads(spent.body)["detail"]["message"]


def test_a_retry_right_after_a_spent_slow_wait_is_refused_at_once() -> None:
    clock = SlowCalls(16.0)
    endpoint, stub = slow_endpoint(clock, budget_s=120.0, interval_s=15.0, refusals=1000)
    with stub:
        first = endpoint.invoke(Invocation(BODY))
        again = endpoint.invoke(Invocation(BODY))
    assert first.status == 503 and again.status == 503
    assert again.sends == 1  # the episode's budget is spent: the retry is one slow send, not another 120 s
