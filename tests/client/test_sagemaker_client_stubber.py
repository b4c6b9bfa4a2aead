"""decision_endpoints_client's calls to AWS, checked without AWS and without the model.

Stand-in, named as such: botocore's Stubber replaces the SageMaker runtime and S3 APIs; each call's parameters
are checked exactly (botocore validates them against the service model too) and never leave the process.
"""

from __future__ import annotations

import gzip
import io
import json

import botocore.session
import httpx2
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber
from decision_endpoints_client import (
    CUSTOM_ATTRIBUTES,
    INFERENCE_ID,
    MAX_REALTIME_PAYLOAD_BYTES,
    TARGET_VARIANT,
    AsyncInferenceEndpoint,
    SageMakerTransport,
)
from decision_endpoints_client.sdk import sagemaker_client
from typesafe_sdk import Noul, RetryPolicy, TypeSafeAPITimeoutError, TypeSafeRateLimitError

ENDPOINT = "decision-dev-cpu"
ANSWER = {
    "model": "m",
    "answers": {"q": {"type": "noul", "noul": 0.8}},
    "usage": {"input_tokens": 3, "output_tokens": 0},
}
BODY = json.dumps({"model": "jev-latest", "state": "s", "questions": {"q": {"type": "noul"}}}).encode()
URL = "https://runtime.sagemaker/endpoints/decision-dev-cpu/v1/systemone"
FAST_RETRY = RetryPolicy(max_retries=2, backoff_initial=0.01, backoff_max=0.01)


def aws_client(service: str):
    # Fixed fake credentials: the Stubber answers, nothing is sent.
    session = botocore.session.get_session()
    session.set_credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    return session.create_client(service, region_name="eu-west-1")


def streaming(data: bytes) -> StreamingBody:
    return StreamingBody(io.BytesIO(data), len(data))


def answered(**extra: str) -> dict:
    return {"Body": streaming(json.dumps(ANSWER).encode()), "ContentType": "application/json", **extra}


def test_invoke_endpoint_request_shape_from_the_requests_headers() -> None:
    client = aws_client("sagemaker-runtime")
    with Stubber(client) as stub:
        stub.add_response(
            "invoke_endpoint",
            answered(InvokedProductionVariant="canary", CustomAttributes="trace=7"),
            expected_params={
                "EndpointName": ENDPOINT,
                "Body": BODY,
                "ContentType": "application/json",
                "Accept": "application/json",
                "CustomAttributes": "trace=7",
                "TargetVariant": "canary",
                "InferenceId": "ticket-4711",
            },
        )
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            CUSTOM_ATTRIBUTES: "trace=7",
            TARGET_VARIANT: "canary",
            INFERENCE_ID: "ticket-4711",
            "Authorization": "Bearer aws-sigv4",  # dropped: SigV4 signs instead
        }
        with httpx2.Client(transport=SageMakerTransport(ENDPOINT, client=client)) as http:
            reply = http.post(URL, content=BODY, headers=headers)
        stub.assert_no_pending_responses()
    assert reply.status_code == 200 and reply.json() == ANSWER
    assert reply.headers["x-amzn-invoked-production-variant"] == "canary"
    assert reply.headers[CUSTOM_ATTRIBUTES] == "trace=7"


def test_the_transports_target_variant_is_the_default_and_unset_parameters_are_left_out() -> None:
    client = aws_client("sagemaker-runtime")
    with Stubber(client) as stub:
        expected = {"EndpointName": ENDPOINT, "Body": BODY, "ContentType": "application/json", "Accept": "*/*"}
        stub.add_response("invoke_endpoint", answered(), expected_params={**expected, "TargetVariant": "shadow"})
        transport = SageMakerTransport(ENDPOINT, client=client, target_variant="shadow")
        with httpx2.Client(transport=transport) as http:
            assert http.post(URL, content=BODY, headers={"Content-Type": "application/json"}).status_code == 200
        stub.assert_no_pending_responses()


def test_throttling_is_a_429_the_sdk_retries() -> None:
    client = aws_client("sagemaker-runtime")
    with Stubber(client) as stub:
        stub.add_client_error(
            "invoke_endpoint",
            service_error_code="ThrottlingException",
            service_message="Rate exceeded",
            http_status_code=400,
        )
        stub.add_response("invoke_endpoint", answered())
        for _ in range(3):
            stub.add_client_error("invoke_endpoint", service_error_code="ThrottlingException", http_status_code=400)
        with sagemaker_client(ENDPOINT, client=client, retry=FAST_RETRY) as sdk:
            first = sdk.system_one(state="s", questions={"q": Noul(instructions="?")})
            with pytest.raises(TypeSafeRateLimitError) as refused:
                sdk.system_one(state="s", questions={"q": Noul(instructions="?")})
        stub.assert_no_pending_responses()  # 1 throttle + answer, then 3 throttles: max_retries=2 used up
    assert first.nouls["q"].noul == 0.8
    assert refused.value.status == 429 and refused.value.body["detail"]["error_type"] == "ThrottlingException"


