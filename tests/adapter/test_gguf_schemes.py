"""Decision-tuned GGUFs: decision-typed copies of the real SmolLM2 GGUF (metadata only, tensors copied
unchanged with the `gguf` package) served by the adapter as a real process over real HTTP, and the
scheme logic on its own (metadata validation, label codes, chunks, the prefix split)."""

from __future__ import annotations

import functools
import json
import os
import string
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import gguf
import httpx
import numpy as np
import pytest
from decision_adapter.core.settings import AdapterSettings
from decision_adapter.prompting import make_scheme
from decision_adapter.prompting.gguf import LevScheme, OpenJevScheme, anchored_chunks, combine_anchored
from decision_adapter.prompting.systemone import TemplateNotSeparable
from decision_spec import contract
from decision_spec.gguf_metadata import (
    InvalidDecisionMetadata,
    ModelMetadata,
    UnsupportedDecisionScheme,
    bucket_of,
    read_decision_metadata,
)
from decision_spec.manifest import Calibration, Manifest, sha256_file, write_manifest
from decision_spec.question_types import options_of
from decision_spec.schemas import DecisionRequest
from jevcompat import runner
from jinja2.sandbox import ImmutableSandboxedEnvironment

from tests.app_support import AppServer, app_server, start_app
from tests.conftest import MODEL_DIR, MODEL_FILE, require_model, start_adapter
from tests.decision_template_support import TEMPLATE
from tests.jevcompat_support import ALL_BUT_COSTLIEST, MANY, assert_conformant_but_the_costliest

F32, STR = gguf.GGUFValueType.FLOAT32, gguf.GGUFValueType.STRING
LETTERS = string.ascii_uppercase + string.ascii_lowercase
BILLING = "I was charged twice for my March invoice and want a refund of the duplicate payment."
REFUND: dict[str, Any] = {"type": "noul", "instructions": "Is the customer asking for money back?"}
TEAM2: dict[str, Any] = {
    "type": "choice",
    "instructions": "Which team?",
    "criteria": {"Billing": "Payments", "Sales": "Pricing"},
}
TEAM4: dict[str, Any] = {
    "type": "choice",
    "instructions": "Which team should handle this ticket?",
    "criteria": {
        "Billing": "Payments, invoices, refunds, double charges",
        "Login": "Passwords, sign-in failures",
        "Sales": "Pricing, upgrades, new contracts",
        "Shipping": None,
    },
}
TEAM7: dict[str, Any] = {
    "type": "choice",
    "instructions": "Which queue?",
    "criteria": {
        name: f"Tickets about {name.lower()}"
        for name in ("Billing", "Refunds", "Login", "Sales", "Bugs", "Legal", "Other")
    },
}
ANGER: dict[str, Any] = {
    "type": "score",
    "instructions": "How frustrated is the customer?",
    "criteria": ["Calm", "Irritated", "Upset", "Angry", "Furious"],
}
MIXED = {"refund": REFUND, "team2": TEAM2, "team4": TEAM4, "team7": TEAM7, "anger": ANGER}
HOT = {"noul": 2.5, "choice": 2.5, "choice.3_5": 0.75}  # score left at the default 1.0


# ---------------------------------------------------------------- GGUF copies


@functools.cache
def bundled_reader() -> gguf.GGUFReader:
    """The bundled GGUF parsed once (1.6 s of the 2.2 a copy took) for every copy this module writes."""
    return gguf.GGUFReader(MODEL_DIR / MODEL_FILE)


def write_variant(directory: Path, extra: dict[str, tuple[Any, gguf.GGUFValueType]]) -> Path:
    """A copy of the SmolLM2 GGUF with the same tensors and metadata plus `extra`, and its manifest."""
    directory.mkdir(parents=True)
    target = directory / MODEL_FILE
    reader = bundled_reader()
    arch = reader.get_field("general.architecture")
    assert arch is not None
    writer = gguf.GGUFWriter(target, arch=arch.contents(), endianess=reader.endianess)
    alignment = reader.get_field("general.alignment")
    if alignment is not None:
        writer.data_alignment = alignment.contents()
    for field in reader.fields.values():
        if field.name == "general.architecture" or field.name.startswith("GGUF.") or field.name in extra:
            continue
        vtype = field.types[0]
        sub_type = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), vtype, sub_type=sub_type)
    for key, (value, vtype) in extra.items():
        writer.add_key_value(key, value, vtype)
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
    write_manifest(
        Manifest(model_file=MODEL_FILE, sha256=sha256_file(target), size_bytes=target.stat().st_size, source="test"),
        directory / "manifest.json",
    )
    return directory


