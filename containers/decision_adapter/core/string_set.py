"""A fixed set of strings found in one pass over a text (an Aho-Corasick automaton): the scan caller text goes
through, linear in the text's length whatever it holds.

The automaton is built once per model from its protected strings. A scan walks the text a character at a time
(skipping, at the root, straight to the next character that starts a string) and reports at each start the longest
string there. Its work is counted in `steps` (one per character read, failure link followed or match reported),
which the tests read to show that it grows linearly with the text.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable


class StringSet:
    def __init__(self, strings: Iterable[str]) -> None:
        self.strings = frozenset(s for s in strings if s)
        self.longest = max((len(s) for s in self.strings), default=0)
        goto: list[dict[str, int]] = [{}]
        length = [0]  # the length of the string ending at a node (0: none)
        for s in sorted(self.strings):
            node = 0
            for c in s:
                nxt = goto[node].get(c)
                if nxt is None:
                    nxt = goto[node][c] = len(goto)
                    goto.append({})
                    length.append(0)
                node = nxt
            length[node] = len(s)
        fail = [0] * len(goto)
        out = [0] * len(goto)  # the nearest node on the failure chain (itself excluded) that ends a string
        queue = deque(goto[0].values())
        while queue:
            node = queue.popleft()
            for c, child in goto[node].items():
                f = fail[node]
                while f and c not in goto[f]:
                    f = fail[f]
                fail[child] = goto[f].get(c, 0)  # children of the root fail to the root
                out[child] = fail[child] if length[fail[child]] else out[fail[child]]
                queue.append(child)
        self._goto, self._fail, self._length, self._out = goto, fail, length, out
        firsts = "".join(sorted({s[0] for s in self.strings}))
        self._first = re.compile(f"[{re.escape(firsts)}]") if firsts else None
        self.steps = 0

    def longest_at(self, text: str, *, first_only: bool = False) -> dict[int, int]:
        """{start: end} of every occurrence of a string of the set (overlapping ones too): at each start, the
        longest. `first_only`: stop at the first occurrence found (whether the text holds any)."""
        found: dict[int, int] = {}
        if self._first is None:
            return found
        goto, fail, length, out, first = self._goto, self._fail, self._length, self._out, self._first
        node, i, n, steps = 0, 0, len(text), 0
        while i < n:
            if node == 0:  # at the root: jump to the next character that can start a string
                m = first.search(text, i)
                if m is None:
                    break
                i = m.start()
            c = text[i]
            while node and c not in goto[node]:
                node = fail[node]
                steps += 1
            node = goto[node].get(c, 0)
            i += 1
            steps += 1
            hit = node if length[node] else out[node]
            while hit:  # later ends overwrite earlier ones: each start keeps its longest
                found[i - length[hit]] = i
                hit = out[hit]
                steps += 1
            if first_only and found:
                break
        self.steps += steps
        return found
