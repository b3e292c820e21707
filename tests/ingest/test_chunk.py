"""Chunking code (Python, the tree-sitter languages), and the line-span invariant of every content type."""

from __future__ import annotations

import random
import textwrap
from pathlib import Path

import pytest

from helix_context.ingest.chunk import chunk_text
from helix_context.ingest.detect import detect_type
from helix_context.models import CONTENT_TYPES
from tests.ingest.chunking import STDLIB, chunk_with, containing, filler, line_no, lines_of

# --------------------------------------------------------------------------- python


PY_MODULE = textwrap.dedent('''\
    """Module docstring."""
    import os
    import sys

    PORT = 11437
    NAMES = ["a", "b"]


    # helper: adds numbers
    @functools.lru_cache(maxsize=None)
    @other.decorator
    def add(a, b):
        """Add a and b."""
        return a + b


    class Small:
        x = 1

        def m(self):
            return self.x
    ''')


def test_python_preamble_is_its_own_chunk_and_decorators_stay_with_their_def() -> None:
    chunks = chunk_with(PY_MODULE, "code", "python")
    pre = containing(chunks, "import os")
    assert "PORT = 11437" in pre.content
    assert "def add" not in pre.content, "the preamble is never merged with a def"
    assert pre.start_line == 1
    add = containing(chunks, "def add(a, b):")
    assert add.content.startswith("# helper: adds numbers\n@functools.lru_cache")
    assert add.start_line == line_no(PY_MODULE, "# helper")
    assert add.symbol == "add"
    # tiny neighbours are merged: `add` and the small class share a chunk
    assert "class Small" in add.content


def test_python_function_found_whole_with_its_span() -> None:
    src = "import os\n\n\n" + filler("alpha", 30) + "\n\n" + filler("beta", 30) + "\n\n" + filler("gamma", 5)
    chunks = chunk_with(src, "code", "python")
    beta = containing(chunks, "def beta(x):")
    start = line_no(src, "def beta(x):")
    end = start + 2 + 30  # def + docstring + 30 body lines + return
    assert beta.start_line <= start and beta.end_line >= end
    assert beta.symbol == "beta"
    assert beta.content.startswith("def beta(x):")
    assert beta.content.rstrip().endswith("return x")


def test_python_big_class_splits_at_methods() -> None:
    methods = "\n".join(textwrap.indent(filler(f"method_{k}", 25), "    ") for k in range(4))
    src = "class Store:\n    \"\"\"A store.\"\"\"\n\n    LIMIT = 10\n\n" + methods + "\n\ndef after():\n    return 1\n"
    assert len(src) > 2400
    chunks = chunk_with(src, "code", "python")
    head = containing(chunks, "class Store:")
    assert head.symbol == "Store"
    assert "LIMIT = 10" in head.content
    for k in range(4):
        c = containing(chunks, f"def method_{k}(x):")
        assert "return x" in c.content
        assert c.symbol in (f"Store.method_{k}", "Store", f"Store.method_{k - 1}")
    m2 = containing(chunks, "def method_2(x):")
    assert m2.content.lstrip().startswith("def method_2") and m2.symbol == "Store.method_2"
    # the function after the class never shares a chunk with a piece of the class
    after = containing(chunks, "def after():")
    assert "method_" not in after.content
    assert after.symbol == "after"


def test_python_docstring_lines_are_not_definitions() -> None:
    src = textwrap.dedent('''\
        TEMPLATE = """
        def not_a_function():
        class NotAClass:
        """


        def real(x):
            return x
        ''')
    chunks = chunk_with(src, "code", "python", max_chars=40)
    symbols = [c.symbol for c in chunks]
    assert "not_a_function" not in symbols and "NotAClass" not in symbols
    assert containing(chunks, "def real(x):").symbol == "real"


def test_python_syntax_error_falls_back_without_raising() -> None:
    src = "import os\n\ndef broken(:\n    pass\n\n\n" + filler("fine", 40) + "\nclass Also(:\n    x = 1\n"
    chunks = chunk_with(src, "code", "python", max_chars=600)
    fine = [c for c in chunks if "def fine(x):" in c.content]
    assert fine and fine[0].symbol == "fine"


# --------------------------------------------------------------------------- other languages

JS = textwrap.dedent('''\
    import { a } from "./a.js";
    import b from "b";

    /**
     * Compute the total.
     */
    export function total(items) {
      let sum = 0;
      for (const it of items) {
        sum += it.price * it.count;
      }
      return sum;
    }

    class Cart {
      constructor() {
        this.items = [];
      }
      add(item) {
        this.items.push(item);
      }
    }
    ''')

