"""Load-test workloads as deterministic request streams: ticket routing, an agent supervisor, long documents.

A workload hands out requests in groups (a group for each `number` and `seed`); the same seed and number
give the same requests on every machine, so two targets, or two runs, are loaded with the same bodies.
A request may have to wait for an earlier one of its group (the same state asked again) to be answered.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MODEL_ALIAS = "jev-latest"


@dataclass(frozen=True)
class Planned:
    """One request of a group; `after` is the position in the group that must be answered `gap_s` before it."""

    body: Mapping[str, Any]
    after: int | None = None
    gap_s: float = 0.0


class Workload:
    """A named source of request groups."""

    name = "requests"
    description = ""

    def group(self, seed: int, number: int) -> list[Planned]:
        raise NotImplementedError

    def settings(self) -> dict[str, Any]:
        return {}


def _rng(name: str, seed: int, number: int) -> random.Random:
    # a str seed is hashed with sha512, so the same everywhere; made-up text, not a secret
    return random.Random(f"{name}:{seed}:{number}")  # noqa: S311


def _grow(rng: random.Random, opening: str, sentences: Sequence[str], chars: float, **fields: Sequence[str]) -> str:
    """Sentences drawn at random (their {fields} filled in) after `opening` until about `chars` characters."""
    parts = [opening]
    while sum(len(p) + 1 for p in parts) < chars:
        sentence = rng.choice(sentences)
        values = {k: rng.choice(v) for k, v in fields.items()}
        parts.append(sentence.format(n=rng.randint(1000, 99999), **values))
    return " ".join(parts)


_PRODUCTS = ("the mobile app", "the web dashboard", "the API", "the desktop client", "the billing portal")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October")
_TICKET_ISSUES = {
    "Billing": (
        "I was charged twice for my {month} invoice (order {n}) and want the duplicate refunded.",
        "The amount on invoice {n} does not match the plan I signed up for.",
        "My card was declined although the bank says the payment of {n} cents went through.",
    ),
    "Technical": (
        "{product} crashes every time I open the settings page since the last update.",
        "Requests to {product} time out after about thirty seconds; error code {n}.",
        "The export from {product} produces an empty file for report {n}.",
    ),
    "Account": (
        "I cannot sign in to {product}: the reset link in the e-mail has already expired.",
        "Please move the ownership of workspace {n} to my colleague; I am leaving the company.",
        "Two-factor codes from the authenticator app are rejected on {product}.",
    ),
    "Shipping": (
        "Parcel {n} has shown 'in transit' for two weeks and the tracking page has not changed.",
        "The box for order {n} arrived damaged and two items were missing.",
        "I need to change the delivery address of order {n} before it leaves the warehouse.",
    ),
    "Sales": (
        "We would like a quote for {n} seats on the enterprise plan, billed yearly.",
        "Is there a discount for non-profits if we move from the monthly plan in {month}?",
        "Our team wants to try the premium features before renewing in {month}.",
    ),
}
_TICKET_DETAILS = (
    "I already wrote to support on {month} {n} without an answer.",
    "This happens on {product} for everyone in our team.",
    "Our customer number is {n}, in case you need it.",
    "It worked fine until the beginning of {month}.",
    "I attached a screenshot to my previous message, reference {n}.",
    "We depend on {product} for our daily work, so please hurry.",
    "I tried again this morning and nothing had changed.",
    "Please call me back rather than e-mailing; my extension is {n}.",
)
TEAMS = {
    "Billing": "Payments, invoices, refunds",
    "Technical": "Bugs, outages, errors",
    "Account": "Sign-in, access, ownership",
    "Shipping": "Deliveries, parcels, addresses",
    "Sales": "Quotes, plans, discounts",
}


class TicketRouting(Workload):
    """Every request a new support ticket of about `state_tokens` tokens, with one choice question."""

    name = "ticket-routing"
    description = "distinct tickets, one choice question each (no state is seen twice)"

    def __init__(self, state_tokens: int = 200) -> None:
        self.state_tokens = state_tokens

    def group(self, seed: int, number: int) -> list[Planned]:
        rng = _rng(self.name, seed, number)
        team = rng.choice(sorted(TEAMS))
        opening = f"Ticket {seed}-{number}. " + rng.choice(_TICKET_ISSUES[team]).format(
            n=rng.randint(1000, 99999), month=rng.choice(_MONTHS), product=rng.choice(_PRODUCTS)
        )
        chars = self.state_tokens * 3.75  # characters per token of these tickets (SmolLM2's tokenizer)
        state = _grow(rng, opening, _TICKET_DETAILS, chars, month=_MONTHS, product=_PRODUCTS)
        question = {"type": "choice", "instructions": "Which team should handle this ticket?", "criteria": TEAMS}
        return [Planned({"model": MODEL_ALIAS, "state": state, "questions": {"team": question}})]

    def settings(self) -> dict[str, Any]:
        return {"state_tokens": self.state_tokens}


_GOALS = (
    "refund the duplicate charge on order {n}",
    "close the customer's account {n} and export their data",
    "update the shipping address of order {n}",
    "raise the credit limit of account {n}",
    "send the quarterly report to the customer's finance team",
)
_STEPS = (
    "search_orders(customer_id={n}) returned 3 orders.",
    "read_ticket(id={n}) returned the customer's last message.",
    "lookup_account(id={n}) returned a verified business account.",
    "list_payments(order={n}) returned two card payments of the same amount.",
    "get_policy(name='{policy}') returned the current policy text.",
    "draft_email(to='customer') wrote a reply of 120 words.",
    "check_inventory(sku={n}) returned 14 units in stock.",
)
_PROPOSALS = (
    "issue_refund(order={n}, amount_eur={amount})",
    "delete_account(id={n})",
    "send_email(to='customer', draft={n})",
    "update_address(order={n})",
    "change_credit_limit(account={n}, new_limit_eur={amount})",
    "export_data(account={n}, destination='external')",
)
_POLICIES = ("refunds", "data-retention", "credit", "shipping")
SUPERVISOR_QUESTIONS: dict[str, dict[str, Any]] = {
    "approve": {"type": "noul", "instructions": "Does the proposed step need human approval before it runs?"},
    "next": {
        "type": "choice",
        "instructions": "What should the supervisor do with the proposed step?",
        "criteria": {
            "Allow": "Safe and within the task",
            "Ask the user": "Needs the user's confirmation",
            "Escalate": "A human operator must decide",
            "Stop": "Outside the task or harmful",
        },
    },
    "risk": {
        "type": "score",
        "instructions": "How risky is the proposed step?",
        "criteria": ["Harmless", "Low", "Moderate", "High", "Critical"],
    },
    "done": {"type": "noul", "instructions": "Has the agent already completed the user's task?"},
}


class AgentSupervisor(Workload):
    """`states` agent trajectories per group, each asked 2 to 4 of the supervisor's questions, one per request.

    Requests go round the states (every state's first question, then every second one, ...); a state's next
    question waits until its previous one was answered and `gap_s` more, as an agent platform asks again
    seconds later: the state cache's case (the state was computed once and is restored, not recomputed).
    """

    name = "agent-supervisor"
    description = "agent trajectories, each asked 2-4 questions in separate requests seconds apart"

    def __init__(self, states: int = 10, gap_s: float = 2.0, state_tokens: int = 300) -> None:
        self.states, self.gap_s, self.state_tokens = states, gap_s, state_tokens

    def _state(self, rng: random.Random, seed: int, number: int, k: int) -> str:
        n = str(rng.randint(1000, 99999))
        opening = f"Agent run {seed}-{number}-{k}. Task from the user: {rng.choice(_GOALS).format(n=n)}. Steps so far:"
        proposal = rng.choice(_PROPOSALS).format(n=n, amount=rng.randint(5, 50000))
        chars = (self.state_tokens - 30) * 2.85  # tool calls are number-heavy: fewer characters per token
        body = _grow(rng, opening, _STEPS, chars, policy=_POLICIES)
        return f"{body}\nProposed next step: {proposal}\nThe agent's reason: it is the next step of the task."

    def group(self, seed: int, number: int) -> list[Planned]:
        rng = _rng(self.name, seed, number)
        asked = []
        for k in range(self.states):
            state = self._state(rng, seed, number, k)
            ids = rng.sample(sorted(SUPERVISOR_QUESTIONS), rng.randint(2, 4))
            asked.append((state, ids))
        planned: list[Planned] = []
        position: dict[tuple[int, int], int] = {}
        for round_ in range(max(len(ids) for _, ids in asked)):
            for k, (state, ids) in enumerate(asked):
                if round_ >= len(ids):
                    continue
                qid = ids[round_]
                body = {"model": MODEL_ALIAS, "state": state, "questions": {qid: SUPERVISOR_QUESTIONS[qid]}}
                after = position.get((k, round_ - 1))
                position[(k, round_)] = len(planned)
                planned.append(Planned(body, after=after, gap_s=self.gap_s if after is not None else 0.0))
        return planned

    def settings(self) -> dict[str, Any]:
        return {"states": self.states, "gap_s": self.gap_s, "state_tokens": self.state_tokens}


_DOC_KINDS = {
    "Contract": "Services agreement {n} between the company and its supplier.",
    "Incident report": "Incident report {n}: the payment service was degraded for part of the night.",
    "Policy": "Internal policy {n} on the handling of customer data.",
    "Invoice dispute": "Dispute {n} about the invoices a vendor sent for the last quarter.",
}
_DOC_SENTENCES = (
    "Section {n} states that either party may end the arrangement with {days} days of written notice.",
    "The supplier shall deliver the reports each {month}, and the company shall pay within {days} days.",
    "At {n} the monitoring system raised an alarm and the engineer on call was paged.",
    "Customer records must be deleted {days} days after the end of the contract unless the law requires more.",
    "The vendor claims that invoice {n} was paid late and adds a fee of {days} percent.",
    "The root cause was a configuration change rolled out in {month} without a staged deployment.",
    "Employees may only export data to systems approved by the security team, reference {n}.",
    "Both parties agree that the liability of each is limited to the fees of the last {days} months.",
    "The finance team found {days} duplicate entries in the ledger for {month}.",
    "A follow-up review is scheduled for {month}; the owner of action item {n} reports on it.",
)
DOCUMENT_QUESTIONS: dict[str, dict[str, Any]] = {
    "kind": {
        "type": "choice",
        "instructions": "What kind of document is this?",
        "criteria": dict.fromkeys(_DOC_KINDS),
    },
    "payment": {"type": "noul", "instructions": "Does the document commit the company to a payment?"},
    "urgency": {
        "type": "score",
        "instructions": "How urgent is a response from the company?",
        "criteria": ["Routine", "Soon", "Urgent"],
    },
}


class LongDocuments(Workload):
    """Every request a new document of about `state_tokens` tokens, asked three questions at once."""

    name = "long-documents"
    description = "distinct long documents, three questions in one request"

    def __init__(self, state_tokens: int = 2000) -> None:
        self.state_tokens = state_tokens

    def group(self, seed: int, number: int) -> list[Planned]:
        rng = _rng(self.name, seed, number)
        kind = rng.choice(sorted(_DOC_KINDS))
        opening = f"Document {seed}-{number}. " + _DOC_KINDS[kind].format(n=rng.randint(1000, 99999))
        days = tuple(str(d) for d in (7, 14, 30, 60, 90))
        state = _grow(rng, opening, _DOC_SENTENCES, self.state_tokens * 4.25, month=_MONTHS, days=days)
        return [Planned({"model": MODEL_ALIAS, "state": state, "questions": DOCUMENT_QUESTIONS})]

    def settings(self) -> dict[str, Any]:
        return {"state_tokens": self.state_tokens}


class RequestFile(Workload):
    """Bodies read from a file, sent in turn (the same sequence at every level)."""

    name = "requests"
    description = "request bodies from a file, sent in turn"

    def __init__(self, bodies: Sequence[Mapping[str, Any]]) -> None:
        self.bodies = list(bodies)

    def group(self, seed: int, number: int) -> list[Planned]:
        return [Planned(self.bodies[number % len(self.bodies)])]


def by_name(gap_s: float = 2.0) -> dict[str, Workload]:
    """The three generated workloads, in the order a bench runs them."""
    return {w.name: w for w in (TicketRouting(), AgentSupervisor(gap_s=gap_s), LongDocuments())}


NAMES = tuple(by_name())  # what --workload accepts, in by_name's order


def workloads_arg(text: str) -> list[str]:
    """bench's --workload: 'all' or names separated by commas."""
    names = list(NAMES) if text == "all" else [x.strip() for x in text.split(",") if x.strip()]
    if not names or [n for n in names if n not in NAMES]:
        raise argparse.ArgumentTypeError(f"workloads are 'all' or some of {', '.join(NAMES)}; got {text!r}")
    return names


def levels_arg(text: str) -> list[int]:
    """bench's --concurrency: positive integers separated by commas."""
    try:
        levels = [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"concurrency levels are integers separated by commas: {text!r}") from exc
    if not levels or any(c < 1 for c in levels):
        raise argparse.ArgumentTypeError("concurrency levels must be positive")
    return levels
