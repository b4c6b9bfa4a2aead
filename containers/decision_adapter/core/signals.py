"""Abstention signals and option orders, as pure functions on logits: no I/O, no model.

- Label mass: how much of the model's next-token probability over the whole vocabulary lies on the
  labels it was offered, at the answer position (the chain rule for two-letter codes). A model that
  wanted to write something else is not choosing among the options.
- Out of scope: the probability of an added "none of these" option, split from the declared options'
  distribution so that the declared options still sum to 1 among themselves.
- Orders: which option orders a question is read under for each order-debiasing mode, and what each is
  called in an answer's `x_orders_read`. The adaptive mode's stopping rule is in adaptive.py.
- The adapter's one `log_softmax` and `softmax` (the engine reads its probabilities with them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt
from decision_spec.contract import DebiasMode

Vector = npt.NDArray[np.float64]


def option_orders(n: int, mode: DebiasMode, *, debias_max_options: int, rotation_max_options: int) -> list[list[int]]:
    """The orders a question of n options is read under (order[slot] = option index), the given one first.

    rotations: all n cyclic rotations, so every option sits in every slot once and the answer is exactly
    invariant to rotating the options; above `rotation_max_options` it falls back to reverse. adaptive: the
    same rotations in `rotation_sequence`'s order (the engine may stop before the last). reverse: the given
    and the reversed order, up to `debias_max_options`."""
    given = list(range(n))
    if mode in ("rotations", "adaptive") and n <= rotation_max_options:
        offsets = rotation_sequence(n) if mode == "adaptive" else list(range(n))
        return [given[r:] + given[:r] for r in offsets]
    if mode != "off" and n <= debias_max_options and n > 1:
        return [given, given[::-1]]
    return [given]


def rotation_sequence(n: int) -> list[int]:
    """The rotations (slot 0 shows option r) in the order adaptive mode reads them: r = floor(n * v) for the
    van der Corput points v = 0, 1/2, 1/4, 3/4, 1/8, ... (repeats skipped), so each next rotation falls in
    the widest gap round the cycle and the first few put every option in slots spread over the list:
    n=6 reads 0, 3, 1, 4, 2, 5."""
    read: list[int] = []
    bits = max(1, (n - 1).bit_length())
    for k in range(1 << bits):  # 2**bits >= n points: every rotation is hit
        v = int(format(k, f"0{bits}b")[::-1], 2) / (1 << bits)
        r = int(n * v)
        if r not in read:
            read.append(r)
    return read


def order_name(order: list[int], declared: int) -> str | None:
    """How `x_orders_read` names an order of `declared` options (an added out-of-scope option stays last):
    "given", "reversed", "rotation:r" (slot 0 shows option r); None for a reading of only some options."""
    shown = order[:declared]
    if sorted(shown) != list(range(declared)):
        return None
    if shown == list(range(declared)):
        return "given"
    if shown == list(range(declared))[::-1]:
        return "reversed"
    r = shown[0]
    if shown == [(slot + r) % declared for slot in range(declared)]:
        return f"rotation:{r}"
    return None


def log_softmax(x: Vector) -> Vector:
    """The adapter's one log-softmax (engine and signals alike): shifted by the maximum, so no exp overflows."""
    m = float(np.max(x))
    return x - (m + float(np.log(np.sum(np.exp(x - m)))))


def softmax(x: Vector) -> Vector:
    e = np.exp(x - np.max(x))
    return e / np.sum(e)  # type: ignore[no-any-return]


def label_mass(first: Vector, codes: Sequence[tuple[int, ...]], second: Mapping[int, Vector] | None = None) -> float:
    """P(any offered label) over the whole vocabulary at the answer position. `first`: the logits there;
    `codes`: each label's tokens (one, or two for two-letter codes); `second[t]`: the logits after first
    token t (two-letter codes). Chain rule: sum over codes of P(first) * P(second | first)."""
    lp = log_softmax(np.asarray(first, dtype=np.float64))
    if len(codes[0]) == 1:
        return float(np.exp(lp[[c[0] for c in codes]]).sum())
    if second is None:
        raise ValueError("two-token labels need the logits after each first token")
    inner = {head: log_softmax(np.asarray(v, dtype=np.float64)) for head, v in second.items()}
    return float(sum(np.exp(lp[c[0]] + inner[c[0]][c[1]]) for c in codes))


def split_out_of_scope(scores: Vector, temperature: float) -> tuple[Vector, float]:
    """From the n + 1 combined scores (the "none of these" option last): the declared options' distribution
    (softmax over their n scores alone, so they sum to 1) and the out-of-scope option's probability among
    all n + 1."""
    scaled = np.asarray(scores, dtype=np.float64) / temperature
    p_out = float(np.exp(log_softmax(scaled))[-1])
    declared = np.exp(log_softmax(scaled[:-1]))
    return declared, p_out
