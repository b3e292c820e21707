"""Split a source text into chunks (future genes) along the lines of its type.

- code: Python at top-level def/class boundaries (a class too big for one chunk
  splits at its methods; decorators and the comments right above a def go with
  it; the module preamble — docstring, imports, constants — is a chunk of its
  own). Boundaries come from a one-pass scanner of strings and indentation, not
  ``ast.parse``: ``ast`` alone runs at ~9 MB/s, below the ingest budget, while
  the scanner gives the same boundaries as ``ast`` on 1777 of 1779 stdlib files
  (the other two differ only where an oversized run of statements is cut) and
  needs no valid syntax. Other languages split at top-level nodes via
  tree-sitter where a grammar loads (a parse slower than 2 MB/s — garbage in a
  code file — is abandoned); else at definition-looking lines and blank-line
  groups.
- markdown: by headings (the section keeps its heading; symbol = heading text).
- text: by paragraphs.  log: by records (a traceback stays with the line that
  started it).  config: by ``[sections]`` / top-level YAML keys.  json: by
  top-level keys or records.  diff: by file, then by hunk.

Every chunk satisfies two invariants the rest of the system relies on:

- ``content`` is exactly the original lines ``start_line..end_line`` (1-based,
  inclusive, lines split at ``\\n``) joined, without the final line terminator —
  except for the pieces of a single line longer than ``max_chars``, which are
  consecutive slices of that one line;
- ``len(content) <= max_chars``.

Adjacent small pieces (under a quarter of ``max_chars``) are merged so the store
does not fill with two-line genes, but never across the boundary of a class that
was split, and never into the module preamble. ``chunk_text`` never raises.
"""

from __future__ import annotations

import re
import threading
from bisect import bisect_right
from itertools import accumulate
from typing import Any

from helix_context.ingest.py_layout import python_string_lines
from helix_context.ingest.treesitter import MAX_BYTES, node_name, parse_within_budget, parser_for
from helix_context.models import Chunk

__all__ = ["chunk_text", "python_string_lines"]


# --------------------------------------------------------------------------- #
# shared helpers
# --------------------------------------------------------------------------- #

class _Seg:
    """A run of lines [start, end) (0-based, end exclusive) that wants to be one chunk."""

    __slots__ = ("start", "end", "symbol", "group", "solo")

    def __init__(self, start: int, end: int, symbol: str | None = None, group: int = 0, solo: bool = False):
        self.start = start
        self.end = end
        self.symbol = symbol
        self.group = group  # pieces of one split container share a non-zero group
        self.solo = solo  # never merged with a neighbour (module preamble)

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"_Seg({self.start}, {self.end}, {self.symbol!r}, g={self.group}, solo={self.solo})"


class _Doc:
    """The text split into lines at ``\\n``, with character offsets of each line."""

    __slots__ = ("text", "lines", "n", "off")

    def __init__(self, text: str):
        self.text = text
        lines = text.split("\n")
        if text.endswith("\n"):
            lines.pop()
        self.lines = lines
        self.n = len(lines)
        # off[i] = offset of line i; off[n] = len(text) + 1 (as if a final "\n" existed)
        self.off = [0, *accumulate(map((1).__add__, map(len, lines)))]

    def blank(self, i: int) -> bool:
        return not self.lines[i].strip()

    def size(self, s: int, e: int) -> int:
        """Upper bound of len(content) for lines [s, e)."""
        return self.off[e] - self.off[s] - 1

    def content(self, s: int, e: int) -> str:
        c = self.text[self.off[s] : self.off[e] - 1]
        if c.endswith("\r"):
            c = c[:-1]
        return c


_group_ids = iter(range(1, 1 << 62))
_group_lock = threading.Lock()


def _new_group() -> int:
    with _group_lock:
        return next(_group_ids)


