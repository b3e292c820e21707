"""tree-sitter plumbing shared by the chunker and the symbol finder: one parser per
language and thread, a parse that gives up on garbage, and a node's name.

Grammars come from ``tree_sitter_language_pack``; a language whose grammar does
not load is remembered and never tried again, so callers fall back at once.
"""

from __future__ import annotations

import threading
import time
from typing import Any

__all__ = ["BESIDE_BEFORE", "MAX_BYTES", "doc_gap", "minified", "node_name", "node_text", "parse_within_budget", "parser_for",
           "unparenthesized"]

ALIASES = {"shell": "bash", "sh": "bash", "zsh": "bash", "js": "javascript", "jsx": "javascript",
               "ts": "typescript", "c++": "cpp", "c#": "csharp", "cs": "csharp", "golang": "go",
               "py": "python", "rb": "ruby", "rs": "rust", "kt": "kotlin", "yml": "yaml"}
_LOCAL = threading.local()
_FAILED: set[str] = set()
MAX_BYTES = 4_000_000
MINIFIED_LINE_BYTES = 400  # lines this long on average: minified or generated, not code written for reading


def minified(src: bytes, lines: int) -> bool:
    """Whether `src` (of `lines` lines) is minified: its chunks are cut by lines and it defines no symbols, since
    a bundle's one-letter names on one 100 KB line point nowhere a reader can go (`lodash.min.js`, `*.min.js`)."""
    return len(src) > MINIFIED_LINE_BYTES * max(1, lines)


def parser_for(language: str) -> Any | None:
    lang = ALIASES.get(language, language)
    if lang in _FAILED:
        return None
    cache = getattr(_LOCAL, "parsers", None)
    if cache is None:
        cache = _LOCAL.parsers = {}
    parser = cache.get(lang)
    if parser is None:
        try:
            from tree_sitter_language_pack import get_parser

            parser = get_parser(lang)  # type: ignore[arg-type]  # the pack types lang as a Literal of its names; ours is checked against them at load
        except Exception:
            _FAILED.add(lang)
            return None
        cache[lang] = parser
    return parser


def node_text(node: Any, src: bytes, limit: int = 120) -> str:
    return src[node.start_byte : min(node.end_byte, node.start_byte + limit)].decode("utf-8", "replace")


def unparenthesized(node: Any) -> Any:
    """`node` without the parentheses around it: `var f = (function f() {...})` binds the function."""
    while node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    return node


_NAME_TYPES = frozenset({"identifier", "field_identifier", "type_identifier", "property_identifier",
                         "qualified_identifier", "scoped_identifier", "destructor_name", "operator_name",
                         "constant", "simple_identifier", "name", "word", "scoped_type_identifier"})


# what grammars parse as siblings before a definition rather than in it: TypeScript's decorators, Rust's attributes,
# Dart's annotations (they belong to the definition that follows, as a comment right above it does)
BESIDE_BEFORE = frozenset({"decorator", "attribute_item", "annotation"})


def doc_gap(comment: Any, src: bytes) -> int:
    """Blank lines a comment may stand above the definition it documents: one for a `/** ... */` block (JSDoc,
    Javadoc, KDoc, PHPDoc: a doc comment by its form, and some projects leave a blank line after it), none for any
    other. Chunks (chunk_code.py) and symbols (symbols_tree.py) attach a comment to what follows by this one rule,
    so a symbol's first line is in the gene that holds its code. Read from `src`, the parsed bytes: a node's own
    `text` is not safe to read once the parser has moved on (it crashed the process on a 5,000-function file)."""
    return 1 if src[comment.start_byte:comment.start_byte + 3] == b"/**" else 0


def node_name(node: Any, src: bytes) -> str | None:
    n = node
    for _ in range(5):
        if n.type in _NAME_TYPES:
            return node_text(n, src)
        nm = n.child_by_field_name("name")
        if nm is not None:
            if nm.type in _NAME_TYPES or nm.end_byte - nm.start_byte <= 80:
                return node_text(nm, src).strip() or None
        nxt = (n.child_by_field_name("declarator") or n.child_by_field_name("declaration")
               or n.child_by_field_name("definition"))
        if nxt is None:
            for c in n.named_children:
                if c.type.endswith(("declarator", "_spec", "definition", "declaration")) or c.type in (
                        "class", "function", "method"):
                    nxt = c
                    break
        if nxt is None:
            t = n.child_by_field_name("type")
            if t is not None and n.type.startswith("impl"):
                return "impl " + node_text(t, src)
            return None
        n = nxt
    return None


