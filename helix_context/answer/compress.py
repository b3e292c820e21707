"""Compress one gene's text for its content type, offline, keeping every critical token.

headroom-ai does the compressing, one compressor per content type, called
directly (its one-call router barely compresses offline):

    code      CodeAwareCompressor (tree-sitter; Kompress fallback and CCR off)
    log       LogCompressor (max_errors raised so ERROR lines stay; CCR off)
    diff      DiffCompressor (CCR off)
    json      SmartCrusher (with the query; CCR markers off)
    markdown  TextCrusher (extractive, order-neutral, query-weighted)
    text      TextCrusher
    config    pass-through, chosen by measurement: TextCrusher keeps about half
              the lines, the critical-token floor then puts back nearly every
              key = value line (a TOML file: 254 -> 231 tokens, a YAML file:
              133 -> 119), and the result has lost its [section] / parent-key
              lines and YAML indentation; the unchanged file is worth the ~10 %

Critical-token floor: the tokens `critical_tokens` finds in the input (paths,
identifiers, numbers, hex, versions, URLs, key=value pairs) that the compressor
dropped are put back by re-inserting the input lines (sentences, for prose) that
held them, in source order, with "…" marking elided stretches. For Python that
parsed before, the result must still parse: restored lines go in as comments
when they would not parse as code. If the result is not smaller than the input,
the input is returned.

headroom is imported lazily on first use, after the offline environment
variables are set (HEADROOM_OFFLINE, HF_HUB_OFFLINE, HEADROOM_CCR_BACKEND=memory,
HEADROOM_TELEMETRY=off, HEADROOM_TOIN_BACKEND=none, TIKTOKEN_CACHE_DIR). litellm
is never imported, and nothing that needs a model hub (Kompress) is ever built.
When headroom is disabled, missing or raises, the text is truncated to
max_tokens (or passed through); `compress` never raises.
"""

from __future__ import annotations

import ast
import bisect
import json
import logging
import os
import re
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from helix_context.tokens import count_tokens, ensure_tiktoken_cache_env, truncate_to_tokens

log = logging.getLogger(__name__)

__all__ = ["Compressed", "Compressor", "critical_tokens", "SMALL_TOKENS"]

# inputs under this many tokens pass through unchanged
SMALL_TOKENS = 60
MARKER = "…"

_PY_LANGS = {"python", "py", "python3", "py3", "pyi"}
_HASH_COMMENT_LANGS = _PY_LANGS | {"ruby", "rb", "bash", "sh", "shell", "zsh", "perl", "r", "yaml", "toml", "elixir"}
_SLASH_COMMENT_LANGS = {
    "javascript", "js", "typescript", "ts", "tsx", "jsx", "java", "c", "cpp", "c++", "cc", "h", "hpp",
    "csharp", "c#", "cs", "go", "rust", "rs", "kotlin", "kt", "swift", "scala", "php", "dart",
}


@dataclass(frozen=True)
class Compressed:
    text: str
    # headroom:code|log|diff|json|text (a max_tokens cut keeps the name), "truncate"
    # (plain cut: headroom off / failed, or a pass-through input over max_tokens), "none"
    method: str
    original_tokens: int
    tokens: int
    critical_total: int  # critical tokens in the input
    critical_kept_raw: int  # kept by the compressor itself, before restoration
    critical_kept: int  # after restoration (== critical_total unless max_tokens forced a cut)


# --------------------------------------------------------------------------- #
# critical tokens
# --------------------------------------------------------------------------- #

_SCALAR = r"""(?:"[^"\n]*"|'[^'\n]*'|-?\d[\w.:+-]*|[A-Za-z_][\w.:/@+-]*|\[[^\]\n]*\])"""

# a whole config-style line: `key = value`, `key: value`, `- key: value`
_CFG_LINE_RE = re.compile(
    r"^[ \t]*(?:-[ \t]+)?(?P<pair>(?P<key>[A-Za-z_][\w.-]*)[ \t]*(?P<op>=|:)[ \t]*(?P<val>" + _SCALAR + r"))"
    r"[ \t]*(?:[#;].*)?$"
)

