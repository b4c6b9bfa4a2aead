"""The adapter's app in the test process: `create_app` behind uvicorn on a thread, over real HTTP on a free port.

What a test of HTTP behaviour needs from the adapter (its routes, status codes, headers, log lines) without a
process start: settings are read from an environment mapping exactly as `serve` reads them (a clean DECISION_* and
SM_LLAMA_CPP_* slate, start_adapter's threads), and the model service is either loaded for this app (`load_service`,
the real GGUF, in this process) or passed in, so that apps with different app-level settings (the API key, the body
limit) share one loaded model. Only what a process alone can show (the `serve` entrypoint, start-up refusals, SIGTERM
drain, cold start) keeps `decision_adapter.launcher.start_adapter`.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import uvicorn
from decision_adapter.app import create_app
from decision_adapter.core.settings import AdapterSettings, RuntimeSettings, load_adapter_settings, runtime_from_env
from decision_adapter.launcher import MODEL_DIR, local_threads
from decision_adapter.loading import load_service
from decision_adapter.serve import JsonFormatter
from decision_adapter.service import ModelService


def gpu_layers() -> int:
    """Layers the test apps offload (TEST_GPU_LAYERS; 0, the CPU, unless a GPU run asks: benchmarks/gpu_run.sh runs
    the decision tests with 999 on a CUDA build)."""
    return int(os.environ.get("TEST_GPU_LAYERS", "0"))


def environment(
    model_dir: Path = MODEL_DIR, env: Mapping[str, str] | None = None, unset: tuple[str, ...] = ()
) -> dict[str, str]:
    """The environment `serve` would see from start_adapter: the caller's without DECISION_*/SM_LLAMA_CPP_*, the
    model directory and start_adapter's threads, then `env`, less `unset`."""
    full = {k: v for k, v in os.environ.items() if not k.startswith(("DECISION_", "SM_LLAMA_CPP_"))}
    full.update({"DECISION_MODEL_DIR": str(model_dir), "SM_LLAMA_CPP_THREADS": local_threads()})
    if gpu_layers():
        full["SM_LLAMA_CPP_N_GPU_LAYERS"] = str(gpu_layers())
    full.update(env or {})
    for name in unset:
        full.pop(name, None)
    return full


def settings_from(full_env: Mapping[str, str]) -> tuple[AdapterSettings, RuntimeSettings]:
    """The adapter's and the runtime's settings from `full_env`, by the functions `serve` calls (SettingsError
    as it raises)."""
    with mock.patch.dict(os.environ, dict(full_env), clear=True):
        return load_adapter_settings(), runtime_from_env()


def load(model_dir: Path = MODEL_DIR, env: Mapping[str, str] | None = None) -> ModelService:
    """A model service on the real GGUF, loaded in this process as the app's lifespan would load it (about 1 s)."""
    return load_service(*settings_from(environment(model_dir, env)))


# Settings only the app reads (app.py's authorize and body limit, bulk's execution parameters, serve's uvicorn
# options): apps that differ in these alone serve the same model service.
APP_LEVEL = frozenset({"api_key", "max_body_bytes", "host", "port", "drain_timeout_s"})
_shared: dict[str, ModelService] = {}


def shared_service(
    model_dir: Path = MODEL_DIR, env: Mapping[str, str] | None = None, unset: tuple[str, ...] = ()
) -> ModelService:
    """The session's one model service for this served configuration (the settings less APP_LEVEL), loaded on first
    use: its counters and state cache are shared by every test that asks for the same configuration."""
    settings, runtime = settings_from(environment(model_dir, env, unset))
    served = settings.model_copy(update=dict.fromkeys(APP_LEVEL))
    key = json.dumps(
        [served.model_dump_json(), sorted(settings.model_fields_set - APP_LEVEL), runtime.model_dump_json()]
    )
    if key not in _shared:
        _shared[key] = load_service(settings, runtime)
    return _shared[key]


def close_shared_services() -> None:
    while _shared:
        _shared.popitem()[1].close()


_serving: contextvars.ContextVar[int] = contextvars.ContextVar("serving")  # the port of the app a thread serves


class _Lines(logging.Handler):
    """The log lines `serve` would print for one app, one JSON object each (its own formatter), kept in memory:
    the records of that app's server thread and of the work it hands to other threads (the context travels)."""

    def __init__(self, port: int) -> None:
        super().__init__(logging.INFO)
        self.setFormatter(JsonFormatter())
        self.port = port
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if _serving.get(None) == self.port:
            self.lines.append(self.format(record))


@dataclass
class AppServer:
    """A running app: its URL, settings and model service, and the log lines written while it ran (`log_lines`, as
    AdapterProcess's); `stop` ends it (and closes the service the app loaded itself)."""

    url: str
    settings: AdapterSettings
    service: ModelService | None  # None only for an app that did not start
    _server: uvicorn.Server = field(repr=False)
    _thread: threading.Thread = field(repr=False)
    _lines: _Lines = field(repr=False)

    def log_lines(self) -> list[dict[str, Any]]:
        out = []
        for line in list(self._lines.lines):
            value = json.loads(line)
            if isinstance(value, dict):
                out.append(value)
        return out

    def log_text(self) -> str:
        return "\n".join(self._lines.lines)

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=60)
        logging.getLogger().removeHandler(self._lines)


def start_app(
    *,
    model_dir: Path = MODEL_DIR,
    env: Mapping[str, str] | None = None,
    unset: tuple[str, ...] = (),
    service: ModelService | None = None,
    shared: bool = False,
) -> AppServer:
    """`create_app` on settings from `env` (as start_adapter's process would read them), served by uvicorn on a
    thread of this process until `stop`. `service`: an already loaded model (never closed here); `shared`: the
    session's service for these settings (shared_service); else the app's lifespan loads one, and closes it when the
    app stops."""
    settings, runtime = settings_from(environment(model_dir, env, unset))
    if shared and service is None:
        service = shared_service(model_dir, env, unset)
    app = create_app(settings, runtime, service)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    lines = _Lines(port)
    # serve's logging: a handler on the root logger, the adapter's and uvicorn's lines at INFO (left so: apps overlap)
    for name in ("decision_adapter", "uvicorn"):
        logging.getLogger(name).setLevel(logging.INFO)
    logging.getLogger().addHandler(lines)
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False, lifespan="on"))

    def run() -> None:
        _serving.set(port)
        server.run(sockets=[sock])

    thread = threading.Thread(target=run, daemon=True, name=f"app-{port}")
    thread.start()
    deadline = time.monotonic() + 120
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    running = AppServer(
        f"http://127.0.0.1:{port}", settings, getattr(app.state, "service", None), server, thread, lines
    )
    if not server.started:
        running.stop()
        raise RuntimeError("the app did not start:\n" + "\n".join(lines.lines))
    return running


@contextlib.contextmanager
def app_server(
    *,
    model_dir: Path = MODEL_DIR,
    env: Mapping[str, str] | None = None,
    unset: tuple[str, ...] = (),
    service: ModelService | None = None,
    shared: bool = False,
) -> Iterator[AppServer]:
    """start_app's server for the block."""
    running = start_app(model_dir=model_dir, env=env, unset=unset, service=service, shared=shared)
    try:
        yield running
    finally:
        running.stop()