def decision_keys(kind: str, temperatures: dict[str, float] | None = None) -> dict[str, tuple[Any, gguf.GGUFValueType]]:
    keys: dict[str, tuple[Any, gguf.GGUFValueType]] = {
        "llama.decision.type": (kind, STR),
        "tokenizer.chat_template.systemone": (TEMPLATE, STR),
    }
    keys.update({f"llama.decision.temperature.{k}": (v, F32) for k, v in (temperatures or {}).items()})
    return keys


class Variants:
    """The GGUF copies by name (the decision keys each adds), each written on first use: a test that needs two of
    them (the change counts run one such test in a scratch tree) writes two."""

    KEYS: Mapping[str, tuple[str, dict[str, float] | None]] = {
        "openjev": ("openjev", {"choice": 1.0}),
        "openjev-hot": ("openjev", HOT),
        "lev": ("lev", None),
        "nimble": ("nimble", None),
        "foo": ("foo", None),
    }

    def __init__(self, root: Path) -> None:
        self.root = root
        self.made: dict[str, Path] = {}

    def __getitem__(self, name: str) -> Path:
        if name not in self.made:
            kind, temperatures = self.KEYS[name]
            self.made[name] = write_variant(self.root / name, decision_keys(kind, temperatures))
        return self.made[name]


@pytest.fixture(scope="module")
def variants(tmp_path_factory: pytest.TempPathFactory) -> Variants:
    require_model()
    return Variants(tmp_path_factory.mktemp("gguf-variants"))


def _adapter(model_dir: Path) -> Iterator[AppServer]:
    server = start_app(model_dir=model_dir)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def openjev(variants: Variants) -> Iterator[AppServer]:
    yield from _adapter(variants["openjev"])


@pytest.fixture(scope="module")
def openjev_hot(variants: Variants) -> Iterator[AppServer]:
    yield from _adapter(variants["openjev-hot"])


@pytest.fixture(scope="module")
def lev(variants: Variants) -> Iterator[AppServer]:
    yield from _adapter(variants["lev"])


@pytest.fixture(scope="module")
def vocab() -> Iterator[Any]:
    from llama_cpp import Llama

    require_model()
    llm = Llama(str(MODEL_DIR / MODEL_FILE), vocab_only=True, verbose=False)
    yield llm
    llm.close()


def tokens(vocab: Any, text: str, *, add_bos: bool = False) -> list[int]:
    return list(vocab.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True))


def ask(url: str, state: object, questions: Mapping[str, object]) -> dict[str, Any]:
    r = httpx.post(
        f"{url}/v1/systemone", json={"model": "jev-latest", "state": state, "questions": questions}, timeout=300
    )
    assert r.status_code == 200, r.text
    return dict(r.json())


def distribution(answer: dict[str, Any]) -> np.ndarray:
    if answer["type"] == "noul":
        return np.array([answer["noul"], 1 - answer["noul"]])
    return np.array(list(answer["probabilities"].values()))


def tempered(p: np.ndarray, t: float) -> np.ndarray:
    """softmax(logits / T) from softmax(logits): p_T is proportional to p ** (1 / T)."""
    logp = np.log(p) / t
    q = np.exp(logp - logp.max())
    return np.asarray(q / q.sum())


def independent_render(state: object, question: dict[str, Any], labels: list[str] | None = None) -> str:
    """The template rendered by the test itself: plain Jinja (sandboxed), a plain-JSON tojson."""
    env = ImmutableSandboxedEnvironment()
    env.filters["tojson"] = lambda v: json.dumps(v, ensure_ascii=False)
    if question["type"] == "noul":
        crit = question.get("criteria") or {}
        options = [{"key": "true", "description": crit.get("true")}, {"key": "false", "description": crit.get("false")}]
    elif question["type"] == "choice":
        options = [{"key": k, "description": v} for k, v in question["criteria"].items()]
    else:
        options = [{"key": str(i), "description": v} for i, v in enumerate(question["criteria"])]
    extra = {"label": labels} if labels is not None else {}
    return env.from_string(TEMPLATE).render(
        id="ignored",
        type=question["type"],
        instructions=question.get("instructions"),
        state=state,
        options=options,
        images=[],
        **extra,
    )


