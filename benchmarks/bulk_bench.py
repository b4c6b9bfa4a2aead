"""Bulk decisions on the bundled SmolLM2 model: JSON Lines mini-batches against one request per record, and
the memory of the adapter and of `decisionctl batch run --url` over a 100,000-record file.

    .venv/bin/python benchmarks/bulk_bench.py [--quick] [--only throughput streaming memory] [--out FILE]

throughput: the same 200 records with 4 questions each, sent as one request per record (POST /invocations,
application/json, one keep-alive connection) and as JSON Lines mini-batches of 50 records (decisionctl's
default for --url), alternating, on one adapter as shipped (state cache on); once with every state distinct
and once with 50 distinct states. Each repetition salts the states, so no run finds another's states cached.
The two ways alternate block by block (50 records each). Records per second and the ratio batch / single
(target >= 1.0 in both); what each way spends outside the model's evaluation per record (HTTP, parsing,
the response), and records answered without reading a token (a question asked again of a state within one
mini-batch is answered from its first evaluation).

streaming: a 100,000-record file through `decisionctl batch run --url` against an adapter process, every
record naming a model the adapter does not serve, so each gets its `model_not_found` error line at once and the
run takes a minute or two: the memory of streaming the file, posting 2,000 mini-batches and writing the
answers, without the model's time. memory: the same with records the model answers (1,000 tiny states in
turn, so every mini-batch's 50 are distinct and the state cache evicts all along; one yes/no question,
order-debiasing off; 10,000 by default, about 75 ms a record on 2 cores, so 100,000 take about 2 hours).
Both report the peak RSS of the two processes, sampled every 0.5 s, and their RSS when 10% of the records
were done (bounded: the peak stays near the 10% value; the file is never loaded whole).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
from decision_adapter.launcher import MODEL_FILE, ROOT, start_adapter

JSON_LINES = "application/jsonlines"
RECORDS = 200
MINI_BATCH = 50
QUESTIONS = {
    "refund": {"type": "noul", "instructions": "Is the customer asking for money back?"},
    "team": {
        "type": "choice",
        "instructions": "Which team should handle this ticket?",
        "criteria": {"Billing": "payments, refunds", "Technical": "bugs, log-in", "Sales": None},
    },
    "urgent": {"type": "choice", "instructions": "How soon?", "criteria": {"Today": None, "This week": None}},
    "anger": {"type": "score", "instructions": "How frustrated?", "criteria": ["Calm", "Frustrated", "Very angry"]},
}
TOPICS = ["charged twice", "cannot log in", "wants a quote", "the app crashes", "the refund is late"]


def records(distinct_states: int, salt: str) -> list[dict[str, Any]]:
    """RECORDS decision bodies over `distinct_states` short states, shuffled so that repeats are not adjacent."""
    states = [f"Run {salt}, ticket {i}: the customer says {TOPICS[i % len(TOPICS)]}." for i in range(distinct_states)]
    bodies = [{"id": i, "state": states[i % distinct_states], "questions": QUESTIONS} for i in range(RECORDS)]
    random.Random(salt).shuffle(bodies)  # noqa: S311 - a reproducible order, not a secret
    return bodies


def one_request_per_record(http: httpx.Client, url: str, bodies: list[dict[str, Any]]) -> tuple[float, float, int]:
    """Wall seconds, the adapter's own evaluation seconds (x_timing_ms.total) and records that read no token."""
    t0, engine_ms, free = time.perf_counter(), 0.0, 0
    for body in bodies:
        r = http.post(url + "/invocations", json={k: v for k, v in body.items() if k != "id"})
        r.raise_for_status()
        engine_ms += r.json()["x_timing_ms"]["total"]
        free += r.json()["x_evaluated_tokens"] == 0
    return time.perf_counter() - t0, engine_ms / 1e3, free


