"""How text is turned into FTS5 input, shared by indexing and querying.

The FTS table tokenises with unicode61 and '_' as a token character, so
`snake_case_name` is one token; camelCase is lowercased whole. To let a query
for "user name" find `getUserName` and `get_user_name`, the indexed body gets
the split parts of every compound identifier appended. The query side uses
the same splitter, so both sides agree by construction.

The derivation must be deterministic: the FTS table is contentless and a row
can only be deleted by replaying exactly the text that was indexed. Change it,
and bump schema.FTS_VERSION: the store then rebuilds the index on open.
"""

from __future__ import annotations

import functools
import re
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterable
from itertools import chain

# words and dotted names (`os.path.join`, `$scope`): the one scan of a chunk's words
_TOKEN_RE = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*")
_CAMEL_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z0-9])|[A-Z]?[a-z0-9]+|[A-Z]+")
_PATH_SPLIT_RE = re.compile(r"[\\/._\-\s]+")
_FTS_TOKEN_RE = re.compile(r"[^\W]+", re.UNICODE)  # mirrors unicode61 with '_' as a token char

_SCANS: OrderedDict[str, Counter[str]] = OrderedDict()
_SCANS_KEPT = 256  # more than the chunks of all but the largest files
_SCANS_LOCK = threading.Lock()


def token_counts(text: str) -> Counter[str]:
    """Each word and dotted name in `text` with its count, in first-seen order (do not modify).

    The tagger and the full-text body both start from this scan, which costs as much
    as the rest of either; the last few texts' scans are kept, so each chunk is scanned
    once whichever of the two asks first.
    """
    with _SCANS_LOCK:
        hit = _SCANS.get(text)
        if hit is not None:
            _SCANS.move_to_end(text)
            return hit
    counts = Counter(_TOKEN_RE.findall(text))
    with _SCANS_LOCK:
        _SCANS[text] = counts
        if len(_SCANS) > _SCANS_KEPT:
            _SCANS.popitem(last=False)
    return counts


def split_identifier(name: str) -> list[str]:
    """`getHTTPResponse_code` → ["get", "http", "response", "code"]; a plain word → []."""
    return list(_split_cached(name))


@functools.lru_cache(maxsize=8192)
def _split_cached(name: str) -> tuple[str, ...]:
    # identifiers repeat across a code base: split each spelling once per process (ingest looks
    # words up in _WORD_PARTS first; this cache serves queries and paths)
    parts: list[str] = []
    for piece in name.split("_"):
        if not piece:
            continue
        # most pieces are one ASCII run of lower case and digits, or of capitals (snake_case,
        # UPPER_CASE): what the camel regex gives for them, without running it
        if piece.isascii() and piece.isalnum():
            if piece.islower() or piece.isdigit():
                parts.append(piece)
                continue
            if piece.isupper() and piece.isalpha():
                parts.append(piece.lower())
                continue
        parts.extend(m.group(0).lower() for m in _CAMEL_RE.finditer(piece))
    if len(parts) < 2:
        return ()
    return tuple(parts)


# `split_identifier` as the cached tuple itself (do not modify): for loops over a pasted issue's names
compound_parts = _split_cached


def is_compound(name: str) -> bool:
    return len(_split_cached(name)) >= 2


class _WordParts(dict[str, tuple[str, ...]]):
    """Word or dotted name → the split parts of its compound identifiers, filled on first sight.

    Looked up through ``map(parts.__getitem__, words)``, so a word seen before costs
    a C-level dict hit and only a new spelling runs Python. Emptied when it grows
    past ``limit`` words, so a long-lived server does not keep every word it met.
    The limit is small: a big tree (the Linux kernel: millions of distinct identifiers)
    refills it all the time, and a table of 400k words took a parse process from 70 MB
    to 300 MB (the table and the allocator's fragments) for no measurable speed.
    """

    limit = 50_000

    def __missing__(self, word: str) -> tuple[str, ...]:
        if len(self) >= self.limit:
            self.clear()
        if "." in word:
            parts = tuple(chain.from_iterable(map(self.__getitem__, word.split("."))))
        elif "_" in word.strip("_") or not (word.islower() or word.isupper()):
            parts = _split_cached(word)
        else:
            parts = ()
        self[word] = parts
        return parts


_WORD_PARTS = _WordParts()


def identifier_parts(text: str) -> list[str]:
    """Unique split parts of all compound identifiers in `text`, in first-seen order."""
    return list(dict.fromkeys(chain.from_iterable(map(_WORD_PARTS.__getitem__, token_counts(text)))))


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


def word_tokens(word: str) -> list[str]:
    """fts_tokens for one query word: the same tokens, without the regex for a plain ASCII word.

    Why: a pasted issue's hundreds of distinct words are each split on every question (terms.py);
    a word of ASCII letters, digits and '_' is one token, its lowercase."""
    if _one_token(word):
        return [word.lower()]
    return fts_tokens(word)


def add_token_counts(counts: dict[str, int], words: Iterable[tuple[str, int]]) -> None:
    """Adds each (word, n) to `counts` as its word_tokens, n each: a pasted issue's ~800 counted words,
    the plain ones (most of them) without a list each."""
    get = counts.get
    for word, n in words:
        if _one_token(word):
            tok = word.lower()
            counts[tok] = get(tok, 0) + n
        else:
            for tok in fts_tokens(word):
                counts[tok] = get(tok, 0) + n


def _one_token(word: str) -> bool:
    """ASCII letters, digits and '_' only: one token (its lowercase) for FTS5's unicode61 with '_' kept."""
    return word.isascii() and word.replace("_", "a").isalnum()


def quote_term(term: str) -> str:
    """An FTS5 string literal: any user text is safe inside double quotes."""
    return '"' + term.replace('"', '""') + '"'