def test_sagemaker_errors_map_to_the_statuses_clients_expect() -> None:
    client = aws_client("sagemaker-runtime")
    cases = [
        ("ModelNotReadyException", 429, "not ready", 503),
        ("ServiceUnavailable", 503, "unavailable", 503),
        ("InternalFailure", 500, "internal", 500),
        ("ValidationError", 400, "Endpoint nope of account 123 not found.", 400),
        ("ValidationError", 400, "Request payload size exceeds the limit.", 413),
        ("AccessDeniedException", 400, "not authorized to perform: sagemaker:InvokeEndpoint", 403),
    ]
    with Stubber(client) as stub:
        for code, http_status, message, _ in cases:
            stub.add_client_error(
                "invoke_endpoint", service_error_code=code, service_message=message, http_status_code=http_status
            )
        with httpx2.Client(transport=SageMakerTransport(ENDPOINT, client=client)) as http:
            statuses = [http.post(URL, content=BODY).status_code for _ in cases]
    assert statuses == [want for *_, want in cases]


def test_a_model_error_gives_the_containers_status_body_and_wait() -> None:
    client = aws_client("sagemaker-runtime")
    overloaded = json.dumps({"detail": {"error_type": "overloaded", "message": "at capacity; retry after 3 s"}})
    with Stubber(client) as stub:
        stub.add_client_error(
            "invoke_endpoint",
            service_error_code="ModelError",
            http_status_code=424,
            service_message="Received client error (429) from primary",
            modeled_fields={"OriginalStatusCode": 429, "OriginalMessage": overloaded, "LogStreamArn": "arn:log"},
        )
        with httpx2.Client(transport=SageMakerTransport(ENDPOINT, client=client)) as http:
            reply = http.post(URL, content=BODY)
    assert (reply.status_code, reply.text, reply.headers["retry-after"]) == (429, overloaded, "3")
    assert reply.headers["x-amzn-sagemaker-log-stream-arn"] == "arn:log"


def test_sagemakers_invocation_timeout_is_the_sdks_timeout() -> None:
    """SageMaker reports a container that never answered (its 60 s) as a ModelError with status 0."""
    client = aws_client("sagemaker-runtime")
    with Stubber(client) as stub:
        stub.add_client_error(
            "invoke_endpoint",
            service_error_code="ModelError",
            http_status_code=424,
            service_message="Your invocation timed out while waiting for a response from container primary.",
            modeled_fields={"OriginalStatusCode": 0},
        )
        sdk = sagemaker_client(ENDPOINT, client=client, retry=RetryPolicy(max_retries=0))
        with sdk, pytest.raises(TypeSafeAPITimeoutError):
            sdk.system_one(state="s", questions={"q": Noul(instructions="?")})
        stub.assert_no_pending_responses()


def test_a_body_over_sagemakers_limit_and_an_unreachable_route_are_answered_without_a_call() -> None:
    client = aws_client("sagemaker-runtime")
    with Stubber(client), httpx2.Client(transport=SageMakerTransport(ENDPOINT, client=client)) as http:
        too_large = http.post(URL, content=b"x" * (MAX_REALTIME_PAYLOAD_BYTES + 1))
        models = http.get("https://runtime.sagemaker/endpoints/decision-dev-cpu/v1/models")
    assert too_large.status_code == 413 and too_large.json()["detail"]["error_type"] == "payload_too_large"
    assert models.status_code == 404 and "InvokeEndpoint only posts" in models.json()["detail"]["message"]


def _async_endpoint(runtime, s3, **options) -> AsyncInferenceEndpoint:
    return AsyncInferenceEndpoint(
        ENDPOINT,
        input_location="s3://bucket/async/input/",
        runtime=runtime,
        s3=s3,
        sleep=lambda s: None,
        object_name=lambda: "req-1.json",
        **options,
    )


def _queued(runtime_stub: Stubber, **expected: object) -> None:
    runtime_stub.add_response(
        "invoke_endpoint_async",
        {
            "InferenceId": "ticket-4711",
            "OutputLocation": "s3://bucket/async/output/ticket-4711.out",
            "FailureLocation": "s3://bucket/async/failure/ticket-4711-error.out",
        },
        expected_params={
            "EndpointName": ENDPOINT,
            "InputLocation": "s3://bucket/async/input/req-1.json",
            "ContentType": "application/json",
            "Accept": "application/json",
            **expected,
        },
    )


