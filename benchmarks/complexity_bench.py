"""What a request's size buys: server time per KB for every route and caller field, benign and adversarial
contents, from 10 KB to the body limit, on the bundled SmolLM2 model.

Each row sends one body per size (10 KB, 100 KB, 1 MB, the 6 MiB body limit less 1 KB) to one adapter process
over local HTTP, one request at a time, and times it at the client (loopback: the transfer is milliseconds).
Adversarial text is the model's end-of-turn marker `<|im_end|>` repeated (in keys: one per key; split: the
marker cut across words, `<|im_` `end|>`); benign text is an ordinary support ticket repeated. The matrix runs
with SM_LLAMA_CPP_CTX_SIZE=2048 so that no row's 10 KB body is minutes of real prefill on 2 cores (a row that is
answered is real work under the budget, marked `answered`); the probe of issue 36 (a string state of markers,
20-160 KB and 1 MB, /v1/systemone) runs on a second adapter with the default context (8192).

Issue 43's shapes (blank lines of spaces, nesting 60 and 900 deep, a list of numbers, many keys, a JSON Lines body of
64-question records) run at the same four sizes on an adapter with the default settings, each with the worst wait of
a second connection polling /ping while the request runs (`--only shapes` runs them alone, keeping the rest of
the JSON file).

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
import threading
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


def _blank_lines(n: int) -> str:
    return ("\n" + " " * 80) * max(1, n // 82 - 1)  # 82 bytes a line in JSON ("\\n" is two)


def _deep(n: int, depth: int) -> Any:
    """A list `depth` deep holding about n bytes of empty strings at its bottom (issue 43: depth 900, 100k strings)."""
    value: Any = [""] * max(1, (n - 2 * depth) // 4)
    for _ in range(depth - 1):
        value = [value]
    return value


def _questions_body(n: int) -> bytes:
    """A JSON Lines body of records of 64 yes/no questions each (issue 43: 40 such records, 157 KB, ran 45 s)."""
    questions = {f"q{i}": {"type": "noul", "instructions": f"Is point {i} of the policy met?"} for i in range(64)}
    lines = [
        json.dumps({"id": i, "state": f"Ticket {i}: please refund the duplicate charge.", "questions": questions})
        for i in range(max(1, n // 5300))
    ]
    return "\n".join(lines).encode()


# issue 43's shapes: (name, route, body of about n bytes, JSON Lines)
SHAPES: list[tuple[str, str, Callable[[int], bytes], bool]] = [
    ("blank lines of spaces", "/v1/systemone", lambda n: json.dumps(systemone(_blank_lines(n))).encode(), False),
    ("nesting 60 deep", "/v1/systemone", lambda n: json.dumps(systemone(_deep(n, 60))).encode(), False),
    ("nesting 900 deep", "/v1/systemone", lambda n: json.dumps(systemone(_deep(n, 900))).encode(), False),
    ("list of numbers", "/v1/systemone", lambda n: json.dumps(systemone([0] * max(1, n // 3))).encode(), False),
    (
        "many keys",
        "/v1/systemone",
        lambda n: json.dumps(systemone({f"k{i}": i for i in range(max(1, n // 19))})).encode(),
        False,
    ),
    ("JSON Lines, 64 questions a record", "/invocations", _questions_body, True),
]


def _worst_ping(url: str, stop: threading.Event, waits: list[float]) -> None:
    """A second connection polling /ping while a request runs: how long the slowest answer took."""
    with httpx.Client() as pinger:
        while not stop.is_set():
            t0 = time.perf_counter()
            pinger.get(url + "/ping", timeout=120)
            waits.append(time.perf_counter() - t0)
            time.sleep(0.02)


def shapes(adapter: AdapterProcess, client: httpx.Client) -> list[dict[str, Any]]:
    """Issue 43's shapes at four sizes up to the body limit, on the default settings: status, time, and the worst
    /ping wait from a second connection meanwhile."""
    rows = []
    for name, route, build, lines in SHAPES:
        row: dict[str, Any] = {"shape": name, "route": route, "sizes": {}}
        for size, n in SIZES.items():
            body = build(n)
            stop, waits = threading.Event(), [0.0]
            pinger = threading.Thread(target=_worst_ping, args=(adapter.url, stop, waits))
            pinger.start()
            try:
                status, seconds = send(client, adapter.url, route, body, lines=lines)
            finally:
                stop.set()
                pinger.join()
            cell = {"bytes": len(body), "status": status, "seconds": round(seconds, 3), "ping_worst_s": max(waits)}
            cell["ping_worst_s"] = round(cell["ping_worst_s"], 3)
            row["sizes"][size] = cell
            print(
                f"{name:34} {size:6} {len(body):>9} B  {status}  {seconds:7.3f} s  /ping worst {max(waits):.3f} s",
                flush=True,
            )
        last = row["sizes"]["limit"]
        row["limit_ok"] = last["seconds"] <= 1.0 or last["status"] == 200
        row["ping_ok"] = all(c["ping_worst_s"] < 0.5 for c in row["sizes"].values())
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "complexity.json")
    parser.add_argument("--only", choices=["shapes"], help="run only issue 43's shapes (kept beside the rest)")
    args = parser.parse_args()
    out: dict[str, Any] = {"machine": f"{platform.machine()}, {platform.processor() or 'cpu'}"}
    if args.only == "shapes":
        kept = json.loads(args.out.read_text()) if args.out.exists() else {}
        with tempfile.TemporaryDirectory() as tmp, httpx.Client() as client:
            adapter = start_adapter(Path(tmp) / "shapes")
            try:
                kept["shapes"] = shapes(adapter, client)
            finally:
                adapter.stop()
        slow = [r["shape"] for r in kept["shapes"] if not r["limit_ok"]]
        stalled = [r["shape"] for r in kept["shapes"] if not r["ping_ok"]]
        print(f"shapes over 1 s at the limit without being real work: {slow or 'none'}")
        print(f"shapes during which /ping waited 0.5 s or more: {stalled or 'none'}")
        args.out.write_text(json.dumps({**out, **kept, "machine": out["machine"]}, indent=1) + "\n")
        return
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
            out["shapes"] = shapes(adapter, client)
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
