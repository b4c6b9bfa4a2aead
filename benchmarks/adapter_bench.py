"""Side-by-side benchmarks of the decision adapter on the bundled SmolLM2 model.

Every number is a ratio of two things measured in the same run, alternating, on the same machine
(the machines are shared and noisy; absolute times are printed for context only). Run:

    .venv/bin/python benchmarks/adapter_bench.py [--quick] [--out benchmarks/results.json]

Adapters run as processes through the `serve` entrypoint (decision_adapter.launcher), each with
the settings its comparison needs; raw llama-cpp-python runs in this process.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
from adapter_timing import (
    CHOICE,
    CHOICE_2,
    EIGHT,
    LONG_STATE,
    NOUL,
    SCORE,
    TICKET,
    alternate,
    client,
    close_clients,
    median_of,
    post,
    rss_mb,
)
from decision_adapter.launcher import MODEL_DIR, MODEL_FILE, ROOT, start_adapter
from decisionctl.load.closed_loop import percentiles


def bench_overhead_and_generation(tmp: Path, n: int) -> dict[str, Any]:
    """Adapter latency for one question vs raw llama-cpp-python eval of the same tokens; decision vs a chat
    completion that writes the label, on the same prompt."""
    import llama_cpp
    from decision_adapter.prompting.generic import SYSTEM_PROMPT, build_template, question_text
    from decision_spec.question_types import options_of
    from decision_spec.schemas import ChoiceQuestion
    from llama_cpp import Llama

    out: dict[str, Any] = {}
    plain = start_adapter(
        tmp / "plain",
        env={"DECISION_ORDER_DEBIAS": "false", "DECISION_STATE_REUSE": "false", "DECISION_CHAT_CONTEXTS": "1"},
    )
    debiased = start_adapter(tmp / "debiased", env={"DECISION_STATE_REUSE": "false"})
    try:
        body = {"state": TICKET, "questions": {"team": CHOICE}}
        llm = Llama(str(MODEL_DIR / MODEL_FILE), n_ctx=8192, n_threads=2, verbose=False)
        template = build_template(llm.metadata["tokenizer.chat_template"], bos_text="", eos_text="", add_bos=False)
        question = ChoiceQuestion.model_validate(CHOICE)
        suffix_body = question_text(question, [0, 1, 2], options_of(question))
        text = template.header + template.state_part(TICKET) + template.suffix(suffix_body)
        tokens = llm.tokenize(text.encode(), add_bos=False, special=True)

        def raw() -> float:
            t0 = time.perf_counter()
            llm.reset()
            llm.eval(tokens)
            llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
            return time.perf_counter() - t0

        adapter_s, raw_s = alternate(lambda: post(plain, body)[0], raw, n)
        llm.close()
        out["overhead"] = {
            "adapter_s": adapter_s,
            "raw_eval_s": raw_s,
            "ratio": adapter_s / raw_s,
            "prompt_tokens": len(tokens),
            "target": "<= 1.15",
        }
        user = f"State:\n{TICKET}\n\n{suffix_body}"
        chat = {
            "messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}],
            "max_tokens": 4,
            "temperature": 0,
        }
        decision_s, chat_s = alternate(
            lambda: post(plain, body)[0], lambda: post(plain, chat, "/v1/chat/completions")[0], n
        )
        debiased_s = median_of(lambda: post(debiased, body)[0], n)
        out["decision_vs_generation"] = {
            "decision_s": decision_s,
            "decision_debiased_s": debiased_s,
            "chat_completion_s": chat_s,
            "ratio": decision_s / chat_s,
            "ratio_debiased": debiased_s / chat_s,
            "target": "<= 1.0 (debias off)",
        }
    finally:
        plain.stop()
        debiased.stop()
    return out


def bench_shared_state(tmp: Path, n: int) -> dict[str, Any]:
    adapter = start_adapter(tmp / "shared", env={"DECISION_STATE_REUSE": "false"})
    try:
        one = {"state": LONG_STATE, "questions": {"q0": NOUL}}
        eight = {"state": LONG_STATE, "questions": EIGHT}
        t1, t8 = alternate(lambda: post(adapter, one)[0], lambda: post(adapter, eight)[0], n)
        tokens = post(adapter, one)[1]["usage"]["input_tokens"]
        separately = sum(post(adapter, {"state": LONG_STATE, "questions": {k: q}})[0] for k, q in EIGHT.items())
        return {
            "one_question_s": t1,
            "eight_questions_s": t8,
            "ratio": t8 / t1,
            "state_tokens_approx": tokens,
            "eight_separate_requests_ratio": separately / t1,
            "target": "<= 2.0",
        }
    finally:
        adapter.stop()


def bench_serial_tail(tmp: Path, count: int) -> dict[str, Any]:
    adapter = start_adapter(tmp / "tail")
    try:
        lat = []
        for i in range(count):
            state = f"Ticket {i}: " + TICKET.replace("March", ["March", "April", "May", "June"][i % 4])
            qs = {"refund": NOUL, "team": CHOICE, "anger": SCORE}
            lat.append(post(adapter, {"state": state, "questions": qs})[0])
        spread = percentiles(lat)  # the same definition `decisionctl bench` reports
        p50, p95 = spread["p50"], spread["p95"]
        assert p50 is not None and p95 is not None
        return {"requests": count, "p50_s": p50, "p95_s": p95, "ratio": p95 / p50, "target": "<= 1.5"}
    finally:
        adapter.stop()


def bench_memory(tmp: Path, count: int) -> dict[str, Any]:
    adapter = start_adapter(tmp / "memory", env={"DECISION_STATE_CACHE_MB": "0"})
    try:
        after: dict[int, float] = {}
        for i in range(1, count + 1):
            post(adapter, {"state": f"Ticket {i}: {TICKET}", "questions": {"refund": NOUL, "team": CHOICE}})
            if i in (10, count):
                after[i] = rss_mb(adapter)
        return {
            "rss_after_10_mb": after[10],
            f"rss_after_{count}_mb": after[count],
            "ratio": after[count] / after[10],
            "target": "<= 1.10",
        }
    finally:
        adapter.stop()


NEW_QUESTIONS = {  # per type: the first request's question, a new one of the same shape, and a third one
    "noul": (
        NOUL,
        {"type": "noul", "instructions": "Is the customer threatening to cancel?"},
        {"type": "noul", "instructions": "Has the customer contacted support before?"},
    ),
    "score": (
        SCORE,
        {**SCORE, "instructions": "How urgent is this ticket?"},
        {**SCORE, "instructions": "How likely is the customer to leave?"},
    ),
    "choice": (CHOICE, CHOICE_2, {**CHOICE, "instructions": "Which queue should this ticket go to?"}),
}


def bench_new_question(
    tmp: Path, n: int, *, debias: bool = True, types: tuple[str, ...] = tuple(NEW_QUESTIONS)
) -> dict[str, Any]:
    """Per question type: a new question on an already-seen state, the state restored from the cache, against
    the first request for that state, which asked a question of the same type and shape. Also a third question
    on the then resident state (what the cache's restore costs is the difference), and the share of the first
    request's evaluated tokens that the new question reads (no cache can go below it)."""
    env = {"DECISION_STATE_CACHE_MB": "256", "DECISION_ORDER_DEBIAS": str(debias).lower()}
    adapter = start_adapter(tmp / f"cache-debias-{debias}", env=env)
    out: dict[str, Any] = {}
    try:
        for qtype in types:
            first_q, new_q, third_q = NEW_QUESTIONS[qtype]
            firsts, agains, residents, shares = [], [], [], []
            for i in range(n):
                seen = f"Case {qtype} {i}. {LONG_STATE}"
                dt, first_body = post(adapter, {"state": seen, "questions": {"first": first_q}})
                assert first_body["x_run"]["state_source"] == "computed", first_body["x_run"]["state_source"]
                firsts.append(dt)
                post(adapter, {"state": f"Other {seen}", "questions": {"first": first_q}})  # moves the KV cache away
                dt, body = post(adapter, {"state": seen, "questions": {"new": new_q}})
                assert body["x_run"]["state_source"] == "cache", body["x_run"]["state_source"]
                agains.append(dt)
                shares.append(body["x_evaluated_tokens"] / first_body["x_evaluated_tokens"])
                dt, body = post(adapter, {"state": seen, "questions": {"third": third_q}})
                assert body["x_run"]["state_source"] == "resident", body["x_run"]["state_source"]
                residents.append(dt)
            first, again, resident = (statistics.median(x) for x in (firsts, agains, residents))
            out[qtype if debias else f"{qtype}_debias_off"] = {
                "first_request_s": first,
                "from_cache_s": again,
                "resident_s": resident,
                "ratio_cache": again / first,
                "ratio_resident": resident / first,
                "token_share": statistics.median(shares),
                "target": "<= 0.15",
            }
    finally:
        adapter.stop()
    return out


def bench_cache_memory(tmp: Path, mem_requests: int, mem_states: int) -> dict[str, Any]:
    """Resident memory against the cache budget over many distinct states."""
    budget_mb = 32
    adapter = start_adapter(tmp / "cache-memory", env={"DECISION_STATE_CACHE_MB": str(budget_mb)})
    try:
        post(adapter, {"state": f"State warm-up: {TICKET}", "questions": {"refund": NOUL}})  # same length as the rest
        base = rss_mb(adapter)
        for i in range(mem_requests):
            post(adapter, {"state": f"State {i % mem_states}: {TICKET}", "questions": {"refund": NOUL}})
        grown = rss_mb(adapter) - base
        counters = client(adapter).get(adapter.url + "/metrics").json()["state_cache"]
        return {
            "requests": mem_requests,
            "distinct_states": mem_states,
            "budget_mb": budget_mb,
            "rss_growth_mb": grown,
            "ratio_to_budget": grown / budget_mb,
            "counters": counters,
            "target": "growth <= budget * 1.10",
        }
    finally:
        adapter.stop()


ORDER_STATES = [
    "I was charged twice for my March invoice and want the duplicate payment refunded.",
    "The sign-in page rejects my password even after a reset; I am locked out.",
    "We would like a quote for moving 40 seats to the enterprise plan.",
    "Every API call has returned 502 since this morning's deploy; production is down.",
]
ORDER_QUESTION = {
    "Billing": "Payments and refunds",
    "Account access": "Passwords and sign-in",
    "Sales": "Plans and quotes",
    "Engineering": "Outages and errors",
}


def bench_order_bias(tmp: Path) -> dict[str, Any]:
    """The effect of order-debiasing: each question is asked under every rotation of its option order.
    Reported per setting: the mean total-variation distance between the distributions of one question
    under different orders (0 = order does not matter), how often the chosen option changes with the
    order, and the mean probability given to whatever option sits in the first slot."""
    out: dict[str, Any] = {}
    names = list(ORDER_QUESTION)
    settings = (
        ("debias_off", {"DECISION_ORDER_DEBIAS": "off"}),
        ("debias_on", {}),  # the default: the given and the reversed order
        ("debias_rotations", {"DECISION_ORDER_DEBIAS": "rotations"}),
    )
    for label, env in settings:
        adapter = start_adapter(tmp / label, env=env)
        try:
            tvs, flips, first_mass = [], [], []
            for state in ORDER_STATES:
                dists, choices = [], []
                for r in range(len(names)):
                    order = names[r:] + names[:r]
                    q = {
                        "type": "choice",
                        "instructions": "Which team should handle this?",
                        "criteria": {k: ORDER_QUESTION[k] for k in order},
                    }
                    probs = post(adapter, {"state": state, "questions": {"q": q}})[1]["answers"]["q"]["probabilities"]
                    dists.append([probs[k] for k in names])
                    choices.append(max(probs, key=probs.__getitem__))
                    first_mass.append(probs[order[0]])
                for i in range(len(dists)):
                    for j in range(i + 1, len(dists)):
                        tvs.append(0.5 * sum(abs(a - b) for a, b in zip(dists[i], dists[j], strict=True)))
                flips.append(len(set(choices)) > 1)
            out[label] = {
                "mean_tv_between_orders": statistics.mean(tvs),
                "share_of_questions_whose_choice_depends_on_order": sum(flips) / len(flips),
                "mean_first_slot_probability": statistics.mean(first_mass),
                "uniform_would_be": 1 / len(names),
            }
        finally:
            adapter.stop()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run, not for BENCHMARKS.md)")
    parser.add_argument("--only", nargs="*", help="run only these sections")
    parser.add_argument("--repeat", type=int, help="repetitions per timed comparison (default 9, 3 with --quick)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results.json")
    args = parser.parse_args()
    n = args.repeat or (3 if args.quick else 9)
    sections: dict[str, Callable[[Path], dict[str, Any]]] = {
        "overhead+generation": lambda t: bench_overhead_and_generation(t, n),
        "order_bias": lambda t: {"order_bias": bench_order_bias(t)},
        "shared_state": lambda t: {"shared_state": bench_shared_state(t, n)},
        "serial_tail": lambda t: {"serial_tail": bench_serial_tail(t, 20 if args.quick else 100)},
        "memory": lambda t: {"memory": bench_memory(t, 50 if args.quick else 500)},
        "new_question": lambda t: {
            "new_question_on_seen_state": {
                **bench_new_question(t, n),
                **bench_new_question(t, n, debias=False, types=("choice",)),
            }
        },
        "cache_memory": lambda t: {
            "cache_memory": bench_cache_memory(t, 100 if args.quick else 1000, 20 if args.quick else 200)
        },
    }
    results: dict[str, Any] = {
        "machine": {"cpu": _cpu(), "logical_cpus": psutil.cpu_count()},
        "model": MODEL_FILE,
        "quick": args.quick,
    }
    with tempfile.TemporaryDirectory() as tmp:
        for name, fn in sections.items():
            if args.only and name not in args.only:
                continue
            t0 = time.perf_counter()
            part = fn(Path(tmp) / name)
            results.update(part)
            print(f"{name} ({time.perf_counter() - t0:.0f} s): {json.dumps(part, indent=1)}", flush=True)
    close_clients()
    if args.only and args.out.exists():  # a partial run updates its sections and keeps the others
        earlier = json.loads(args.out.read_text())
        results = {**earlier, **results, "quick": bool(earlier.get("quick")) or args.quick}
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


def _cpu() -> str:
    from decision_adapter.identity import cpu_model

    return cpu_model()


if __name__ == "__main__":
    raise SystemExit(main())
