"""CPU work on long caller text in slices: no single C call (a regex search, a normalization, a count) holds the GIL
for the whole of a long text, so /ping, admission and the other requests' threads run between slices."""

from __future__ import annotations

from collections.abc import Iterator

SLICE = 1 << 15  # characters a slice holds at most: well under a millisecond of any one pass over it
OVERLAP = 256  # characters of the previous slice a pattern search reads again (its matches span fewer)


def stable_pieces(text: str, size: int = SLICE) -> Iterator[str]:
    """The text in consecutive pieces of at most about `size` characters, each cut before a character Unicode
    normalization never joins to what precedes it (a line end, else any ASCII character), so normalizing the pieces
    one by one gives the normalized whole; a run of `size` characters with no such place is cut where it ends."""
    start, n = 0, len(text)
    while n - start > size:
        end = start + size
        cut = text.rfind("\n", start + size // 2, end)
        if cut <= start:
            cut = next((i for i in range(end, start + size // 2, -1) if text[i] < "\x80"), end)
        yield text[start:cut]
        start = cut
    yield text[start:]
