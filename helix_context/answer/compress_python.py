"""Keeping compressed Python parseable: whole statements, their enclosing block headers, whole prefixes.

Why apart: a restored line dropped into the middle of compressed Python must not break it, and a
budget cut of Python must still parse; both need the syntax tree, which no other content type does.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from helix_context.tokens import count_tokens

PY_LANGS = {"python", "py", "python3", "py3", "pyi"}


def py_closure(text: str) -> Callable[[set[int], set[int]], set[int]] | None:
    """For Python: widen a set of lines to whole statements plus the headers of
    the blocks around them (if/for/try/with/def/class, else/except/finally), so
    that the restored lines parse in place."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    lines = text.split("\n")

    def first_line(node: ast.stmt) -> int:
        decos: list[ast.expr] = getattr(node, "decorator_list", None) or []
        return min([node.lineno] + [d.lineno for d in decos]) - 1

    def span(node: ast.stmt) -> range:
        return range(first_line(node), node.end_lineno or node.lineno)  # ast.parse always sets end_lineno

    def header(node: ast.stmt) -> range:
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
                if isinstance(s, (ast.Try, ast.TryStar)):
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


def parses(code: str) -> bool:
    try:
        ast.parse(code)
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


def python_prefix(code: str, max_tokens: int) -> str | None:
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
    if best and parses(best):
        return best
    return None

