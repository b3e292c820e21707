"""What an answer may say about the query it answers, and when there is no query at all.

An answer that repeats a pasted 100 KB issue back to its caller costs the caller that
many bytes (and an agent that many tokens) for nothing it did not already have, so
every answer echoes at most a short prefix plus the full length. An empty query has no
answer at all: the caller gets one clear message instead of an empty result that looks
like "nothing is indexed".
"""

from __future__ import annotations

from helix_context.errors import InvalidRequest

ECHO_CHARS = 120  # enough to tell two queries apart in a log or a reply; a line, not a page

EMPTY_QUERY_MESSAGE = "the query is empty: give a question, an identifier or a few words to look for"


def echo(query: str, limit: int = ECHO_CHARS) -> str:
    """The query as an answer may repeat it: whole when short, else its start and its length."""
    if len(query) <= limit:
        return query
    return f"{query[:limit]}… ({len(query):,} characters)"


def require_query(query: str | None) -> str:
    """The query, or InvalidRequest when it holds nothing but whitespace."""
    if query is None or not query.strip():
        raise InvalidRequest(EMPTY_QUERY_MESSAGE)
    return query
