"""Options scored by name: the chain rule over each name's tokens, read only where the names part (a trie's branches).

Where options are named (DECISION_OPTION_LABELS=names), each option's answer is its name's token sequence, and
P(name) = the product, over the points where the declared names part, of P(the name's next token | the prompt and
the tokens so far), each a softmax restricted to the tokens the names continue with there. After the token that
tells a name from every other, the declared names allow one continuation, so the rest of it costs no read. A name
that is the start of another ends where the other goes on: there its continuation is the end of the answer (`end`,
the model's end-of-turn token). The two-letter codes of the lettered prompt are the case of names two tokens long.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from .signals import Vector, log_softmax

Path = tuple[int, ...]
Node = dict[int, "Node | None"]  # next token -> the node after it; None after `end`


def _trie(names: Sequence[Path], end: int) -> Node:
    if len(set(names)) != len(names) or not all(names):
        raise ValueError("option names must be distinct and non-empty token sequences")
    root: Node = {}
    for name in names:
        node = root
        for token in name:
            child = node.setdefault(token, {})
            assert child is not None  # `end` is a control token: never one of a name's
            node = child
        node[end] = None
    return root


def branch_points(names: Sequence[Path], end: int) -> dict[Path, list[int]]:
    """Each point where the names part (a prefix of the answer, () first) -> the tokens they continue with there,
    in the order the names are given; `end` where a name ends and another goes on. Linear in the names' tokens."""
    points: dict[Path, list[int]] = {}
    path: list[int] = []
    stack: list[tuple[int, int, Node]] = [(0, -1, _trie(names, end))]  # (depth, the token into it, node)
    while stack:
        depth, token, node = stack.pop()
        del path[depth:]
        if depth:
            path[depth - 1 : depth] = [token]
        if len(node) > 1:
            points[tuple(path)] = list(node)
        stack.extend((depth + 1, t, child) for t, child in reversed(node.items()) if child is not None)
    return points


def cloze_logprobs(
    names: Sequence[Path], points: Mapping[Path, list[int]], end: int, logits_after: Callable[[Path], Vector]
) -> tuple[Vector, float]:
    """(log P(name) for each name, restricted to the declared names; the label mass: the same chain of
    probabilities over the whole vocabulary, summed over the names). `points`: `branch_points` of the same names,
    in any order (a restricted softmax does not depend on it). `logits_after(path)` is the model's logits after the
    prompt and `path`'s tokens, asked once for each branch point: reading them costs their paths' tokens."""
    restricted: dict[Path, dict[int, float]] = {}
    whole: dict[Path, dict[int, float]] = {}
    for path, tokens in points.items():
        logits = np.asarray(logits_after(path), dtype=np.float64)
        restricted[path] = dict(zip(tokens, (float(v) for v in log_softmax(logits[tokens])), strict=True))
        full = log_softmax(logits)
        whole[path] = {t: float(full[t]) for t in tokens}
    out = np.zeros(len(names))
    mass = 0.0
    for i, name in enumerate(names):
        lp = lw = 0.0
        for path in restricted:  # a name meets a branch point where the point's path starts it
            if name[: len(path)] == path:
                token = name[len(path)] if len(path) < len(name) else end
                lp += restricted[path][token]
                lw += whole[path][token]
        out[i] = lp
        mass += float(np.exp(lw))
    return out, mass
