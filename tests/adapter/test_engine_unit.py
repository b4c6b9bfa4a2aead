"""DecisionEngine's logic on a scripted stand-in runtime (tests/fake_runtime.py), with the real generic scheme.

No model, no HTTP: the fake runtime returns scripted logits per evaluated suffix (a biased reader: an option's
content score plus its slot's bias), so each answer is checked against probabilities computed here by hand from
those logits. The same engine on the real model is tested in test_adapter_decisions.py and the other model tests.
"""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np
import pytest
from decision_adapter.asked import Asked, asked_of
from decision_adapter.calibration import ActiveCalibration
from decision_adapter.core.errors import InvalidRequest, TokenBudgetExceeded
from decision_adapter.engine import AnswerMemo, DecisionEngine
from decision_adapter.prompting.generic import SYSTEM_PROMPT, SYSTEM_PROMPT_NAMES, GenericScheme, build_template
from decision_adapter.runtime import LlamaRuntime
from decision_adapter.state_cache import StateCache
from decision_spec.contract import DebiasMode
from decision_spec.gguf_metadata import Temperatures
from decision_spec.schemas import DecisionRequest

from tests.fake_runtime import END, OTHER_LOGIT, VOCAB, FakeRuntime, encode, slot_reader

STATE = "Please refund the second charge."
HEADER = f"{SYSTEM_PROMPT}\n\n"  # the plain template (no chat template given)
TEAM = {"type": "choice", "criteria": {"Billing": None, "Technical": None, "Sales": None}}
URGENT = {"type": "noul"}
CONTENT = {"Billing": 2.0, "Technical": 0.5, "Sales": -1.0, "Yes": 1.0, "No": -0.5}
IDENTITY = ActiveCalibration("identity", Temperatures({}))


def make_engine(
    rt: FakeRuntime,
    mode: DebiasMode = "off",
    *,
    cache: StateCache | None = None,
    calibration: ActiveCalibration = IDENTITY,
    tolerance: float | None = None,
    out_of_scope: bool = False,
    reuse_states: bool = True,
    named: bool = False,
    max_request_tokens: int | None = None,
) -> DecisionEngine:
    template = build_template(
        None, bos_text="", eos_text="", add_bos=True, option_labels="names" if named else "letters"
    )
    scheme = GenericScheme(
        template, debias_mode=mode, debias_max_options=8, rotation_max_options=8, adaptive_tolerance=tolerance
    )
    return DecisionEngine(
        cast(LlamaRuntime, rt),
        scheme,
        model_sha256="0" * 64,
        calibration=calibration,
        cache=cache if cache is not None else StateCache(0),
        reuse_states=reuse_states,
        out_of_scope=out_of_scope,
        max_request_tokens=max_request_tokens,
    )


def request(state: str = STATE, **questions: dict[str, Any]) -> Asked:
    return asked_of(DecisionRequest.model_validate({"state": state, "questions": questions}))


def softmax(xs: list[float]) -> list[float]:
    top = max(xs)
    exps = [math.exp(x - top) for x in xs]
    return [e / sum(exps) for e in exps]


def log_softmax(xs: list[float]) -> list[float]:
    return [math.log(p) for p in softmax(xs)]


def test_off_reads_the_state_once_and_each_question_once_and_softmaxes_the_label_logits() -> None:
    rt = FakeRuntime(slot_reader(CONTENT))
    outcome = make_engine(rt).score(request(team=TEAM, urgent=URGENT))
    question_units = [
        "\n\nQuestion: Which option fits best?\nOptions:\nA. Billing\nB. Technical\nC. Sales\nAnswer:",
        "\n\nQuestion: Which answer fits the state?\nOptions:\nA. Yes\nB. No\nAnswer:",
    ]
    assert rt.decoded == [HEADER, f"State:\n{STATE}", *question_units]
    team, urgent = outcome.answers["team"], outcome.answers["urgent"]
    assert team.keys == ["Billing", "Technical", "Sales"] and urgent.keys == ["true", "false"]
    assert team.probs == pytest.approx(softmax([2.0, 0.5, -1.0]), abs=1e-12)
    assert urgent.probs == pytest.approx([1 / (1 + math.exp(-1.5)), 1 / (1 + math.exp(1.5))], abs=1e-12)
    assert (team.orders, team.orders_read, urgent.orders_read) == (1, ["given"], ["given"])
    labels = [math.exp(x) for x in (2.0, 0.5, -1.0)]  # every other token of the vocabulary has logit 0
    assert team.label_mass == pytest.approx(sum(labels) / (sum(labels) + (VOCAB - 3) * math.exp(OTHER_LOGIT)))
    tokens = len(encode(HEADER, add_bos=True)) + len(encode(f"State:\n{STATE}"))
    tokens += sum(len(encode(u)) for u in question_units)
    assert (outcome.input_tokens, outcome.evaluated_tokens, outcome.state_source) == (tokens, tokens, "computed")