def one_mini_batch(http: httpx.Client, url: str, bodies: list[dict[str, Any]]) -> tuple[float, float, int]:
    payload = "".join(json.dumps(b) + "\n" for b in bodies).encode()
    t0 = time.perf_counter()
    r = http.post(url + "/invocations", content=payload, headers={"Content-Type": JSON_LINES})
    seconds = time.perf_counter() - t0
    r.raise_for_status()
    answers = [json.loads(line) for line in r.text.splitlines()]
    assert sum("error" not in a for a in answers) == len(bodies), r.text[:300]
    engine_s = sum(a["x_timing_ms"]["total"] for a in answers) / 1e3
    return seconds, engine_s, sum(a["x_evaluated_tokens"] == 0 for a in answers)


def bench_throughput(tmp: Path, repeat: int) -> dict[str, Any]:
    """Per repetition, the two ways alternate block by block (50 records one by one, then a mini-batch of 50
    other records, the next block the other way round), so drift on a shared machine falls on both."""
    adapter = start_adapter(tmp / "throughput")
    out: dict[str, Any] = {"records": RECORDS, "questions_per_record": len(QUESTIONS), "mini_batch": MINI_BATCH}
    try:
        with httpx.Client(timeout=600) as http:
            one_mini_batch(http, adapter.url, records(4, "warm-up")[:MINI_BATCH])
            for name, distinct in (("distinct_states", RECORDS), ("50_states", 50)):
                totals = {"single": [0.0, 0.0, 0], "batch": [0.0, 0.0, 0]}
                block_ratios = []
                for k in range(repeat):
                    single_bodies = records(distinct, f"{name}-s{k}")
                    batch_bodies = records(distinct, f"{name}-b{k}")
                    for j, start in enumerate(range(0, RECORDS, MINI_BATCH)):
                        block = slice(start, start + MINI_BATCH)
                        runs = {}
                        for way in ("single", "batch") if j % 2 == 0 else ("batch", "single"):
                            if way == "single":
                                runs[way] = one_request_per_record(http, adapter.url, single_bodies[block])
                            else:
                                runs[way] = one_mini_batch(http, adapter.url, batch_bodies[block])
                        for way, run in runs.items():
                            totals[way] = [a + b for a, b in zip(totals[way], run, strict=True)]
                        block_ratios.append(round(runs["single"][0] / runs["batch"][0], 3))
                n = RECORDS * repeat
                single, batch = totals["single"], totals["batch"]
                out[name] = {
                    "single_records_per_s": round(n / single[0], 3),
                    "batch_records_per_s": round(n / batch[0], 3),
                    "ratio": round(single[0] / batch[0], 3),
                    "block_ratios": block_ratios,
                    "outside_engine_ms_per_record": {
                        "single": round((single[0] - single[1]) / n * 1e3, 2),
                        "batch": round((batch[0] - batch[1]) / n * 1e3, 2),
                    },
                    "engine_ratio": round(single[1] / batch[1], 3),
                    "records_reading_no_token": {"single": single[2], "batch": batch[2]},
                    "target": ">= 1.0",
                }
                print(f"  {name}: {json.dumps(out[name])}", flush=True)
    finally:
        adapter.stop()
    return out


STATES_IN_MEMORY_RUN = 1000


def write_cases(path: Path, count: int, model: str) -> None:
    question = {"refund": {"type": "noul"}}
    with path.open("w", encoding="utf-8") as f:
        for i in range(count):
            state = f"case {i % STATES_IN_MEMORY_RUN}"  # more states than the cache holds: it evicts all along
            f.write(json.dumps({"id": i, "model": model, "state": state, "questions": question}) + "\n")