def _finish(doc: _Doc, segs: list[_Seg], content_type: str, language: str | None, max_chars: int) -> list[Chunk]:
    """Trim blank edges, merge small neighbours, split oversized pieces, build chunks."""
    n = doc.n
    trimmed: list[_Seg] = []
    for seg in segs:
        s, e = max(0, seg.start), min(n, seg.end)
        while s < e and doc.blank(s):
            s += 1
        while e > s and doc.blank(e - 1):
            e -= 1
        if s < e:
            seg.start, seg.end = s, e
            trimmed.append(seg)

    min_chars = max_chars // 4
    merged: list[_Seg] = []
    for seg in trimmed:
        if merged:
            prev = merged[-1]
            if (
                not prev.solo
                and not seg.solo
                and prev.group == seg.group
                and prev.end <= seg.start
                and (doc.size(prev.start, prev.end) < min_chars or doc.size(seg.start, seg.end) < min_chars)
                and doc.size(prev.start, seg.end) <= max_chars
            ):
                prev.end = seg.end
                if prev.symbol is None:
                    prev.symbol = seg.symbol
                continue
        merged.append(seg)

    chunks: list[Chunk] = []
    for seg in merged:
        if doc.size(seg.start, seg.end) <= max_chars:
            chunks.append(Chunk(doc.content(seg.start, seg.end), content_type, language,
                                seg.start + 1, seg.end, seg.symbol))
        else:
            _split_lines(doc, seg.start, seg.end, seg.symbol, content_type, language, max_chars, chunks)
    return chunks


def _split_lines(doc: _Doc, s: int, e: int, symbol: str | None, content_type: str, language: str | None,
                 max_chars: int, out: list[Chunk]) -> None:
    """Pack lines [s, e) greedily into pieces of at most max_chars, cutting at a blank line where one is near."""
    off = doc.off
    while s < e:
        while s < e and doc.blank(s):
            s += 1
        if s >= e:
            return
        if doc.size(s, e) <= max_chars:
            end = e
            while end > s and doc.blank(end - 1):
                end -= 1
            out.append(Chunk(doc.content(s, end), content_type, language, s + 1, end, symbol))
            return
        # largest k with size(s, k) <= max_chars  <=>  off[k] <= off[s] + max_chars + 1
        k = bisect_right(off, off[s] + max_chars + 1, s + 1, e + 1) - 1
        if k <= s:
            line = doc.lines[s]
            if line.endswith("\r"):
                line = line[:-1]
            if len(line) <= max_chars:  # fits once the terminator is not counted
                out.append(Chunk(line, content_type, language, s + 1, s + 1, symbol))
            else:
                _hard_split(line, s + 1, symbol, content_type, language, max_chars, out)
            s += 1
            continue
        cut = k
        lo = s + (k - s) // 2
        for j in range(k - 1, lo, -1):
            if doc.blank(j):
                cut = j
                break
        end = cut
        while end > s and doc.blank(end - 1):
            end -= 1
        out.append(Chunk(doc.content(s, end), content_type, language, s + 1, end, symbol))
        s = cut


