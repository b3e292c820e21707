"""Restoration: put back the input lines (sentences, for prose) that held tokens the compressor dropped.

Why apart: this is the critical-token floor's repair step, the same for every content type. The
input is split into restorable units, the compressor's output is matched to them, and the
units holding lost tokens go back in source order, with a marker ("…", as a comment in code)
wherever input was skipped.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from dataclasses import dataclass

from helix_context.answer.compress_critical import contains_token
from helix_context.answer.compress_python import PY_LANGS

MARKER = "…"

_HASH_COMMENT_LANGS = PY_LANGS | {"ruby", "rb", "bash", "sh", "shell", "zsh", "perl", "r", "yaml", "toml", "elixir"}
_SLASH_COMMENT_LANGS = {
    "javascript", "js", "typescript", "ts", "tsx", "jsx", "java", "c", "cpp", "c++", "cc", "h", "hpp",
    "csharp", "c#", "cs", "go", "rust", "rs", "kotlin", "kt", "swift", "scala", "php", "dart",
}

_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?])[ \t]+(?=[\"'(\[`*_]?[A-Z0-9])")
_BARE_BULLET_RE = re.compile(r"\d{1,3}[.)]|[-*+]")
_BULLET_RE = re.compile(r"^(?:[-*+>]|\d{1,3}[.)])\s+")
_FENCE_RE = re.compile(r"^\s*(?:```|~~~)")
_HEADING_RE = re.compile(r"^\s{0,3}#{1,6}\s+\S")


@dataclass
class _Units:
    texts: list[str]  # one restorable piece each (a line, or a sentence of prose)
    must: set[int]  # units restored whenever the compressor dropped them (markdown headings)
    fence_of: dict[int, tuple[int, int]]  # unit inside a fence -> (open, close) unit indices


def split_units(text: str, content_type: str) -> _Units:
    lines = text.split("\n")
    if content_type not in ("text", "markdown"):
        return _Units(lines, set(), {})
    units: list[str] = []
    must: set[int] = set()
    fence_of: dict[int, tuple[int, int]] = {}
    in_fence = False
    fence_open = -1
    members: list[int] = []
    for line in lines:
        if content_type == "markdown" and _FENCE_RE.match(line):
            units.append(line)
            idx = len(units) - 1
            if not in_fence:
                in_fence, fence_open, members = True, idx, []
            else:
                in_fence = False
                for j in members:
                    fence_of[j] = (fence_open, idx)
            continue
        if in_fence or not line.strip():
            units.append(line)
            if in_fence:
                members.append(len(units) - 1)
            continue
        if content_type == "markdown" and _HEADING_RE.match(line):
            units.append(line)
            must.add(len(units) - 1)
            continue
        indent = line[: len(line) - len(line.lstrip())]
        body = line.strip()
        bullet = _BULLET_RE.match(body)
        lead = bullet.group() if bullet else ""
        parts = _SENTENCE_SPLIT_RE.split(body[len(lead):]) or [""]
        units.append(indent + lead + parts[0])
        units.extend(parts[1:])
    return _Units(units, must, fence_of)


def _is_signal_line(key: str) -> bool:
    return len(key) >= 3 and any(c.isalnum() for c in key)


def _match_output(units: list[str], out_lines: list[str], prose: bool) -> list[int | None]:
    """For each output line, the input unit it reproduces (monotone, greedy), or None."""
    index: dict[str, list[int]] = {}
    for i, u in enumerate(units):
        key = u.strip()
        if _is_signal_line(key):
            index.setdefault(key, []).append(i)
    matched: list[int | None] = []
    last = -1
    for line in out_lines:
        key = line.strip()
        m: int | None = None
        if _is_signal_line(key):
            for i in index.get(key, ()):
                if i > last:
                    m = i
                    break
            if m is None and prose and len(key) >= 12:
                for i in range(last + 1, len(units)):
                    if key in units[i]:
                        m = i
                        break
        elif key and last + 1 < len(units) and units[last + 1].strip() == key:
            m = last + 1  # a short line (")", "}", "else:") right after its predecessor
        matched.append(m)
        if m is not None:
            last = m
    return matched


def marker_for(content_type: str, language: str | None) -> str:
    lang = (language or "").lower()
    if content_type == "code":
        if lang in _SLASH_COMMENT_LANGS:
            return "// " + MARKER
        if lang in _HASH_COMMENT_LANGS or not lang:
            return "# " + MARKER
        return MARKER
    if content_type == "config":
        return "# " + MARKER
    return MARKER


def commented(line: str, content_type: str, language: str | None) -> str:
    prefix = "// " if (language or "").lower() in _SLASH_COMMENT_LANGS else "# "
    indent = line[: len(line) - len(line.lstrip())]
    return indent + prefix + line.strip()


def restore(
    units: _Units,
    out_text: str,
    lost: list[str],
    content_type: str,
    language: str | None,
    render: Callable[[str], str] | None = None,
    expand: Callable[[set[int], set[int]], set[int]] | None = None,
) -> str:
    """Put back the input units that hold the lost tokens, in source order: each
    restored run goes right after the output line that reproduces the unit
    before it, with a marker where input was skipped."""
    prose = content_type in ("text", "markdown")
    texts = units.texts
    out_lines = out_text.split("\n")
    if prose:  # TextCrusher splits "1. Do this." into "1." and "Do this."
        joined: list[str] = []
        for line in out_lines:
            if joined and _BARE_BULLET_RE.fullmatch(joined[-1].strip()) and line.strip():
                joined[-1] = joined[-1].strip() + " " + line.strip()
            else:
                joined.append(line)
        out_lines = joined
    matched = _match_output(texts, out_lines, prose)
    present = {m for m in matched if m is not None}

    chosen: set[int] = set()
    need = list(lost)
    for j, unit in enumerate(texts):
        if not need:
            break
        if j in present:
            continue
        hits = [t for t in need if contains_token(unit, t)]
        if hits:
            chosen.add(j)
            need = [t for t in need if t not in hits]
    if units.must:
        chosen |= {j for j in units.must if j not in present}
    if units.fence_of:  # a fence whose body shows must show its fence lines too
        for j in list(present | chosen):
            pair = units.fence_of.get(j)
            if pair:
                chosen |= {p for p in pair if p not in present}
    if expand is not None and chosen:
        chosen = expand(chosen, present)
    chosen -= present
    if not chosen and not prose:
        return out_text

    marker = marker_for(content_type, language)
    indent_markers = content_type == "code"
    show = render or (lambda s: s)
    pending = sorted(chosen)
    last_unit = max((i for i, t in enumerate(texts) if t.strip()), default=len(texts) - 1)
    result: list[str] = []
    state: dict[str, int | None] = {"src": -1, "restored": False}  # src: unit index of the last line out; None: a compressor line
    run: list[str] = []  # the restored units just emitted
    nonblank = [i for i, t in enumerate(texts) if t.strip()]

    def gap(a: int, b: int) -> bool:
        """Some non-blank unit lies strictly between a and b."""
        k = bisect.bisect_right(nonblank, a)
        return k < len(nonblank) and nonblank[k] < b

    def mark(near: str) -> None:
        if result and result[-1].strip() == marker.strip():
            return
        if indent_markers:
            result.append(near[: len(near) - len(near.lstrip())] + marker)
        else:
            result.append(marker)

    def flush(limit: int) -> None:
        while pending and pending[0] < limit:
            j = pending.pop(0)
            prev = state["src"]
            if prev is None:
                if not (result and _looks_like_marker(result[-1])):
                    mark(texts[j])
            elif gap(prev, j):
                mark(texts[j])
            result.append(show(texts[j]))
            state["src"], state["restored"] = j, True
            run.append(texts[j])

    next_matched: list[int | None] = [None] * len(out_lines)
    upcoming: int | None = None
    for k in range(len(out_lines) - 1, -1, -1):
        next_matched[k] = upcoming
        if matched[k] is not None:
            upcoming = matched[k]
    first = next((m for m in matched if m is not None), None)
    flush(first if first is not None else len(texts))
    for k, (line, m) in enumerate(zip(out_lines, matched, strict=True)):
        if state["restored"] and m is not None and state["src"] is not None and gap(state["src"], m):
            mark(line)
        if prose and m is not None and texts[m].strip() == line.strip():
            line = texts[m]  # TextCrusher trims lines: keep the list / quote indentation
        if m is None and run and _restated(line, run):
            continue  # e.g. a one-line docstring summary right after the full docstring put back
        run.clear()
        result.append(line)
        state["src"], state["restored"] = m, False
        if m is not None:
            nxt = next_matched[k]
            flush(nxt if nxt is not None else len(texts))
    flush(len(texts))
    if state["restored"] and state["src"] is not None and gap(state["src"], last_unit + 1):
        mark(result[-1])
    return "\n".join(result)


def _restated(line: str, run: list[str]) -> bool:
    """A compressor line that only repeats what the restored run just said."""
    core = line.strip().strip("\"'`").strip()
    if len(core) < 12 or _looks_like_marker(line):
        return False
    return core in " ".join(u.strip() for u in run)


_MARKERISH_RE = re.compile(r"omitted|elided|truncated|compressed|…|\.\.\.|^\s*\[\d+ ", re.IGNORECASE)


def _looks_like_marker(line: str) -> bool:
    return bool(_MARKERISH_RE.search(line))

