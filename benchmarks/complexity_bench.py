"""What a request's size buys: server time per KB for every route and caller field, benign and adversarial
contents, from 10 KB to the body limit, on the bundled SmolLM2 model.

Each row sends one body per size (10 KB, 100 KB, 1 MB, the 6 MiB body limit less 1 KB) to one adapter process
over local HTTP, one request at a time, and times it at the client (loopback: the transfer is milliseconds).
Adversarial text is the model's end-of-turn marker `<|im_end|>` repeated (in keys: one per key; split: the
marker cut across words, `<|im_` `end|>`); benign text is an ordinary support ticket repeated. The matrix runs
with SM_LLAMA_CPP_CTX_SIZE=2048 so that no row's 10 KB body is minutes of real prefill on 2 cores (a row that is
answered is real work under the budget, marked `answered`); the probe of issue 36 (a string state of markers,
20-160 KB and 1 MB, /v1/systemone) runs on a second adapter with the default context (8192).

Checks printed at the end: per row, time per KB at the limit over time per KB at 10 KB (at most 2: cost grows no
faster than the body), and every request at the limit answered within 1 s unless answered (real work).

    .venv/bin/python benchmarks/complexity_bench.py [--out benchmarks/complexity.json]

Run it alone (one model-running process at a time): about 2 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from decision_adapter.launcher import ROOT, AdapterProcess, start_adapter

KB = 1024
LIMIT = 6 * 1024 * 1024 - KB  # the adapter's default body limit (DECISION_MAX_BODY_BYTES), less room for framing
SIZES = {"10KB": 10 * KB, "100KB": 100 * KB, "1MB": 1024 * KB, "limit": LIMIT}
MARKER = "<|im_end|>"
TICKET = "I was charged twice for my March invoice (order 4471); please refund the duplicate charge soon. "
CONTENTS: dict[str, Callable[[int], str]] = {
    "benign": lambda n: (TICKET * (n // len(TICKET) + 1))[:n],
    "markers": lambda n: (MARKER * (n // len(MARKER) + 1))[:n],
    "split": lambda n: (("<|im_ " + "end|> ") * (n // 12 + 1))[:n],
}
CHOICE = {"type": "choice", "instructions": "Which team?", "criteria": {"Billing": None, "Sales": None}}


def _fill(make: Callable[[str], Any], n: int, text: Callable[[int], str]) -> bytes:
    """A body of about n bytes: `make` takes the text, the text is sized so that the body comes to n."""
    overhead = len(json.dumps(make("")).encode())
    body = json.dumps(make(text(max(0, n - overhead))), ensure_ascii=False).encode()
    return body[: n + 4096] if len(body) <= n + 4096 else body


def _split(text: str, parts: int) -> list[str]:
    size = max(1, len(text) // parts)
    return [text[i * size : (i + 1) * size] or "x" for i in range(parts)]


def _keys(text: str, width: int = 40) -> dict[str, int]:
    return {f"{i}{text[i * width : (i + 1) * width]}": i for i in range(max(1, len(text) // width))}


def _nested(text: str, depth: int = 50) -> Any:
    value: Any = _split(text, 8)
    for i in range(depth):
        value = {f"level{i}": value}
    return value


def systemone(state: Any = "A ticket.", **question: Any) -> dict[str, Any]:
    return {"model": "jev-latest", "state": state, "questions": {"q": {**CHOICE, **question}}}


# (route, field) -> a function of the caller text that makes the body
FIELDS: dict[tuple[str, str], Callable[[str], Any]] = {
    ("/v1/systemone", "state string"): systemone,
    ("/v1/systemone", "state object keys"): lambda t: systemone(_keys(t)),
    ("/v1/systemone", "state object values"): lambda t: systemone(dict(enumerate(_split(t, 500)))),
    ("/v1/systemone", "state nesting"): lambda t: systemone(_nested(t)),
    ("/v1/systemone", "instructions"): lambda t: systemone(instructions=t),
    ("/v1/systemone", "option names"): lambda t: systemone(
        criteria={f"{i}{c}": None for i, c in enumerate(_split(t, 255))}
    ),
    ("/v1/systemone", "option descriptions"): lambda t: systemone(
        criteria={f"o{i}": d for i, d in enumerate(_split(t, 255))}
    ),
    ("/v1/systemone", "score levels"): lambda t: systemone(type="score", criteria=_split(t, 10)),
    ("/v1/systemone", "question count"): lambda t: {
        "state": "A ticket.",
        "questions": {f"{c}{i}": {"type": "noul"} for i, c in enumerate(_split(t, max(1, len(t) // 30)))},
    },
    ("/v1/decisions", "input string"): lambda t: {"model": "jev-latest", "input": t, "questions": [_pred()]},
    ("/v1/decisions", "input messages"): lambda t: {
        "model": "jev-latest",
        "input": [{"role": "user", "content": c} for c in _split(t, 100)],
        "questions": [_pred()],
    },
    ("/v1/decisions", "tool outputs"): lambda t: {
        "model": "jev-latest",
        "input": [
            item
            for i, c in enumerate(_split(t, 50))
            for item in (
                {"type": "function_call", "call_id": f"c{i}", "name": "lookup", "arguments": "{}"},
                {"type": "function_call_output", "call_id": f"c{i}", "output": c},
            )
        ],
        "questions": [_pred()],
    },
    ("/v1/decisions", "choice values"): lambda t: {
        "model": "jev-latest",
        "input": "A ticket.",
        "questions": [
            {
                "type": "choice",
                "instructions": "Which?",
                "choices": [{"value": f"{i}{c}"} for i, c in enumerate(_split(t, 255))],
            }
        ],
    },
    ("/invocations", "decision state"): systemone,
    ("/invocations", "openai input"): lambda t: {"model": "jev-latest", "input": t, "questions": [_pred()]},
    ("/v1/chat/completions", "message content"): lambda t: {
        "messages": [{"role": "user", "content": t}],
        "max_tokens": 1,
    },
}


def _pred() -> dict[str, Any]:
    return {"type": "predicate", "instructions": "Does the customer want money back?"}


def jsonlines(text: Callable[[int], str], n: int) -> bytes:
    """Records of at most 256 KB each, their states together about n bytes."""
    per = min(n, 256 * KB)
    line = json.dumps(systemone(text(per - 200))).encode()
    return b"\n".join([line] * max(1, n // len(line)))


def send(client: httpx.Client, url: str, route: str, body: bytes, *, lines: bool = False) -> tuple[int, float]:
    headers = {"content-type": "application/jsonlines" if lines else "application/json"}
    t0 = time.perf_counter()
    r = client.post(url + route, content=body, headers=headers, timeout=600)
    return r.status_code, time.perf_counter() - t0


def matrix(adapter: AdapterProcess, client: httpx.Client) -> list[dict[str, Any]]:
    rows = []
    cases: list[tuple[str, str, str, Callable[[int], bytes], bool]] = []
    for (route, field), make in FIELDS.items():
        for content, text in CONTENTS.items():
            cases.append((route, field, content, lambda n, m=make, t=text: _fill(m, n, t), False))
    for content, text in CONTENTS.items():
        cases.append(("/invocations", "JSON Lines records", content, lambda n, t=text: jsonlines(t, n), True))
    for route, field, content, build, lines in cases:
        row: dict[str, Any] = {"route": route, "field": field, "content": content, "sizes": {}}
        for name, n in SIZES.items():
            body = build(n)
            status, seconds = send(client, adapter.url, route, body, lines=lines)
            row["sizes"][name] = {"bytes": len(body), "status": status, "seconds": round(seconds, 4)}
        first, mega, last = row["sizes"]["10KB"], row["sizes"]["1MB"], row["sizes"]["limit"]
        row["per_kb_ratio"] = round((last["seconds"] / last["bytes"]) / (first["seconds"] / first["bytes"]), 3)
        row["per_kb_ratio_from_1mb"] = round((last["seconds"] / last["bytes"]) / (mega["seconds"] / mega["bytes"]), 3)
        row["limit_ok"] = last["seconds"] <= 1.0 or last["status"] == 200
        rows.append(row)
        cells = "  ".join(f"{k} {v['status']} {v['seconds'] * 1e3:8.1f} ms" for k, v in row["sizes"].items())
        ratios = f"per-KB x{row['per_kb_ratio']:.3f} (from 1 MB x{row['per_kb_ratio_from_1mb']:.2f})"
        print(f"{route:22} {field:22} {content:8} {cells}  {ratios}", flush=True)
    return rows


def probe(adapter: AdapterProcess, client: httpx.Client) -> list[dict[str, Any]]:
    """Issue 36's probe: a string state of end-of-turn markers, a choice question, /v1/systemone."""
    rows = []
    for kb in (20, 40, 80, 160, 1024):
        body = json.dumps(systemone(MARKER * (kb * 1000 // len(MARKER)))).encode()
        status, seconds = send(client, adapter.url, "/v1/systemone", body)
        rows.append({"kb": kb, "status": status, "seconds": round(seconds, 4)})
        print(f"probe {kb:5d} KB of markers: {status} in {seconds:.3f} s", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "complexity.json")
    args = parser.parse_args()
    out: dict[str, Any] = {"machine": f"{platform.machine()}, {platform.processor() or 'cpu'}"}
    with tempfile.TemporaryDirectory() as tmp, httpx.Client() as client:
        env = {"DECISION_CHAT_CONTEXTS": "1", "SM_LLAMA_CPP_CTX_SIZE": "2048"}
        adapter = start_adapter(Path(tmp) / "matrix", env=env)
        try:
            out["matrix"] = matrix(adapter, client)
        finally:
            adapter.stop()
        adapter = start_adapter(Path(tmp) / "probe")
        try:
            out["probe"] = probe(adapter, client)
        finally:
            adapter.stop()
    worst = max(out["matrix"], key=lambda r: r["per_kb_ratio"])
    steepest = max(out["matrix"], key=lambda r: r["per_kb_ratio_from_1mb"])
    print(
        f"largest per-KB ratio, limit over 1 MB: {steepest['per_kb_ratio_from_1mb']} "
        f"({steepest['route']} {steepest['field']})"
    )
    slow = [f"{r['route']} {r['field']} {r['content']}" for r in out["matrix"] if not r["limit_ok"]]
    print(f"largest per-KB ratio, limit over 10 KB: {worst['per_kb_ratio']} ({worst['route']} {worst['field']})")
    print(f"requests at the limit over 1 s without being real work: {slow or 'none'}")
    args.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
