"""Critical tokens: what a compressed text must not lose, and the check that it did not.

Why apart: the critical-token floor is the one promise compression makes whatever the content
type (paths, identifiers, numbers, hex, versions, URLs, key=value pairs survive), so the
definition lives in one place that the compressor, the restorer and the budget cut all read.
"""

from __future__ import annotations

import re

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


def critical_for(text: str, content_type: str) -> list[str]:
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


def contains_token(hay: str, tok: str) -> bool:
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