def _missing(s3_stub: Stubber, key: str) -> None:
    s3_stub.add_client_error(
        "get_object",
        service_error_code="NoSuchKey",
        http_status_code=404,
        expected_params={"Bucket": "bucket", "Key": key},
    )


def test_invoke_endpoint_async_puts_the_body_queues_it_and_reads_the_answer() -> None:
    runtime, s3 = aws_client("sagemaker-runtime"), aws_client("s3")
    with Stubber(runtime) as runtime_stub, Stubber(s3) as s3_stub:
        put = {"Bucket": "bucket", "Key": "async/input/req-1.json", "Body": BODY, "ContentType": "application/json"}
        s3_stub.add_response("put_object", {}, expected_params=put)
        _queued(runtime_stub, CustomAttributes="trace=7", InferenceId="ticket-4711", InvocationTimeoutSeconds=600)
        _missing(s3_stub, "async/output/ticket-4711.out")
        _missing(s3_stub, "async/failure/ticket-4711-error.out")
        s3_stub.add_response(
            "get_object",
            {"Body": streaming(json.dumps(ANSWER).encode()), "ContentType": "application/json"},
            expected_params={"Bucket": "bucket", "Key": "async/output/ticket-4711.out"},
        )
        s3_stub.add_response("delete_object", {}, expected_params={"Bucket": "bucket", "Key": "async/input/req-1.json"})
        endpoint = _async_endpoint(runtime, s3, invocation_timeout_s=600)
        headers = {"Content-Type": "application/json", CUSTOM_ATTRIBUTES: "trace=7", INFERENCE_ID: "ticket-4711"}
        with httpx2.Client(transport=SageMakerTransport(invoker=endpoint)) as http:
            reply = http.post(URL, content=BODY, headers={**headers, "Accept": "application/json"})
        runtime_stub.assert_no_pending_responses()
        s3_stub.assert_no_pending_responses()
    assert reply.status_code == 200 and reply.json() == ANSWER
    assert reply.headers[INFERENCE_ID] == "ticket-4711"


def test_a_failed_async_invocation_is_not_retried_and_a_throttle_is() -> None:
    runtime, s3 = aws_client("sagemaker-runtime"), aws_client("s3")
    with Stubber(runtime) as runtime_stub, Stubber(s3) as s3_stub:
        s3_stub.add_response("put_object", {})
        _queued(runtime_stub)
        _missing(s3_stub, "async/output/ticket-4711.out")
        s3_stub.add_response("get_object", {"Body": streaming(b"container returned 422"), "ContentType": "text/plain"})
        s3_stub.add_response("delete_object", {})
        s3_stub.add_response("put_object", {})
        runtime_stub.add_client_error("invoke_endpoint_async", service_error_code="ThrottlingException")
        s3_stub.add_response("delete_object", {})
        with httpx2.Client(transport=SageMakerTransport(invoker=_async_endpoint(runtime, s3))) as http:
            failed = http.post(
                URL, content=BODY, headers={"Content-Type": "application/json", "Accept": "application/json"}
            )
            throttled = http.post(
                URL, content=BODY, headers={"Content-Type": "application/json", "Accept": "application/json"}
            )
        s3_stub.assert_no_pending_responses()
    assert failed.status_code == 424 and failed.json()["detail"]["message"] == "container returned 422"
    assert throttled.status_code == 429


def test_a_compressed_body_is_sent_decompressed_and_an_unknown_encoding_is_refused() -> None:
    """InvokeEndpoint carries no Content-Encoding, so the container must get the body as the SDK meant it."""
    client = aws_client("sagemaker-runtime")
    with Stubber(client) as stub:
        expected = {"EndpointName": ENDPOINT, "Body": BODY, "ContentType": "application/json", "Accept": "*/*"}
        stub.add_response("invoke_endpoint", answered(), expected_params=expected)
        with httpx2.Client(transport=SageMakerTransport(ENDPOINT, client=client)) as http:
            plain = http.post(URL, content=gzip.compress(BODY), headers={"Content-Encoding": "gzip"})
            unknown = http.post(URL, content=BODY, headers={"Content-Encoding": "br"})
        stub.assert_no_pending_responses()
    assert plain.status_code == 200
    assert unknown.status_code == 415 and unknown.json()["detail"]["error_type"] == "unsupported_content_encoding"
