"""How text is turned into FTS5 input, shared by indexing and querying.

The FTS table tokenises with unicode61 and '_' as a token character, so
`snake_case_name` is one token; camelCase is lowercased whole. To let a query
for "user name" find `getUserName` and `get_user_name`, the indexed body gets
the split parts of every compound identifier appended. The query side uses
the same splitter, so both sides agree by construction.

The derivation must be deterministic: the FTS table is contentless and a row
can only be deleted by replaying exactly the text that was indexed.
"""

from __future__ import annotations

import functools
import re

IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CAMEL_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z0-9])|[A-Z]?[a-z0-9]+|[A-Z]+")
_PATH_SPLIT_RE = re.compile(r"[\\/._\-\s]+")
_FTS_TOKEN_RE = re.compile(r"[^\W]+", re.UNICODE)  # mirrors unicode61 with '_' as a token char


def split_identifier(name: str) -> list[str]:
    """`getHTTPResponse_code` → ["get", "http", "response", "code"]; a plain word → []."""
    return list(_split_cached(name))


@functools.lru_cache(maxsize=65536)
def _split_cached(name: str) -> tuple[str, ...]:
    # identifiers repeat across a code base: split each spelling once per process
    parts: list[str] = []
    for piece in name.split("_"):
        if piece:
            parts.extend(m.group(0).lower() for m in _CAMEL_RE.finditer(piece))
    if len(parts) < 2:
        return ()
    return tuple(parts)


def is_compound(name: str) -> bool:
    return len(_split_cached(name)) >= 2


def identifier_parts(text: str) -> list[str]:
    """Unique split parts of all compound identifiers in `text`, in first-seen order."""
    seen: dict[str, None] = {}
    # split each distinct word once: source code repeats its identifiers many times
    for word in dict.fromkeys(IDENT_RE.findall(text)):
        if "_" in word.strip("_") or (not word.islower() and not word.isupper()):
            for part in _split_cached(word):
                seen.setdefault(part, None)
    return list(seen)


def body_text(content: str) -> str:
    parts = identifier_parts(content)
    return content if not parts else content + "\n" + " ".join(parts)


def tags_text(tags: tuple[str, ...] | list[str]) -> str:
    return " ; ".join(tags)


def path_text(path: str | None) -> str:
    """Segments, the file name's stem and extension, and split identifier parts."""
    if not path:
        return ""
    return _path_text(path)


@functools.lru_cache(maxsize=4096)
def _path_text(path: str) -> str:
    # every gene of a file indexes the same path: derive it once per file
    segments = [s for s in re.split(r"[\\/]+", path) if s]
    tail = segments[-4:]  # deep absolute prefixes carry no signal
    words: dict[str, None] = {}
    for seg in tail:
        for piece in _PATH_SPLIT_RE.split(seg):
            if piece:
                words.setdefault(piece.lower(), None)
        for piece in split_identifier(seg.rsplit(".", 1)[0]):
            words.setdefault(piece, None)
    return " ".join(words)


def fts_tokens(text: str) -> list[str]:
    """Tokens as FTS5 would see them (lowercased, '_' kept inside tokens)."""
    return [t.lower() for t in _FTS_TOKEN_RE.findall(text)]


def quote_term(term: str) -> str:
    """An FTS5 string literal: any user text is safe inside double quotes."""
    return '"' + term.replace('"', '""') + '"'
