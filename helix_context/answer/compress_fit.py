"""The budget cut: whole lines under a token limit, the ones the query and the critical tokens need first.

Why apart: it runs only when a compressed gene still exceeds its share of the budget, after
compression and restoration, and it ranks lines by the query rather than by content type.
"""

from __future__ import annotations

import re

from helix_context.answer.compress_critical import contains_token
from helix_context.tokens import count_tokens, truncate_to_tokens

_QUERY_WORD_RE = re.compile(r"[\w./:-]{3,}")
_STOP = frozenset(
    "the and for with that this what why how when where which who does did are was were has have not "
    "from into about can could should would will there their them then than its it's you your".split()
)


def _query_words(query: str) -> set[str]:
    return {w.strip(".:/-") for w in _QUERY_WORD_RE.findall(query.lower())} - _STOP - {""}


def fit_to_budget(text: str, max_tokens: int, crit: list[str], query: str, marker: str, keep_first: bool = False) -> str:
    """Keep whole lines under max_tokens, preferring lines with critical tokens the
    query mentions, then lines with query words, then lines with any critical token;
    source order is kept and gaps are marked. keep_first: the first line is a
    header the rest needs (a JSON table's schema line)."""
    if count_tokens(text) <= max_tokens:
        return text
    lines = text.split("\n")
    words = _query_words(query)
    qlow = query.lower()
    wanted = [t for t in crit if contains_token(qlow, t.lower()) or any(w in t.lower() for w in words if len(w) >= 4)]

    def priority(line: str) -> int:
        low = line.lower()
        if wanted and any(contains_token(line, t) for t in wanted):
            return 3
        if words and any(w in low for w in words):
            return 2
        if any(contains_token(line, t) for t in crit):
            return 1
        return 0

    order = sorted(
        (i for i, line in enumerate(lines) if line.strip() and line.strip() != marker),
        key=lambda i: (-(9 if keep_first and i == 0 else priority(lines[i])), i),
    )
    marker_cost = count_tokens(marker) + 1
    chosen: list[int] = []
    used = 0
    for i in order:
        cost = count_tokens(lines[i]) + 1
        if used + cost + marker_cost > max_tokens:
            continue
        chosen.append(i)
        used += cost + marker_cost  # worst case: a marker per kept line

    def render(idx: list[int]) -> str:
        out: list[str] = []
        prev = -1
        for i in sorted(idx):
            if i != prev + 1 and not (out and out[-1] == marker):
                out.append(marker)
            out.append(lines[i])
            prev = i
        if idx and prev < len(lines) - 1:
            out.append(marker)
        return "\n".join(out)

    if not chosen:
        return truncate_to_tokens(text, max_tokens)
    result = render(chosen)
    while count_tokens(result) > max_tokens and len(chosen) > 1:
        chosen.pop()
        result = render(chosen)
    if count_tokens(result) > max_tokens:
        result = truncate_to_tokens(result, max_tokens)
    return result