_MIN_SPEED = 2_000_000  # bytes per CPU second; real code parses at ~10-30 MB/s
# Up to this size a file is parsed from its bytes, without a budget: even error recovery at a tenth
# of the budget's speed finishes in about a second. Larger files are parsed within the budget.
UNBUDGETED_BYTES = 256_000
_CHUNK = 65536  # what the read callback hands tree-sitter at a time


def parse_within_budget(parser: Any, src: bytes) -> Any | None:
    """Parse, giving up (None) when the input goes far slower than code does.

    Garbage or non-code text in a code file can take tree-sitter's error recovery
    seconds per MB. tree-sitter's own progress callback cancels the parse once it
    runs over budget (the read callback always returns consistent slices: feeding
    tree-sitter a truncated input mid-parse crashes some grammars); the parser is
    then reset so the next parse starts fresh.

    The chunker and the symbol finder both ask for the tree of the same file, one
    after the other: the last parse of each thread is kept (one tree, replaced by the
    next parse), so a file is parsed once — parsing is most of the cost of a C file.
    """
    last = getattr(_LOCAL, "last", None)
    if last is not None and last[0] is parser and last[1] == src:
        return last[2]
    _LOCAL.last = None  # the previous tree goes before the next parse allocates its own
    if len(src) <= UNBUDGETED_BYTES:
        tree = parser.parse(src)
    else:
        source = getattr(_LOCAL, "source", None)
        if source is None:
            source = _LOCAL.source = _BudgetedSource()
        tree = source.parse(parser, src)
    _LOCAL.last = (parser, src, tree)
    return tree


class _BudgetedSource:
    """What a budgeted parse reads from: one buffer per thread, and callbacks made once.

    py-tree-sitter 0.26 keeps a reference to every object a read callback returns (and to
    the callbacks) for good: slices of each file's bytes would keep every file read that way
    in memory (measured: the whole source of every file, ~60 MB per 3,000 C files). Here the
    leaked references point at views into one reused buffer (~200 bytes each, one per chunk
    of a large file) and at these two bound methods. Never read ``Node.text`` from such a
    tree: the binding re-reads it through the callback and does not take a view.
    """

    def __init__(self) -> None:
        self._buffer = bytearray(MAX_BYTES)
        self._view = memoryview(self._buffer)
        self._chunks: dict[int, memoryview] = {}
        self._size = 0
        self._budget = 0.0
        self._started = 0.0
        self._calls = 0
        self.read = self._read
        self.over_budget = self._over_budget

    def parse(self, parser: Any, src: bytes) -> Any | None:
        size = len(src)
        self._buffer[:size] = src  # same length: the buffer never moves under a view
        self._size = size
        self._chunks = {}
        self._calls = 0
        self._budget = 0.02 + size / _MIN_SPEED
        self._started = time.thread_time()
        try:
            tree = parser.parse(self.read, progress_callback=self.over_budget)
        except TypeError:  # a py-tree-sitter without progress callbacks: no budget
            tree = parser.parse(src)
        except ValueError:  # cancelled ("Parsing failed")
            tree = None
        if tree is None:
            parser.reset()
        return tree

    def _read(self, offset: int, _point: Any) -> Any:
        if offset >= self._size:
            return b""
        chunk = self._chunks.get(offset)  # some scanners (Perl's) seek back to the same places often
        if chunk is None:
            chunk = self._chunks[offset] = self._view[offset : min(offset + _CHUNK, self._size)]
        return chunk

    def _over_budget(self, _offset: int, _has_error: bool) -> bool:
        # tree-sitter asks ~10 times per KB; reading the thread's clock is a system call
        self._calls += 1
        return not self._calls & 15 and time.thread_time() - self._started > self._budget