# ---------------------------------------------------------------- scheme logic, no model


def meta_with(kind: str | None, **extra: str) -> dict[str, str]:
    meta = {"general.architecture": "llama", "tokenizer.chat_template.systemone": TEMPLATE, **extra}
    if kind is not None:
        meta["llama.decision.type"] = kind
    return meta


def test_decision_metadata_types_and_temperatures_are_read_and_checked() -> None:
    assert (
        read_decision_metadata({"general.architecture": "llama", "tokenizer.chat_template.systemone": TEMPLATE}) is None
    )
    read = read_decision_metadata(
        meta_with(
            "openjev", **{"llama.decision.temperature.choice": "2.5", "llama.decision.temperature.choice.3_5": "0.75"}
        )
    )
    assert read is not None and read.type == "openjev"
    temps = read.temperatures
    assert [bucket_of(n) for n in (2, 3, 5, 6, 10, 11, 255)] == ["2", "3_5", "3_5", "6_10", "6_10", "11", "11"]
    assert (temps.of("choice", 4), temps.of("choice", 2), temps.of("choice", 60), temps.of("noul", 2)) == (
        0.75,
        2.5,
        2.5,
        1.0,
    )
    for kind in ("nimble", "kev", "laya", "clef", "foo"):
        with pytest.raises(UnsupportedDecisionScheme, match=f"llama.decision.type = '{kind}'"):
            read_decision_metadata(meta_with(kind))
    for bad in ("0", "-1", "abc", "nan", "inf"):
        with pytest.raises(InvalidDecisionMetadata, match=r"llama\.decision\.temperature\.score\.6_10"):
            read_decision_metadata(meta_with("lev", **{"llama.decision.temperature.score.6_10": bad}))
    with pytest.raises(InvalidDecisionMetadata, match=r"tokenizer\.chat_template\.systemone"):
        read_decision_metadata({"general.architecture": "llama", "llama.decision.type": "openjev"})
    assert issubclass(UnsupportedDecisionScheme, ValueError) and issubclass(InvalidDecisionMetadata, ValueError)


def test_anchored_chunks_cover_every_option_and_recover_the_full_softmax() -> None:
    """Past 52 options openjev asks chunks led by option 0; when every chunk's distribution is the full
    softmax restricted to it (Luce's axiom), combining them gives back the full softmax exactly."""
    rng = np.random.default_rng(7)
    for n in (53, 60, 104, 255):
        chunks = anchored_chunks(n, 52)
        assert all(c[0] == 0 and len(c) <= 52 for c in chunks)
        assert sorted(i for c in chunks for i in c[1:]) == list(range(1, n))
        logits = rng.normal(0, 3, n)
        per_pass = []
        for chunk in chunks:
            lp = np.full(n, np.nan)  # slots outside the chunk are never read
            sub = logits[chunk]
            lp[chunk] = sub - np.log(np.sum(np.exp(sub)))
            per_pass.append(lp)
        combined = combine_anchored(per_pass, chunks)
        full = np.exp(logits) / np.exp(logits).sum()
        got = np.exp(combined - combined.max())
        assert np.allclose(got / got.sum(), full, atol=1e-12)
    assert anchored_chunks(52, 52) == [list(range(52))]


def scheme(kind: str, vocab: Any, template: str = TEMPLATE) -> Any:
    meta = {**dict(vocab.metadata), "llama.decision.type": kind, "tokenizer.chat_template.systemone": template}
    return make_scheme(
        ModelMetadata.read(meta),
        read_decision_metadata(meta),
        AdapterSettings(),
        bos_text="<|im_start|>",
        eos_text="<|im_end|>",
        tokenize=lambda t: tokens(vocab, t),
    )


def question(body: dict[str, Any]) -> Any:
    return DecisionRequest.model_validate({"state": "s", "questions": {"q": body}}).questions["q"]