def _hard_split(line: str, lineno: int, symbol: str | None, content_type: str, language: str | None,
                max_chars: int, out: list[Chunk]) -> None:
    """Slices of one giant line, each <= max_chars, cut at whitespace near the end where possible."""
    pos, n = 0, len(line)
    while pos < n:
        end = min(n, pos + max_chars)
        if end < n:
            ws = line.rfind(" ", pos + (max_chars * 4) // 5, end)
            if ws > pos:
                end = ws + 1
        piece = line[pos:end]
        if piece.strip():
            out.append(Chunk(piece, content_type, language, lineno, lineno, symbol))
        pos = end


def _segments_from_anchors(anchors: list[tuple[int, str | None]], start: int, end: int, group: int = 0,
                           ) -> list[_Seg]:
    """Anchors (line, symbol) in increasing order → segments spanning until the next anchor."""
    segs: list[_Seg] = []
    if not anchors or anchors[0][0] > start:
        anchors = [(start, None), *anchors]
    for i, (line, sym) in enumerate(anchors):
        nxt = anchors[i + 1][0] if i + 1 < len(anchors) else end
        if nxt > line:
            segs.append(_Seg(line, nxt, sym, group))
    return segs


# --------------------------------------------------------------------------- #
# prose: paragraphs
# --------------------------------------------------------------------------- #


def _segments_paragraphs(doc: _Doc, start: int = 0, end: int | None = None, group: int = 0) -> list[_Seg]:
    end = doc.n if end is None else end
    segs: list[_Seg] = []
    lines = doc.lines
    i = start
    while i < end:
        while i < end and not lines[i].strip():
            i += 1
        if i >= end:
            break
        j = i + 1
        while j < end and lines[j].strip():
            j += 1
        segs.append(_Seg(i, j, None, group))
        i = j
    return segs


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


def _py_anchors(doc: _Doc, mask: bytearray, s: int, e: int, indent: str, prefix: str,
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
    comment = indent + "#"
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
        floor = anchors[-1][3] + 1 if anchors else s
        while start - 1 >= floor and lines[start - 1].startswith(comment) and not mask[start - 1]:
            start -= 1
        if kind != "other" and first_def < 0:
            first_def = len(anchors)
        anchors.append((start, sym, kind, line))
        prev_kind = kind
    return anchors, first_def


def _segments_python(doc: _Doc, text: str, max_chars: int) -> list[_Seg] | None:
    if "\r" in text and text.count("\r") != text.count("\r\n"):
        return None  # lone CR line breaks: let the generic splitter handle it
    mask = python_string_lines(text)
    anchors, first_def = _py_anchors(doc, mask, 0, doc.n, "", "")
    if not anchors:
        return None
    segs: list[_Seg] = []
    for i, (start, sym, kind, line) in enumerate(anchors):
        s = 0 if i == 0 else start
        e = anchors[i + 1][0] if i + 1 < len(anchors) else doc.n
        if e <= s:
            continue
        if kind == "class" and doc.size(s, e) > max_chars:
            segs.extend(_split_py_class(doc, mask, line, s, e, max_chars, sym or "", ""))
        else:
            segs.append(_Seg(s, e, sym, 0, solo=(i == 0 and first_def > 0)))
    return segs


def _split_py_class(doc: _Doc, mask: bytearray, class_line: int, s: int, e: int, max_chars: int, qual: str,
                    outer_indent: str) -> list[_Seg]:
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
        return [_Seg(s, e, qual)]
    anchors, first_def = _py_anchors(doc, mask, class_line + 1, e, indent, qual + ".")
    if first_def < 0:
        return [_Seg(s, e, qual)]
    group = _new_group()
    items = [a for a in anchors[first_def:] if s < a[0] < e]
    if not items:
        return [_Seg(s, e, qual)]
    segs: list[_Seg] = [_Seg(s, items[0][0], qual, group)]
    for i, (start, sym, kind, line) in enumerate(items):
        end = items[i + 1][0] if i + 1 < len(items) else e
        if end <= start:
            continue
        if kind == "class" and doc.size(start, end) > max_chars:
            segs.extend(_split_py_class(doc, mask, line, start, end, max_chars, sym or qual, indent))
        else:
            segs.append(_Seg(start, end, sym, group))
    return segs


# --------------------------------------------------------------------------- #
# code: other languages via tree-sitter
# --------------------------------------------------------------------------- #

_IMPORT_LIKE = re.compile(r"import|include|using|package|use_declaration|extern_crate|require|namespace_use|"
                          r"module_declaration|library|header")


def _ts_anchors(children: list[Any], src: bytes, prefix: str, floor_row: int,
                fixed: str | None = None) -> list[tuple[int, str | None, Any]]:
    """One anchor per named child; comments right above a node attach to it.

    With ``fixed`` (the pieces of one big function body) every anchor gets that symbol.
    """
    anchors: list[tuple[int, str | None, Any]] = []
    pending: int | None = None  # start row of a comment block waiting for its node
    last_row = floor_row - 1
    node_end = -1  # last row of the previous non-comment node
    for c in children:
        if not c.is_named:
            continue
        srow = c.start_point[0]
        erow = c.end_point[0] if c.end_point[1] > 0 or c.end_point[0] == srow else c.end_point[0] - 1
        if "comment" in c.type:
            if srow <= node_end:
                continue  # a trailing comment on the previous node's last line
            if pending is None or srow > last_row + 1:
                pending = srow
            last_row = erow
            continue
        start = srow
        if pending is not None and srow <= last_row + 1:
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


def _ts_split(doc: _Doc, node: Any, src: bytes, s: int, e: int, qual: str | None, max_chars: int,
              depth: int, group: int = 0, in_function: bool = False) -> list[_Seg]:
    """A node too big for one chunk, split at the members of its container (class body, block…).

    Pieces of a class-like node get a fresh merge group (never merged with what is
    outside it); pieces of a function body keep the function's name as symbol.
    """
    container = _ts_container(node) if depth < 4 else None
    if container is None:
        return [_Seg(s, e, qual, group)]
    if not in_function:
        # entering a class-like or function node: its pieces merge only among themselves
        group = _new_group()
        decl = node.child_by_field_name("declaration") or node.child_by_field_name("definition")
        in_function = bool(_FUNC_LIKE.search(node.type) or (decl is not None and _FUNC_LIKE.search(decl.type)))
    prefix = (qual + ".") if qual else ""
    anchors = _ts_anchors(container.children, src, prefix, s + 1, fixed=qual if in_function else None)
    anchors = [a for a in anchors if s < a[0] < e]
    if not anchors:
        return [_Seg(s, e, qual, group)]
    segs: list[_Seg] = [_Seg(s, anchors[0][0], qual, group)]
    for i, (start, sym, child) in enumerate(anchors):
        end = anchors[i + 1][0] if i + 1 < len(anchors) else e
        if end <= start:
            continue
        if doc.size(start, end) > max_chars:
            segs.extend(_ts_split(doc, child, src, start, end, sym or qual, max_chars, depth + 1, group, in_function))
        else:
            segs.append(_Seg(start, end, sym, group))
    return segs


def _segments_treesitter(doc: _Doc, text: str, language: str, max_chars: int) -> list[_Seg] | None:
    parser = parser_for(language)
    if parser is None:
        return None
    src = text.encode("utf-8", "surrogatepass")
    if len(src) > MAX_BYTES or len(src) > 400 * doc.n:
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
    segs: list[_Seg] = []
    first = 0
    if 0 < n_pre < len(anchors):
        first = anchors[n_pre][0]
        segs.append(_Seg(0, first, None, 0, solo=True))
        anchors = anchors[n_pre:]
    for i, (start, sym, node) in enumerate(anchors):
        s = first if i == 0 else start
        e = anchors[i + 1][0] if i + 1 < len(anchors) else doc.n
        if e <= s:
            continue
        if doc.size(s, e) > max_chars:
            segs.extend(_ts_split(doc, node, src, s, e, sym, max_chars, 0))
        else:
            segs.append(_Seg(s, e, sym, 0))
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


def _segments_code_fallback(doc: _Doc, language: str | None) -> list[_Seg]:
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
        return _segments_paragraphs(doc)
    segs = _segments_from_anchors(anchors, 0, doc.n)
    if segs and segs[0].symbol is None and len(segs) > 1:
        segs[0].solo = True
    return segs


# --------------------------------------------------------------------------- #
# markdown
# --------------------------------------------------------------------------- #

_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_SETEXT = re.compile(r" {0,3}(=+|-+)[ \t]*$")
_RST_UNDER = re.compile(r"([=\-~^\"'`*+#:.<>_])\1{2,}[ \t]*$")


def _segments_markdown(doc: _Doc, language: str | None) -> list[_Seg]:
    lines = doc.lines
    n = doc.n
    anchors: list[tuple[int, str | None]] = []
    fence: str | None = None
    rst = language == "rst"
    i = 0
    if n and lines[0].rstrip() == "---":  # YAML front matter
        j = 1
        while j < n and lines[j].rstrip() not in ("---", "..."):
            j += 1
        i = j + 1
    while i < n:
        line = lines[i]
        if fence is not None:
            stripped = line.strip()
            if stripped.startswith(fence) and not stripped.strip(fence[0]):
                fence = None
            i += 1
            continue
        if not line:
            i += 1
            continue
        c = line.lstrip(" ")[:1]
        if c in "`~":
            m = _FENCE.match(line)
            if m:
                fence = m.group(1)
                i += 1
                continue
        if c == "#" and not rst:
            m = _ATX.match(line[:1000])
            if m:
                anchors.append((i, (m.group(2) or "").strip() or None))
                i += 1
                continue
        if i + 1 < n and line.strip() and not line.startswith(("    ", "\t")):
            nxt = lines[i + 1]
            if nxt[:1] in "=-~^\"'`*+#:.<>_" and nxt.strip():
                prev_blank = i == 0 or not lines[i - 1].strip()
                if rst:
                    m = _RST_UNDER.match(nxt)
                    ok = bool(m) and len(nxt.rstrip()) >= len(line.rstrip()) and not _RST_UNDER.match(line)
                    if ok:
                        start = i - 1 if i > 0 and lines[i - 1].strip() and _RST_UNDER.match(lines[i - 1]) else i
                        anchors.append((start, line.strip()))
                        i += 2
                        continue
                else:
                    m = _SETEXT.match(nxt)
                    if m and (m.group(1)[0] == "=" or prev_blank) and not line.lstrip().startswith(
                            ("-", "*", "+", ">", "|")):
                        anchors.append((i, line.strip()))
                        i += 2
                        continue
        i += 1
    if not anchors:
        return _segments_paragraphs(doc)
    return _segments_from_anchors(anchors, 0, n)


# --------------------------------------------------------------------------- #
# logs
# --------------------------------------------------------------------------- #

from helix_context.ingest.detect import LOG_LINE_RE as _LOG_START  # noqa: E402 - kept beside the log section that uses it

_CONT = re.compile(r"(?:[ \t]|Traceback \(most recent call last\)|During handling of the above exception|"
                   r"The above exception was the direct cause|Caused by[: ]|\.\.\. \d+ (?:more|common)|"
                   r"[\w.$]*(?:Error|Exception|Warning|Exit|Interrupt)\b[^ ]*(?::|$)|at [\w$.<>]+\()")
_TB_START = "Traceback (most recent call last)"


def _segments_log(doc: _Doc) -> list[_Seg]:
    lines = doc.lines
    n = doc.n
    # does this log have timestamped / levelled records at all?
    sample = [ln for ln in lines[:200] if ln.strip()]
    stamped = sum(1 for ln in sample if _LOG_START.match(ln)) * 5 >= max(1, len(sample))
    starts: list[tuple[int, str | None]] = []
    in_tb = False
    after_blank = True
    for i in range(n):
        line = lines[i]
        if not line.strip():
            after_blank = True
            continue
        new = False
        if in_tb:
            # a traceback runs until its unindented exception line (included)
            if line.startswith(_TB_START) or line.startswith(("During handling", "The above exception")):
                pass
            elif line[0] not in " \t":
                if stamped and _LOG_START.match(line):
                    new = True
                in_tb = False
        elif stamped:
            if _LOG_START.match(line):
                new = True
            elif after_blank and not _CONT.match(line):
                new = True
        else:
            if after_blank and not _CONT.match(line):
                new = True
        if line.startswith(_TB_START):
            in_tb = True
        if new or not starts:
            starts.append((i, None))
        after_blank = False
    if not starts:
        return []
    return _segments_from_anchors(starts, 0, n)


# --------------------------------------------------------------------------- #
# config
# --------------------------------------------------------------------------- #

_SECTION = re.compile(r"\s*\[\[?\s*([^\]\n]+?)\s*\]\]?\s*(?:[#;].*)?$")
_YAML_KEY = re.compile(r"(?:\"([^\"]+)\"|'([^']+)'|([^\s#:\-\"'][^:#]*?))\s*:(?:\s|$)")
_MAKE_TARGET = re.compile(r"([A-Za-z0-9_./%$() -]+?)\s*::?(?:\s|$)(?!=)")
_DOCKER_STAGE = re.compile(r"FROM\s+\S+(?:\s+AS\s+(\S+))?", re.I)
_COMMENT_PREFIX = ("#", ";", "//")


def _segments_config(doc: _Doc, language: str | None) -> list[_Seg]:
    lines = doc.lines
    anchors: list[tuple[int, str | None]] = []
    lang = language or ""

    def attach_comments(i: int) -> int:
        start = i
        while start - 1 >= 0 and lines[start - 1].lstrip().startswith(_COMMENT_PREFIX):
            start -= 1
        return start

    if lang in ("yaml", "yml"):
        for i, line in enumerate(lines):
            if not line or line[0] in " \t#-%\r" or line.startswith("..."):
                if line.startswith("---"):
                    anchors.append((i, None))
                continue
            m = _YAML_KEY.match(line[:400])
            if m:
                anchors.append((attach_comments(i), m.group(1) or m.group(2) or m.group(3)))
    elif lang == "makefile":
        for i, line in enumerate(lines):
            if not line or line[0] in " \t#\r.":
                continue
            m = _MAKE_TARGET.match(line[:400])
            if m and "=" not in line.split(":", 1)[0]:
                anchors.append((attach_comments(i), m.group(1).strip()))
    elif lang == "dockerfile":
        for i, line in enumerate(lines):
            m = _DOCKER_STAGE.match(line[:400])
            if m:
                anchors.append((attach_comments(i), m.group(1) or line.split()[1] if len(line.split()) > 1 else None))
    else:
        for i, line in enumerate(lines):
            if line[:1] == "[" or (line[:1] in " \t" and line.lstrip()[:1] == "["):
                m = _SECTION.match(line[:400])
                if m:
                    anchors.append((attach_comments(i), m.group(1)))
    # fewer than two anchors: sections do not help, group by blank lines instead
    if len(anchors) < 1:
        return _segments_paragraphs(doc)
    segs = _segments_from_anchors(anchors, 0, doc.n)
    return segs


# --------------------------------------------------------------------------- #
# json
# --------------------------------------------------------------------------- #

_JSON_KEY = re.compile(r"([ \t]*)\"((?:[^\"\\]|\\.){0,200})\"\s*:")


def _segments_json(doc: _Doc, language: str | None) -> list[_Seg]:
    lines = doc.lines
    n = doc.n
    if n <= 1:
        return [_Seg(0, n)]
    first = next((i for i in range(n) if lines[i].strip()), 0)
    head = lines[first].lstrip()
    if language == "jsonl" or (head.startswith("{") and head.rstrip().endswith("}") and n > first + 1
                               and lines[first + 1].lstrip().startswith("{")):
        return [_Seg(i, i + 1) for i in range(n) if lines[i].strip()]
    # pretty-printed: members of the outermost value have the smallest indentation inside it
    indent: int | None = None
    for i in range(first + 1, min(n, first + 400)):
        ln = lines[i]
        st = ln.lstrip(" \t")
        if st and st[0] not in "}]":
            indent = len(ln) - len(st)
            break
    if not indent:
        return _segments_paragraphs(doc) if n > 1 else [_Seg(0, n)]
    anchors: list[tuple[int, str | None]] = []
    for i in range(first + 1, n):
        ln = lines[i]
        if len(ln) > indent and ln[indent] not in " \t}]" and (indent == 0 or not ln[:indent].strip()):
            if ln[indent] == "\"":
                m = _JSON_KEY.match(ln)
                anchors.append((i, m.group(2) if m else None))
            else:
                anchors.append((i, None))
    if not anchors:
        return [_Seg(0, n)]
    anchors[0] = (first, anchors[0][1])
    return _segments_from_anchors(anchors, 0, n)


# --------------------------------------------------------------------------- #
# diff
# --------------------------------------------------------------------------- #

_DIFF_FILE = re.compile(r"(?:diff --git a/(\S+) b/(\S+)|diff (?:-\S+ )*(\S+) (\S+)$|Index: (\S+))")
_PLUS_FILE = re.compile(r"\+\+\+ (?:b/)?([^\t\n\r]+)")


def _segments_diff(doc: _Doc, max_chars: int) -> list[_Seg]:
    lines = doc.lines
    n = doc.n
    files: list[tuple[int, str | None]] = []
    hunks: list[list[int]] = []
    i = 0
    while i < n:
        line = lines[i]
        if line.startswith(("diff ", "Index: ")):
            m = _DIFF_FILE.match(line)
            name = None
            if m:
                name = m.group(2) or m.group(4) or m.group(5)
            files.append((i, name))
            hunks.append([])
        elif line.startswith("--- ") and i + 1 < n and lines[i + 1].startswith("+++ "):
            m = _PLUS_FILE.match(lines[i + 1])
            name = m.group(1).strip() if m else None
            if files and files[-1][0] < i and not hunks[-1]:
                # header of the file opened by the `diff` line above: name it
                files[-1] = (files[-1][0], files[-1][1] or name)
            else:
                files.append((i, name))
                hunks.append([])
            i += 2
            continue
        elif line.startswith("@@"):
            if not files:
                files.append((i, None))
                hunks.append([])
            hunks[-1].append(i)
        i += 1
    if not files:
        return _segments_paragraphs(doc)
    segs: list[_Seg] = []
    if files[0][0] > 0:
        segs.append(_Seg(0, files[0][0], None))  # commit message / patch preamble
    for k, (start, name) in enumerate(files):
        end = files[k + 1][0] if k + 1 < len(files) else n
        if doc.size(start, end) <= max_chars or len(hunks[k]) < 2:
            segs.append(_Seg(start, end, name))
            continue
        group = _new_group()
        hs = [h for h in hunks[k] if start < h < end]
        # the file header goes with its first hunk
        bounds = [start, *hs[1:]] if hs else [start]
        for j, b in enumerate(bounds):
            e = bounds[j + 1] if j + 1 < len(bounds) else end
            segs.append(_Seg(b, e, name, group))
    return segs


# --------------------------------------------------------------------------- #
# entry point
# --------------------------------------------------------------------------- #


def _segments(doc: _Doc, text: str, content_type: str, language: str | None, max_chars: int) -> list[_Seg]:
    if content_type == "code":
        segs = None
        lang = (language or "").lower()
        if lang == "python":
            segs = _segments_python(doc, text, max_chars)
        elif lang:
            try:
                segs = _segments_treesitter(doc, text, lang, max_chars)
            except Exception:
                segs = None
        if segs is None:
            segs = _segments_code_fallback(doc, lang)
        return segs
    if content_type == "markdown":
        return _segments_markdown(doc, language)
    if content_type == "log":
        return _segments_log(doc)
    if content_type == "config":
        return _segments_config(doc, (language or "").lower())
    if content_type == "json":
        return _segments_json(doc, (language or "").lower())
    if content_type == "diff":
        return _segments_diff(doc, max_chars)
    return _segments_paragraphs(doc)


def chunk_text(text: str, content_type: str, language: str | None, max_chars: int = 2400) -> list[Chunk]:
    """Split ``text`` into chunks of at most ``max_chars`` characters along its structure.

    Empty or whitespace-only text gives ``[]``. Never raises: a text that its
    type-specific splitter cannot handle is split by paragraphs / lines instead.
    """
    if not text or not text.strip():
        return []
    max_chars = max(1, int(max_chars))
    doc = _Doc(text)
    try:
        segs = _segments(doc, text, content_type, language, max_chars)
        return _finish(doc, segs, content_type, language, max_chars)
    except Exception:
        try:
            return _finish(doc, _segments_paragraphs(doc), content_type, language, max_chars)
        except Exception:
            out: list[Chunk] = []
            _split_lines(doc, 0, doc.n, None, content_type, language, max_chars, out)
            return out
