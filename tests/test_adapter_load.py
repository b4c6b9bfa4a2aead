"""The adapter under load, on the real SmolLM2 model over real HTTP: threads split across the contexts, and a
413 that reaches a client which sends its whole body before reading.

One adapter for the module, started on the adapter's own thread default (no SM_LLAMA_CPP_THREADS), with a
1 MiB body limit.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator

import httpx
import pytest
from decision_adapter.settings import runtime_from_env, threads_per_context

from tests.conftest import AdapterProcess, require_model, start_adapter

TICKET = "I was charged twice for my March invoice and the refund has not arrived."
NOUL = {"type": "noul", "instructions": "Is the customer asking for money back?"}
DECISION = {"model": "jev-latest", "state": TICKET, "questions": {"refund": NOUL}}
CONTEXTS = 1
BODY_LIMIT = 1 << 20
MODULE_ENV = {"DECISION_MAX_CONCURRENCY": str(CONTEXTS), "DECISION_MAX_BODY_BYTES": str(BODY_LIMIT)}


@pytest.fixture(scope="module")
def adapter(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdapterProcess]:
    require_model()
    proc = start_adapter(tmp_path_factory.mktemp("load"), env=MODULE_ENV, unset=("SM_LLAMA_CPP_THREADS",))
    yield proc
    proc.stop()


def post(adapter: AdapterProcess, body: dict[str, object], timeout: float = 120) -> httpx.Response:
    return httpx.post(adapter.url + "/v1/systemone", json=body, timeout=timeout)


# -- threads


def test_threads_split_the_cores_across_the_contexts() -> None:
    assert [threads_per_context(n, cores=8) for n in (1, 2, 3, 8, 16)] == [8, 4, 2, 1, 1]
    cores = len(os.sched_getaffinity(0))
    kwargs = runtime_from_env({}).llama_kwargs(4096, contexts=2)
    assert kwargs["n_threads"] == kwargs["n_threads_batch"] == max(1, cores // 2)
    with pytest.raises(ValueError, match="context"):
        threads_per_context(0, cores=8)


def test_explicit_threads_win_and_batch_threads_follow_them() -> None:
    kwargs = runtime_from_env({"SM_LLAMA_CPP_THREADS": "3"}).llama_kwargs(4096, contexts=4)
    assert (kwargs["n_threads"], kwargs["n_threads_batch"]) == (3, 3)
    both = runtime_from_env({"SM_LLAMA_CPP_THREADS": "3", "SM_LLAMA_CPP_THREADS_BATCH": "5"})
    assert (both.llama_kwargs(4096, contexts=4)["n_threads"], both.llama_kwargs(4096)["n_threads_batch"]) == (3, 5)


def test_run_identity_reports_the_default_split(adapter: AdapterProcess) -> None:
    r = post(adapter, DECISION)
    assert r.status_code == 200, r.text
    expected = threads_per_context(CONTEXTS)
    assert r.json()["x_run"]["hardware"]["threads"] == expected
    ready = next(line for line in adapter.log_lines() if line.get("event") == "ready")
    assert ready["identity"]["hardware"]["threads"] == expected  # type: ignore[index]


# -- 413 on a plain client


def _chunks(size: int) -> Iterable[bytes]:
    for start in range(0, size, 1 << 16):
        yield b" " * min(1 << 16, size - start)


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_body_over_the_limit_gets_its_413_on_a_client_that_sends_it_all_first(
    adapter: AdapterProcess, framing: str
) -> None:
    """urllib writes the whole body before it reads and asks for Connection: close; a 2 MiB body against a 1 MiB
    limit was answered unread, and the socket closed on unread data reset the connection (Broken pipe) instead."""
    size = 2 * BODY_LIMIT
    data: bytes | Iterable[bytes] = b" " * size if framing == "content-length" else _chunks(size)
    request = urllib.request.Request(  # noqa: S310 - the adapter's own http:// URL
        adapter.url + "/invocations", data=data, headers={"Content-Type": "application/json"}, method="POST"
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=60)  # noqa: S310 - as above
    assert caught.value.code == 413
    assert json.loads(caught.value.read())["detail"]["error_type"] == "payload_too_large"
    assert post(adapter, DECISION).status_code == 200  # and the adapter serves on