def test_reverse_reads_the_head_once_and_averages_log_probabilities_over_both_orders() -> None:
    rt = FakeRuntime(slot_reader(CONTENT, slot_bias=[1.5, 0.0, 0.0]))
    outcome = make_engine(rt, "reverse").score(request(team=TEAM, urgent=URGENT))
    assert rt.decoded[2:5] == [
        "\n\nQuestion: Which option fits best?\n",
        "Options:\nA. Billing\nB. Technical\nC. Sales\nAnswer:",
        "Options:\nA. Sales\nB. Technical\nC. Billing\nAnswer:",
    ]
    given = log_softmax([2.0 + 1.5, 0.5, -1.0])  # per option: Billing, Technical, Sales
    reversed_slots = log_softmax([-1.0 + 1.5, 0.5, 2.0])  # per slot: Sales, Technical, Billing
    combined = [
        (given[0] + reversed_slots[2]) / 2,
        (given[1] + reversed_slots[1]) / 2,
        (given[2] + reversed_slots[0]) / 2,
    ]
    team = outcome.answers["team"]
    assert team.probs == pytest.approx(softmax(combined), abs=1e-12)
    assert (team.orders, team.orders_read) == (2, ["given", "reversed"])
    # two options: the mean of logs cancels a slot bias exactly, p(yes) = sigmoid(content difference)
    assert outcome.answers["urgent"].probs[0] == pytest.approx(1 / (1 + math.exp(-1.5)), abs=1e-12)
    assert outcome.answers["urgent"].slot_probabilities[0][0] == pytest.approx(1 / (1 + math.exp(-3.0)))
    # usage counts one order's render per question, its shared head included: header, state, then per question
    # the head and the given order's suffix (decoded: team head, given, reversed, urgent head, given, reversed)
    assert len(rt.decoded) == 8
    one_render = [len(encode(HEADER, add_bos=True)), *(len(encode(rt.decoded[i])) for i in (1, 2, 3, 5, 6))]
    assert outcome.input_tokens == sum(one_render)


def test_rotations_average_the_probabilities_of_every_rotation() -> None:
    bias = [1.0, 0.0, -0.5]
    rt = FakeRuntime(slot_reader(CONTENT, slot_bias=bias))
    team = make_engine(rt, "rotations").score(request(team=TEAM)).answers["team"]
    content = [2.0, 0.5, -1.0]
    mean = [0.0, 0.0, 0.0]
    for r in range(3):  # rotation r shows option (slot + r) % 3 in each slot
        shown = [(slot + r) % 3 for slot in range(3)]
        for slot, p in enumerate(softmax([content[o] + b for o, b in zip(shown, bias, strict=True)])):
            mean[shown[slot]] += p / 3
    assert team.probs == pytest.approx(mean, abs=1e-12)
    assert team.orders_read == ["given", "rotation:1", "rotation:2"]
    assert rt.decoded.count("\n\nQuestion: Which option fits best?\n") == 1 and len(rt.decoded) == 2 + 1 + 3


