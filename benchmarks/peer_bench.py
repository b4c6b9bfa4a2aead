"""The adapter side by side with llama.cpp's own server on the same GGUF and the same decider-suite cases.

llama.cpp's server answers `/v1/systemone` for a GGUF whose metadata declares it a decision model
(`<arch>.decision.type` and a `tokenizer.chat_template.systemone` template; tools/server/README.md of llama.cpp).
`typed-copy` writes such a copy of a plain GGUF without touching the weights: the same tensors and metadata, plus
`decision.type = openjev` and a systemone template that asks as this project's generic prompt does (its system
prompt, "State:", "Question:", lettered options with their descriptions). Served by both, the prompt is the same
token for token, so every difference between the two is the server's own: the adapter adds its calibration, its
policy and (on a plain GGUF) order debiasing. The third column is the adapter's generic scheme on the plain GGUF
as packaged (order debiasing `reverse`).

    .venv/bin/python benchmarks/peer_bench.py typed-copy .cache/models/qwen2.5-coder-1.5b/<gguf> /tmp/typed
    # serve /tmp/typed with llama-server (-fa off) and with the adapter, then, one at a time, alone:
    .venv/bin/python benchmarks/peer_bench.py run --url http://127.0.0.1:8091 --name llama-server --out DIR
    .venv/bin/python benchmarks/peer_bench.py report DIR [--json benchmarks/peer.json]

`run` sends each sampled case (`--per-type` of each question type from the test part, the same cases for every
column: the first ones of the file, which is in a hashed order) as one `/v1/systemone` request, then each choice
case again with its options in a seeded shuffled order (the flip rate), then a latency probe: `--latency-rounds`
requests of 1 question and of 8 questions over one state. The peer is never a dependency of this project: this
script needs only a URL.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
TEST_PART = ROOT / "evaluation" / "decider" / "test.jsonl"
SYSTEM = (
    "You are a careful decision assistant. Read the state, then answer the question by choosing exactly one "
    "of the labelled options. Reply with the option's label only."
)
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
# ChatML, as Qwen2.5 was tuned; newlines inside expressions so the render does not depend on trim_blocks. The
# question id is never shown. Noul options are true, false (shown Yes, No); score options are "0".."n-1" with the
# level's text as their description; choice options are key: description, as the generic prompt shows them.
TEMPLATE = (
    "{% set L = [" + ", ".join(f"'{c}'" for c in LETTERS) + "] %}"
    "<|im_start|>system\n" + SYSTEM + "<|im_end|>\n"
    "<|im_start|>user\nState:\n"
    "{% if state is string %}{{ state }}{% else %}{{ state | tojson }}{% endif %}"
    "{{ '\\n\\nQuestion: ' }}"
    "{% if instructions is none %}Which option fits the state?"
    "{% elif instructions is string %}{{ instructions }}{% else %}{{ instructions | tojson }}{% endif %}"
    "{{ '\\n' }}{% if type == 'score' %}{{ 'Levels (A is the lowest, ' ~ L[(options | length) - 1] ~ "
    "' the highest):' }}{% else %}Options:{% endif %}"
    "{% for o in options %}{{ '\\n' ~ L[loop.index0] ~ '. ' }}"
    "{% if type == 'score' %}{{ o.description if o.description is string else o.description | tojson }}"
    "{% else %}{% if type == 'noul' %}{{ 'Yes' if o.key == 'true' else 'No' }}{% else %}{{ o.key }}{% endif %}"
    "{% if o.description is not none %}{{ ': ' }}"
    "{% if o.description is string %}{{ o.description }}{% else %}{{ o.description | tojson }}{% endif %}"
    "{% endif %}{% endif %}{% endfor %}"
    "{{ '<|im_end|>\\n<|im_start|>assistant\\n' }}"
)


def typed_copy(source: Path, out: Path) -> Path:
    """A copy of `source` whose metadata declares it an openjev decision model with TEMPLATE; its manifest too."""
    import gguf
    from decision_spec.manifest import Manifest, sha256_file, write_manifest

    out.mkdir(parents=True, exist_ok=True)
    target = out / source.name
    reader = gguf.GGUFReader(source)
    arch_field = reader.get_field("general.architecture")
    assert arch_field is not None
    arch = arch_field.contents()
    extra = {f"{arch}.decision.type": "openjev", "tokenizer.chat_template.systemone": TEMPLATE}
    writer = gguf.GGUFWriter(target, arch=arch, endianess=reader.endianess)
    alignment = reader.get_field("general.alignment")
    if alignment is not None:
        writer.data_alignment = alignment.contents()
    for field in reader.fields.values():
        if field.name == "general.architecture" or field.name.startswith("GGUF.") or field.name in extra:
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), vtype, sub_type=sub)
    for key, value in extra.items():
        writer.add_key_value(key, value, gguf.GGUFValueType.STRING)
    for tensor in reader.tensors:
        writer.add_tensor_info(
            tensor.name, tensor.data.shape, tensor.data.dtype, tensor.data.nbytes, tensor.tensor_type
        )
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for tensor in reader.tensors:
        writer.write_tensor_data(tensor.data, tensor_endianess=reader.endianess)
    writer.close()
    manifest = Manifest(
        model_file=target.name,
        sha256=sha256_file(target),
        size_bytes=target.stat().st_size,
        source=f"benchmarks/peer_bench.py typed-copy of {source.name}",
    )
    write_manifest(manifest, out / "manifest.json")
    return target


def sample(per_type: int) -> list[dict[str, Any]]:
    cases = [json.loads(line) for line in TEST_PART.read_text().splitlines() if line.strip() and line[0] != "#"]
    taken: dict[str, int] = {}
    out = []
    for case in cases:
        t = case["question"]["type"]
        if taken.get(t, 0) < per_type:
            taken[t] = taken.get(t, 0) + 1
            out.append(case)
    return out


def option_keys(question: dict[str, Any]) -> list[str]:
    if question["type"] == "noul":
        return ["true", "false"]
    if question["type"] == "score":
        return [str(i) for i in range(len(question["criteria"]))]
    return list(question["criteria"])


def probabilities(answer: dict[str, Any], keys: list[str]) -> list[float]:
    if "noul" in answer and "probabilities" not in answer:
        p = float(answer["noul"])
        return [p, 1 - p]
    probs = answer["probabilities"]
    return [float(probs[k]) for k in keys]


def expected_key(case: dict[str, Any]) -> str:
    e = case["expected"]
    return ("true" if e else "false") if isinstance(e, bool) else str(e)


def ask(client: httpx.Client, url: str, state: Any, questions: dict[str, Any]) -> tuple[dict[str, Any], float]:
    t0 = time.perf_counter()
    r = client.post(f"{url}/v1/systemone", json={"state": state, "questions": questions})
    elapsed = time.perf_counter() - t0
    r.raise_for_status()
    return r.json()["answers"], elapsed


def shuffled(question: dict[str, Any], seed: str) -> dict[str, Any]:
    keys = list(question["criteria"])
    rng = random.Random(seed)  # noqa: S311 - a seeded shuffle, not a secret
    order = keys[:]
    while order == keys:
        rng.shuffle(order)
    return {**question, "criteria": {k: question["criteria"][k] for k in order}}


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{args.name}.jsonl"
    done = {json.loads(line)["key"] for line in path.read_text().splitlines()} if path.is_file() else set()
    cases = sample(args.per_type)
    with httpx.Client(timeout=600) as client, path.open("a") as sink:

        def record(key: str, row: dict[str, Any]) -> None:
            sink.write(json.dumps({"key": key, **row}) + "\n")
            sink.flush()

        jobs: list[tuple[str, dict[str, Any], dict[str, Any]]] = [(c["id"], c, c["question"]) for c in cases]
        jobs += [
            (f"{c['id']}#shuffled", c, shuffled(c["question"], c["id"]))
            for c in cases
            if c["question"]["type"] == "choice"
        ]
        for i, (key, case, question) in enumerate(jobs):
            if key in done:
                continue
            answers, elapsed = ask(client, args.url, case["state"], {"q": question})
            keys = option_keys(question)
            record(
                key,
                {
                    "id": case["id"],
                    "type": question["type"],
                    "keys": keys,
                    "expected": expected_key(case),
                    "probs": probabilities(answers["q"], keys),
                    "latency_s": elapsed,
                },
            )
            print(f"{args.name}: {i + 1}/{len(jobs)} {key} {elapsed:.2f} s", file=sys.stderr, flush=True)
        state_case = cases[0]
        questions = [c["question"] for c in cases[:8]]
        for n in (1, 8):
            key = f"latency/{n}"
            if key in done:
                continue
            qs = {f"q{i}": questions[i % len(questions)] for i in range(n)}
            times = [ask(client, args.url, state_case["state"], qs)[1] for _ in range(args.latency_rounds)]
            record(key, {"questions": n, "latency_s": times})
            print(f"{args.name}: {n} questions a request: median {statistics.median(times):.2f} s", file=sys.stderr)
    return 0


def ece(rows: list[dict[str, Any]], bins: int = 10) -> float:
    total, acc = 0.0, [[0, 0.0, 0.0] for _ in range(bins)]
    for r in rows:
        conf = max(r["probs"])
        b = min(int(conf * bins), bins - 1)
        acc[b][0] += 1
        acc[b][1] += conf
        acc[b][2] += r["keys"][r["probs"].index(conf)] == r["expected"]
    for n, c, a in acc:
        total += abs(c - a) if n else 0.0
    return sum(abs(c - a) for n, c, a in acc if n) / max(len(rows), 1)


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    centre, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return ((centre - half) / (1 + z * z / n), (centre + half) / (1 + z * z / n))


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    plain = [r for r in rows if "#" not in r["key"] and not r["key"].startswith("latency/")]
    right = [r["keys"][r["probs"].index(max(r["probs"]))] == r["expected"] for r in plain]
    by_id = {r["id"]: r for r in plain}
    flips = [r for r in rows if r["key"].endswith("#shuffled")]
    picked = lambda r: r["keys"][r["probs"].index(max(r["probs"]))]  # noqa: E731
    choice = [r for r in plain if r["type"] == "choice"]
    first_picked = sum(picked(r) == r["keys"][0] for r in choice)
    first_right = sum(r["expected"] == r["keys"][0] for r in choice)
    last_picked = sum(picked(r) == r["keys"][-1] for r in choice)
    last_right = sum(r["expected"] == r["keys"][-1] for r in choice)
    latency = {r["questions"]: statistics.median(r["latency_s"]) for r in rows if r["key"].startswith("latency/")}
    per_case = [r["latency_s"] for r in plain]
    return {
        "cases": len(plain),
        "accuracy": sum(right) / max(len(right), 1),
        "accuracy_ci": wilson(sum(right), len(right)),
        "by_type": {
            t: sum(ok for ok, r in zip(right, plain, strict=True) if r["type"] == t)
            / sum(r["type"] == t for r in plain)
            for t in sorted({r["type"] for r in plain})
        },
        "ece": ece(plain),
        "choice_first_slot": {"picked": first_picked, "right": first_right, "of": len(choice)},
        "choice_last_slot": {"picked": last_picked, "right": last_right, "of": len(choice)},
        "flip_rate": sum(picked(f) != picked(by_id[f["id"]]) for f in flips) / max(len(flips), 1),
        "flips": [sum(picked(f) != picked(by_id[f["id"]]) for f in flips), len(flips)],
        "latency_per_case_p50_s": statistics.median(per_case) if per_case else None,
        "latency_request_median_s": latency,
    }


def report(args: argparse.Namespace) -> int:
    out = Path(args.dir)
    runs = {
        path.stem: [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        for path in sorted(out.glob("*.jsonl"))
    }
    result: dict[str, Any] = {name: summary(rows) for name, rows in runs.items()}
    lines = [
        "| server | cases | accuracy (95 % CI) | yes/no | choice | score | ECE | first slot picked / right "
        "| flips under shuffle | p50 a case | 1 question | 8 questions |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, s in result.items():
        lo, hi = s["accuracy_ci"]
        bt = s["by_type"]
        lat = s["latency_request_median_s"]
        fs = s["choice_first_slot"]
        lines.append(
            f"| {name} | {s['cases']} | {s['accuracy']:.1%} ({lo:.0%}-{hi:.0%}) | {bt.get('noul', 0):.0%} "
            f"| {bt.get('choice', 0):.0%} | {bt.get('score', 0):.0%} | {s['ece']:.3f} "
            f"| {fs['picked']} / {fs['right']} of {fs['of']} | {s['flips'][0]} of {s['flips'][1]} "
            f"| {s['latency_per_case_p50_s']:.2f} s | {lat.get(1, math.nan):.2f} s | {lat.get(8, math.nan):.2f} s |"
        )
    if {"llama-server", "adapter-typed"} <= set(runs):  # the same prompt on both: every difference is the server's
        same = agreement(*(answered(runs[name]) for name in ("llama-server", "adapter-typed")))
        result["agreement_llama_server_adapter_typed"] = same
        lines += [
            "",
            f"llama-server and adapter-typed pick the same option on {same['same']} of {same['requests']} requests; "
            f"where they differ, the two picks' probabilities are at most {same['max_gap']:.3f} apart "
            f"(mean {same['mean_gap']:.3f}) in either server's answer",
        ]
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return 0


def answered(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A run's answered requests by key (the latency probes left out)."""
    return {r["key"]: r for r in rows if "probs" in r}


