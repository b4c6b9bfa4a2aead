"""load_bench.py's lane section: decision latency from one closed-loop client (ticket routing) on the default lanes,
idle and while chat generations run back to back, and with chat off; its table."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import httpx
from decision_adapter.launcher import start_adapter
from decisionctl import tables
from decisionctl.load import runs, workloads
from decisionctl.transport import HttpSender, RetryPolicy

LANE_CHAT = {"messages": [{"role": "user", "content": "Write a long story about a ship."}], "max_tokens": 256}


class ChatLoad:
    """Chat generations sent back to back from a thread until stopped, so the chat context is never idle."""

    def __init__(self, url: str, timeout_s: float) -> None:
        self.url = url + "/v1/chat/completions"
        self.timeout_s = timeout_s
        self.generations = 0
        self.tokens = 0
        self.seconds: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop)

    def __enter__(self) -> ChatLoad:
        self._thread.start()
        metrics = self.url.removesuffix("/v1/chat/completions") + "/metrics"
        while httpx.get(metrics, timeout=30).json()["lanes"]["chat"]["admitted"] < 1:  # generating before we measure
            time.sleep(0.05)
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.is_set():
            start = time.perf_counter()
            reply = httpx.post(self.url, json=LANE_CHAT, timeout=self.timeout_s)
            if reply.status_code == 200:
                self.generations += 1
                self.tokens += int(reply.json()["usage"]["completion_tokens"])
                self.seconds.append(time.perf_counter() - start)


def _lane_row(name: str, level: dict[str, Any], chats: ChatLoad | None, env: dict[str, str]) -> dict[str, Any]:
    return {
        "setting": name,
        "adapter_env": env,
        "decisions": level["accepted"],
        "latency_s": level["latency_s"],
        "chat_generations": chats.generations if chats else 0,
        "chat_tokens": chats.tokens if chats else 0,
        "chat_s_mean": sum(chats.seconds) / len(chats.seconds) if chats and chats.seconds else None,
        "level": level,
    }


def _one_client(transport: HttpSender, count: int, seed: int, warmup: int) -> dict[str, Any]:
    """One closed-loop client sending `count` ticket-routing decisions."""
    (level,) = runs.run_target(
        transport,
        workloads.TicketRouting(),
        [1],
        count=count,
        duration_s=3600,
        policy=RetryPolicy(),
        seed=seed,
        warmup=warmup,
    )
    return level


def bench_lane(tmp: Path, count: int, timeout_s: float) -> dict[str, Any]:
    """Decision p95 idle and while chat generations run on the default lanes (the adapter's own thread split), and
    with chat off, `count` decisions each; each measurement has states of its own seed, so none finds another's
    states cached."""
    rows = []
    for chat_contexts in ("1", "0"):
        env = {"DECISION_MAX_CONCURRENCY": "1", "DECISION_CHAT_CONTEXTS": chat_contexts}
        adapter = start_adapter(tmp / f"lane-chat-{chat_contexts}", env=env, unset=("SM_LLAMA_CPP_THREADS",))
        transport = HttpSender(adapter.url, timeout_s=timeout_s, max_connections=2)
        try:
            if chat_contexts == "1":
                rows.append(_lane_row("chat lane, idle", _one_client(transport, count, 301, 1), None, env))
                with ChatLoad(adapter.url, timeout_s) as chats:
                    busy = _one_client(transport, count, 302, 0)
                rows.append(_lane_row("chat lane, chat generating", busy, chats, env))
            else:
                rows.append(
                    _lane_row("chat off (all cores to decisions)", _one_client(transport, count, 303, 1), None, env)
                )
        finally:
            transport.close()
            adapter.stop()
    idle_p95, busy_p95 = rows[0]["latency_s"]["p95"], rows[1]["latency_s"]["p95"]
    return {
        "rows": rows,
        "p95_while_chat_vs_idle": busy_p95 / idle_p95 if idle_p95 and busy_p95 else None,
        "target": "<= 1.25",
    }


def lane_table(result: dict[str, Any]) -> str:
    rows = [
        [
            r["setting"],
            str(r["decisions"]),
            tables.num(r["latency_s"]["p50"], 2),
            tables.num(r["latency_s"]["p95"], 2),
            tables.num(r["latency_s"]["p99"], 2),
            f"{r['chat_generations']} ({r['chat_tokens']} tokens)",
        ]
        for r in result["rows"]
    ]
    headers = ["decisions on", "decisions", "p50 s", "p95 s", "p99 s", "chat generations meanwhile"]
    ratio = tables.num(result["p95_while_chat_vs_idle"], 2)
    return (
        tables.table(headers, rows) + f"\ndecision p95 while chat generates / idle: {ratio} (target {result['target']})"
    )
