"""Code segments: Python by a one-pass scanner, other languages by tree-sitter, else definition-looking lines.

See chunk.py for why the Python boundaries come from a scanner rather than ``ast``.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from typing import Any

from helix_context.ingest.chunk_lines import Doc, Seg, new_group, segments_from_anchors, segments_paragraphs
from helix_context.ingest.py_layout import comment_block_start, python_string_lines
from helix_context.ingest.treesitter import (BESIDE_BEFORE, MAX_BYTES, doc_gap, minified, node_name, parse_within_budget,
                                            parser_for)

# --------------------------------------------------------------------------- #
# code: Python, by a scanner of strings and indentation
# --------------------------------------------------------------------------- #

_PY_STMT = {"": re.compile(r"^[^\s#)\]}]", re.M)}
_BLOCK_END = re.compile(r":[ \t]*(?:#.*)?\r?$")
_CONTINUES = re.compile(r"[(\[{,\\+\-*/=%&|^<>@][ \t]*(?:#.*)?\r?$")
_PY_DEF = re.compile(r"(?:async[ \t]+)?(def|class)[ \t]+([A-Za-z_]\w*)")


def _py_stmt_re(indent: str) -> re.Pattern[str]:
    pat = _PY_STMT.get(indent)
    if pat is None:
        pat = _PY_STMT[indent] = re.compile("^" + re.escape(indent) + r"[^\s#)\]}]", re.M)
    return pat


def _py_anchors(doc: Doc, mask: bytearray, s: int, e: int, indent: str, prefix: str,
                ) -> tuple[list[tuple[int, str | None, str, int]], int]:
    """Statements at exactly ``indent`` in lines [s, e): one anchor per def/class (with its
    decorators and the comments right above it), one per run of other statements.

    Anchors are (start line, symbol, kind, line of the def keyword); returns
    (anchors, index of the first def/class anchor or -1).
    """
    text, lines, off = doc.text, doc.lines, doc.off
    anchors: list[tuple[int, str | None, str, int]] = []
    first_def = -1
    pending_dec: int | None = None
    prev_kind = ""
    line = s
    for m in _py_stmt_re(indent).finditer(text, off[s], off[e] - 1 if e > s else off[s]):
        p = m.end() - 1
        line = bisect_right(off, p, line) - 1
        if mask[line]:
            continue
        ch = text[p]
        if ch == "@":
            if pending_dec is None:
                pending_dec = line
            continue
        dm = _PY_DEF.match(text, p) if ch in "adc" else None
        if dm is None:
            if pending_dec is not None:
                continue  # arguments of a multi-line decorator
            if prev_kind == "other":
                continue
            if line > s:
                prev = lines[line - 1]
                if _CONTINUES.search(prev[-200:]) or (ch in "\"'" and prev.lstrip()[:1] in ("\"", "'")):
                    continue  # inside a bracket / continued expression that reaches back to this column
            kind, sym, start = "other", None, line
        else:
            kind, sym = dm.group(1), prefix + dm.group(2)
            start = line if pending_dec is None else pending_dec
            pending_dec = None
        start = comment_block_start(lines, mask, start, indent, anchors[-1][3] + 1 if anchors else s)
        if kind != "other" and first_def < 0:
            first_def = len(anchors)
        anchors.append((start, sym, kind, line))
        prev_kind = kind
    return anchors, first_def


def segments_python(doc: Doc, text: str, max_chars: int) -> list[Seg] | None:
    if "\r" in text and text.count("\r") != text.count("\r\n"):
        return None  # lone CR line breaks: let the generic splitter handle it
    mask = python_string_lines(text)
    anchors, first_def = _py_anchors(doc, mask, 0, doc.n, "", "")
    if not anchors:
        return None
    segs: list[Seg] = []
    for i, (start, sym, kind, line) in enumerate(anchors):
        s = 0 if i == 0 else start
        e = anchors[i + 1][0] if i + 1 < len(anchors) else doc.n
        if e <= s:
            continue
        if kind == "class" and doc.size(s, e) > max_chars:
            segs.extend(_split_py_class(doc, mask, line, s, e, max_chars, sym or "", ""))
        else:
            segs.append(Seg(s, e, sym, 0, solo=(i == 0 and first_def > 0)))
    return segs


def _split_py_class(doc: Doc, mask: bytearray, class_line: int, s: int, e: int, max_chars: int, qual: str,
                    outer_indent: str) -> list[Seg]:
    """A class too big for one chunk: header (+ docstring, attributes), then each method."""
    lines = doc.lines
    # the body starts after the header line that ends with ':'; its indentation is the first code line's
    indent = None
    body = None
    for i in range(class_line, min(e, class_line + 50)):
        if not mask[i] and _BLOCK_END.search(lines[i]):
            body = i + 1
            break
    for i in range(body if body is not None else e, e):
        ln = lines[i]
        st = ln.lstrip(" \t")
        if st and not mask[i] and st[0] != "#":
            if len(ln) - len(st) > len(outer_indent):
                indent = ln[: len(ln) - len(st)]
            break
    if indent is None:
        return [Seg(s, e, qual)]
    anchors, first_def = _py_anchors(doc, mask, class_line + 1, e, indent, qual + ".")
    if first_def < 0:
        return [Seg(s, e, qual)]
    group = new_group()
    items = [a for a in anchors[first_def:] if s < a[0] < e]
    if not items:
        return [Seg(s, e, qual)]
    segs: list[Seg] = [Seg(s, items[0][0], qual, group)]
    for i, (start, sym, kind, line) in enumerate(items):
        end = items[i + 1][0] if i + 1 < len(items) else e
        if end <= start:
            continue
        if kind == "class" and doc.size(start, end) > max_chars:
            segs.extend(_split_py_class(doc, mask, line, start, end, max_chars, sym or qual, indent))
        else:
            segs.append(Seg(start, end, sym, group))
    return segs


# --------------------------------------------------------------------------- #
# code: other languages via tree-sitter
# --------------------------------------------------------------------------- #

_IMPORT_LIKE = re.compile(r"import|include|using|package|use_declaration|extern_crate|require|namespace_use|"
                          r"module_declaration|library|header")


def _ts_anchors(children: list[Any], src: bytes, prefix: str, floor_row: int,
                fixed: str | None = None) -> list[tuple[int, str | None, Any]]:
    """One anchor per named child; the comments and decorators right above a node attach to it (a `/**` block
    across one blank line: treesitter.doc_gap), and a Dart function's body to its signature.

    With ``fixed`` (the pieces of one big function body) every anchor gets that symbol.
    """
    anchors: list[tuple[int, str | None, Any]] = []
    pending: int | None = None  # start row of a comment block waiting for its node
    last_row = floor_row - 1
    node_end = -1  # last row of the previous non-comment node
    gap = 0  # blank lines the last comment may stand above its node
    for c in children:
        if not c.is_named:
            continue
        srow = c.start_point[0]
        erow = c.end_point[0] if c.end_point[1] > 0 or c.end_point[0] == srow else c.end_point[0] - 1
        if c.type == "function_body" and anchors and anchors[-1][2].type.endswith("_signature"):
            last_row = node_end = erow  # Dart: a function's body is the sibling after its signature
            continue
        comment = "comment" in c.type
        if comment or c.type in BESIDE_BEFORE:
            if srow <= node_end and comment:
                continue  # a trailing comment on the previous node's last line
            if pending is None or srow > last_row + 1:
                pending = srow
            last_row, gap = erow, (doc_gap(c, src) if comment else 0)
            continue
        start = srow
        if pending is not None and srow <= last_row + 1 + gap:
            start = pending
        pending = None
        if fixed is not None:
            sym: str | None = fixed
        else:
            name = node_name(c, src)
            sym = (prefix + name) if name else None
        anchors.append((max(start, floor_row), sym, c))
        last_row = node_end = erow
    return anchors


_FUNC_LIKE = re.compile(r"function|method|constructor|lambda|arrow|closure|func_literal|destructor|"
                        r"operator|accessor|getter|setter")


def _rows(node: Any) -> int:
    return node.end_point[0] - node.start_point[0] + 1


def _ts_container(node: Any) -> Any | None:
    """The node whose named children are the members of a big node (class body, namespace body…)."""
    n = node
    for _ in range(6):
        body = (n.child_by_field_name("body") or n.child_by_field_name("declaration")
                or n.child_by_field_name("definition"))
        named = [c for c in n.named_children if "comment" not in c.type]
        if body is None:
            if len(named) == 1:
                body = named[0]
            else:
                multi = [c for c in named if c.end_point[0] > c.start_point[0]]
                if len(multi) == 1 and _rows(multi[0]) * 10 >= _rows(n) * 8:
                    body = multi[0]
        if body is not None and body.named_child_count > 0 and _rows(body) * 2 >= _rows(n):
            n = body
            continue
        inside = {c.start_point[0] for c in named if c.start_point[0] > node.start_point[0]}
        return n if len(inside) >= 2 else None
    return None


def _ts_split(doc: Doc, node: Any, src: bytes, s: int, e: int, qual: str | None, max_chars: int,
              depth: int, group: int = 0, in_function: bool = False) -> list[Seg]:
    """A node too big for one chunk, split at the members of its container (class body, block…).

    Pieces of a class-like node get a fresh merge group (never merged with what is
    outside it); pieces of a function body keep the function's name as symbol.
    """
    container = _ts_container(node) if depth < 4 else None
    if container is None:
        return [Seg(s, e, qual, group)]
    if not in_function:
        # entering a class-like or function node: its pieces merge only among themselves
        group = new_group()
        decl = node.child_by_field_name("declaration") or node.child_by_field_name("definition")
        in_function = bool(_FUNC_LIKE.search(node.type) or (decl is not None and _FUNC_LIKE.search(decl.type)))
    prefix = (qual + ".") if qual else ""
    anchors = _ts_anchors(container.children, src, prefix, s + 1, fixed=qual if in_function else None)
    anchors = [a for a in anchors if s < a[0] < e]
    if not anchors:
        return [Seg(s, e, qual, group)]
    segs: list[Seg] = [Seg(s, anchors[0][0], qual, group)]
    for i, (start, sym, child) in enumerate(anchors):
        end = anchors[i + 1][0] if i + 1 < len(anchors) else e
        if end <= start:
            continue
        if doc.size(start, end) > max_chars:
            segs.extend(_ts_split(doc, child, src, start, end, sym or qual, max_chars, depth + 1, group, in_function))
        else:
            segs.append(Seg(start, end, sym, group))
    return segs


def segments_treesitter(doc: Doc, text: str, language: str, max_chars: int) -> list[Seg] | None:
    parser = parser_for(language)
    if parser is None:
        return None
    src = text.encode("utf-8", "surrogatepass")
    if len(src) > MAX_BYTES or minified(src, doc.n):
        return None  # minified or not code at all: lines of 400+ bytes on average
    tree = parse_within_budget(parser, src)
    if tree is None:
        return None
    root = tree.root_node
    children = root.children
    if root.has_error:
        err = sum(c.end_byte - c.start_byte for c in children if c.type == "ERROR" or c.is_missing)
        if err * 2 > len(src):
            return None
    anchors = _ts_anchors(children, src, "", 0)
    if not anchors:
        return None
    # leading imports / includes / package lines form the preamble
    n_pre = 0
    while n_pre < len(anchors) and _IMPORT_LIKE.search(anchors[n_pre][2].type):
        n_pre += 1
    segs: list[Seg] = []
    first = 0
    if 0 < n_pre < len(anchors):
        first = anchors[n_pre][0]
        segs.append(Seg(0, first, None, 0, solo=True))
        anchors = anchors[n_pre:]
    for i, (start, sym, node) in enumerate(anchors):
        s = first if i == 0 else start
        e = anchors[i + 1][0] if i + 1 < len(anchors) else doc.n
        if e <= s:
            continue
        if doc.size(s, e) > max_chars:
            segs.extend(_ts_split(doc, node, src, s, e, sym, max_chars, 0))
        else:
            segs.append(Seg(s, e, sym, 0))
    return segs


# --------------------------------------------------------------------------- #
# code: fallback at definition-looking lines
# --------------------------------------------------------------------------- #

_MODS = r"(?:(?:export|default|pub(?:\([^)]*\))?|public|private|protected|internal|static|final|abstract|async|" \
        r"unsafe|extern|inline|virtual|override|open|data|sealed|partial|const|local|declare)\s+)*"
_DEF_LINE = re.compile(
    r"(?:" + _MODS + r"(?:def|class|func|fn|function|interface|struct|enum|trait|impl|module|object|"
    r"namespace|sub|proc|macro_rules!|record|protocol|extension|type\s+\w+\s*(?:=|struct|interface))\b"
    r"|[A-Za-z_][\w:<>,*& \t]*[\s*&]\**[A-Za-z_][\w:~]*\s*\([^;]*$"  # C-style `int main(void) {`
    r"|(?:const|let|var)\s+\w+\s*=\s*(?:async\s*)?(?:function\b|\([^)]*\)\s*=>|\w+\s*=>))"
)
_PREFIX_LINE = re.compile(r"\s*(?:@|#|//|/\*|\*|--|;|'''|\"\"\"|\[\w)")
_PY_DEF_LINE = re.compile(r"(?:async\s+def|def|class)\s+\w")
_DEF_NAME = re.compile(r"\b(?:def|class|func|fn|function|interface|struct|enum|trait|impl|module|object|"
                       r"namespace|sub|record|type)\s+([A-Za-z_][\w.]*)")
_CALL_NAME = re.compile(r"([A-Za-z_][\w:~]*)\s*(?:\(|=)")


def segments_code_fallback(doc: Doc, language: str | None) -> list[Seg]:
    lines = doc.lines
    rx = _PY_DEF_LINE if language == "python" else _DEF_LINE
    anchors: list[tuple[int, str | None]] = []
    floor = 0
    for i, line in enumerate(lines):
        if not line or line[0] in " \t}\r)#/":
            continue
        if rx.match(line[:400]):
            start = i
            while start - 1 >= floor and lines[start - 1] and lines[start - 1][0] not in " \t" \
                    and _PREFIX_LINE.match(lines[start - 1]):
                start -= 1
            m = _DEF_NAME.search(line[:400]) or _CALL_NAME.search(line[:400])
            anchors.append((start, m.group(1) if m else None))
            floor = i + 1
    if not anchors:
        return segments_paragraphs(doc)
    segs = segments_from_anchors(anchors, 0, doc.n)
    if segs and segs[0].symbol is None and len(segs) > 1:
        segs[0].solo = True
    return segs