def test_adaptive_stops_when_the_unread_rotations_cannot_change_the_answer() -> None:
    four = {"type": "choice", "criteria": {"Billing": None, "Technical": None, "Sales": None, "Legal": None}}
    even = {"type": "choice", "criteria": {"North": None, "South": None, "East": None, "West": None}}
    content = {
        "Billing": 12.0,
        "Technical": 0.0,
        "Sales": 0.0,
        "Legal": 0.0,
        "North": 0,
        "South": 0,
        "East": 0,
        "West": 0,
    }
    rt = FakeRuntime(slot_reader(content, slot_bias=[0.3, 0.0, 0.0, 0.0]))
    outcome = make_engine(rt, "adaptive", tolerance=0.3).score(request(decisive=four, even=even))
    decisive = outcome.answers["decisive"]
    # reading order 0, 2, 1, 3: after two reads the pick may still change; after three Billing keeps it and its
    # probability can move at most the unread quarter (0.25 <= 0.3)
    assert decisive.orders_read == ["given", "rotation:2", "rotation:1"] and decisive.orders == 3
    mean = [0.0] * 4
    for r in (0, 2, 1):
        shown = [(slot + r) % 4 for slot in range(4)]
        logits = [[12.0, 0.0, 0.0, 0.0][o] + (0.3 if slot == 0 else 0.0) for slot, o in enumerate(shown)]
        for slot, p in enumerate(softmax(logits)):
            mean[shown[slot]] += p / 3
    assert decisive.probs == pytest.approx(mean, abs=1e-12)
    # a near tie reads every rotation, and is then the rotations answer
    assert outcome.answers["even"].orders_read == ["given", "rotation:2", "rotation:1", "rotation:3"]
    rotations = make_engine(FakeRuntime(rt.script), "rotations").score(request(even=even)).answers["even"]
    assert outcome.answers["even"].probs == pytest.approx(rotations.probs, abs=1e-15)
    assert rotations.probs == pytest.approx([0.25] * 4, abs=1e-12)  # each option once in the biased slot


def test_the_temperature_and_the_slot_prior_apply_to_the_label_distribution() -> None:
    prior = np.array([0.5, 0.25, 0.25])
    calibration = ActiveCalibration("manifest", Temperatures({"choice": 2.0}), slot_prior={3: prior})
    team = make_engine(FakeRuntime(slot_reader(CONTENT)), calibration=calibration).score(request(team=TEAM))
    raw = log_softmax([2.0, 0.5, -1.0])
    debiased = log_softmax([lp - math.log(p) for lp, p in zip(raw, prior, strict=True)])
    assert team.answers["team"].probs == pytest.approx(softmax([lp / 2.0 for lp in debiased]), abs=1e-12)
    assert team.answers["team"].slot_probabilities == [pytest.approx(softmax([2.0, 0.5, -1.0]), abs=1e-12)]


def test_out_of_scope_is_offered_last_in_every_order_and_split_from_the_declared_options() -> None:
    content = {**CONTENT, "None of these / not enough information": 1.0}
    rt = FakeRuntime(slot_reader(content, slot_bias=[0.5, 0.0, 0.0, 0.0]))
    team = make_engine(rt, "reverse", out_of_scope=True).score(request(team=TEAM)).answers["team"]
    assert rt.decoded[3:5] == [
        "Options:\nA. Billing\nB. Technical\nC. Sales\nD. None of these / not enough information\nAnswer:",
        "Options:\nA. Sales\nB. Technical\nC. Billing\nD. None of these / not enough information\nAnswer:",
    ]
    given = log_softmax([2.5, 0.5, -1.0, 1.0])
    reverse = log_softmax([-0.5, 0.5, 2.0, 1.0])  # per slot: Sales, Technical, Billing, none of these
    combined = [(given[0] + reverse[2]) / 2, (given[1] + reverse[1]) / 2, (given[2] + reverse[0]) / 2]
    combined.append((given[3] + reverse[3]) / 2)
    assert team.keys == ["Billing", "Technical", "Sales"]
    assert team.probs == pytest.approx(softmax(combined[:3]), abs=1e-12) and sum(team.probs) == pytest.approx(1.0)
    assert team.out_of_scope == pytest.approx(softmax(combined)[3], abs=1e-12)


def test_a_second_request_on_the_same_state_reads_no_state_tokens() -> None:
    rt = FakeRuntime(slot_reader(CONTENT))
    engine = make_engine(rt)
    engine.score(request(team=TEAM))
    before = len(rt.decoded)
    again = engine.score(request(urgent=URGENT))
    question = "\n\nQuestion: Which answer fits the state?\nOptions:\nA. Yes\nB. No\nAnswer:"
    assert rt.decoded[before:] == [question]
    assert (again.state_source, again.evaluated_tokens) == ("resident", len(encode(question)))
    other = engine.score(request("Another state.", urgent=URGENT))
    assert other.state_source == "computed" and rt.decoded[-2] == "State:\nAnother state."


