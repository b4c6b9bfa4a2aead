"""`decisionctl bench` against real adapters on the real SmolLM2 model over real HTTP.

A second adapter with a one-slot queue (DECISION_MAX_QUEUE=1, DECISION_MAX_CONCURRENCY=1) is full as
soon as two requests are in flight, so its 429s must show up in the numbers, not as a crash.
"""

from __future__ import annotations

import json

import pytest
from decisionctl import cli
from decisionctl.prices import load_prices

from tests.conftest import require_model, start_adapter

pytestmark = [pytest.mark.model, pytest.mark.slow]


@pytest.fixture(scope="module")
def one_slot_adapter(tmp_path_factory: pytest.TempPathFactory):
    require_model()
    adapter = start_adapter(
        tmp_path_factory.mktemp("one-slot"), env={"DECISION_MAX_QUEUE": "1", "DECISION_MAX_CONCURRENCY": "1"}
    )
    yield adapter
    adapter.stop()


# Short one-question requests keep the 64 requests of the next test to about a minute on 2 cores.
SHORT_REQUESTS = [
    {
        "model": "jev-latest",
        "state": "Refund my duplicate payment, please.",
        "questions": {"refund": {"type": "noul", "instructions": "Does the customer ask for money back?"}},
    },
    {
        "model": "jev-latest",
        "state": "The app crashes on start.",
        "questions": {"team": {"type": "choice", "criteria": {"Billing": None, "Technical": None}}},
    },
    {
        "model": "jev-latest",
        "state": "WHERE IS MY ORDER?!",
        "questions": {"anger": {"type": "score", "criteria": ["Calm", "Annoyed", "Furious"]}},
    },
]


def test_bench_at_1_2_4_8_counts_429s_and_compares_two_endpoints_with_costs(
    one_slot_adapter, adapter_url, tmp_path, capsys
) -> None:
    out = tmp_path / "bench"
    requests = tmp_path / "requests.jsonl"
    requests.write_text("".join(json.dumps(r) + "\n" for r in SHORT_REQUESTS))
    # --timeout: a loaded CI machine may be slow; this test is about counting rejections, not about speed
    code = cli.main(
        [
            "bench",
            "--url",
            one_slot_adapter.url,
            "--label",
            "one-slot",
            "--compare",
            adapter_url,
            "--compare-label",
            "default",
            "--concurrency",
            "1,2,4,8",
            "--count",
            "8",
            "--prices",
            "--instance-type",
            "ml.c6i.8xlarge",
            "--compare-instance-type",
            "ml.g6e.xlarge",
            "--requests",
            str(requests),
            "--timeout",
            "600",
            "--out",
            str(out),
        ]
    )
    printed = capsys.readouterr()
    assert code == 0, printed.err
    report = json.loads((out / "bench.json").read_text())
    assert (out / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    prices = load_prices()
    one_slot, default = report["targets"]
    assert (one_slot["label"], default["label"]) == ("one-slot", "default")
    for target, instance in ((one_slot, "ml.c6i.8xlarge"), (default, "ml.g6e.xlarge")):
        assert [lv["concurrency"] for lv in target["levels"]] == [1, 2, 4, 8]
        assert target["price_per_hour"] == prices.price(instance)
        for lv in target["levels"]:
            assert lv["sent"] == 8 and lv["errors"] == 0
            assert lv["accepted"] + lv["rejected_429"] == 8 and lv["accepted"] >= 1
            lat = lv["latency_s"]
            assert 0 < lat["p50"] <= lat["p95"] <= lat["p99"] <= lat["max"]
            assert lv["throughput_per_s"] == pytest.approx(lv["accepted"] / lv["wall_s"])
            assert lv["rate_429"] == pytest.approx(lv["rejected_429"] / 8)
            expected_cost = target["price_per_hour"] / (lv["throughput_per_s"] * 3600) * 1000
            assert lv["cost_per_1000"] == pytest.approx(expected_cost)
    by_level = {lv["concurrency"]: lv for lv in one_slot["levels"]}
    assert by_level[1]["rejected_429"] == 0  # one client never finds the queue full
    assert by_level[4]["rejected_429"] >= 1 and by_level[8]["rejected_429"] >= 4  # two slots, the rest turned away
    assert all(lv["rejected_429"] == 0 for lv in default["levels"])  # a 16-deep queue takes 8 clients
    titles, header = printed.out.splitlines()[:2]
    assert titles.split() == ["one-slot", "(ml.c6i.8xlarge)", "|", "default", "(ml.g6e.xlarge)"]
    assert header.split().count("p99") == 2 and header.split().count("USD/1k") == 2
    assert "EXAMPLES: check them against the AWS price list" in printed.out


def test_bench_for_a_duration(one_slot_adapter, tmp_path) -> None:
    out = tmp_path / "bench"
    assert (
        cli.main(
            [
                "bench",
                "--url",
                one_slot_adapter.url,
                "--concurrency",
                "2",
                "--duration",
                "2",
                "--warmup",
                "0",
                "--timeout",
                "600",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    (level,) = json.loads((out / "bench.json").read_text())["targets"][0]["levels"]
    assert level["sent"] >= 2 and level["wall_s"] >= 2.0 and level["errors"] == 0


@pytest.mark.parametrize(
    "extra",
    [
        [],  # no instance type at all
        ["--compare-instance-type", "ml.g6e.xlarge", "--compare", "http://b"],  # the first target's is missing
        ["--instance-type", "ml.c6i.8xlarge", "--compare", "http://b"],  # the compared target's is missing
    ],
)
def test_prices_need_the_instance_type_of_every_target(extra: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["bench", "--url", "http://a", "--prices", *extra])
    assert exit_info.value.code == 2 and "--prices needs --instance-type" in capsys.readouterr().err
