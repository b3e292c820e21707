"""Every function, method, class and named constant of a code file as its own span with its qualified name.

Why a pass of its own: the chunker packs small neighbours into one stored gene
(a 40-line gene may hold five functions), but an answer should point at the one
function that matched. Symbols are found independently of chunking, nested
ones included, so `ZipFile._extract_member` has its exact lines whichever gene
stores it.

Python's constants are the capitalised names a module assigns (``MAX_SYMBOLS =
5000``, ``SpanKey = tuple[int, int]``) and the capitals a class assigns
(``Color.RED``): "where is MAX_SYMBOLS set" used to land on whatever used the
name, never on the line that sets it. Python uses the same string scan as the
chunker (py_layout) plus indentation — no ``ast`` (too slow for the ingest
budget, and it needs valid syntax). The languages tree-sitter parses are
symbols_tree.py's.
"""

from __future__ import annotations

import re
from typing import Any

from helix_context.ingest.py_layout import comment_block_start, python_string_lines
from helix_context.ingest.symbols_tree import MAX_DOC_LINES, MAX_SYMBOLS, SCRIPT_HOSTS, UPPER, embedded_scripts, treesitter_symbols
from helix_context.models import Symbol

__all__ = ["find_symbols"]

_PY_LINE = re.compile(r"[ \t]*(?:(@)|(?:async[ \t]+)?(def|class)[ \t]+([A-Za-z_]\w*))")
# `NAME = ...` or `NAME: type = ...` with a capitalised name (not `==`, not `NAME[i] = `, not `A, B = `)
_PY_ASSIGN = re.compile(r"[ \t]*(_*[A-Z]\w*)[ \t]*(?::[^=\n]*)?=(?!=)")
# `NAME: dict[` with the annotation going on over the next lines (its `=` comes after the closing bracket)
_PY_ANNOTATION_OPENS = re.compile(r"[ \t]*(_*[A-Z]\w*)[ \t]*:[^=\n#]*[\[(][ \t]*(?:#.*)?$")


def _indent(line: str) -> int:
    width = 0
    for ch in line:
        if ch == " ":
            width += 1
        elif ch == "\t":
            width += 8 - width % 8
        else:
            break
    return width


def python_symbols(text: str) -> list[Symbol]:
    """Functions, methods and classes of Python source, with decorators and the comment block right above them
    (py_layout.comment_block_start, the chunker's rule), at any depth; constants of modules and classes."""
    mask = python_string_lines(text)
    lines = text.split("\n")
    out: list[Symbol] = []
    # open scopes: [indent, qualified name, kind, start index, out index]
    stack: list[list[Any]] = []
    last_code = -1  # last significant line seen
    decorator_start: int | None = None
    decorator_indent = -1
    # indent of the last statement that opened no block: lines deeper than it continue it (a call's keyword
    # arguments, a literal's items), so their `NAME=` is no assignment; -1 after a line ending in `:`
    statement_indent = -1
    for i, line in enumerate(lines):
        if mask[i]:
            last_code = i  # the rest of a multi-line string belongs to the statement above
            continue
        stripped = line.lstrip(" \t")
        if stripped and stripped[0] in ")]}":
            last_code = i  # the closing line of a call or literal ends the statement it closes
            if _opens_block(stripped):  # `):` closing a multi-line signature: its body follows
                statement_indent = -1
            continue
        if not stripped or stripped[0] == "#" or stripped.startswith(("\r", "\f")):
            continue
        ind = _indent(line)
        continued = 0 <= statement_indent < ind
        if decorator_start is not None and ind > decorator_indent:
            last_code = i  # a decorator's arguments continued on more lines
            continue
        while stack and ind <= stack[-1][0]:
            _close(stack.pop(), last_code, out)
        m = _PY_LINE.match(line)
        if m is not None and m.group(1):
            if decorator_start is None or ind != decorator_indent:
                decorator_start, decorator_indent = i, ind
            last_code = i
            continue
        if m is not None and m.group(2):
            name = m.group(3)
            parent = stack[-1] if stack else None
            kind = "class" if m.group(2) == "class" else ("method" if parent and parent[2] == "class" else "function")
            qual = f"{parent[1]}.{name}" if parent else name
            start = decorator_start if decorator_start is not None and decorator_indent == ind else i
            documented = comment_block_start(lines, mask, start, line[:len(line) - len(stripped)])
            if start - documented <= MAX_DOC_LINES:  # a longer block above is the file's header, not this one's
                start = documented
            if len(out) < MAX_SYMBOLS:
                out.append(Symbol(qual, kind, start + 1, i + 1))
                stack.append([ind, qual, kind, start, len(out) - 1])
        elif m is None and not continued and (not stack or stack[-1][2] == "class") and len(out) < MAX_SYMBOLS:
            a = _PY_ASSIGN.match(line) or _PY_ANNOTATION_OPENS.match(line)
            # in a class body only capitals: `Meta = ...` there is rarely what a question names
            if a is not None and (not stack or UPPER.fullmatch(a.group(1))):
                qual = f"{stack[-1][1]}.{a.group(1)}" if stack else a.group(1)
                out.append(Symbol(qual, "constant", i + 1, i + 1))
                stack.append([ind, qual, "constant", i, len(out) - 1])  # closed like a scope: its value's lines
        decorator_start = None
        last_code = i
        if not continued:  # a statement of its own
            statement_indent = -1 if _opens_block(stripped) else ind
    while stack:
        _close(stack.pop(), last_code, out)
    return out


def _opens_block(code: str) -> bool:
    """Whether a line ends in `:` (before a comment on a line without quotes, which could hold a `#`)."""
    if "#" in code and "'" not in code and '"' not in code:
        code = code.split("#", 1)[0]
    return code.rstrip().endswith(":")


def _close(scope: list[Any], last_code: int, out: list[Symbol]) -> None:
    sym = out[scope[4]]
    end = max(last_code + 1, sym.end_line)
    out[scope[4]] = Symbol(sym.name, sym.kind, sym.start_line, end)


def find_symbols(text: str, content_type: str, language: str | None) -> list[Symbol]:
    """Symbols of a code text, in order of their first line; [] for anything else."""
    if content_type != "code" or not language:
        return []
    if language == "python":
        return python_symbols(text)
    if language in SCRIPT_HOSTS:  # a component's or page's <script> blocks, at their own lines
        text, language = embedded_scripts(text)
        if not text.strip():
            return []
    return sorted(treesitter_symbols(text, language), key=lambda s: (s.start_line, -s.end_line))
