"""`decisionctl bench`: closed-loop load with retries against the real adapter on the real SmolLM2 model over
real HTTP, the generated workloads, and `--recommend-scaling` on a recorded result.

One adapter for the module, with one context and a one-slot queue (DECISION_MAX_CONCURRENCY=1,
DECISION_MAX_QUEUE=1) and no wait at admission: it holds two requests, so four clients must see 429s, retries and
what they cost.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import statistics
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from decisionctl.commands import cli
from decisionctl.core.prices import load_prices
from decisionctl.load import workloads
from decisionctl.load.closed_loop import run_level
from decisionctl.load.runs import SCALING_KEY, recommend, run_target
from decisionctl.transport import HttpSender, Reply, RetryPolicy

from tests.app_support import start_app
from tests.conftest import MODEL_DIR, MODEL_FILE, require_model


@pytest.fixture(scope="module")
def two_slot_adapter(tmp_path_factory: pytest.TempPathFactory):
    require_model()
    adapter = start_app(
        env={"DECISION_MAX_QUEUE": "1", "DECISION_MAX_CONCURRENCY": "1", "DECISION_ADMISSION_WAIT_S": "0"},
    )
    yield adapter
    adapter.stop()


@pytest.fixture(scope="module")
def ticket_run(two_slot_adapter, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Ticket routing at 1 and 4 clients, 4 decisions each, 3 attempts per decision."""
    out = tmp_path_factory.mktemp("bench") / "run"
    # --timeout: a loaded CI machine may be slow; this run is about counting, not about speed
    args = ["bench", "--url", two_slot_adapter.url, "--label", "two-slot", "--workload", "ticket-routing"]
    args += ["--concurrency", "1,4", "--count", "4", "--max-attempts", "3", "--timeout", "600", "--out", str(out)]
    args += ["--prices", "--instance-type", "ml.c6i.8xlarge", "--recommend-scaling", "--slo-p95-ms", "600000"]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert cli.main(args) == 0
    return out, printed.getvalue()


