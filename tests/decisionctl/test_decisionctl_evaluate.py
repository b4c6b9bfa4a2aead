"""`decisionctl evaluate` against the real adapter serving the real SmolLM2 model over real HTTP.

One pass over the shipped example set is shared by the tests of this module: it is interrupted
(SIGKILL) part-way and resumed, and the resumed, complete run is the one whose metrics, plots and
calibration fit the other tests check. A counting proxy in front of the adapter counts the requests
at the server side. SmolLM2-135M is a plumbing model (about chance on these cases): nothing here
asserts that it decides well, only that what evaluate reports is what the endpoint said.
"""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
import pytest
from decision_spec.manifest import Calibration, SlotPrior, read_manifest, write_manifest
from decisionctl.commands import cli
from decisionctl.core import temperatures
from decisionctl.core.labeled import Prediction

from tests.app_support import start_app
from tests.conftest import MODEL_SHA256

pytestmark = [pytest.mark.model, pytest.mark.slow]

EXAMPLES = Path(str(resources.files("decisionctl").joinpath("data", "examples.jsonl")))


class CountingProxy:
    """Forwards every request to the adapter and remembers what each decision request asked."""

    def __init__(self, upstream: str) -> None:
        self.upstream, self.sent, self.lock = upstream, [], threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                request = json.loads(body)
                with outer.lock:
                    outer.sent.append(_key(request["state"], request["questions"]["q"]))
                upstream = httpx.post(
                    outer.upstream + self.path, content=body, timeout=300, headers={"Content-Type": "application/json"}
                )
                try:
                    self.send_response(upstream.status_code)
                    for name in ("Content-Type", "Retry-After"):
                        if name in upstream.headers:
                            self.send_header(name, upstream.headers[name])
                    self.send_header("Content-Length", str(len(upstream.content)))
                    self.end_headers()
                    self.wfile.write(upstream.content)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client was killed while its request was in flight

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def count(self) -> int:
        with self.lock:
            return len(self.sent)


def _key(state: Any, question: Any) -> str:
    return json.dumps([state, question], sort_keys=True)