@pytest.mark.model
def test_lev_codes_are_single_tokens_or_two_letters_for_the_whole_question(vocab: Any) -> None:
    lev = scheme("lev", vocab)
    assert isinstance(lev, LevScheme) and lev.single_labels == 35  # A..Z, AA..AI are one token each; AJ is not
    for n, first_codes in ((30, [("A",), ("B",)]), (35, [("A",), ("B",)]), (36, [("A", "A"), ("A", "B")])):
        q = question({"type": "choice", "criteria": {f"o{i}": None for i in range(n)}})
        passes = lev.passes(q, options_of(q), qid="q", state="s")
        assert len(passes) == 2 and passes[1].order == list(reversed(range(n)))
        assert passes[0].codes[:2] == first_codes and len({len(c) for c in passes[0].codes}) == 1
        shown = "".join(passes[0].codes[n - 1])
        assert f"\n{shown}. o{n - 1}\n" in passes[0].suffix_text  # the template shows the codes read
    score = question({"type": "score", "criteria": ["low", "high"]})
    assert len(lev.passes(score, options_of(score), qid="q", state="s")) == 1
    openjev = scheme("openjev", vocab)
    assert (
        isinstance(openjev, OpenJevScheme) and openjev.single_labels == 52 and openjev.tail == "<|im_start|>assistant\n"
    )
    assert openjev.name == "openjev/gguf-systemone"
    assert openjev.version != scheme("openjev", vocab, "{# v2 #}" + TEMPLATE).version  # states never cross templates


@pytest.mark.model
@pytest.mark.parametrize(
    "state", ["plain", "ends with two newlines\n\n", "ends with one\n", " spaces  ", {"k": ["v\n"]}, ""]
)
def test_prefix_and_suffix_tokenize_to_exactly_the_render(vocab: Any, state: object) -> None:
    """The split is cut where tokenizing the parts apart changes no token, whatever the state ends with."""
    openjev = scheme("openjev", vocab)
    q = question(TEAM4)
    render = independent_render(state, TEAM4)
    prefix = openjev.prefix_texts(state)
    (single,) = openjev.passes(q, options_of(q), qid="q", state=state)
    assert "".join(prefix) + single.suffix_text == render
    assert [t for text in prefix for t in tokens(vocab, text)] + tokens(vocab, single.suffix_text) == tokens(
        vocab, render
    )
    assert len(prefix) == 2 and prefix[0].endswith("<|im_start|>user\n")  # the head: one unit, cached across states
    assert prefix[1].startswith("State:\n")  # the state is shared by every question of the request


@pytest.mark.model
def test_question_text_before_the_shared_prefix_is_refused_clearly(vocab: Any) -> None:
    tricky = "{% if options | length > 20 %}Many options.\n{% endif %}" + TEMPLATE
    openjev = scheme("openjev", vocab, tricky)  # the probes (2 and 3 options) do not reveal it
    q = question({"type": "choice", "criteria": {f"o{i}": None for i in range(21)}})
    with pytest.raises(TemplateNotSeparable, match="question-specific text before"):
        openjev.passes(q, options_of(q), qid="q", state="s")
    with pytest.raises(InvalidDecisionMetadata, match="does not compile"):
        scheme("openjev", vocab, "{% for %}")


# ---------------------------------------------------------------- the adapter on decision-typed copies


