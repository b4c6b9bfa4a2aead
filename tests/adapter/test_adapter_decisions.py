"""The adapter on the real SmolLM2 GGUF over real HTTP: answers come from the logits, all three types,
the limits of the contract, shared state and order-debiasing."""

from __future__ import annotations

import math

import httpx
import numpy as np
import pytest
from decision_adapter.prompting.generic import build_template, question_text
from decision_spec import contract
from decision_spec.question_types import options_of
from decision_spec.schemas import ChoiceQuestion

from tests.app_support import gpu_layers
from tests.conftest import MODEL_DIR, MODEL_FILE

pytestmark = pytest.mark.model

BILLING = "I was charged twice for my March invoice and want a refund of the duplicate payment."
LOGIN = "I cannot log in: the sign-in page says my password is wrong even after I reset it."
TEAM = {
    "type": "choice",
    "instructions": "Which team should handle this ticket?",
    "criteria": {
        "Billing": "Payments, invoices, refunds, double charges",
        "Login": "Passwords, sign-in failures, account access",
        "Sales": "Pricing, upgrades, new contracts",
    },
}
REFUND = {"type": "noul", "instructions": "Is the customer asking for money back?"}
ANGER = {
    "type": "score",
    "instructions": "How frustrated is the customer?",
    "criteria": ["Calm", "Frustrated", "Very angry"],
}


def ask(url: str, state: object, questions: dict[str, object], **extra: object) -> dict:
    r = httpx.post(
        f"{url}/v1/systemone",
        json={"model": "jev-latest", "state": state, "questions": questions, **extra},
        timeout=300,
    )
    assert r.status_code == 200, r.text
    return r.json()


def vector(answer: dict) -> list[float]:
    if answer["type"] == "noul":
        return [answer["noul"], 1 - answer["noul"]]
    return list(answer["probabilities"].values())


def test_answers_equal_an_independent_softmax_over_the_label_logits(adapter_url: str) -> None:
    """Recompute one choice answer with raw llama-cpp-python: the whole prompt in one eval, the last
    position's logits, a softmax over the label tokens, the two orders' log-probabilities averaged."""
    import llama_cpp
    from llama_cpp import Llama

    got = ask(adapter_url, BILLING, {"team": TEAM})["answers"]["team"]
    llm = Llama(str(MODEL_DIR / MODEL_FILE), n_ctx=2048, n_threads=2, n_gpu_layers=gpu_layers(), verbose=False)
    template = build_template(llm.metadata["tokenizer.chat_template"], bos_text="", eos_text="", add_bos=False)
    question = ChoiceQuestion.model_validate(TEAM)
    options = options_of(question)
    letters = [llm.tokenize(c.encode(), add_bos=False, special=True)[0] for c in "ABC"]
    per_order = []
    for order in ([0, 1, 2], [2, 1, 0]):
        text = template.header + template.state_part(BILLING) + template.suffix(question_text(question, order, options))
        llm.reset()
        llm.eval(llm.tokenize(text.encode(), add_bos=False, special=True))
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1), shape=(llm.n_vocab(),))
        slot = logits[letters].astype(np.float64)
        slot_lp = slot - np.log(np.sum(np.exp(slot - slot.max()))) - slot.max()
        lp = np.empty(3)
        lp[order] = slot_lp
        per_order.append(lp)
    combined = np.mean(per_order, axis=0)
    expected = np.exp(combined - combined.max())
    expected /= expected.sum()
    llm.close()
    assert list(got["probabilities"]) == ["Billing", "Login", "Sales"]
    assert np.allclose(list(got["probabilities"].values()), expected, atol=1e-5)


def test_clearly_different_states_give_clearly_different_distributions(adapter_url: str) -> None:
    questions = {"team": TEAM, "refund": REFUND, "anger": ANGER}
    a = ask(adapter_url, BILLING, questions)["answers"]
    b = ask(adapter_url, LOGIN, questions)["answers"]
    for qid in questions:
        va, vb = vector(a[qid]), vector(b[qid])
        assert contract.is_distribution(va) and contract.is_distribution(vb)
        # a state left unread would give exactly the same answer; the bundled model's smallest gap here is 0.008
        assert max(abs(x - y) for x, y in zip(va, vb, strict=True)) > 0.002, qid
    # and the distributions are not uniform garbage
    assert max(vector(a["team"])) - min(vector(a["team"])) > 0.01