GO = textwrap.dedent('''\
    package main

    import "fmt"

    // Serve starts the server.
    func Serve(port int) error {
    \tfmt.Println("listening", port)
    \treturn nil
    }

    type Server struct {
    \tPort int
    }

    func (s *Server) Start() error {
    \treturn Serve(s.Port)
    }
    ''')

RUST = textwrap.dedent('''\
    use std::io;

    /// Parse a port.
    pub fn parse_port(s: &str) -> u16 {
        s.parse().unwrap_or(11437)
    }

    impl Server {
        pub fn start(&self) -> io::Result<()> {
            Ok(())
        }
    }
    ''')

JAVA = textwrap.dedent('''\
    package app;

    import java.util.List;

    public class Main {
        private int port = 11437;

        public static void main(String[] args) {
            System.out.println("hi");
        }
    }
    ''')


@pytest.mark.parametrize(
    ("src", "language", "needle", "symbol"),
    [
        (JS, "javascript", "export function total(items) {", "total"),
        (GO, "go", "func Serve(port int) error {", "Serve"),
        (RUST, "rust", "pub fn parse_port(s: &str) -> u16 {", "parse_port"),
        (JAVA, "java", "public static void main(String[] args) {", None),
    ],
)
def test_tree_sitter_languages_keep_definitions_whole(src: str, language: str, needle: str, symbol: str | None) -> None:
    chunks = chunk_with(src, "code", language, max_chars=2400)
    c = containing(chunks, needle)
    start = line_no(src, needle)
    assert c.start_line <= start
    # small file: few chunks, but the preamble (imports) stays apart
    if language in ("javascript", "go", "rust"):
        pre = chunks[0]
        assert "import" in pre.content or "use std" in pre.content
        assert needle not in pre.content
    # with a small budget each definition gets its own chunk, leading comment included
    small = chunk_with(src, "code", language, max_chars=160)
    c = containing(small, needle)
    if symbol:
        assert c.symbol == symbol
    body_end = next(i for i, ln in enumerate(lines_of(src), 1) if i > start and ln.startswith("}"))
    assert c.end_line >= body_end or language == "java"


def test_js_doc_comment_goes_with_its_function() -> None:
    chunks = chunk_with(JS, "code", "javascript", max_chars=200)
    c = containing(chunks, "export function total(items) {")
    assert c.content.startswith("/**")


def test_big_js_class_splits_at_methods() -> None:
    methods = "\n".join(
        f"  method{k}(x) {{\n" + "".join(f"    x = x + compute{i}(x, {k});\n" for i in range(20)) + "    return x;\n  }\n"
        for k in range(5))
    src = "class Big {\n" + methods + "}\n\nfunction after() {\n  return 1;\n}\n"
    chunks = chunk_with(src, "code", "javascript", max_chars=1200)
    for k in range(5):
        c = containing(chunks, f"  method{k}(x) {{")
        assert c.symbol in (f"Big.method{k}", "Big")
    assert containing(chunks, "function after()").symbol == "after"


def test_unknown_language_uses_the_definition_line_fallback() -> None:
    src = "".join(f"function f{k}(x)\n" + "".join(f"  x = x + {i}\n" for i in range(30)) + "end\n\n" for k in range(4))
    chunks = chunk_with(src, "code", "no-such-language", max_chars=400)
    for k in range(4):
        assert any(c.content.startswith(f"function f{k}(x)") for c in chunks)


# --------------------------------------------------------------------------- invariants


def test_empty_and_whitespace_give_no_chunks() -> None:
    for ct in CONTENT_TYPES:
        assert chunk_text("", ct, None) == []
        assert chunk_text("  \n\t\n\r\n", ct, None) == []


WEIRD = [
    "a\x00b\x00c\n\x00\n" * 50,
    "def f():\r\n    return 1\r\n\r\n\r\nclass A:\r\n    pass\r\n",
    "no trailing newline\nsecond line",
    "x" * 20_000,
    "word " * 4_000,
    "line1\rline2\rline3\r",
    "\n\n\nstart after blanks\n\n\n",
    "# " + "#" * 5000 + "\n",
    "{" * 3000 + "}" * 3000,
    "def f(:\n" + "    (" * 500 + "\n",
    "\ufeff\u2028\u2029\x85\x0c\x0b weird separators\n" * 30,
    "é" * 3000 + "\n" + "😀" * 3000,
    "```\nunterminated fence\n" * 40,
    "Traceback (most recent call last):\n" * 100,
    '"""unterminated docstring\n' + "def x(): pass\n" * 100,
    # garbage: slow for tree-sitter's error recovery, so its parse is cancelled and the fallback splits it
    "".join(random.Random(11).choice("ab_Z09 .:=-/\\\"'`#@{}[]()<>\n\t\r\x00é😀|*~^$,;!?+%&") for _ in range(30_000)),
]


