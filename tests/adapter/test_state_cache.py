"""Issue 6: states kept warm across requests. Answers served from a cached or resident state equal
answers computed from scratch, whatever the order of requests and evictions, also under concurrency."""

from __future__ import annotations

import random
import threading

import httpx
import pytest
from decision_adapter.state_cache import Snapshot, StateCache, prefix_key

from tests.app_support import AppServer, start_app

STATES = [
    "I was charged twice for my March invoice and want the duplicate payment refunded.",
    "The sign-in page rejects my password even after a reset; I am locked out of my account. " * 2,
    {"subject": "Upgrade", "body": "We want to move 40 seats to the enterprise plan next month.", "seats": 40},
    ["Order #88 arrived broken.", "The box was crushed.", "I want a replacement, not a refund."],
    "Our API returns 502 errors for every request since the deploy at 09:00 UTC; production is down. " * 3,
]
QUESTIONS = {
    "refund": {"type": "noul", "instructions": "Is the customer asking for money back?"},
    "team": {
        "type": "choice",
        "instructions": "Which team should handle this?",
        "criteria": {"Billing": "Payments", "Support": "Account access", "Sales": "Plans", "Engineering": "Outages"},
    },
    "urgency": {"type": "score", "instructions": "How urgent is it?", "criteria": ["Low", "Medium", "High"]},
    "human": {"type": "noul", "instructions": "Should a human review this?", "criteria": {"true": "Money is involved"}},
}


def test_lru_evicts_least_recently_used_within_budget() -> None:
    cache = StateCache(budget_bytes=250)
    snaps = {name: Snapshot((i,), bytes(100)) for i, name in enumerate("abc")}
    for name, snap in snaps.items():
        assert cache.put(name, snap)
        if name == "b":
            assert cache.get("a", (0,)) is not None  # a is now more recent than b
    assert cache.get("b", (1,)) is None and cache.get("a", (0,)) is not None and cache.get("c", (2,)) is not None
    assert cache.bytes_held == 200 and cache.stats.evictions == 1
    assert not cache.put("huge", Snapshot((9,), bytes(300)))
    assert cache.get("a", (99,)) is None  # same key, other tokens (a collision) is never served


def test_prefix_key_depends_on_model_template_and_tokens() -> None:
    base = prefix_key("m", "t", [1, 2, 3])
    assert base != prefix_key("m2", "t", [1, 2, 3]) != prefix_key("m", "t2", [1, 2, 3])
    assert base != prefix_key("m", "t", [1, 2, 4]) and base == prefix_key("m", "t", (1, 2, 3))


def _probabilities(body: dict) -> dict[str, list[float]]:
    out = {}
    for qid, a in body["answers"].items():
        out[qid] = [a["noul"]] if a["type"] == "noul" else list(a["probabilities"].values())
    return out


def _ask(adapter: AppServer, state: object, qids: list[str]) -> dict:
    r = httpx.post(
        f"{adapter.url}/v1/systemone", json={"state": state, "questions": {q: QUESTIONS[q] for q in qids}}, timeout=300
    )
    assert r.status_code == 200, r.text
    return r.json()


STEPS = 24  # with seed 6 the sequence meets all three sources, hits and evictions (asserted below); it was 50


@pytest.mark.model
@pytest.mark.slow
def test_cached_answers_equal_uncached_over_a_random_sequence_with_evictions() -> None:
    cached = start_app(env={"DECISION_STATE_CACHE_MB": "6"})
    fresh = start_app(env={"DECISION_STATE_REUSE": "false"}, shared=True)  # keeps no state: sharing it changes nothing
    try:
        rng = random.Random(6)
        sources = []
        saved: dict[tuple[int, str], set[int]] = {}  # tokens a reused state saved over reading everything again
        computed: dict[tuple[int, tuple[str, ...]], dict] = {}  # the reference, computed once per distinct request
        for _ in range(STEPS):
            state = rng.randrange(len(STATES))
            qids = rng.sample(sorted(QUESTIONS), rng.randint(1, 2))
            a = _ask(cached, STATES[state], qids)
            if (state, tuple(qids)) not in computed:
                computed[state, tuple(qids)] = _ask(fresh, STATES[state], qids)
            b = computed[state, tuple(qids)]
            sources.append(a["x_run"]["state_source"])
            assert b["x_run"]["state_source"] == "computed"
            if a["x_run"]["state_source"] != "computed":
                key = (state, a["x_run"]["state_source"])
                saved.setdefault(key, set()).add(b["x_evaluated_tokens"] - a["x_evaluated_tokens"])
            for qid, probs in _probabilities(a).items():
                assert probs == pytest.approx(_probabilities(b)[qid], abs=1e-6), (qid, a["x_run"]["state_source"])
        counters = httpx.get(f"{cached.url}/metrics", timeout=10).json()["state_cache"]
        assert {"cache", "computed", "resident"} <= set(sources), sources
        # a restored state is not read again: the saving is its prefix, the same every time; a resident state
        # saves at least that (a question head left resident by the previous request is not read again either)
        restored = {state: v for (state, source), v in saved.items() if source == "cache"}
        assert restored and all(len(v) == 1 and min(v) > 0 for v in restored.values()), saved
        for (state, source), v in saved.items():
            assert source == "cache" or state not in restored or min(v) >= min(restored[state]), saved
        assert counters["evictions"] > 0 and counters["hits"] > 0
        assert counters["bytes_held"] <= counters["budget_bytes"] == 6 * 1024 * 1024
    finally:
        cached.stop()
        fresh.stop()


@pytest.mark.model
@pytest.mark.slow
def test_concurrent_requests_on_the_same_state_stay_correct() -> None:
    shared = start_app(env={"DECISION_MAX_CONCURRENCY": "2", "DECISION_STATE_CACHE_MB": "16"})
    fresh = start_app(env={"DECISION_STATE_REUSE": "false"}, shared=True)
    try:
        jobs = [(i % 2, [sorted(QUESTIONS)[i % len(QUESTIONS)]]) for i in range(8)]
        expected = [_probabilities(_ask(fresh, STATES[s], q)) for s, q in jobs]
        got: dict[int, dict] = {}

        def run(i: int) -> None:
            s, q = jobs[i]
            got[i] = _probabilities(_ask(shared, STATES[s], q))

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for i, want in enumerate(expected):
            for qid, probs in want.items():
                assert got[i][qid] == pytest.approx(probs, abs=1e-6)
        # the two contexts share one cache and one budget: idle contexts are taken in turn, so a state computed
        # by one is restored by the other, not computed again
        first, second = _ask(shared, STATES[3], ["refund"]), _ask(shared, STATES[3], ["urgency"])
        assert (first["x_run"]["state_source"], second["x_run"]["state_source"]) == ("computed", "cache")
        assert _probabilities(second)["urgency"] == pytest.approx(
            _probabilities(_ask(fresh, STATES[3], ["urgency"]))["urgency"], abs=1e-6
        )
        counters = httpx.get(f"{shared.url}/metrics", timeout=10).json()["state_cache"]
        assert counters["budget_bytes"] == 16 * 1024 * 1024 and counters["bytes_held"] <= counters["budget_bytes"]
    finally:
        shared.stop()
        fresh.stop()