_TOKEN_RE = re.compile(
    r"""
    (?P<url>\b(?:https?|ftp|file|wss?|sqlite|postgres(?:ql)?|redis)://[^\s<>"'`]+)
  | (?P<ts>\b\d{4}-\d{2}-\d{2}(?:[T\ ]\d{2}:\d{2}(?::\d{2})?(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)?(?![\w])
      | \b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b)
  | (?P<uuid>\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b)
  | (?P<kv>(?<![\w.-])(?:--?)?[A-Za-z_][\w.-]*=(?!=)(?:"[^"\n]*"|'[^'\n]*'|[^\s,;()\[\]{}"'<>]+))
  | (?P<kc>(?<![\w.-])[A-Za-z_][\w.-]*:\ ?(?:"[^"\n]*"|[\w.+-]+)(?=[\s,;)}\]]|$))
  | (?P<winpath>\b[A-Za-z]:\\(?:[^\\\s:*?"<>|]+\\)*[^\\\s:*?"<>|,;)]*)
  | (?P<path>(?<!\w)(?:~|\.{1,2})?/[\w.@+-]+(?:/[\w.@+-]*)*
      | \b[\w.@+-]+(?:/[\w.@+-]+){2,}/?
      | \b[\w.@+-]+/[\w@+-]+\.[A-Za-z]\w{0,6}\b)
  | (?P<hex>\b0[xX][0-9a-fA-F]+\b
      | \b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,}\b
      | \b(?=[0-9A-F]*[A-F])(?=[0-9A-F]*\d)[0-9A-F]{7,}\b)
  | (?P<version>\bv?\d+(?:\.\d+){1,3}(?:-[0-9A-Za-z]+(?:\.[0-9A-Za-z]+)*)?(?!\w|\.\w))
  | (?P<dotted>\b_*[A-Za-z][\w-]*(?:\.[A-Za-z_][\w-]*)+\b)
  | (?P<ident>\b_+[A-Za-z0-9]\w*
      | \b[A-Za-z][A-Za-z0-9]*(?:_+[A-Za-z0-9]+)+_*\b
      | \b[a-z]+(?:[A-Z][a-z0-9]*)+\b
      | \b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b
      | \b[A-Z]{2,}[a-z]+\w*\b
      | \b[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)+\b
      | \b[A-Za-z]+\d[A-Za-z0-9]*\b)
  | (?P<number>(?<![\w.])-?\d+(?:[_,]\d{3})*(?:\.\d+)?(?:[A-Za-z%]{1,3})?(?!\w|\.\w))
    """,
    re.VERBOSE,
)

_TRAILING_PUNCT = ".,;:!?)]}'\"`"


def _looks_technical_key(key: str) -> bool:
    return "_" in key or "." in key or any(c.isupper() for c in key[1:]) or any(c.isdigit() for c in key)


def _is_numeric_value(v: str) -> bool:
    v = v.strip("\"'")
    return bool(v) and (v[0].isdigit() or (v[0] == "-" and v[1:2].isdigit()))


_PLAIN_VALUES = ("true", "false", "none", "null", "yes", "no", "on", "off")


def _is_setting(m: re.Match[str], line: str) -> bool:
    """A whole-line `key = value` / `key: value` that states a setting or a fact."""
    key, op, val = m.group("key"), m.group("op"), m.group("val")
    bare_word = val[:1].isalpha() and not any(c in val for c in "_./:@") and val.lower() not in _PLAIN_VALUES
    if op == "=":
        return not (bare_word and line[:1] in (" ", "\t"))  # `x = y` in an indented block is code
    return not (bare_word and not _looks_technical_key(key) and line.lstrip()[:1].isupper())  # "Note: this"