def test_the_state_cache_serves_a_state_computed_on_another_context() -> None:
    cache = StateCache(1 << 20)
    first, second = FakeRuntime(slot_reader(CONTENT)), FakeRuntime(slot_reader(CONTENT))
    computed = make_engine(first, cache=cache).score(request(team=TEAM))
    served = make_engine(second, cache=cache).score(request(team=TEAM))
    assert (computed.state_source, served.state_source, second.restores) == ("computed", "cache", 1)
    question = "\n\nQuestion: Which option fits best?\nOptions:\nA. Billing\nB. Technical\nC. Sales\nAnswer:"
    assert second.decoded == [question] and served.evaluated_tokens == len(encode(question))
    assert served.answers == computed.answers
    assert cache.counters()["entries"] == 1 and (cache.stats.hits, cache.stats.misses) == (1, 1)


def test_without_state_reuse_every_request_reads_its_state() -> None:
    rt = FakeRuntime(slot_reader(CONTENT))
    engine = make_engine(rt, reuse_states=False)
    sources = [engine.score(request(team=TEAM)).state_source for _ in range(2)]
    assert sources == ["computed", "computed"] and rt.decoded.count(f"State:\n{STATE}") == 2


def test_a_memory_that_cannot_drop_a_suffix_restores_the_state_and_gives_the_same_answers() -> None:
    refusing = FakeRuntime(slot_reader(CONTENT, slot_bias=[1.0]), partial_rewind=False)
    answers = make_engine(refusing, "reverse").score(request(team=TEAM, urgent=URGENT)).answers
    reference = make_engine(FakeRuntime(refusing.script), "reverse").score(request(team=TEAM, urgent=URGENT)).answers
    assert answers == reference
    # one snapshot of the state; every reading after the first goes back to it
    assert (refusing.snapshots, refusing.restores) == (1, 3)


def test_a_mini_batch_memo_answers_a_repeated_question_without_evaluating() -> None:
    rt = FakeRuntime(slot_reader(CONTENT))
    engine, memo = make_engine(rt), AnswerMemo()
    first = engine.score(request(team=TEAM), memo)
    repeated = engine.score(request(team=TEAM), memo)
    assert repeated.evaluated_tokens == 0 and repeated.answers["team"] is first.answers["team"] and len(memo) == 1


def needed_tokens(state: str, question: str) -> int:
    return len(encode(HEADER, add_bos=True)) + len(encode(f"State:\n{state}")) + len(encode(question))


def test_a_request_over_the_token_budget_is_refused_before_anything_is_evaluated() -> None:
    question = "\n\nQuestion: Which answer fits the state?\nOptions:\nA. Yes\nB. No\nAnswer:"
    needed = needed_tokens(STATE, question)
    fits = FakeRuntime(slot_reader(CONTENT), n_ctx=needed)
    assert make_engine(fits).score(request(urgent=URGENT)).evaluated_tokens == needed
    short = FakeRuntime(slot_reader(CONTENT), n_ctx=needed - 1)
    with pytest.raises(
        TokenBudgetExceeded, match=f"needs {needed} tokens of context but the model's budget is {needed - 1}"
    ):
        make_engine(short).score(request(urgent=URGENT))
    assert short.decoded == [] and short.tokens_decoded == 0


def test_scripts_that_name_no_option_give_a_uniform_answer() -> None:
    def silent(_text: str) -> None:  # every label at the same logit as the rest of the vocabulary
        return None

    team = make_engine(FakeRuntime(silent)).score(request(team=TEAM)).answers["team"]
    assert team.probs == pytest.approx([1 / 3] * 3, abs=1e-12)
    assert team.label_mass == pytest.approx(3 / VOCAB)


def name_reader(by_unit: dict[str, dict[str, float]]) -> Any:
    """Logits by the text of the unit read last: the question's suffix (its options by name), or a name's start."""
    return lambda text: next((logits for end, logits in by_unit.items() if text.endswith(end)), None)