@pytest.mark.model
@pytest.mark.slow  # the GGUF copies this needs and their adapters: 15 s or more
def test_the_model_reads_exactly_the_template_render(openjev: AppServer, vocab: Any) -> None:
    """(a) usage.input_tokens equals the token count of the template rendered by the test, and the answer
    equals a softmax over the label logits of that render evaluated in one piece by llama-cpp-python."""
    import llama_cpp
    from llama_cpp import Llama

    add_bos = vocab.metadata.get("tokenizer.ggml.add_bos_token", "true") != "false"
    cases: list[tuple[object, str, dict[str, Any]]] = [
        (BILLING, "refund", REFUND),
        (
            {"ticket": BILLING, "tags": ["billing", "ü"]},
            "team",
            {**TEAM4, "instructions": ["Route it.", {"rule": "one"}]},
        ),
        ("Line one.\n\n", "anger", ANGER),
    ]
    llm = Llama(str(MODEL_DIR / MODEL_FILE), n_ctx=2048, n_threads=2, verbose=False)
    try:
        for state, qid, q in cases:
            body = ask(openjev.url, state, {qid: q})
            assert body["x_run"]["prompt_template"] == "openjev/gguf-systemone"
            render = independent_render(state, q)
            ids = tokens(vocab, render, add_bos=add_bos)
            assert body["usage"]["input_tokens"] == len(ids), (qid, render)
            llm.reset()
            llm.eval(ids)
            logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1), shape=(llm.n_vocab(),))
            n = len(distribution(body["answers"][qid]))
            label_ids = [tokens(vocab, c)[0] for c in LETTERS[:n]]
            slot = logits[label_ids].astype(np.float64)
            expected = np.exp(slot - slot.max()) / np.exp(slot - slot.max()).sum()
            assert np.allclose(distribution(body["answers"][qid]), expected, atol=1e-5), qid
    finally:
        llm.close()


@pytest.mark.model
@pytest.mark.slow  # the GGUF copies this needs and their adapters: 15 s or more
def test_gguf_temperatures_are_softmax_of_logits_over_t(openjev: AppServer, openjev_hot: AppServer) -> None:
    """(b) Same tensors and prompt, T from the GGUF: p_T is p_1 ** (1/T) renormalised, per type and bucket."""
    cold = ask(openjev.url, BILLING, MIXED)
    hot = ask(openjev_hot.url, BILLING, MIXED)
    expected_t = {"refund": 2.5, "team2": 2.5, "team4": 0.75, "team7": 2.5, "anger": 1.0}
    for qid, t in expected_t.items():
        p1, pt = distribution(cold["answers"][qid]), distribution(hot["answers"][qid])
        assert np.allclose(pt, tempered(p1, t), atol=1e-6, rtol=0), qid
        if t != 1.0:
            assert np.max(np.abs(pt - p1)) > 1e-3, qid  # the temperature really moved it
    assert max(distribution(cold["answers"]["team7"])) - min(distribution(cold["answers"]["team7"])) > 0.01
    assert hot["x_run"]["calibration"] == {
        "source": "gguf",
        "temperature": {"noul": 2.5, "choice": 2.5, "score": 1.0, "choice.3_5": 0.75},
    }
    assert cold["x_run"]["calibration"]["source"] == "gguf"


@pytest.mark.model
@pytest.mark.slow  # the GGUF copies this needs and their adapters: 15 s or more
def test_lev_averages_the_distributions_of_the_two_orders(lev: AppServer, openjev: AppServer) -> None:
    """(c) lev's choice answer is the mean of the given-order and reversed-order distributions, each of
    which an openjev copy with the same template computes on its own."""
    reversed_team = {**TEAM4, "criteria": dict(reversed(list(TEAM4["criteria"].items())))}
    got = ask(lev.url, BILLING, {"team": TEAM4, "refund": REFUND})["answers"]
    given = ask(openjev.url, BILLING, {"team": TEAM4})["answers"]["team"]["probabilities"]
    backwards = ask(openjev.url, BILLING, {"team": reversed_team})["answers"]["team"]["probabilities"]
    mean = {k: (given[k] + backwards[k]) / 2 for k in given}
    assert list(got["team"]["probabilities"]) == list(TEAM4["criteria"]) and got["team"]["x_orders"] == 2
    assert all(abs(got["team"]["probabilities"][k] - mean[k]) < 1e-6 for k in mean), (got["team"], mean)
    assert max(abs(given[k] - backwards[k]) for k in given) > 1e-3  # the order matters, so the mean is not trivial
    assert got["refund"]["x_orders"] == 1  # noul is asked in one order
    many = ask(lev.url, BILLING, {"q": {"type": "choice", "criteria": {f"Queue {i}": None for i in range(40)}}})
    probs = list(many["answers"]["q"]["probabilities"].values())
    assert contract.is_distribution(probs) and len(probs) == 40  # two-letter codes past AI for this model


