"""The shared half of chunking: a text as lines, runs of lines (segments), and turning segments into chunks.

Why its own module: every content type's splitter (code in chunk_code.py, the rest in chunk_kinds.py)
yields segments over the same ``Doc``; trimming, merging small neighbours and cutting oversized
pieces is done once here, which is where the invariants stated in chunk.py are kept.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from itertools import accumulate

from helix_context.models import Chunk


# --------------------------------------------------------------------------- #
# shared helpers
# --------------------------------------------------------------------------- #

class Seg:
    """A run of lines [start, end) (0-based, end exclusive) that wants to be one chunk."""

    __slots__ = ("start", "end", "symbol", "group", "solo")

    def __init__(self, start: int, end: int, symbol: str | None = None, group: int = 0, solo: bool = False):
        self.start = start
        self.end = end
        self.symbol = symbol
        self.group = group  # pieces of one split container share a non-zero group
        self.solo = solo  # never merged with a neighbour (module preamble)

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Seg({self.start}, {self.end}, {self.symbol!r}, g={self.group}, solo={self.solo})"


class Doc:
    """The text split into lines at ``\\n``, with character offsets of each line."""

    __slots__ = ("text", "lines", "n", "off")

    def __init__(self, text: str):
        self.text = text
        lines = text.split("\n")
        if text.endswith("\n"):
            lines.pop()
        self.lines = lines
        self.n = len(lines)
        # off[i] = offset of line i; off[n] = len(text) + 1 (as if a final "\n" existed)
        self.off = [0, *accumulate(map((1).__add__, map(len, lines)))]

    def blank(self, i: int) -> bool:
        return not self.lines[i].strip()

    def size(self, s: int, e: int) -> int:
        """Upper bound of len(content) for lines [s, e)."""
        return self.off[e] - self.off[s] - 1

    def content(self, s: int, e: int) -> str:
        c = self.text[self.off[s] : self.off[e] - 1]
        if c.endswith("\r"):
            c = c[:-1]
        return c


_group_ids = iter(range(1, 1 << 62))
_group_lock = threading.Lock()


def new_group() -> int:
    with _group_lock:
        return next(_group_ids)


def finish_chunks(doc: Doc, segs: list[Seg], content_type: str, language: str | None, max_chars: int) -> list[Chunk]:
    """Trim blank edges, merge small neighbours, split oversized pieces, build chunks."""
    n = doc.n
    trimmed: list[Seg] = []
    for seg in segs:
        s, e = max(0, seg.start), min(n, seg.end)
        while s < e and doc.blank(s):
            s += 1
        while e > s and doc.blank(e - 1):
            e -= 1
        if s < e:
            seg.start, seg.end = s, e
            trimmed.append(seg)

    min_chars = max_chars // 4
    merged: list[Seg] = []
    for seg in trimmed:
        if merged:
            prev = merged[-1]
            if (
                not prev.solo
                and not seg.solo
                and prev.group == seg.group
                and prev.end <= seg.start
                and (doc.size(prev.start, prev.end) < min_chars or doc.size(seg.start, seg.end) < min_chars)
                and doc.size(prev.start, seg.end) <= max_chars
            ):
                prev.end = seg.end
                if prev.symbol is None:
                    prev.symbol = seg.symbol
                continue
        merged.append(seg)

    chunks: list[Chunk] = []
    for seg in merged:
        if doc.size(seg.start, seg.end) <= max_chars:
            chunks.append(Chunk(doc.content(seg.start, seg.end), content_type, language,
                                seg.start + 1, seg.end, seg.symbol))
        else:
            split_lines(doc, seg.start, seg.end, seg.symbol, content_type, language, max_chars, chunks)
    return chunks


def split_lines(doc: Doc, s: int, e: int, symbol: str | None, content_type: str, language: str | None,
                 max_chars: int, out: list[Chunk]) -> None:
    """Pack lines [s, e) greedily into pieces of at most max_chars, cutting at a blank line where one is near."""
    off = doc.off
    while s < e:
        while s < e and doc.blank(s):
            s += 1
        if s >= e:
            return
        if doc.size(s, e) <= max_chars:
            end = e
            while end > s and doc.blank(end - 1):
                end -= 1
            out.append(Chunk(doc.content(s, end), content_type, language, s + 1, end, symbol))
            return
        # largest k with size(s, k) <= max_chars  <=>  off[k] <= off[s] + max_chars + 1
        k = bisect_right(off, off[s] + max_chars + 1, s + 1, e + 1) - 1
        if k <= s:
            line = doc.lines[s]
            if line.endswith("\r"):
                line = line[:-1]
            if len(line) <= max_chars:  # fits once the terminator is not counted
                out.append(Chunk(line, content_type, language, s + 1, s + 1, symbol))
            else:
                hard_split(line, s + 1, symbol, content_type, language, max_chars, out)
            s += 1
            continue
        cut = k
        lo = s + (k - s) // 2
        for j in range(k - 1, lo, -1):
            if doc.blank(j):
                cut = j
                break
        end = cut
        while end > s and doc.blank(end - 1):
            end -= 1
        out.append(Chunk(doc.content(s, end), content_type, language, s + 1, end, symbol))
        s = cut


def hard_split(line: str, lineno: int, symbol: str | None, content_type: str, language: str | None,
                max_chars: int, out: list[Chunk]) -> None:
    """Slices of one giant line, each <= max_chars, cut at whitespace near the end where possible."""
    pos, n = 0, len(line)
    while pos < n:
        end = min(n, pos + max_chars)
        if end < n:
            ws = line.rfind(" ", pos + (max_chars * 4) // 5, end)
            if ws > pos:
                end = ws + 1
        piece = line[pos:end]
        if piece.strip():
            out.append(Chunk(piece, content_type, language, lineno, lineno, symbol))
        pos = end


def segments_from_anchors(anchors: list[tuple[int, str | None]], start: int, end: int, group: int = 0,
                           ) -> list[Seg]:
    """Anchors (line, symbol) in increasing order → segments spanning until the next anchor."""
    segs: list[Seg] = []
    if not anchors or anchors[0][0] > start:
        anchors = [(start, None), *anchors]
    for i, (line, sym) in enumerate(anchors):
        nxt = anchors[i + 1][0] if i + 1 < len(anchors) else end
        if nxt > line:
            segs.append(Seg(line, nxt, sym, group))
    return segs


# --------------------------------------------------------------------------- #
# prose: paragraphs
# --------------------------------------------------------------------------- #


def segments_paragraphs(doc: Doc, start: int = 0, end: int | None = None, group: int = 0) -> list[Seg]:
    end = doc.n if end is None else end
    segs: list[Seg] = []
    lines = doc.lines
    i = start
    while i < end:
        while i < end and not lines[i].strip():
            i += 1
        if i >= end:
            break
        j = i + 1
        while j < end and lines[j].strip():
            j += 1
        segs.append(Seg(i, j, None, group))
        i = j
    return segs
