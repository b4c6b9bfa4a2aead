"""The official SDK's clients, and the `openai` SDK's, made ready for a SageMaker endpoint: the transport, a
placeholder API key (SigV4 signs instead) and a base URL that names the endpoint in the SDK's logs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from decision_endpoints_client.transports import ENDPOINT_OPTIONS, AsyncSageMakerTransport, SageMakerTransport

if TYPE_CHECKING:
    from decision_endpoints_client.bearer_token import BearerToken

# The SDK insists on a key; SageMaker strips the Authorization header it becomes and checks SigV4 instead.
SIGV4_PLACEHOLDER_KEY = "aws-sigv4"


def base_url(endpoint_name: str) -> str:
    """Not dialled (the transport sends through botocore); it names the endpoint in the SDK's log lines."""
    return f"https://runtime.sagemaker/endpoints/{endpoint_name}"


def sagemaker_client(endpoint_name: str, *, region: str | None = None, **options: Any) -> Any:
    """A `typesafe_sdk.TypeSafeClient` whose calls go to the endpoint; `options` are the SDK client's own
    (retry, model, headers, ...) plus the transport's (transports.EndpointOptions: target_variant,
    async_input_location, client, inference_component, capacity_wait, ...)."""
    from typesafe_sdk import TypeSafeClient

    transport, options = _split(SageMakerTransport, endpoint_name, region, options, base_url(endpoint_name))
    return TypeSafeClient(transport=transport, **options)


def async_sagemaker_client(endpoint_name: str, *, region: str | None = None, **options: Any) -> Any:
    """As `sagemaker_client`, a `typesafe_sdk.AsyncTypeSafeClient`."""
    from typesafe_sdk import AsyncTypeSafeClient

    transport, options = _split(AsyncSageMakerTransport, endpoint_name, region, options, base_url(endpoint_name))
    return AsyncTypeSafeClient(transport=transport, **options)


def openai_client(endpoint_name: str, *, region: str | None = None, **options: Any) -> Any:
    """An `openai.OpenAI` whose `decisions.create(...)` goes to the endpoint through InvokeEndpoint: the transport
    in an httpx2 client (`http_client=`); `options` are the OpenAI client's own (max_retries, timeout, ...) plus the
    transport's. The SDK's retry reads the Retry-After the transport recovers from a ModelError."""
    import httpx2
    from openai import OpenAI

    transport, options = _split(SageMakerTransport, endpoint_name, region, options, openai_base_url(endpoint_name))
    return OpenAI(http_client=httpx2.Client(transport=transport), **options)


def async_openai_client(endpoint_name: str, *, region: str | None = None, **options: Any) -> Any:
    """As `openai_client`, an `openai.AsyncOpenAI` over the async transport."""
    import httpx2
    from openai import AsyncOpenAI

    transport, options = _split(AsyncSageMakerTransport, endpoint_name, region, options, openai_base_url(endpoint_name))
    return AsyncOpenAI(http_client=httpx2.AsyncClient(transport=transport), **options)


def _split(
    transport_class: type[SageMakerTransport] | type[AsyncSageMakerTransport],
    endpoint_name: str,
    region: str | None,
    options: dict[str, Any],
    default_base_url: str,
) -> tuple[Any, dict[str, Any]]:
    """The transport built from its options, and the client's own options with the placeholder key and the base
    URL filled in where the caller gave none."""
    transport_options = {k: options.pop(k) for k in ENDPOINT_OPTIONS if k in options and k != "region"}
    transport = transport_class(endpoint_name, region=region, **transport_options)
    return transport, {"api_key": SIGV4_PLACEHOLDER_KEY, "base_url": default_base_url, **options}


def openai_base_url(endpoint_name: str) -> str:
    """The OpenAI SDK's base URL (it appends /decisions): not dialled either."""
    return f"{base_url(endpoint_name)}/v1"


def openai_route_client(endpoint_name: str, region: str, *, token: BearerToken | None = None, **options: Any) -> Any:
    """An `openai.OpenAI` for the endpoint's OpenAI-compatible route with bearer tokens (chat completions only:
    SageMaker routes nothing else there); `options` are the OpenAI client's own."""
    import httpx2
    from openai import OpenAI

    from decision_endpoints_client.bearer_token import BearerAuth, BearerToken, openai_route_base_url

    auth = BearerAuth(token or BearerToken(region))
    return OpenAI(
        api_key="sagemaker-bearer-token",  # replaced on every request by the auth flow
        base_url=options.pop("base_url", openai_route_base_url(endpoint_name, region)),
        http_client=httpx2.Client(auth=auth),
        **options,
    )