def _line_tokens(line: str, start: int, end: int) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for tm in _TOKEN_RE.finditer(line, start, end):
        kind = tm.lastgroup or ""
        tok = tm.group()
        if kind in ("url", "path", "winpath"):
            tok = tok.rstrip(_TRAILING_PUNCT)
            if kind == "path" and (not any(c.isalpha() for c in tok) or len(tok) < 3):
                continue
        elif kind == "kc":
            key, _, val = tok.partition(":")
            if not (_looks_technical_key(key) or _is_numeric_value(val.strip()) or "_" in val):
                out.extend(_line_tokens(line, tm.start() + len(key) + 1, tm.end()))  # "see: InvoiceWriter"
                continue
            kind = "pair"
        elif kind == "kv":
            if not tok.endswith(("\"", "'")):
                tok = tok.rstrip(_TRAILING_PUNCT)
            kind = "pair"
        elif kind == "dotted":
            if len(tok) < 4 or max(len(p) for p in tok.split(".")) < 2:
                continue  # e.g, i.e
        elif kind == "ident":
            if len(tok) < 2 or ("-" in tok and not any(c.isdigit() for c in tok)):
                continue  # hyphenated words are English, hyphenated names with digits are ids
        elif kind == "number":
            if sum(c.isdigit() for c in tok) < 2 and "." not in tok:
                continue  # single digits are everywhere
        if tok:
            out.append((tok, kind))
    return out


def _scan(text: str) -> list[tuple[str, str, int]]:
    """(token, kind, line number) for every critical token, in source order, repeats included."""
    out: list[tuple[str, str, int]] = []
    for lineno, line in enumerate(text.split("\n")):
        start = 0
        m = _CFG_LINE_RE.match(line)
        if m and _is_setting(m, line):
            out.append((m.group("pair").rstrip(), "pair", lineno))
            start = m.end("pair")
        out.extend((tok, kind, lineno) for tok, kind in _line_tokens(line, start, len(line)))
    return out


def critical_tokens(text: str) -> list[str]:
    """Tokens a compressed text must not lose, unique, in order of first appearance:
    URLs, paths, identifiers (snake_case, camelCase, PascalCase with an inner
    capital, dotted names, id-like names with digits), numbers of two digits or
    more, hex strings, UUIDs, versions, timestamps, and key=value / key: value
    pairs. Plain English words are not critical."""
    seen: dict[str, None] = {}
    for tok, _kind, _line in _scan(text):
        seen.setdefault(tok, None)
    return list(seen)


_LOG_IMPORTANT_RE = re.compile(
    r"\b(?:ERROR|ERR|FATAL|CRIT(?:ICAL)?|SEVERE|PANIC|ALERT|EMERG|WARN(?:ING)?|Traceback|Exception|Error|"
    r"error|failed|failure|exception|panic)\b|^\s+at\s|^\s*File \"|^\S*(?:Error|Exception)\b"
)
_VOLATILE_KINDS = {"ts", "number", "hex", "uuid", "version"}


def _critical_for(text: str, content_type: str) -> list[str]:
    """The floor for one content type: `critical_tokens`, except for
    - diffs: tokens of +/- lines and file / hunk headers; unchanged context lines
      (leading space) are there to locate the change, and the diff compressor
      trims them;
    - logs: every token of warning / error lines, but only the stable tokens
      (names, paths, URLs, non-numeric settings) of routine lines, whose
      timestamps, counters and ids change line by line and are what a log
      compressor is there to fold away."""
    if content_type not in ("diff", "log"):
        return critical_tokens(text)
    lines = text.split("\n")
    seen: dict[str, None] = {}
    if content_type == "diff":
        for tok, _kind, lineno in _scan(text):
            if not lines[lineno].startswith(" "):
                seen.setdefault(tok, None)
        return list(seen)
    important = {i for i, line in enumerate(lines) if _LOG_IMPORTANT_RE.search(line)}
    for tok, kind, lineno in _scan(text):
        if lineno not in important:
            if kind in _VOLATILE_KINDS:
                continue
            if kind == "pair":
                val = re.split(r"[=:]", tok, maxsplit=1)[-1].strip().strip("\"'")
                if not val or _is_numeric_value(val) or re.fullmatch(r"[\w-]*\d[\w-]*", val):
                    continue
            if kind == "ident" and any(c.isdigit() for c in tok):
                continue
        seen.setdefault(tok, None)
    return list(seen)