def _examples() -> list[dict[str, Any]]:
    return [json.loads(line) for line in EXAMPLES.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def proxy(adapter_url: str):
    p = CountingProxy(adapter_url)
    yield p
    p.server.shutdown()
    p.server.server_close()


@pytest.fixture(scope="module")
def evaluated(proxy: CountingProxy, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Start evaluate in a process, SIGKILL it after a few cases are scored, then re-run it to completion."""
    out = tmp_path_factory.mktemp("evaluate") / "run"
    predictions = out / "predictions.jsonl"
    argv = [sys.executable, "-m", "decisionctl.commands.cli", "evaluate", str(EXAMPLES), "--url", proxy.url]
    argv += ["--out", str(out)]  # the same command twice: killed part-way, then resumed
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        if predictions.exists() and len(predictions.read_text().splitlines()) >= 4:
            break
        time.sleep(0.05)
    assert proc.poll() is None, f"evaluate ended before it was interrupted: {proc.stderr.read() if proc.stderr else ''}"
    proc.kill()
    proc.wait()
    text = predictions.read_text()
    scored_first = [json.loads(line)["id"] for line in text[: text.rfind("\n") + 1].splitlines()]
    sent_first = proxy.count()
    time.sleep(0.5)  # let the proxy finish the request the killed client left in flight
    proc2 = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    return {
        "out": out,
        "scored_first": scored_first,
        "sent_first": sent_first,
        "sent_second": proxy.sent[sent_first:],
        "returncode": proc2.returncode,
        "stdout": proc2.stdout,
        "stderr": proc2.stderr,
        "results": json.loads((out / "results.json").read_text()),
    }


def test_an_interrupted_run_resumes_without_resending_scored_cases(evaluated: dict[str, Any]) -> None:
    cases = _examples()
    scored = set(evaluated["scored_first"])
    assert evaluated["returncode"] == 0, evaluated["stderr"]
    assert 4 <= len(scored) < len(cases)
    unscored = sorted(_key(c["state"], c["question"]) for c in cases if c["id"] not in scored)
    assert sorted(evaluated["sent_second"]) == unscored  # exactly the rest, each once, none of the scored ones
    results = evaluated["results"]
    assert results["complete"] and results["scored"] == len(cases)
    assert results["reused_from_earlier_runs"] == len(scored) and results["sent_this_run"] == len(unscored)
    assert f"{len(unscored)} cases sent, {len(scored)} already scored" in evaluated["stderr"]


def test_evaluate_writes_metrics_plots_and_identity_that_match_an_independent_computation(evaluated) -> None:
    out, results = evaluated["out"], evaluated["results"]
    for png in ("reliability.png", "confidence_hist.png"):
        data = (out / png).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    assert results["identity"]["model_sha256"] == MODEL_SHA256
    assert results["identity"]["calibration"]["source"] in ("identity", "manifest", "gguf")
    # Independent computation from the labeled file and the per-case probabilities the endpoint returned
    expected = {c["id"]: c for c in _examples()}
    preds = {p["id"]: p for p in results["predictions"]}
    assert set(preds) == set(expected)
    confidences, rights, briers = [], [], []
    by_type: dict[str, list[bool]] = {}
    for cid, case in expected.items():
        p, q = preds[cid], case["question"]
        assert math.isclose(sum(p["probs"]), 1.0, abs_tol=1e-6)
        if q["type"] == "noul":
            p_yes = p["probs"][0]
            truth = [1.0, 0.0] if case["expected"] else [0.0, 1.0]
            right, conf = (p_yes >= 0.5) == case["expected"], max(p_yes, 1 - p_yes)
            dist = [p_yes, 1 - p_yes]
        else:
            names = list(q["criteria"]) if q["type"] == "choice" else [str(i) for i in range(len(q["criteria"]))]
            assert p["options"] == names
            want = names.index(case["expected"]) if q["type"] == "choice" else case["expected"]
            truth = [1.0 if i == want else 0.0 for i in range(len(names))]
            dist = p["probs"]
            top = max(range(len(dist)), key=lambda i: dist[i])
            right, conf = top == want, dist[top]
        confidences.append(conf)
        rights.append(right)
        briers.append(sum((a - b) ** 2 for a, b in zip(dist, truth, strict=True)))
        by_type.setdefault(q["type"], []).append(right)
    ece = 0.0
    for k in range(10):
        members = [i for i, c in enumerate(confidences) if min(int(c * 10), 9) == k]
        if members:
            acc = sum(rights[i] for i in members) / len(members)
            ece += len(members) / len(confidences) * abs(acc - sum(confidences[i] for i in members) / len(members))
    overall = results["metrics"]["overall"]
    assert overall["ece"] == pytest.approx(ece, abs=1e-12)
    assert overall["brier"] == pytest.approx(sum(briers) / len(briers), abs=1e-12)
    assert overall["accuracy"] == pytest.approx(sum(rights) / len(rights))
    for qtype, flags in by_type.items():
        assert results["metrics"][qtype]["accuracy"] == pytest.approx(sum(flags) / len(flags))
    assert 0.0 <= results["metrics"]["choice"]["macro_f1"] <= 1.0
    # the endpoint answered with real, state-dependent distributions, not one fixed vector
    assert len({tuple(round(x, 4) for x in p["probs"]) for p in results["predictions"]}) > len(preds) // 2
    assert "Coverage and accuracy" in evaluated["stdout"] and "overall: " in evaluated["stdout"]
    assert len(results["coverage"]["overall"]) == 20 and results["recommendation"]["overall"]["target_accuracy"] == 0.9
    assert "state" not in (out / "predictions.jsonl").read_text()  # no customer text written


def test_fit_calibration_reports_heldout_ece_and_the_adapter_applies_what_it_wrote(
    evaluated, proxy: CountingProxy, model_copy: Path, tmp_path: Path, capsys
) -> None:
    manifest_path = model_copy / "manifest.json"
    # A uniform slot prior (it changes no answer) in the manifest: the fit must keep it beside its temperatures.
    template = json.loads((evaluated["out"] / "identity.json").read_text())["prompt_template"]
    prior = SlotPrior(
        model_sha256=MODEL_SHA256, prompt_template=template, slots={str(n): [1 / n] * n for n in range(2, 7)}
    )
    write_manifest(
        read_manifest(manifest_path).model_copy(update={"calibration": Calibration(slot_prior=prior)}), manifest_path
    )
    original = manifest_path.read_bytes()
    before_count = proxy.count()
    code = cli.main(
        [
            "evaluate",
            str(EXAMPLES),
            "--url",
            proxy.url,
            "--out",
            str(evaluated["out"]),
            "--fit-calibration",
            "--seed",
            "3",
            "--manifest",
            str(manifest_path),
        ]
    )
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert proxy.count() == before_count  # every case was already scored: the fit sends nothing
    fit = json.loads((evaluated["out"] / "results.json").read_text())["calibration_fit"]
    assert fit["heldout_cases"] >= 15 and fit["fit_cases"] >= 25
    line = (
        f"Held-out ECE ({fit['heldout_cases']} cases): {fit['heldout_ece_before']:.3f} before, "
        f"{fit['heldout_ece_after']:.3f} after: "
    )
    assert line in printed.out
    assert (evaluated["out"] / "reliability_heldout.png").read_bytes()[:4] == b"\x89PNG"
    # Deterministic (the shipped cases, split seed 3, the bundled model): the held-out ECE goes down (0.139 to 0.063,
    # noul and choice temperatures applied; at seed 0 it does not), so the manifest is rewritten and the rest of this
    # test checks that an adapter applies it.
    assert fit["improved"], printed.out
    assert "calibration lowered it" in printed.out and manifest_path.read_bytes() != original
    written = read_manifest(manifest_path)
    assert written.sha256 == MODEL_SHA256 and written.calibration is not None
    assert written.calibration.slot_prior == prior
    for qtype, entry in fit["per_type"].items():
        assert written.calibration.for_type(qtype) == pytest.approx(entry["temperature"], rel=1e-5)
    # An adapter started on the rewritten manifest serves p' proportional to p ** (T0 / T), as the fit assumed.
    fresh = start_app(model_dir=model_copy)
    try:
        preds = {p["id"]: p for p in json.loads((evaluated["out"] / "results.json").read_text())["predictions"]}
        cases = {c["id"]: c for c in _examples()}
        for qtype in ("noul", "choice", "score"):
            cid = next(i for i, p in preds.items() if p["type"] == qtype)
            reply = httpx.post(
                fresh.url + "/v1/systemone",
                timeout=300,
                json={"model": "jev-latest", "state": cases[cid]["state"], "questions": {"q": cases[cid]["question"]}},
            ).json()
            assert reply["x_run"]["calibration"]["source"] == "manifest"
            in_force = reply["x_run"]["calibration"]["temperature"][qtype]
            assert in_force == pytest.approx(written.calibration.for_type(qtype))
            old = Prediction.from_json(preds[cid])
            entry = fit["per_type"][qtype]
            predicted = temperatures.rescale(old, entry["exponent"] if entry["applied"] else 1.0)
            answer = reply["answers"]["q"]
            served = [answer["noul"]] if qtype == "noul" else [answer["probabilities"][o] for o in old.options]
            assert served == pytest.approx(predicted.probs[: len(served)], abs=2e-3)
        # The saved predictions came from the uncalibrated endpoint: resuming them against this one is refused.
        out = tmp_path / "resumed"
        out.mkdir()
        for name in ("predictions.jsonl", "identity.json"):
            (out / name).write_bytes((evaluated["out"] / name).read_bytes())
        one_more = tmp_path / "one-more.jsonl"
        one_more.write_text(json.dumps({**cases[cid], "id": "not-scored-yet"}) + "\n")
        assert cli.main(["evaluate", str(one_more), "--url", fresh.url, "--out", str(out)]) == 1
        assert "model or calibration changed" in capsys.readouterr().err
    finally:
        fresh.stop()


def test_changed_option_wording_is_scored_again(evaluated, proxy: CountingProxy, tmp_path: Path) -> None:
    """A re-run after editing one case's wording sends that case only; the others are reused."""
    cases = _examples()
    edited = next(c for c in cases if c["question"]["type"] == "choice")
    edited["question"]["criteria"] = {k: f"{v} (reworded)" for k, v in edited["question"]["criteria"].items()}
    path = tmp_path / "examples-reworded.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in cases))
    out = tmp_path / "run"
    out.mkdir()
    for name in ("predictions.jsonl", "identity.json"):
        (out / name).write_bytes((evaluated["out"] / name).read_bytes())
    before = proxy.count()
    assert cli.main(["evaluate", str(path), "--url", proxy.url, "--out", str(out)]) == 0
    assert proxy.sent[before:] == [_key(edited["state"], edited["question"])]
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert json.loads((out / "results.json").read_text())["cases_sha256"] == digest


def test_decide_through_the_sagemaker_route_of_the_real_adapter(adapter_url: str, capsys) -> None:
    """/invocations is what SageMaker calls: it takes the decision body the CLI sends."""
    root = Path(__file__).resolve().parents[2]
    code = cli.main(
        [
            "decide",
            "--url",
            adapter_url,
            "--route",
            "/invocations",
            str(root / "examples" / "ticket.json"),
            "--show-identity",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    table = out.split("\n\n")[0].splitlines()[2:]  # the answers table, below its header and rule
    rows = {line.split()[0]: line.split()[1] for line in table}
    assert {rows.get("refund"), rows.get("team"), rows.get("anger")} == {"noul", "choice", "score"}
    assert f'"model_sha256": "{MODEL_SHA256}"' in out


def test_compare_reports_what_a_rewording_changed_on_the_real_endpoint(
    evaluated: dict[str, Any], adapter_url: str, tmp_path: Path
) -> None:
    """Option wording is model input: the example set with every question's instructions reworded, evaluated
    against the same endpoint, then compared with the first run; the report must agree with the two results."""
    reworded = tmp_path / "reworded.jsonl"
    cases = _examples()
    for case in cases:
        case["question"]["instructions"] = "Read the message carefully. " + case["question"]["instructions"]
    reworded.write_text("".join(json.dumps(case) + "\n" for case in cases))
    new = tmp_path / "reworded-run"
    assert cli.main(["evaluate", str(reworded), "--url", adapter_url, "--out", str(new)]) == 0
    out = tmp_path / "comparison"
    assert cli.main(["compare", str(evaluated["out"]), str(new), "--out", str(out)]) == 0
    report = json.loads((out / "comparison.json").read_text())
    base = {p["id"]: p for p in evaluated["results"]["predictions"]}
    after = {p["id"]: p for p in json.loads((new / "results.json").read_text())["predictions"]}
    assert report["overall"]["cases"] == len(base) == len(after) == len(cases)
    assert report["overall"]["content_changed"] == len(cases)  # every case's wording changed
    assert report["identity_changes"] == {}  # the same endpoint, model and calibration
    expected = {
        cid: 0.5 * sum(abs(x - y) for x, y in zip(b["probs"], after[cid]["probs"], strict=True))
        for cid, b in base.items()
    }
    assert {c["id"]: c["total_variation"] for c in report["cases"]} == pytest.approx(expected, abs=1e-12)
    changed = sum(b["predicted_index"] != after[cid]["predicted_index"] for cid, b in base.items())
    assert report["overall"]["decisions_changed"] == changed
    assert max(expected.values()) > 0.001  # the reworded prompt moved the model's distributions
    assert (out / "comparison.png").stat().st_size > 10_000