@pytest.mark.model
@pytest.mark.slow
def test_levels_count_decisions_sends_429s_and_losses_with_retries(ticket_run) -> None:
    out, printed = ticket_run
    report = json.loads((out / "bench.json").read_text())
    assert (out / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert report["retry"]["max_attempts"] == 3 and report["bounds"]["decisions_per_level"] == 4
    assert report["workloads"]["ticket-routing"]["state_tokens"] == 200
    (target,) = report["targets"]
    assert (target["label"], target["workload"], target["instance_type"]) == (
        "two-slot",
        "ticket-routing",
        "ml.c6i.8xlarge",
    )
    one, four = target["levels"]
    for lv in (one, four):
        assert lv["decisions"] == 4 and lv["errors"] == 0
        assert lv["accepted"] + lv["lost"] == 4 and lv["accepted"] >= 1
        assert lv["accepted"] <= lv["sends"] <= 3 * lv["decisions"]
        assert lv["sends_per_accepted"] == pytest.approx(lv["sends"] / lv["accepted"])
        assert lv["rate_429"] == pytest.approx(lv["rejected_429"] / lv["sends"])
        assert lv["throughput_per_s"] == pytest.approx(lv["accepted"] / lv["wall_s"])
        assert lv["answers_per_s"] == pytest.approx(lv["throughput_per_s"])  # one question a ticket
        lat = lv["latency_s"]
        assert 0 < lat["p50"] <= lat["p95"] <= lat["p99"] <= lat["max"]
        assert lv["cost_per_1000"] == pytest.approx(target["price_per_hour"] / (lv["throughput_per_s"] * 3600) * 1000)
    assert (one["sends"], one["rejected_429"], one["lost"]) == (4, 0, 0)  # one client never finds the queue full
    # four clients, two places: the first four sends alone turn two away, and each 429 is sent again
    assert four["rejected_429"] >= 2 and four["sends"] == four["accepted"] + four["rejected_429"]
    assert "dec/s" in printed and "sends/dec" in printed and "EXAMPLES: check them" in printed
    # the run's own recommendation: 4 clients turned requests away, 1 did not
    assert f"cpu.{SCALING_KEY} = 1" in printed


@pytest.mark.model
@pytest.mark.slow
def test_recommend_scaling_reads_the_recorded_run(ticket_run, capsys) -> None:
    out, _ = ticket_run
    code = cli.main(["bench", "--from-result", str(out / "bench.json"), "--recommend-scaling", "--slo-p95-ms", "1"])
    assert code == 1  # no decision of this CPU takes a millisecond
    assert "none: the lowest level measured has p95" in capsys.readouterr().out


@pytest.mark.model
@pytest.mark.slow
def test_supervisor_questions_on_a_seen_state_restore_it_from_the_cache(two_slot_adapter) -> None:
    def lookups() -> tuple[int, int]:
        counters = httpx.get(two_slot_adapter.url + "/metrics").json()["state_cache"]
        return int(counters["hits"]), int(counters["misses"])

    supervisor = workloads.AgentSupervisor(states=2, gap_s=0.3, state_tokens=120)
    group = supervisor.group(0, 0)
    transport = HttpSender(two_slot_adapter.url, timeout_s=600)
    hits, misses = lookups()
    try:
        (level,) = run_target(
            transport, supervisor, [2], count=len(group), duration_s=600, policy=RetryPolicy(max_attempts=5), warmup=0
        )
    finally:
        transport.close()
    assert level["decisions"] == len(group) and level["accepted"] == len(group)
    # each state is computed once (a miss); a later question finds it resident or restores it from the cache
    # (a hit), which happens at least once: the two states' first questions come before any second one
    now_hits, now_misses = lookups()
    assert now_misses - misses == 2 and now_hits - hits >= 1


@pytest.mark.model
@pytest.mark.slow
def test_a_level_ends_when_its_time_is_up(two_slot_adapter, tmp_path) -> None:
    out = tmp_path / "bench"
    args = ["bench", "--url", two_slot_adapter.url, "--concurrency", "2", "--duration", "2", "--warmup", "0"]
    assert cli.main([*args, "--timeout", "600", "--out", str(out)]) == 0
    report = json.loads((out / "bench.json").read_text())
    (level,) = report["targets"][0]["levels"]
    assert report["bounds"] == {"decisions_per_level": 100_000, "seconds_per_level": 2.0}
    assert 2 <= level["decisions"] < 100 and level["wall_s"] >= 2.0 and level["errors"] == 0


class _Echo:
    """A transport that answers every body after `service_s` and records when each was sent and answered."""

    label = "echo"

    def __init__(self, service_s: float) -> None:
        self.service_s = service_s
        self.log: list[tuple[str, float, float]] = []
        self._lock = threading.Lock()

    def send(self, body: Any) -> Reply:
        start = time.monotonic()
        time.sleep(self.service_s)
        with self._lock:
            self.log.append((body["state"], start, time.monotonic()))
        return Reply(200, b"{}", self.service_s)

    def close(self) -> None:
        pass


def test_a_question_on_a_seen_state_waits_for_the_answer_before_and_the_gap() -> None:
    supervisor = workloads.AgentSupervisor(states=3, gap_s=0.15, state_tokens=60)
    group = supervisor.group(0, 0)
    echo = _Echo(0.05)
    level = run_level(echo, supervisor, 3, count=len(group), duration_s=30, policy=RetryPolicy())
    assert level["accepted"] == len(group)
    sent = {state: sorted((s, e) for st, s, e in echo.log if st == state) for state in {st for st, _, _ in echo.log}}
    assert len(sent) == 3 and sum(len(v) for v in sent.values()) == len(group)
    for times in sent.values():
        for (_, answered), (next_start, _) in itertools.pairwise(times):
            assert next_start >= answered + 0.15 - 1e-3


def test_generated_workloads_are_deterministic_and_shaped_as_described() -> None:
    from llama_cpp import Llama

    tokenizer = Llama(str(MODEL_DIR / MODEL_FILE), vocab_only=True, verbose=False)
    try:
        for workload, tokens, questions in (
            (workloads.TicketRouting(), 200, {"team"}),
            (workloads.AgentSupervisor(), 300, None),
            (workloads.LongDocuments(), 2000, {"kind", "payment", "urgency"}),
        ):
            assert [p.body for p in workload.group(3, 7)] == [p.body for p in workload.group(3, 7)]
            assert workload.group(3, 7)[0].body != workload.group(4, 7)[0].body  # another level, other states
            bodies = [p.body for n in range(6) for p in workload.group(0, n)]
            sizes = [len(tokenizer.tokenize(str(b["state"]).encode(), add_bos=False)) for b in bodies]
            assert 0.85 * tokens <= statistics.mean(sizes) <= 1.15 * tokens, (workload.name, statistics.mean(sizes))
            if questions is not None:
                assert all(set(b["questions"]) == questions for b in bodies)
    finally:
        tokenizer.close()
    group = workloads.AgentSupervisor().group(0, 0)
    states = {p.body["state"] for p in group}
    assert len(states) == 10
    for state in states:
        asked = [i for i, p in enumerate(group) if p.body["state"] == state]
        assert 2 <= len(asked) <= 4
        assert len({next(iter(group[i].body["questions"])) for i in asked}) == len(asked)  # different questions
        assert [group[i].after for i in asked] == [None, *asked[:-1]]  # each waits for the one before
        assert all(group[i].gap_s == 2.0 for i in asked[1:])


def _level(concurrency: int, p95_s: float, *, rejected: int = 0) -> dict[str, Any]:
    return {
        "concurrency": concurrency,
        "accepted": 40,
        "errors": 0,
        "lost": 0,
        "rejected_429": rejected,
        "throughput_per_s": concurrency / (p95_s * 2),
        "latency_s": {"p50": p95_s / 2, "p95": p95_s, "p99": p95_s * 1.1},
    }


RECORDED = {
    "targets": [
        {
            "label": "cpu",
            "workload": "ticket-routing",
            "instance_type": "ml.c6i.8xlarge",
            "levels": [_level(1, 0.5), _level(2, 0.9), _level(4, 1.6), _level(8, 1.2, rejected=3), _level(16, 1.5)],
        },
        {
            "label": "cpu",
            "workload": "long-documents",
            "instance_type": "ml.c6i.8xlarge",
            "levels": [_level(1, 0.8), _level(2, 1.9), _level(4, 3.5)],
        },
        {
            "label": "gpu",
            "workload": "ticket-routing",
            "instance_type": "ml.g6e.xlarge",
            "levels": [_level(1, 0.1), _level(2, 0.15), _level(4, 0.2)],
        },
    ]
}


def test_recommendation_is_the_last_clean_level_within_the_objective() -> None:
    by = {(r.label, r.workload): r for r in recommend(RECORDED, 2000)}
    # 8 turned requests away: 16 below it is not trusted, however fast
    assert by["cpu", "ticket-routing"].concurrency == 4 and not by["cpu", "ticket-routing"].highest_tested
    assert by["cpu", "long-documents"].concurrency == 2
    assert by["gpu", "ticket-routing"].concurrency == 4 and by["gpu", "ticket-routing"].highest_tested
    assert by["gpu", "ticket-routing"].config_key == f"gpu.{SCALING_KEY}"
    assert [r.concurrency for r in recommend(RECORDED, 1000)] == [2, 1, 4]
    assert [r.concurrency for r in recommend(RECORDED, 50)] == [None, None, None]


def test_recommend_scaling_on_a_recorded_file_prints_the_key_per_target(tmp_path: Path, capsys) -> None:
    recorded = tmp_path / "bench.json"
    recorded.write_text(json.dumps(RECORDED))
    assert cli.main(["bench", "--from-result", str(recorded), "--recommend-scaling", "--slo-p95-ms", "2000"]) == 0
    printed = capsys.readouterr().out
    # the lowest over the workloads binds: long documents hold 2 where tickets hold 4
    assert f"-> cpu.{SCALING_KEY} = 2 (the lowest over the workloads: long-documents)" in printed
    assert f"-> gpu.{SCALING_KEY} = 4" in printed and "the highest level measured, so try higher ones" in printed
    assert "context.environments.<env>.cpu" in printed


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--from-result", "x.json"], "--from-result is read by --recommend-scaling"),
        (["--recommend-scaling", "--url", "http://127.0.0.1:1"], "--recommend-scaling needs --slo-p95-ms"),
        ([], "one of the arguments --url --sagemaker-endpoint is required"),
        (["--url", "http://a", "--prices"], "--prices needs --instance-type"),
        (["--url", "http://a", "--prices", "--instance-type", "ml.c6i.8xlarge", "--compare", "http://b"], "--prices"),
        (["--workload", "chat"], "workloads are 'all' or some of ticket-routing"),
    ],
)
def test_arguments_that_do_not_fit_together_are_refused(args: list[str], message: str, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["bench", *args])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("url", ["http://10.0.0.5:8080", "https://example.com", "http://127.0.0.1.example.com"])
def test_load_goes_only_to_loopback_urls(url: str, tmp_path: Path, capsys) -> None:
    assert cli.main(["bench", "--url", url, "--out", str(tmp_path)]) == 1
    assert "only to a loopback URL" in capsys.readouterr().err
    assert not (tmp_path / "bench.json").exists()