def test_all_three_types_with_structured_text_and_unicode(adapter_url: str) -> None:
    questions = {
        "질문 🙂": {
            "type": "choice",
            "instructions": ["Route the ticket.", {"rule": "pick one"}],
            "criteria": {"환불 요청": {"owns": ["refunds"]}, "배송 문의": None, "🙂 기타": ["other"]},
        },
        "n.1": {"type": "noul", "criteria": {"false": "No money is requested"}},
        "s": {"type": "score", "instructions": {"scale": "anger"}, "criteria": [{"label": "Calm"}, "Angry"]},
    }
    body = ask(adapter_url, {"subject": "배송", "body": BILLING, "tags": ["a", 1]}, questions)
    answers = body["answers"]
    assert set(answers) == set(questions)
    assert list(answers["질문 🙂"]["probabilities"]) == ["환불 요청", "배송 문의", "🙂 기타"]
    assert answers["질문 🙂"]["choice"] in questions["질문 🙂"]["criteria"]
    assert 0.0 <= answers["n.1"]["noul"] <= 1.0
    assert answers["s"]["legend"] == {"0": '{"label": "Calm"}', "1": "Angry"}
    score = answers["s"]
    probs = list(score["probabilities"].values())
    assert score["score"] == pytest.approx(contract.score_expectation(probs))
    assert score["confidence"] == pytest.approx(contract.score_confidence(probs))
    assert isinstance(body["usage"]["input_tokens"], int) and body["usage"]["output_tokens"] == 0


@pytest.mark.slow
def test_255_options_and_10_levels_answer(adapter_url: str) -> None:
    many = {"Billing": "Payments", **{f"Queue {i:03d}": None for i in range(1, 255)}}
    levels = [f"Level {i}" for i in range(10)]
    body = ask(
        adapter_url,
        BILLING,
        {
            "queue": {"type": "choice", "instructions": "Which queue?", "criteria": many},
            "level": {"type": "score", "instructions": "How urgent?", "criteria": levels},
        },
    )
    queue, level = body["answers"]["queue"], body["answers"]["level"]
    assert list(queue["probabilities"]) == list(many)
    assert contract.is_distribution(list(queue["probabilities"].values()))
    assert queue["probabilities"][queue["choice"]] == max(queue["probabilities"].values())
    assert queue["confidence"] == pytest.approx(contract.choice_confidence(list(queue["probabilities"].values())))
    assert queue["x_orders"] == 1  # two-letter codes: one order (DECISION_DEBIAS_MAX_OPTIONS)
    assert list(level["probabilities"]) == [str(i) for i in range(10)] and level["x_orders"] == 2
    assert all(math.isfinite(p) for p in queue["probabilities"].values())


def test_shared_state_answers_equal_single_question_answers(adapter_url: str) -> None:
    """Each question reads the same prefilled state: batching and order change nothing, bit for bit."""
    together = ask(adapter_url, BILLING, {"team": TEAM, "refund": REFUND, "anger": ANGER})["answers"]
    reordered = ask(adapter_url, BILLING, {"anger": ANGER, "refund": REFUND, "renamed": TEAM})["answers"]
    for qid, q in (("team", TEAM), ("refund", REFUND), ("anger", ANGER)):
        alone = ask(adapter_url, BILLING, {qid: q})["answers"][qid]
        assert vector(alone) == vector(together[qid])
    assert vector(reordered["renamed"]) == vector(together["team"])


def test_order_debiasing_makes_answers_invariant_to_option_order(adapter_url: str) -> None:
    reversed_team = {**TEAM, "criteria": dict(reversed(list(TEAM["criteria"].items())))}
    a = ask(adapter_url, BILLING, {"q": TEAM})["answers"]["q"]["probabilities"]
    b = ask(adapter_url, BILLING, {"q": reversed_team})["answers"]["q"]["probabilities"]
    assert all(a[k] == pytest.approx(b[k], abs=1e-9) for k in a)


def test_run_identity_is_in_every_response(adapter_url: str) -> None:
    body = ask(adapter_url, BILLING, {"refund": REFUND})
    run = body["x_run"]
    assert run["model_sha256"] == "c624c2bea4349b36453448197f53b3935a96da7934904c124a612716c348a8ff"
    assert run["model_file"] == MODEL_FILE and run["llama_cpp_python"] == "0.3.36"
    assert run["prompt_template"].startswith("generic-v2/") and run["calibration"]["source"] == "identity"
    assert run["hardware"]["logical_cpus"] >= 1 and run["hardware"]["threads"] >= 1
    assert len(body["answers"]["refund"]["x_options_sha256"]) == 16