@pytest.mark.model
@pytest.mark.slow  # the GGUF copies this needs and their adapters: 15 s or more
@pytest.mark.parametrize("kind", ["nimble", "foo"])
def test_undeclared_scheme_types_refuse_to_start(variants: Variants, tmp_path: Path, kind: str) -> None:
    """(d) The process exits non-zero, and its log names the type and the key."""
    adapter = start_adapter(tmp_path, model_dir=variants[kind], wait=False)
    assert adapter.proc.wait(timeout=120) != 0
    refused = [line for line in adapter.log_lines() if line.get("event") == "model_not_loaded"]
    assert refused, adapter.log_path.read_text()
    assert f"llama.decision.type = '{kind}'" in str(refused[0]["message"]) and "refusing to start" in str(
        refused[0]["message"]
    )


@pytest.mark.model
@pytest.mark.slow  # the GGUF copies this needs and their adapters: 15 s or more
def test_manifest_calibration_overrides_gguf_temperatures(
    variants: Variants, openjev: AppServer, tmp_path: Path
) -> None:
    """(e) The hot copy with a manifest calibration of T=2: the manifest's T applies, the GGUF's do not."""
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    os.link(variants["openjev-hot"] / MODEL_FILE, model_dir / MODEL_FILE)
    manifest = Manifest.model_validate(json.loads((variants["openjev-hot"] / "manifest.json").read_text()))
    calibrated = manifest.model_copy(
        update={"calibration": Calibration(temperature={"noul": 2.0, "choice": 2.0, "score": 2.0})}
    )
    write_manifest(calibrated, model_dir / "manifest.json")
    with app_server(model_dir=model_dir) as adapter:
        got = ask(adapter.url, BILLING, MIXED)
    cold = ask(openjev.url, BILLING, MIXED)
    for qid in MIXED:
        assert np.allclose(
            distribution(got["answers"][qid]), tempered(distribution(cold["answers"][qid]), 2.0), atol=1e-6
        ), qid
    assert got["x_run"]["calibration"] == {
        "source": "manifest",
        "temperature": {"noul": 2.0, "choice": 2.0, "score": 2.0},
    }


@pytest.mark.model
@pytest.mark.slow  # the GGUF copies this needs and their adapters: 15 s or more
def test_openjev_answers_past_52_options(openjev: AppServer) -> None:
    """(f) 60 options: every option answered (two chunks led by the first option), summing to 1."""
    criteria = {"Billing": "Payments and refunds", **{f"Queue {i:02d}": f"Tickets for queue {i}" for i in range(1, 60)}}
    body = ask(openjev.url, BILLING, {"q": {"type": "choice", "instructions": "Which queue?", "criteria": criteria}})
    answer = body["answers"]["q"]
    probs = list(answer["probabilities"].values())
    assert list(answer["probabilities"]) == list(criteria) and answer["x_orders"] == 2
    assert contract.is_distribution(probs) and abs(sum(probs) - 1) < 1e-9
    assert answer["choice"] == max(answer["probabilities"], key=answer["probabilities"].get)
    assert max(probs) - min(probs) > 1e-3  # not uniform garbage
    at_limit = ask(openjev.url, BILLING, {"q": {"type": "choice", "criteria": dict(list(criteria.items())[:52])}})
    assert at_limit["answers"]["q"]["x_orders"] == 1


@pytest.mark.model
@pytest.mark.slow
def test_jevcompat_musts_pass_on_an_openjev_model(openjev: AppServer) -> None:
    """(g) Every MUST and SHOULD of the conformance suite but its 2-to-255-options case (run in full on the default
    adapter: tests/jevcompat_support.py), and 255 options here: openjev asks them in chunks of 52 led by option 0."""
    report = runner.run(openjev.url, timeout=300, only=set(ALL_BUT_COSTLIEST))
    assert_conformant_but_the_costliest(report)
    assert {r.id: r.status for r in report.results}["semantics.question-id"] == "pass"
    body = ask(openjev.url, BILLING, {"q": {"type": "choice", "instructions": "Which queue?", "criteria": MANY}})
    answer = body["answers"]["q"]
    assert list(answer["probabilities"]) == list(MANY) and answer["x_orders"] == len(anchored_chunks(255, 52)) == 5
    assert contract.is_distribution(list(answer["probabilities"].values()))
    assert abs(sum(answer["probabilities"].values()) - 1) < 1e-9