@pytest.mark.parametrize(("count", "duration"), [("0", "1"), ("100001", "1"), ("1", "3601")])
def test_levels_are_bounded_in_count_and_time(count: str, duration: str, capsys) -> None:
    args = ["bench", "--url", "http://127.0.0.1:1", "--count", count, "--duration", duration]
    assert cli.main(args) == 1
    assert "per level must be" in capsys.readouterr().err


def _instance_types(node: Any) -> set[str]:
    """Every instance type a cdk.json environment names (endpoints, pools, per-type alarms, bulk, shadows)."""
    if isinstance(node, dict):
        return {t for key, value in node.items() for t in _instance_types(key) | _instance_types(value)}
    if isinstance(node, list):
        return {t for value in node for t in _instance_types(value)}
    return {node} if isinstance(node, str) and node.startswith("ml.") else set()


def test_the_shipped_prices_cover_every_instance_type_cdk_json_names(tmp_path: Path, capsys) -> None:
    """`bench --prices` prices every type an environment ships, dev's ml.c6i.xlarge first (it used to fail)."""
    cdk_json = json.loads((Path(__file__).resolve().parents[2] / "cdk.json").read_text(encoding="utf-8"))
    named = _instance_types(cdk_json["context"]["environments"])
    assert "ml.c6i.xlarge" in named
    table = load_prices()
    assert {t: table.price(t) > 0 for t in named} == dict.fromkeys(named, True)

    class Answering(BaseHTTPRequestHandler):  # stands in for an adapter: every decision accepted
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            body = b'{"model": "m", "answers": {}, "usage": {"input_tokens": 1, "output_tokens": 0}}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Answering)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        args = ["bench", "--url", url, "--concurrency", "1", "--count", "2", "--warmup", "0", "--out", str(tmp_path)]
        assert cli.main([*args, "--prices", "--instance-type", "ml.c6i.xlarge"]) == 0
    finally:
        server.shutdown()
    assert "cost per 1,000 requests" in capsys.readouterr().out
    report = json.loads((tmp_path / "bench.json").read_text(encoding="utf-8"))
    assert report["targets"][0]["price_per_hour"] == table.price("ml.c6i.xlarge")


def test_a_failure_every_request_would_meet_ends_the_level_at_once() -> None:
    """No AWS credentials in a client thread (bench --warmup 0): the level raises it instead of reporting 0/0."""
    from botocore.exceptions import NoCredentialsError

    class Unsigned:
        label, sends = "sagemaker:x", 0

        def send(self, body: Any) -> Reply:
            self.sends += 1
            raise NoCredentialsError

        def close(self) -> None:
            pass

    transport = Unsigned()
    workload = workloads.RequestFile([{"state": "s", "questions": {"q": {"type": "noul"}}}])
    with pytest.raises(NoCredentialsError):
        run_level(transport, workload, 4, count=100, duration_s=60, policy=RetryPolicy())
    assert transport.sends <= 4  # each client tried once at most; nothing was retried
