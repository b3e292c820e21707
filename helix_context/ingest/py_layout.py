"""Where Python's multi-line strings are: the one scan the chunker, the symbol finder and the facts share.

Knowing which lines start inside a string literal is what lets a ``def`` or a
``KEY = 1`` at the start of a line be told from the same words in a docstring,
without a full parse (``ast`` alone runs at ~9 MB/s, below the ingest budget).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict

__all__ = ["comment_block_start", "python_string_lines"]

_PY_TOKEN = re.compile(r"#|\"\"\"|\'\'\'|\"|\'")
_PY_SQ_END = {
    '"': re.compile(r'(?:[^"\\\n]++|\\.)*+', re.S),
    "'": re.compile(r"(?:[^'\\\n]++|\\.)*+", re.S),
}
_LAYOUT_CACHE: OrderedDict[str, bytearray] = OrderedDict()
_LAYOUT_CACHE_SIZE = 2
_LAYOUT_LOCK = threading.Lock()


def python_string_lines(text: str) -> bytearray:
    """Per line (split at ``\\n``): 1 when the line starts inside a multi-line string literal.

    A single pass over strings and comments (no full parse): this is what lets the
    chunker and the fact extractor tell a ``def`` or ``KEY = 1`` at the start of a
    line from the same words in a docstring, at tens of MB/s. Tolerates any input
    (an unterminated string runs to the end). Remembers the last two texts, so the
    chunker and the fact extractor scan each file once.
    """
    if '"""' not in text and "'''" not in text and "\\\n" not in text:
        # only triple quotes and backslash-newlines carry a string over a line break
        return bytearray(text.count("\n") + 1)
    with _LAYOUT_LOCK:
        hit = _LAYOUT_CACHE.get(text)
        if hit is not None:
            _LAYOUT_CACHE.move_to_end(text)
            return hit
    n_lines = text.count("\n") + 1
    mask = bytearray(n_lines)
    search = _PY_TOKEN.search
    find = text.find
    count = text.count
    n = len(text)
    pos = 0
    line = 0  # line index of `pos`
    while True:
        m = search(text, pos)
        if m is None:
            break
        st = m.start()
        tok = m.group()
        if tok == "#":
            nl = find("\n", st)
            if nl < 0:
                break
            line += count("\n", pos, nl + 1)
            pos = nl + 1
            continue
        if len(tok) == 3:
            j = m.end()
            while True:
                k = find(tok, j)
                if k < 0:
                    end = n
                    break
                b = k
                while b > j and text[b - 1] == "\\":
                    b -= 1
                if (k - b) % 2 == 0:
                    end = k + 3
                    break
                j = k + 1
        else:
            closing = _PY_SQ_END[tok].match(text, m.end())
            end = closing.end() if closing is not None else n
            if end < n and text[end] == tok:
                end += 1
        first = line + count("\n", pos, st)
        inner = count("\n", st, end)
        if inner:
            mask[first + 1 : first + inner + 1] = b"\x01" * inner
        line = first + inner
        pos = end
    with _LAYOUT_LOCK:
        _LAYOUT_CACHE[text] = mask
        _LAYOUT_CACHE.move_to_end(text)
        while len(_LAYOUT_CACHE) > _LAYOUT_CACHE_SIZE:
            _LAYOUT_CACHE.popitem(last=False)
    return mask


def comment_block_start(lines: list[str], mask: bytearray, start: int, indent: str, floor: int = 0) -> int:
    """The first line of the ``#`` comments right above line ``start`` at exactly ``indent``, else ``start``.

    Python's habit besides docstrings: a comment block straight above a ``def`` or its decorators says what
    it does. The chunker keeps such a block with its definition and the symbol finder counts it in the
    definition's lines, both by this one rule: no blank line between, the same indentation (a deeper
    comment ends the block above), not inside a string, not above ``floor``.
    """
    comment = indent + "#"
    while start - 1 >= floor and lines[start - 1].startswith(comment) and not mask[start - 1]:
        start -= 1
    return start
