"""Coordinate confidence: do the delivered items come from the places the query names?"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from collections.abc import Iterable

from helix_context.models import Gene, QuerySignals, ScoredGene

# weights of the kinds of path token a query can name: an exact file or a path
# fragment pins the answer down; a bare name (a directory or a file stem) less;
# an extension hardly at all.
_W_FILE = 1.0
_W_NAME = 0.6
_W_EXT = 0.2
_EXT_RE = re.compile(r"^\.[a-z0-9_+-]{1,10}$")
_STRIP = " \t\r\n\"'`()[]{}<>,;:!?"
_WRITTEN_PATH_RE = re.compile(r"[\w.~:-]*(?:/[\w.-]+)+/?")


@dataclass(frozen=True)
class _Token:
    text: str
    kind: str  # file | path | name | ext
    weight: float


def _norm_path(path: str) -> str:
    p = path.replace("\\", "/").lower()
    while "//" in p:
        p = p.replace("//", "/")
    return p


def _classify(raw: str) -> _Token | None:
    t = _norm_path(raw.strip(_STRIP))
    while t.startswith("./"):
        t = t[2:]
    if not t.strip("./~"):
        return None  # ".", "..", "/", "~": where the user stands, not a coordinate
    if "/" in t.strip("/"):
        return _Token(t.strip("/"), "path", _W_FILE)
    t = t.strip("/")
    if _EXT_RE.match(t):
        return _Token(t, "ext", _W_EXT)
    if "." in t.strip("."):
        return _Token(t, "file", _W_FILE)
    return _Token(t.strip("."), "name", _W_NAME)


def _written_paths(query: QuerySignals, token_texts: set[str]) -> tuple[list[str], set[str]]:
    """Whole paths as written in the query ("retrieve/fusion.py"), when the
    extractor passed on only their segments; kept only if their last segment is
    one of the path tokens.

    Returns (paths, prose segments). Slash-joined words with no extension and
    no anchor ("and/or", "client/server", "read/write") are prose, not paths:
    their segments are dropped rather than counted as directories.
    """
    paths: list[str] = []
    prose: set[str] = set()
    for match in _WRITTEN_PATH_RE.finditer(_norm_path(query.text)):
        raw = match.group(0)
        text = raw.rstrip("/")
        # "~/", "./" and "../" say where the user stands, not where the file is:
        # keep the part that can be matched as a suffix of an indexed path
        text = re.sub(r"^(?:~/|\./|\.\./)+", "", text).strip("/")
        if "/" not in text:
            continue
        segments = text.split("/")
        if segments[-1] not in token_texts:
            continue
        if segments[0].endswith(":") and len(segments[0]) > 2:
            continue  # a URL ("https://…"), not a place on disk; a drive ("c:") is
        anchored = raw.startswith(("/", "./", "../", "~")) or ":" in segments[0]
        if "." in segments[-1].strip(".") or anchored or len(segments) > 2:
            paths.append(text)
        else:
            prose.update(segments)
    return paths, prose


def _query_tokens(query: QuerySignals) -> list[_Token]:
    seen: dict[str, _Token] = {}
    for raw in query.path_tokens:
        tok = _classify(raw)
        if tok is not None and tok.text not in seen:
            seen[tok.text] = tok
    if seen:
        written, prose = _written_paths(query, set(seen))
        for text in prose:
            if seen.get(text) is not None and seen[text].kind == "name":
                del seen[text]
        for text in written:
            seen.setdefault(text, _Token(text, "path", _W_FILE))
    tokens = list(seen.values())
    strong = [t for t in tokens if t.kind in ("file", "path")]
    # a file name that ends a path written out in full is counted by that path
    path_bases = {t.text.rsplit("/", 1)[-1] for t in strong if t.kind == "path"}
    implied_ext = {"." + t.text.rsplit(".", 1)[1] for t in strong if "." in t.text.rsplit("/", 1)[-1]}
    implied_names: set[str] = set()
    for t in strong:
        parts = t.text.split("/")
        implied_names.update(parts)
        base = parts[-1]
        if "." in base:
            implied_names.add(base.split(".", 1)[0])
    out = []
    for t in tokens:
        if t.kind == "file" and t.text in path_bases:
            continue  # "fusion.py" split out of "retrieve/fusion.py"
        if t.kind == "ext" and t.text in implied_ext:
            continue  # "server.py" already says ".py"
        if t.kind == "name" and (t.text in implied_names or ("." + t.text) in implied_ext):
            continue  # "server" or "py" split out of "server.py" / "src/server.py"
        out.append(t)
    return out


def _covers(token: _Token, path: str) -> bool:
    p = _norm_path(path).rstrip("/")
    parts = [s for s in p.split("/") if s]
    if not parts:
        return False
    base = parts[-1]
    if token.kind == "path":
        return p == token.text or p.endswith("/" + token.text) or f"/{token.text}/" in f"/{p}/"
    if token.kind == "file":
        return base == token.text
    if token.kind == "ext":
        return base.endswith(token.text)
    # a bare name: a directory on the path, the file's stem, or an extension without its dot
    stem = base.split(".", 1)[0]
    return token.text in parts or token.text == stem or base.endswith("." + token.text)


def _item_path(item: Any) -> str | None:
    if isinstance(item, str):
        return item
    if isinstance(item, ScoredGene):
        return item.gene.source_path
    if isinstance(item, Gene):
        return item.source_path
    return getattr(item, "source_id", None)


def _coverage(query: QuerySignals, items: Iterable[Any]) -> tuple[float, list[str]]:
    tokens = _query_tokens(query)
    if not tokens:
        return 1.0, []
    paths = [p for p in (_item_path(i) for i in items) if p]
    total = sum(t.weight for t in tokens)
    covered = 0.0
    missing: list[str] = []
    for t in tokens:
        if any(_covers(t, p) for p in paths):
            covered += t.weight
        elif t.kind in ("file", "path", "name"):
            missing.append(t.text)
    return covered / total, missing


def coordinate_confidence(query: QuerySignals, items: Iterable[Any]) -> float:
    """How well the delivered items' source paths cover the paths the query names.

    Weighted share of the query's path tokens (file names and path fragments
    1.0, bare directory names / stems 0.6, extensions 0.2) found among the
    items' source paths; tokens implied by a longer one ("py" and "server" by
    "server.py") are not counted twice. 1.0 when the query names no path.
    ``items``: ScoredGene, Gene, PacketItem or plain path strings.
    """
    return _coverage(query, items)[0]


def uncovered_path_tokens(query: QuerySignals, items: Iterable[Any]) -> list[str]:
    """The files / paths / names the query mentions that no item comes from."""
    return _coverage(query, items)[1]