def agreement(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """On the requests both answered: how often they pick the same option, and how near a tie each difference is
    (the larger, over the two answers, of the gap between the two picked options' probabilities)."""
    gaps, same = [], 0
    for key in sorted(a.keys() & b.keys()):
        pa, pb = a[key]["probs"], b[key]["probs"]  # in the order of the request's option keys
        ia, ib = max(range(len(pa)), key=pa.__getitem__), max(range(len(pb)), key=pb.__getitem__)
        if ia == ib:
            same += 1
        else:
            gaps.append(max(abs(pa[ia] - pa[ib]), abs(pb[ia] - pb[ib])))
    return {
        "requests": same + len(gaps),
        "same": same,
        "max_gap": max(gaps, default=0.0),
        "mean_gap": statistics.fmean(gaps) if gaps else 0.0,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("typed-copy")
    t.add_argument("gguf", type=Path)
    t.add_argument("out", type=Path)
    r = sub.add_parser("run")
    r.add_argument("--url", required=True)
    r.add_argument("--name", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--per-type", type=int, default=15)
    r.add_argument("--latency-rounds", type=int, default=3)
    p = sub.add_parser("report")
    p.add_argument("dir")
    p.add_argument("--json")
    args = ap.parse_args(argv)
    if args.cmd == "typed-copy":
        print(typed_copy(args.gguf, args.out))
        return 0
    return run(args) if args.cmd == "run" else report(args)


if __name__ == "__main__":
    sys.exit(main())