def _contains(hay: str, tok: str) -> bool:
    """tok occurs in hay, not as part of a longer word or number."""
    start = hay.find(tok)
    if start < 0:
        return False
    word_start = tok[0].isalnum() or tok[0] == "_"
    word_end = tok[-1].isalnum() or tok[-1] == "_"
    while start >= 0:
        end = start + len(tok)
        ok_left = not word_start or start == 0 or not (hay[start - 1].isalnum() or hay[start - 1] == "_")
        ok_right = not word_end or end == len(hay) or not (hay[end].isalnum() or hay[end] == "_")
        if ok_left and ok_right:
            return True
        start = hay.find(tok, start + 1)
    return False


# --------------------------------------------------------------------------- #
# units, restoration, budget cut
# --------------------------------------------------------------------------- #

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


def _split_units(text: str, content_type: str) -> _Units:
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


def _marker_for(content_type: str, language: str | None) -> str:
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


def _commented(line: str, content_type: str, language: str | None) -> str:
    prefix = "// " if (language or "").lower() in _SLASH_COMMENT_LANGS else "# "
    indent = line[: len(line) - len(line.lstrip())]
    return indent + prefix + line.strip()


def _restore(
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
        hits = [t for t in need if _contains(unit, t)]
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

    marker = _marker_for(content_type, language)
    indent_markers = content_type == "code"
    show = render or (lambda s: s)
    pending = sorted(chosen)
    last_unit = max((i for i, t in enumerate(texts) if t.strip()), default=len(texts) - 1)
    result: list[str] = []
    state = {"src": -1, "restored": False}  # src: unit index of the last line out; None: a compressor line
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

    next_matched = [None] * len(out_lines)
    upcoming: int | None = None
    for k in range(len(out_lines) - 1, -1, -1):
        next_matched[k] = upcoming
        if matched[k] is not None:
            upcoming = matched[k]
    first = next((m for m in matched if m is not None), None)
    flush(first if first is not None else len(texts))
    for k, (line, m) in enumerate(zip(out_lines, matched)):
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


def _py_closure(text: str) -> Callable[[set[int], set[int]], set[int]] | None:
    """For Python: widen a set of lines to whole statements plus the headers of
    the blocks around them (if/for/try/with/def/class, else/except/finally), so
    that the restored lines parse in place."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    lines = text.split("\n")

    def first_line(node: ast.AST) -> int:
        decos = getattr(node, "decorator_list", None) or []
        return min([node.lineno] + [d.lineno for d in decos]) - 1  # type: ignore[attr-defined]

    def span(node: ast.AST) -> range:
        return range(first_line(node), node.end_lineno)  # type: ignore[attr-defined]

    def header(node: ast.AST) -> range:
        body = getattr(node, "body", None)
        if not body:
            return span(node)
        return range(first_line(node), max(first_line(node) + 1, body[0].lineno - 1))

    def clause_line(before_lineno: int, words: tuple[str, ...]) -> list[int]:
        i = before_lineno - 2  # 0-based line above the clause's first statement
        while i >= 0:
            stripped = lines[i].lstrip()
            if stripped.startswith(words):
                return [i]
            if stripped and not stripped.startswith("#"):
                break
            i -= 1
        return []

    def first_stmt_lines(stmts: list[ast.stmt]) -> set[int]:
        if not stmts:
            return set()
        s = stmts[0]
        if getattr(s, "body", None) and not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return set(header(s)) | first_stmt_lines(s.body)  # type: ignore[attr-defined]
        return set(span(s))

    def expand(chosen: set[int], present: set[int]) -> set[int]:
        need = set(chosen)

        def walk(stmts: list[ast.stmt], chain: list[set[int]]) -> None:
            for s in stmts:
                sp = span(s)
                if not any(t in need_targets for t in sp):
                    continue
                parents: set[int] = set().union(*chain) if chain else set()
                body = getattr(s, "body", None)
                if not body or isinstance(s, ast.Match):
                    need.update(sp)
                    need.update(parents)
                    continue
                hdr = set(header(s))
                if any(t in need_targets for t in hdr):
                    need.update(hdr)
                    need.update(parents)
                orelse = getattr(s, "orelse", None) or []
                if isinstance(s, (ast.Try, getattr(ast, "TryStar", ast.Try))):
                    # a try needs a body statement and one handler (or its finally)
                    base = hdr | first_stmt_lines(body)
                    if s.handlers:
                        h0 = s.handlers[0]
                        h0_header = set(range(h0.lineno - 1, max(h0.lineno, h0.body[0].lineno - 1)))
                        tail = h0_header | first_stmt_lines(h0.body)
                    else:
                        fin_line = set(clause_line(s.finalbody[0].lineno, ("finally",)))
                        tail = fin_line | first_stmt_lines(s.finalbody)
                    walk(body, chain + [hdr | tail])
                    for h in s.handlers:
                        hh = set(range(h.lineno - 1, max(h.lineno, h.body[0].lineno - 1)))
                        if any(t in need_targets for t in hh):
                            need.update(hh | base | parents)
                        walk(h.body, chain + [base | hh])
                    if orelse:
                        walk(orelse, chain + [base | tail | set(clause_line(orelse[0].lineno, ("else",)))])
                    if s.finalbody:
                        walk(s.finalbody, chain + [base | set(clause_line(s.finalbody[0].lineno, ("finally",)))])
                    continue
                walk(body, chain + [hdr])
                if orelse:
                    is_elif = isinstance(s, ast.If) and lines[orelse[0].lineno - 1].lstrip().startswith("elif")
                    extra = hdr | first_stmt_lines(body)
                    if not is_elif:
                        extra |= set(clause_line(orelse[0].lineno, ("else",)))
                    walk(orelse, chain + [extra])

        need_targets = set(chosen)
        walk(tree.body, [])
        return need

    return expand


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


_QUERY_WORD_RE = re.compile(r"[\w./:-]{3,}")
_STOP = frozenset(
    "the and for with that this what why how when where which who does did are was were has have not "
    "from into about can could should would will there their them then than its it's you your".split()
)


def _query_words(query: str) -> set[str]:
    return {w.strip(".:/-") for w in _QUERY_WORD_RE.findall(query.lower())} - _STOP - {""}


def _fit(text: str, max_tokens: int, crit: list[str], query: str, marker: str, keep_first: bool = False) -> str:
    """Keep whole lines under max_tokens, preferring lines with critical tokens the
    query mentions, then lines with query words, then lines with any critical token;
    source order is kept and gaps are marked. keep_first: the first line is a
    header the rest needs (a JSON table's schema line)."""
    if count_tokens(text) <= max_tokens:
        return text
    lines = text.split("\n")
    words = _query_words(query)
    qlow = query.lower()
    wanted = [t for t in crit if _contains(qlow, t.lower()) or any(w in t.lower() for w in words if len(w) >= 4)]

    def priority(line: str) -> int:
        low = line.lower()
        if wanted and any(_contains(line, t) for t in wanted):
            return 3
        if words and any(w in low for w in words):
            return 2
        if any(_contains(line, t) for t in crit):
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


def _python_prefix(code: str, max_tokens: int) -> str | None:
    """The longest run of whole top-level statements that fits, or None."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    lines = code.split("\n")
    starts = []
    for node in tree.body:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        starts.append(first - 1)
    starts.append(len(lines))
    best = None
    for cut in starts[1:]:
        candidate = "\n".join(lines[:cut]).rstrip()
        if count_tokens(candidate) > max_tokens:
            break
        best = candidate
    if best and _parses(best):
        return best
    return None


# --------------------------------------------------------------------------- #
# the compressor
# --------------------------------------------------------------------------- #

_OFFLINE_ENV = {
    "HEADROOM_OFFLINE": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HEADROOM_CCR_BACKEND": "memory",
    "HEADROOM_TELEMETRY": "off",
    "HEADROOM_TOIN_BACKEND": "none",  # TOIN learning stays in memory: no ~/.headroom/toin.json
}


def set_offline_env() -> None:
    """The environment headroom needs to run without a network; set before importing it."""
    for key, value in _OFFLINE_ENV.items():
        os.environ.setdefault(key, value)
    ensure_tiktoken_cache_env()


def _env_disabled() -> bool:
    return os.environ.get("HELIX_DISABLE_HEADROOM", "").strip().lower() in ("1", "true", "yes", "on")


_PY_PROBE = '''import os


def probe_function(alpha_value: int, beta_value: int) -> int:
    """Add two numbers after some checks."""
    total_sum = alpha_value + beta_value
    if total_sum > 100:
        total_sum = total_sum - 100
    for index_value in range(10):
        total_sum += index_value
        total_sum -= index_value
    result_value = total_sum * 2
    result_value = result_value // 2
    return result_value


def other_function(name_value: str) -> str:
    """Return the name."""
    cleaned_name = name_value.strip()
    cleaned_name = cleaned_name.lower()
    if not cleaned_name:
        cleaned_name = "anonymous"
    for _ in range(3):
        cleaned_name = cleaned_name.replace("  ", " ")
    return cleaned_name
'''


class Compressor:
    """Per-content-type compression with a critical-token floor. Thread-safe;
    build one per process and reuse it."""

    def __init__(self, use_headroom: bool = True) -> None:
        self._use = bool(use_headroom)
        self._lock = threading.RLock()
        self._detected = False
        self._available = False
        self._reason = ""
        self._code_ok = False
        self.import_seconds: float | None = None
        self.version: str | None = None
        self._impl: dict[str, Any] = {}
        self._call_locks: dict[str, threading.Lock] = {}
        if not self._use:
            self._detected = True
            self._reason = "disabled by settings (assembly.headroom = false / HELIX_DISABLE_HEADROOM=1)"
        elif _env_disabled():
            self._use = False
            self._detected = True
            self._reason = "disabled by HELIX_DISABLE_HEADROOM"

    # ---- availability -------------------------------------------------------

    @property
    def available(self) -> bool:
        self._detect()
        return self._available

    @property
    def reason(self) -> str:
        self._detect()
        return self._reason

    def info(self) -> dict[str, Any]:
        """For /health."""
        self._detect()
        return {
            "available": self._available,
            "reason": self._reason,
            "version": self.version,
            "code_compression": self._code_ok,
            "import_seconds": self.import_seconds,
        }

    def _detect(self) -> None:
        if self._detected:
            return
        with self._lock:
            if self._detected:
                return
            try:
                self._load()
            except ImportError as exc:
                self._available = False
                self._reason = f"headroom-ai not installed ({exc})"
                log.info("headroom unavailable: %s", self._reason)
            except Exception as exc:  # a broken install must not take the server down
                self._available = False
                self._reason = f"headroom-ai failed to load: {type(exc).__name__}: {exc}"
                log.warning("headroom unavailable: %s", self._reason)
            finally:
                self._detected = True

    def _load(self) -> None:
        set_offline_env()
        started = time.perf_counter()
        import headroom  # noqa: F401  (slow: ~0.1 s; SmartCrusher's import adds ~0.6 s, done on first JSON)
        from headroom.transforms.code_compressor import CodeAwareCompressor, CodeCompressorConfig
        from headroom.transforms.diff_compressor import DiffCompressor, DiffCompressorConfig
        from headroom.transforms.log_compressor import LogCompressor, LogCompressorConfig
        from headroom.transforms.text_crusher import TextCrusher, TextCrusherConfig

        self.version = getattr(headroom, "__version__", None)
        self._impl["code"] = CodeAwareCompressor(
            CodeCompressorConfig(
                enable_ccr=False, fallback_to_kompress=False, min_tokens_for_compression=SMALL_TOKENS
            )
        )
        self._impl["log"] = LogCompressor(
            LogCompressorConfig(max_errors=1000, max_warnings=50, max_stack_traces=20, enable_ccr=False)
        )
        self._impl["diff"] = DiffCompressor(DiffCompressorConfig(enable_ccr=False))
        # retrieved passages have no recency: weigh sentences by the query, not by position
        self._impl["text"] = TextCrusher(TextCrusherConfig(w_recency=0.0))
        self.import_seconds = round(time.perf_counter() - started, 4)

        probe = self._impl["code"].compress(_PY_PROBE, language="python")
        self._code_ok = probe.compressed != _PY_PROBE
        self._available = True
        self._reason = (
            "ok" if self._code_ok else "ok, but code passes through (tree-sitter missing: install headroom-ai[code])"
        )
        log.info("headroom %s loaded in %.3f s (%s)", self.version, self.import_seconds, self._reason)

    def warm_up(self) -> None:
        """Load everything now (SmartCrusher's import alone takes ~0.5 s), e.g. in a
        background thread at server start, so no request pays for it."""
        if self.available:
            try:
                self._smart_crusher()
            except Exception as exc:
                log.warning("headroom SmartCrusher failed to load: %s", exc)

    def _smart_crusher(self) -> Any:
        sc = self._impl.get("json")
        if sc is None:
            with self._lock:
                sc = self._impl.get("json")
                if sc is None:
                    started = time.perf_counter()
                    from headroom.config import CCRConfig
                    from headroom.transforms.smart_crusher import SmartCrusher

                    sc = SmartCrusher(ccr_config=CCRConfig(enabled=False, inject_retrieval_marker=False))
                    self._impl["json"] = sc
                    log.info("headroom SmartCrusher loaded in %.3f s", time.perf_counter() - started)
        return sc

    # ---- compressing --------------------------------------------------------

    def compress(
        self,
        text: str,
        content_type: str,
        language: str | None = None,
        *,
        query: str = "",
        max_tokens: int | None = None,
    ) -> Compressed:
        """Compress text for its content type; never raises."""
        text = text or ""
        try:
            return self._compress(text, content_type, language, query or "", max_tokens)
        except Exception:
            log.exception("compression of a %s gene failed; falling back to truncation", content_type)
            try:
                return self._plain(text, max_tokens, critical_tokens(text), count_tokens(text))
            except Exception:
                log.exception("fallback truncation failed")
                n = len(text) // 4
                return Compressed(text, "none", n, n, 0, 0, 0)

    def _plain(self, text: str, max_tokens: int | None, crit: list[str], original: int) -> Compressed:
        if max_tokens is not None and original > max_tokens:
            out = truncate_to_tokens(text, max(0, max_tokens))
            kept = sum(1 for t in crit if _contains(out, t))
            return Compressed(out, "truncate", original, count_tokens(out), len(crit), kept, kept)
        return Compressed(text, "none", original, original, len(crit), len(crit), len(crit))

    def _compress(
        self, text: str, content_type: str, language: str | None, query: str, max_tokens: int | None
    ) -> Compressed:
        ctype = (content_type or "text").lower()
        original = count_tokens(text)
        crit = _critical_for(text, ctype)
        is_python = ctype == "code" and (language or "").lower() in _PY_LANGS
        marker = _marker_for(ctype, language)

        if not self.available:
            return self._plain(text, max_tokens, crit, original)
        py_ok = is_python and _parses(text)
        # Python that does not parse is passed through: headroom would return it
        # unchanged anyway, and its process-wide syntax breaker counts each such
        # call as a failure and pauses Python compression after a few of them
        if original < SMALL_TOKENS or ctype == "config" or not text.strip() or (is_python and not py_ok):
            if max_tokens is not None and original > max_tokens:
                return self._cut(text, text, "none", original, crit, len(crit), query, max_tokens, marker, py_ok)
            return Compressed(text, "none", original, original, len(crit), len(crit), len(crit))

        raw, method, detected_python = self._run_headroom(text, ctype, language, query)
        py_input_ok = py_ok or (detected_python and _parses(text))

        check_raw = raw.replace("\\n", "\n") if ctype == "json" else raw
        lost = [t for t in crit if not _contains(check_raw, t)]
        kept_raw = len(crit) - len(lost)

        out = raw
        if lost or ctype == "markdown":
            units = _split_units(text, ctype)
            out = _restore(units, raw, lost, ctype, language, expand=_py_closure(text) if py_input_ok else None)
            if py_input_ok and not _parses(out):
                out = _restore(units, raw, lost, ctype, language, render=lambda s: _commented(s, ctype, language))
        if py_input_ok and not _parses(out):
            log.debug("restored python did not parse; keeping the input")
            out = text

        tokens = count_tokens(out)
        if tokens >= original:
            out, method, tokens = text, "none", original

        if max_tokens is not None and tokens > max_tokens:
            return self._cut(text, out, method, original, crit, kept_raw, query, max_tokens, marker, py_input_ok)
        kept = len(crit) if out is text else sum(1 for t in crit if _contains(out, t))
        return Compressed(out, method, original, tokens, len(crit), kept_raw, kept)

    def _cut(
        self, text: str, out: str, method: str, original: int, crit: list[str], kept_raw: int,
        query: str, max_tokens: int, marker: str, py_input_ok: bool,
    ) -> Compressed:
        fitted = _fit(out, max(0, max_tokens), crit, query, marker, keep_first=method == "headroom:json")
        if py_input_ok and not _parses(fitted):
            fitted = _python_prefix(out, max_tokens) or ""
            if not fitted:  # not even one top-level statement fits: show the start as comments
                fitted = truncate_to_tokens("\n".join("# " + line for line in out.split("\n")), max_tokens)
        if method == "none":
            method = "truncate"
        kept = sum(1 for t in crit if _contains(fitted, t))
        return Compressed(fitted, method, original, count_tokens(fitted), len(crit), kept_raw, kept)

    def _run_headroom(self, text: str, ctype: str, language: str | None, query: str) -> tuple[str, str, bool]:
        """(compressed text, method, detected-as-python)."""
        if ctype == "code":
            lock = self._call_lock("code")
            with lock:
                r = self._impl["code"].compress(text, language=language, context=query)
            lang = getattr(getattr(r, "language", None), "value", "")
            return r.compressed, "headroom:code", lang == "python"
        if ctype == "log":
            with self._call_lock("log"):
                r = self._impl["log"].compress(text)
            return r.compressed, "headroom:log", False
        if ctype == "diff":
            with self._call_lock("diff"):
                r = self._impl["diff"].compress(text, query)
            return r.compressed, "headroom:diff", False
        if ctype == "json":
            sc = self._smart_crusher()
            with self._call_lock("json"):
                r = sc.crush(text, query=query)
            out = r.compressed
            if out.startswith('"'):  # a top-level array comes back as a JSON string holding the table
                try:
                    decoded = json.loads(out)
                    if isinstance(decoded, str):
                        out = decoded
                except ValueError:
                    pass
            return out.rstrip("\n"), "headroom:json", False
        # markdown, text, and anything unknown: extractive prose
        with self._call_lock("text"):
            r = self._impl["text"].compress(text, query, None)
        return r.compressed, "headroom:text", False

    def _call_lock(self, kind: str) -> threading.Lock:
        lock = self._call_locks.get(kind)
        if lock is None:
            with self._lock:
                lock = self._call_locks.setdefault(kind, threading.Lock())
        return lock