def test_named_options_are_listed_by_name_and_answered_by_their_first_tokens_where_those_differ() -> None:
    rt = FakeRuntime(name_reader({"Answer:": {" B": 2.0, " T": 0.5, " S": -1.0, " Y": 1.0, " N": -0.5}}))
    outcome = make_engine(rt, named=True).score(request(team=TEAM, urgent=URGENT))
    assert rt.decoded == [
        f"{SYSTEM_PROMPT_NAMES}\n\n",
        f"State:\n{STATE}",
        "\n\nQuestion: Which option fits best?\nOptions:\n- Billing\n- Technical\n- Sales\nAnswer:",
        "\n\nQuestion: Which answer fits the state?\nOptions:\n- Yes\n- No\nAnswer:",
    ]  # one read a question: " B", " T" and " S" tell the names apart, so no name is read further
    team, urgent = outcome.answers["team"], outcome.answers["urgent"]
    assert team.probs == pytest.approx(softmax([2.0, 0.5, -1.0]), abs=1e-12)
    assert urgent.probs == pytest.approx(softmax([1.0, -0.5]), abs=1e-12)
    first = [math.exp(x) for x in (2.0, 0.5, -1.0)]
    scripted = sum(first) + math.exp(1.0) + math.exp(-0.5)  # " Y" and " N" are scripted for every question here
    assert team.label_mass == pytest.approx(sum(first) / (scripted + (VOCAB - 5) * math.exp(OTHER_LOGIT)))


def test_a_name_that_starts_another_is_read_on_to_where_they_part_and_ends_there() -> None:
    question = {"type": "choice", "criteria": {"Billing": None, "Sales": None, "Sales team": None}}
    rt = FakeRuntime(name_reader({"Answer:": {" B": 1.0, " S": 0.0}, " Sales": {" t": 0.5, END: 0.0}}))
    answer = make_engine(rt, named=True).score(request(team=question)).answers["team"]
    assert rt.decoded[-1] == " Sales"  # the one read past the suffix: where "Sales" ends and "Sales team" goes on
    root, inner = softmax([1.0, 0.0]), softmax([0.0, 0.5])  # inner: the end of the answer, then " t"
    assert answer.probs == pytest.approx([root[0], root[1] * inner[0], root[1] * inner[1]], abs=1e-12)


def test_named_options_read_in_both_orders_combine_like_letters() -> None:
    rt = FakeRuntime(name_reader({"Answer:": {" B": 2.0, " T": 0.5, " S": -1.0}}))
    team = make_engine(rt, "reverse", named=True).score(request(team=TEAM)).answers["team"]
    assert "Options:\n- Sales\n- Technical\n- Billing\nAnswer:" in rt.decoded
    assert team.probs == pytest.approx(softmax([2.0, 0.5, -1.0]), abs=1e-12)  # a reader with no taste for a slot


def test_two_options_of_one_name_are_refused_as_the_callers() -> None:
    levels = {"type": "score", "criteria": ["Low", "Low", "High"]}
    rt = FakeRuntime(name_reader({}))
    with pytest.raises(InvalidRequest, match="two of this question's options have the same name"):
        make_engine(rt, named=True).score(request(level=levels))
    assert rt.tokens_decoded == 0


def test_names_that_would_read_past_the_request_budget_are_refused_before_anything_is_read() -> None:
    """Options each the start of the next ("a", "a a", "a a a", ...) cost a read per option, each longer than the
    last; the budget counts those reads while planning, as it counts suffixes."""
    chain = {"type": "choice", "criteria": {" ".join(["a"] * n): None for n in range(1, 41)}}
    read = FakeRuntime(name_reader({}))
    outcome = make_engine(read, named=True).score(request(chain=chain))
    assert outcome.evaluated_tokens == outcome.input_tokens + sum(range(1, 40))  # the prompt, then 39 reads
    assert outcome.input_tokens < 1_500 < outcome.evaluated_tokens
    refused = FakeRuntime(name_reader({}))
    with pytest.raises(TokenBudgetExceeded):
        make_engine(refused, named=True, max_request_tokens=1_500).score(request(chain=chain))
    assert refused.tokens_decoded == 0