LANGUAGES = {"code": ["python", "javascript", "c", None], "config": ["toml", "yaml", "ini", None],
             "json": ["json", "jsonl"], "markdown": ["markdown", "rst"]}


@pytest.mark.parametrize("ct", CONTENT_TYPES)
@pytest.mark.parametrize("max_chars", [2400, 100, 7])
def test_weird_input_never_raises_and_keeps_spans(ct: str, max_chars: int) -> None:
    for lang in LANGUAGES.get(ct, [None]):
        for text in WEIRD:
            chunk_with(text, ct, lang, max_chars)


@pytest.mark.parametrize("ct", CONTENT_TYPES)
def test_one_megabyte_single_line(ct: str) -> None:
    for lang in LANGUAGES.get(ct, [None]):
        for text in ("x" * 1_000_000, "word " * 200_000):
            chunks = chunk_with(text, ct, lang, 2400)
            assert len(chunks) >= 417


def test_giant_single_line_is_hard_split_into_pieces_of_that_line() -> None:
    text = "head\n" + "abc " * 300_000 + "\ntail\n"
    chunks = chunk_with(text, "text", None, max_chars=2400)
    middle = [c for c in chunks if c.start_line == 2]
    assert len(middle) >= 500
    assert "".join(c.content for c in middle) == ("abc " * 300_000).rstrip() or "".join(
        c.content for c in middle).replace(" ", "") == "abc" * 300_000


def _stdlib_sample() -> list[Path]:
    files: list[Path] = []
    for sub in ("json", "email", "http", "logging", "importlib", "asyncio"):
        files += sorted((STDLIB / sub).rglob("*.py"))
    rng = random.Random(7)
    others = [p for p in sorted((STDLIB / "test").rglob("*")) if p.is_file() and p.suffix not in (".py", ".pyc")
              and p.stat().st_size < 300_000]
    files += rng.sample(others, min(60, len(others)))
    files += [p for p in (STDLIB / "pydoc_data" / "topics.py", STDLIB / "typing.py", STDLIB / "inspect.py")
              if p.exists()]
    return files


@pytest.mark.skipif(not STDLIB.exists(), reason="no stdlib sources")
def test_line_span_invariant_on_real_stdlib_files() -> None:
    files = _stdlib_sample()
    assert len(files) > 50
    n_chunks = 0
    for path in files:
        data = path.read_bytes()
        text = data.decode("utf-8", "replace")
        ct, lang = detect_type(str(path), text)
        for max_chars in (2400, 300):
            chunks = chunk_with(text, ct, lang, max_chars)
            n_chunks += len(chunks)
            if text.strip():
                assert chunks, path
        # every python file: as a different type too (the chunkers must not depend on the right guess)
        if path.suffix == ".py" and path.stat().st_size < 60_000:
            for other in ("markdown", "log", "config", "json", "diff", "text"):
                chunk_with(text, other, None, 1000)
    assert n_chunks > len(files)


@pytest.mark.skipif(not STDLIB.exists(), reason="no stdlib sources")
def test_stdlib_python_top_level_defs_start_chunks() -> None:
    """On real code every top-level def/class (per `ast`) begins inside a chunk named after it or its
    merge partner, and no chunk boundary falls inside a small top-level function."""
    import ast

    for path in sorted((STDLIB / "json").rglob("*.py")) + sorted((STDLIB / "email").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        chunks = chunk_with(text, "code", "python")
        tree = ast.parse(text)
        for node in tree.body:
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            end = node.end_lineno or node.lineno
            covering = [c for c in chunks if c.start_line <= start <= c.end_line]
            assert covering, (path, node.name)
            size = len("\n".join(lines_of(text)[start - 1 : end]))
            if size <= 2400 and not isinstance(node, ast.ClassDef):
                whole = [c for c in chunks if c.start_line <= start and c.end_line >= end]
                assert whole, (path, node.name, "a small function is never cut")


def test_garbage_in_a_code_file_then_real_code_still_parses() -> None:
    garbage = WEIRD[-1] * 5
    for lang in ("javascript", "go", "rust"):
        chunk_with(garbage, "code", lang, 2400)
    # the parser that gave up on the garbage is reset: a real file right after gets tree-sitter symbols
    small = chunk_with(JS, "code", "javascript", max_chars=160)
    assert containing(small, "export function total(items) {").symbol == "total"