class PeakRss:
    """The peak RSS of some processes, sampled in a thread; `at(name)` records the current values under a name."""

    def __init__(self, pids: dict[str, int], every_s: float = 0.5) -> None:
        self.procs = {name: psutil.Process(pid) for name, pid in pids.items()}
        self.peak = dict.fromkeys(pids, 0.0)
        self.marks: dict[str, dict[str, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(every_s,), daemon=True)

    def _sample(self) -> dict[str, float]:
        now = {}
        for name, proc in self.procs.items():
            try:
                now[name] = proc.memory_info().rss / 2**20
            except psutil.NoSuchProcess:
                now[name] = 0.0
            self.peak[name] = max(self.peak[name], now[name])
        return now

    def _run(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            self._sample()

    def at(self, name: str) -> None:
        self.marks[name] = {k: round(v, 1) for k, v in self._sample().items()}

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def progress(out: Path) -> Iterator[int]:
    """Records answered so far, from the run state the client saves after each mini-batch."""
    while True:
        try:
            yield int(json.loads((out / "run.json").read_text())["records_done"])
        except (OSError, ValueError, KeyError):
            yield 0


def bench_memory(tmp: Path, count: int, *, answered: bool) -> dict[str, Any]:
    """`answered`: records the model evaluates; otherwise each names a model not served (an error line at once)."""
    cases, out = tmp / "cases.jsonl", tmp / "out"
    tmp.mkdir(parents=True, exist_ok=True)
    write_cases(cases, count, "jev-latest" if answered else "not-served-here")
    adapter = start_adapter(tmp / "adapter", env={"DECISION_ORDER_DEBIAS": "false"})
    adapter_start = psutil.Process(adapter.proc.pid).memory_info().rss / 2**20
    cmd = [
        sys.executable,
        "-m",
        "decisionctl.commands.cli",
        "batch",
        "run",
        str(cases),
        "--url",
        adapter.url,
        "--out",
        str(out),
    ]
    t0 = time.perf_counter()
    try:
        client = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        with PeakRss({"adapter": adapter.proc.pid, "client": client.pid}) as rss:
            marked = False
            for done in progress(out):
                if not marked and done >= count // 10:
                    rss.at("at_10_percent")
                    marked = True
                if client.poll() is not None:
                    break
                time.sleep(0.5)
            rss.at("at_end")
        stdout = client.communicate()[0]
    finally:
        adapter.stop()
    seconds = time.perf_counter() - t0
    summary = json.loads((out / "summary.json").read_text())
    return {
        "records": count,
        "file_mb": round(cases.stat().st_size / 2**20, 1),
        "answered": summary["answered"],
        "failed": summary["failed"],
        "seconds": round(seconds, 1),
        "records_per_s": round(count / seconds, 1),
        "adapter_rss_after_load_mb": round(adapter_start, 1),
        "peak_rss_mb": {k: round(v, 1) for k, v in rss.peak.items()},
        "rss_mb": rss.marks,
        "client_exit": client.returncode,
        "client_said": stdout.strip().splitlines()[-1:] if stdout else [],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1 repetition, 10,000 and 500 records (a smoke run)")
    parser.add_argument(
        "--only", nargs="*", choices=("throughput", "streaming", "memory"), help="run only these sections"
    )
    parser.add_argument("--repeat", type=int, help="repetitions per comparison (default 2, 1 with --quick)")
    parser.add_argument("--streaming-records", type=int, help="records of the streaming run (default 100000)")
    parser.add_argument("--memory-records", type=int, help="answered records of the memory run (default 10000)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "bulk_results.json")
    args = parser.parse_args()
    repeat = args.repeat or (1 if args.quick else 2)
    streamed = args.streaming_records or (10_000 if args.quick else 100_000)
    evaluated = args.memory_records or (500 if args.quick else 10_000)
    sections: dict[str, Callable[[Path], dict[str, Any]]] = {
        "throughput": lambda t: bench_throughput(t, repeat),
        "streaming": lambda t: bench_memory(t, streamed, answered=False),
        "memory": lambda t: bench_memory(t, evaluated, answered=True),
    }
    results: dict[str, Any] = {"machine": {"logical_cpus": psutil.cpu_count()}, "model": MODEL_FILE}
    results["quick"] = args.quick
    with tempfile.TemporaryDirectory() as tmp:
        for name, fn in sections.items():
            if args.only and name not in args.only:
                continue
            t0 = time.perf_counter()
            results[name] = fn(Path(tmp) / name)
            print(f"{name} ({time.perf_counter() - t0:.0f} s): {json.dumps(results[name], indent=1)}", flush=True)
    if args.only and args.out.exists():  # a partial run updates its sections and keeps the others
        results = {**json.loads(args.out.read_text()), **results}
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
