"""`serve`: the container entrypoint SageMaker runs (`docker run <image> serve`).

Reads settings once, logs what it ignores, loads and verifies the model in the app's lifespan
(a checksum mismatch stops start-up with a non-zero exit and a log line naming the file and both
checksums), then serves on 8080 (or SAGEMAKER_BIND_TO_PORT). SIGTERM stops accepting connections
and lets in-flight requests finish for up to DECISION_DRAIN_TIMEOUT_S seconds.
"""

from __future__ import annotations

import ctypes
import json
import logging
import sys
import time
from typing import Any


class JsonFormatter(logging.Formatter):
    """One JSON object per line. Messages that already are JSON objects are merged, not nested."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        base: dict[str, Any] = {"ts": round(time.time(), 3), "level": record.levelname.lower(), "logger": record.name}
        try:
            parsed = json.loads(message)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            base.update(parsed)
        else:
            base["message"] = message
        if record.exc_info:
            base["exception"] = self.formatException(record.exc_info)
        return json.dumps(base, ensure_ascii=False, default=str)


def configure_logging() -> None:
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    for name in ("uvicorn", "uvicorn.error"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
    logging.getLogger("uvicorn.access").disabled = True  # our own per-request lines replace it


def return_freed_memory_to_the_os() -> None:
    """Evicted state snapshots (megabytes each) must give their memory back: a fixed mmap threshold stops
    glibc from raising it dynamically and serving such blocks from a heap that never shrinks."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return  # not glibc: nothing to tune
    m_mmap_threshold = -3
    libc.mallopt(m_mmap_threshold, 1 << 20)


def check() -> int:
    """Smoke test for image builds: the bindings load the image's libllama; no model needed."""
    import llama_cpp

    info = {
        "llama_cpp_python": llama_cpp.__version__,
        "system_info": llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip(),
        "gpu_offload": bool(llama_cpp.llama_supports_gpu_offload()),
    }
    print(json.dumps(info))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["serve"]:
        args = args[1:]  # SageMaker runs `docker run <image> serve` and the entrypoint is serve itself
    if args[:1] == ["--check"]:
        return check()
    if args:
        print(f"usage: serve [--check] (unexpected arguments: {' '.join(args)})", file=sys.stderr)
        return 2
    configure_logging()
    return_freed_memory_to_the_os()
    log = logging.getLogger("decision_adapter.serve")
    from .core.settings import SettingsError, load_adapter_settings, runtime_from_env

    try:
        settings = load_adapter_settings()
        runtime = runtime_from_env()
    except SettingsError as e:
        log.error(json.dumps({"event": "invalid_setting", "message": str(e)}))
        return 2
    for name in runtime.ignored:
        log.warning(
            json.dumps(
                {
                    "event": "setting_ignored",
                    "variable": name,
                    "message": "not a runtime setting this adapter knows; ignored",
                }
            )
        )
    import uvicorn

    from .app import create_app

    app = create_app(settings, runtime)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=settings.drain_timeout_s,
        lifespan="on",
    )
    server = uvicorn.Server(config)
    server.run()
    return 0 if server.started else 1


if __name__ == "__main__":
    raise SystemExit(main())
