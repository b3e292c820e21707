"""Symbol-level pointers: every function, method and class is its own span with its qualified name."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import httpx
import pytest

from helix_context import HelixContextManager
from helix_context.ingest.symbols import find_symbols, python_symbols
from tests.retrieve.older_genome import older_genome, reingest_marked

# small neighbours: the chunker packs all of these into one stored gene
ARCHIVE = textwrap.dedent('''\
    """A tiny archive reader."""
    import os


    class ArchiveError(Exception):
        """Raised when an archive is damaged."""


    class ZipFile:
        """Read members of a zip archive."""

        def __init__(self, path):
            self.path = path

        @property
        def names(self):
            return list(self._index)

        def _extract_member(self, member, target):
            """Write one member below target, refusing names that climb out of it."""
            if member.startswith("/") or ".." in member.split("/"):
                raise ArchiveError(f"unsafe member name {member!r}")
            return os.path.join(target, member)

        def close(self):
            self._fp = None


    def is_zipfile(path):
        return path.endswith(".zip")
    ''')

TS_SOURCE = textwrap.dedent('''\
    export class Cart {
      add(item) {
        this.items.push(item);
      }
      total() {
        return this.items.reduce((sum, i) => sum + i.price, 0);
      }
    }

    function applyCoupon(cart, code) {
      return code === "HALF" ? cart.total() / 2 : cart.total();
    }
    ''')


def test_python_symbols_match_ast_on_real_code() -> None:
    """Same names and spans as `ast` (decorators included) for a whole real module of the standard library, each
    with the `#` comment lines right above it at its own indentation (`JSONDecodeError.__init__` has one)."""
    import json.decoder as module

    text = Path(module.__file__).read_text(encoding="utf-8")
    lines = text.split("\n")
    want: dict[str, tuple[int, int]] = {}

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                while lines[start - 2].startswith(" " * node.col_offset + "#"):
                    start -= 1
                want[prefix + node.name] = (start, node.end_lineno or node.lineno)
                walk(node.body, prefix + node.name + ".")

    walk(ast.parse(text).body, "")
    got = {s.name: (s.start_line, s.end_line) for s in python_symbols(text) if s.kind != "constant"}
    assert got == want


def test_python_constants_match_ast_on_real_code() -> None:
    """A module's capitalised assignments (multi-line literals whole) and a class's capitals, as `ast` sees them."""
    import json.decoder as decoder
    import logging.handlers as handlers

    for module in (decoder, handlers):
        text = Path(module.__file__).read_text(encoding="utf-8")
        want: dict[str, tuple[int, int]] = {}
        for node in ast.parse(text).body:
            body = node.body if isinstance(node, ast.ClassDef) else [node]
            prefix = node.name + "." if isinstance(node, ast.ClassDef) else ""
            for stmt in body:
                target = (stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                          else stmt.target if isinstance(stmt, ast.AnnAssign) and stmt.value is not None else None)
                if isinstance(target, ast.Name) and target.id.lstrip("_")[:1].isupper() and (
                        not prefix or target.id.upper() == target.id):
                    want[prefix + target.id] = (stmt.lineno, stmt.end_lineno or stmt.lineno)
        got = {s.name: (s.start_line, s.end_line) for s in python_symbols(text) if s.kind == "constant"}
        assert got == want and len(want) >= 8, module.__name__


def test_python_symbols_are_not_fooled_by_lookalike_lines() -> None:
    """Only assignments of a module or class are constants (not a condition, a tuple, an item, a keyword
    argument in capitals); one whose annotation runs over several lines is one, with all its lines."""
    src = textwrap.dedent('''\
        LIMIT = 5
        TABLE = {
            "a": 1,
        }
        if LIMIT == 3:
            OTHER: int = 4
        A, B = 1, 2
        D[0] = 1
        X += 1
        log = make()
        configure(
            LEVEL=3,
            FORMAT="%(message)s",
        )
        handlers = dict(  # keyword arguments in capitals
            STDERR=1,
        )


        @decorate(
            "long argument",
        )
        def f(
            a,
        ):
            LOCAL = 3
            return g(
                a,
            )
        HANDLERS: dict[
            str,
            int,
        ] = {"a": 1}
        ''')
    got = {s.name: (s.kind, s.start_line, s.end_line) for s in python_symbols(src)}
    assert got == {"LIMIT": ("constant", 1, 1), "TABLE": ("constant", 2, 4), "OTHER": ("constant", 6, 6),
                   "f": ("function", 20, 29), "HANDLERS": ("constant", 30, 33)}


def test_nested_symbols_kinds_and_decorators() -> None:
    syms = {s.name: s for s in python_symbols(ARCHIVE)}
    assert syms["ZipFile"].kind == "class" and syms["ZipFile._extract_member"].kind == "method"
    assert syms["is_zipfile"].kind == "function"
    assert (syms["ZipFile.names"].start_line, syms["ZipFile.names"].end_line) == (15, 17)  # @property is part of it
    assert (syms["ZipFile._extract_member"].start_line, syms["ZipFile._extract_member"].end_line) == (19, 23)
    assert syms["ArchiveError"].end_line == 6  # a class that is only a docstring


def test_tree_sitter_languages_get_symbols_too() -> None:
    syms = {s.name: s for s in find_symbols(TS_SOURCE, "code", "javascript")}
    if not syms:
        pytest.skip("no tree-sitter grammar for javascript in this install")
    assert {"Cart", "Cart.add", "Cart.total", "applyCoupon"} <= set(syms)
    assert syms["Cart.total"].kind == "method" and (syms["Cart.total"].start_line, syms["Cart.total"].end_line) == (5, 7)
    assert syms["applyCoupon"].start_line == 10


# each language's own ways of defining things: (source, every symbol as (kind, first line))
DEFINED = {
    "go": ("package shop\n\ntype Server struct{ addr string }\ntype Shape interface { Area() float64 }\n"
           "type ID string\n\nfunc (s *Server) Start() error {\n\treturn nil\n}\nfunc (Stack[T]) Push() {}\n"
           "func New() *Server { return nil }\n",
           {"Server": ("class", 3), "Shape": ("class", 4), "Shape.Area": ("method", 4), "Server.Start": ("method", 7),
            "Stack.Push": ("method", 10), "New": ("function", 11)}),
    "rust": ("struct Cart { n: u32 }\nimpl Cart {\n    fn add(&mut self) {}\n}\nimpl<T> Stack<T> { fn push(&mut self) {} }\n"
             "mod util {\n    pub fn helper() {}\n}\nenum Kind { A, B(u8) }\nmod tests;\n",
             {"Cart": ("class", 2), "Cart.add": ("method", 3), "Stack": ("class", 5), "Stack.push": ("method", 5),
              "util": ("class", 6), "util.helper": ("function", 7), "Kind": ("class", 9)}),
    "java": ("public class Cart {\n  public Cart() {}\n  void add(int x) {}\n  enum Kind { A, B }\n}\n"
             "record Point(int x, int y) { int sum() { return x + y; } }\n",
             {"Cart": ("class", 1), "Cart.Cart": ("method", 2), "Cart.add": ("method", 3), "Cart.Kind": ("class", 4),
              "Point": ("class", 6), "Point.sum": ("method", 6)}),
    "csharp": ("namespace Shop {\n  public class Cart {\n    public void Add(int x) {}\n"
               "    public int Total { get; set; }\n  }\n  static class Util { static int Go() => 1; }\n}\n",
               {"Shop": ("class", 1), "Shop.Cart": ("class", 2), "Shop.Cart.Add": ("method", 3),
                "Shop.Util": ("class", 6), "Shop.Util.Go": ("method", 6)}),
    "kotlin": ("class Cart {\n  fun add(x: Int) {}\n}\nfun top() {}\nobject Registry { fun get() {} }\n",
               {"Cart": ("class", 1), "Cart.add": ("method", 2), "top": ("function", 4), "Registry": ("class", 5),
                "Registry.get": ("method", 5)}),
    "swift": ("class Cart {\n  func add(x: Int) {}\n  deinit { flush() }\n}\nprotocol Shape { func area() -> Double }\n",
              {"Cart": ("class", 1), "Cart.add": ("method", 2), "Cart.deinit": ("method", 3), "Shape": ("class", 5),
               "Shape.area": ("method", 5)}),
    "cpp": ("namespace shop {\nclass Cart {\n public:\n  void add(int x) { n += x; }\n};\nvoid go() {}\n"
            "struct Cart c;\n}\nint main() { return 0; }\n",
            {"shop": ("class", 1), "shop.Cart": ("class", 2), "shop.Cart.add": ("method", 4), "shop.go": ("function", 6),
             "main": ("function", 9)}),
    "typescript": ("namespace Api {\n  export function get(id: string) { return id; }\n}\n",
                   {"Api": ("class", 1), "Api.get": ("function", 2)}),
    "r": ("add <- function(x) {\n  x + 1\n}\nlapply(1:3, function(z) z)\n", {"add": ("function", 1)}),
    "julia": ("function add(x)\n  x + 1\nend\nstruct Cart\n  n::Int\nend\nmodule Shop\nfunction go() end\nend\n",
              {"add": ("function", 1), "Cart": ("class", 4), "Shop": ("class", 7), "Shop.go": ("function", 8)}),
    "perl": ("package Cart;\nsub add {\n  return 1;\n}\n1;\n", {"add": ("function", 2)}),
    "objc": ("@implementation Cart\n- (void)add:(int)x {}\n@end\n", {"Cart": ("class", 1), "Cart.add": ("method", 2)}),
}


@pytest.mark.parametrize("language", sorted(DEFINED))
def test_each_language_s_definitions_are_named_as_its_readers_name_them(language: str) -> None:
    """A Go method is `Server.Start` (its receiver's), a Rust impl's method `Cart.add` (not `impl Cart.add`), R's
    `add <- function(x)` is `add` (not `function`), Julia's and Perl's definitions are found at all; a
    namespace's or module's function a function; a constructor is a method, not a class (`constructor` holds
    `struct`), and Kotlin's `simple_identifier` is no class (it holds `impl`); enum members, C# accessors, a
    function's body, a C++ `struct Cart c;` and a Rust `mod tests;` (uses, not definitions) define nothing."""
    from helix_context.ingest.treesitter import parser_for

    if parser_for(language) is None:
        pytest.skip(f"no tree-sitter grammar for {language} in this install")
    source, want = DEFINED[language]
    assert {s.name: (s.kind, s.start_line) for s in find_symbols(source, "code", language)} == want


@pytest.fixture
def archive_genome(helix: HelixContextManager, tmp_path: Path) -> tuple[HelixContextManager, Path]:
    root = tmp_path / "lib"
    (root / "archive").mkdir(parents=True)
    (root / "archive" / "zipfile.py").write_text(ARCHIVE)
    (root / "archive" / "cart.js").write_text(TS_SOURCE)
    (root / "README.md").write_text("# lib\n\nReads zip archives and carts.\n")
    helix.ingest_path(root)
    return helix, root


def test_fingerprint_points_at_the_method_not_the_merged_gene(archive_genome) -> None:
    helix, root = archive_genome
    genes = helix.genome.genes_for_source(str(root / "archive" / "zipfile.py"))
    assert len(genes) <= 2, "the fixture must pack neighbours into one gene for this test to mean anything"
    top = helix.fingerprint("refuse unsafe member names that climb out of the target folder", max_results=3)[0]
    assert top["symbol"] == "ZipFile._extract_member" and top["kind"] == "method"
    assert (top["start_line"], top["end_line"]) == (19, 23)


def test_issue_with_traceback_finds_the_frame_function(archive_genome) -> None:
    helix, _ = archive_genome
    issue = textwrap.dedent('''\
        Extracting fails on a harmless archive

        ```
        Traceback (most recent call last):
          File "/home/u/app/run.py", line 3, in <module>
            z.extractall("out")
          File "/usr/lib/archive/zipfile.py", line 21, in _extract_member
            raise ArchiveError(f"unsafe member name {member!r}")
        archive.ArchiveError: unsafe member name 'a..b.txt'
        ```
        A name that merely contains two dots is not climbing out.
        ''')
    results = helix.fingerprint(issue, max_results=5)
    assert results[0]["symbol"] == "ZipFile._extract_member"
    assert results[0]["signals"].get("definition", 0) > 0


def test_group_by_file_ranks_files_with_their_best_symbols(archive_genome) -> None:
    helix, root = archive_genome
    files = helix.fingerprint("applyCoupon cart total", max_results=3, group_by="file")
    assert files[0]["source_id"] == str(root / "archive" / "cart.js")
    assert files[0]["symbols"][0]["symbol"] in {"applyCoupon", "Cart.total"}
    assert all({"symbol", "start_line", "end_line"} <= set(s) for s in files[0]["symbols"])
    with pytest.raises(ValueError, match="group_by"):
        helix.fingerprint("cart", group_by="folder")


def test_packet_items_name_their_symbol_over_http(archive_genome, server_factory) -> None:
    helix, root = archive_genome
    server = server_factory(helix.settings)
    with httpx.Client(base_url=server.url, timeout=30) as http:
        r = http.post("/context/packet", json={"query": "unsafe member name climbing out", "group_by": "file"})
        assert r.status_code == 200, r.text
        data = r.json()
        items = data["verified"] + data["stale_risk"]
        assert items[0]["symbol"] == "ZipFile._extract_member"
        assert items[0]["src"].endswith("zipfile.py:19-23")
        assert data["files"][0]["source_id"].endswith("zipfile.py")
        r = http.post("/fingerprint", json={"query": "is_zipfile", "group_by": "file"})
        assert r.status_code == 200 and r.json()["results"][0]["symbols"][0]["symbol"] == "is_zipfile"
        r = http.post("/fingerprint", json={"query": "x", "group_by": "folder"})
        assert r.status_code == 422 and "group_by" in r.text


@pytest.mark.parametrize("query", [
    "",
    "Traceback (most recent call last):\n  File \"/x/y.py\", line 1, in nowhere_at_all\nKeyError: 'q'\n",
    "```python\nfor i in range(10):\n    print(i)\n```",
    "word " * 200_000,
])
def test_whole_issue_bad_input_gets_a_clear_answer(archive_genome, server_factory, query: str) -> None:
    helix, _ = archive_genome
    server = server_factory(helix.settings)
    with httpx.Client(base_url=server.url, timeout=60) as http:
        r = http.post("/context/packet", json={"query": query})
    if not query.strip():  # nothing to look for: one clear 4xx that says what to send
        assert r.status_code == 400 and "query is empty" in r.json()["error"]["message"], r.text
        return
    assert r.status_code == 200, r.text
    assert isinstance(r.json()["known_empty"], bool)


def test_a_symbol_name_not_in_the_genome_is_known_empty(archive_genome) -> None:
    helix, _ = archive_genome
    packet = helix.packet("QuantumFluxCapacitor.recalibrate_warp_manifold", "edit")
    assert packet.known_empty and not packet.items


def _long_function() -> str:
    """A module whose one function is too long for one gene: storage cuts it, and its later genes hold
    no symbol's first line."""
    steps = "\n".join(f"    total_{i} = ledger.entry_{i}(amount, rate_{i})  # step {i} of the settlement" for i in range(60))
    return (f"def settle_accounts(ledger, amount):\n    \"\"\"Settle the ledger's accounts.\"\"\"\n{steps}\n"
            "    refund = ledger.reverse_chargeback(amount)  # a disputed card payment is paid back\n"
            "    return refund\n\n\ndef tiny_helper(x):\n    return x\n")


def test_a_function_cut_into_several_genes_is_one_pointer_named_for_it(helix: HelixContextManager,
                                                                       tmp_path: Path) -> None:
    path = tmp_path / "books" / "settle.py"
    path.parent.mkdir()
    path.write_text(_long_function())
    helix.ingest_path(path.parent)
    genes = helix.genome.genes_for_source(str(path))
    assert len(genes) >= 3, "the fixture must cut the function into several genes for this test to mean anything"
    end = next(i for i, line in enumerate(path.read_text().split("\n"), 1) if line.startswith("    return refund"))
    found = helix.fingerprint("reverse a disputed card payment chargeback", max_results=5)
    assert (found[0]["symbol"], found[0]["start_line"], found[0]["end_line"]) == ("settle_accounts", 1, end)
    spans = [(p["source_id"], p["start_line"], p["end_line"]) for p in found]
    assert len(spans) == len(set(spans)), f"one function, one pointer: {spans}"
    assert not any(p["kind"] is None and 1 < p["start_line"] <= end for p in found), found



def test_the_packet_lists_a_function_cut_into_several_genes_once(helix: HelixContextManager, tmp_path: Path) -> None:
    """/context/packet lists genes: it used to give the function's pointer and then its later genes again as
    nameless items inside its lines (one verified, the function itself not). Now one item, verified by the words
    of all its lines; a neighbour that is a definition of its own stays an item of its own."""
    path = tmp_path / "books" / "settle.py"
    path.parent.mkdir()
    path.write_text(_long_function())
    helix.ingest_path(path.parent)
    end = next(i for i, line in enumerate(path.read_text().split("\n"), 1) if line.startswith("    return refund"))
    packet = helix.packet("reverse a disputed card payment chargeback in settle_accounts")
    items = [(i.symbol, i.start_line, i.end_line, i.verdict) for i in packet.items]
    assert items[0] == ("settle_accounts", 1, end, "verified"), items
    assert not any(1 <= first <= last <= end for _, first, last, _ in items[1:]), items
    assert packet.notes[0].startswith(f"{len(packet.verified)} verified, "), packet.notes

RETRY = textwrap.dedent('''\
    """Fetching and uploading with retries."""
    import time

    MAX_RETRIES = 5
    BACKOFF_SECONDS = 0.5


    def fetch(session, url):
        for attempt in range(MAX_RETRIES):
            response = session.get(url)
            if response.ok:
                return response
            time.sleep(BACKOFF_SECONDS * 2 ** attempt)
        raise TimeoutError(f"{url}: no answer after {MAX_RETRIES} tries")


    def upload(session, url, body):
        for attempt in range(MAX_RETRIES):
            if session.put(url, body).ok:
                return
            time.sleep(BACKOFF_SECONDS)
        raise TimeoutError(f"{url}: not stored after {MAX_RETRIES} tries")
    ''')


@pytest.mark.parametrize("query", ["MAX_RETRIES", "where is MAX_RETRIES set?"])
def test_a_constant_s_name_points_at_the_line_that_sets_it(helix: HelixContextManager, tmp_path: Path,
                                                            query: str) -> None:
    """Asked for a module constant, the first pointer is its assignment, not the functions that use it."""
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "retry.py").write_text(RETRY)
    helix.ingest_path(tmp_path / "net")
    top = helix.fingerprint(query, max_results=3)[0]
    assert (top["symbol"], top["kind"], top["start_line"], top["end_line"]) == ("MAX_RETRIES", "constant", 4, 4)


def test_a_genome_from_before_constants_gets_them_on_its_next_ingest(settings, tmp_path: Path) -> None:
    """Upgrading: opening an older genome marks its files of languages with constants for one re-parse (not its
    other files), and the next ingest of the folder gives them their constants without new genes."""
    from helix_context.genome.schema import V8_CONSTANTS

    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "retry.py").write_text(RETRY)
    (tmp_path / "net" / "README.md").write_text("# net\n\nRetries for fetching and uploading.\n")
    (tmp_path / "net" / "ports.go").write_text("package net\n\nconst DefaultPort = 8080\n")
    helix = older_genome(settings, tmp_path / "net", V8_CONSTANTS, "DELETE FROM symbols WHERE kind = 'constant'")
    try:
        reingest_marked(helix, tmp_path / "net", {"retry.py", "ports.go"})
        top = helix.fingerprint("MAX_RETRIES", max_results=3)[0]
        assert (top["symbol"], top["kind"], top["start_line"]) == ("MAX_RETRIES", "constant", 4)
    finally:
        helix.close()

DECLARED = {
    "typescript": ('export const MAX_RETRIES = 5;\nconst config = { retries: 1 };\n'
                   'export const fetchUser = async (id: string): Promise<string> => {\n  return get(id);\n};\n'
                   'let COUNTER = 0;\nclass Cart {\n  static LIMIT = 3;\n  total = 0;\n'
                   '  handle = () => { this.total += 1; };\n}\nfunction outer() { const LOCAL_MAX = 3; return LOCAL_MAX; }\n',
                   {"MAX_RETRIES": ("constant", 1, 1), "fetchUser": ("function", 3, 5), "Cart": ("class", 7, 11),
                    "Cart.LIMIT": ("constant", 8, 8), "Cart.handle": ("method", 10, 10), "outer": ("function", 12, 12)}),
    "go": ("package main\n\nconst MaxRetries = 5\n\nconst (\n\tA = 1\n\tB = 2\n)\n\nvar x = 3\n\n"
           "func f() int {\n\tconst local = 1\n\treturn local\n}\n",
           {"MaxRetries": ("constant", 3, 3), "A": ("constant", 6, 6), "B": ("constant", 7, 7),
            "f": ("function", 12, 15)}),
    "rust": ('const MAX: u32 = 5;\nstatic NAME: &str = "x";\nfn f() -> u8 {\n    const IN: u8 = 1;\n    IN\n}\n',
             {"MAX": ("constant", 1, 1), "NAME": ("constant", 2, 2), "f": ("function", 3, 6)}),
    "java": ("class A {\n  public static final int MAX = 5;\n  static int count = 0;\n  private int y = 2;\n"
             "  void f() { final int LOCAL = 1; }\n}\n",
             {"A": ("class", 1, 6), "A.MAX": ("constant", 2, 2), "A.f": ("method", 5, 5)}),
    # CommonJS: functions a module assigns to `exports` and to a constructor's prototype
    "javascript": ("exports.handler = async (event) => {\n  return respond(event);\n};\n"
                   "module.exports.parse = function (text) { return text; };\n"
                   "function Cart() { this.items = []; this.total = function () {}; }\n"
                   "Cart.prototype.add = function (item) {\n  this.items.push(item);\n};\n"
                   "Cart.create = () => new Cart();\nhandlers[name] = function () {};\nCart.LIMIT = 5;\n"
                   "module.exports.Store = class extends Base {\n  save(cart) { return put(cart); }\n};\n"
                   "module.exports = { format(cart) { return String(cart); }, total: (cart) => 0, size: 3 };\n"
                   "const api = { get(id) { return fetch(id); }, post: (body) => send(body) };\n"
                   "export default { methods: { save() { return 1; } } };\n",
                   {"handler": ("function", 1, 3), "parse": ("function", 4, 4), "Cart": ("function", 5, 5),
                    "Cart.add": ("method", 6, 8), "Cart.create": ("method", 9, 9), "Store": ("class", 12, 14),
                    "Store.save": ("method", 13, 13), "format": ("function", 15, 15), "total": ("function", 15, 15),
                    "api.get": ("method", 16, 16), "api.post": ("method", 16, 16), "methods.save": ("method", 17, 17)}),
    "ruby": ("MAX = 5\nclass A\n  LIMIT = 3\n  def f\n    1\n  end\nend\n",
             {"MAX": ("constant", 1, 1), "A": ("class", 2, 7), "A.LIMIT": ("constant", 3, 3), "A.f": ("method", 4, 6)}),
}


@pytest.mark.parametrize("language", sorted(DECLARED))
def test_tree_sitter_languages_name_their_constants_and_functions_bound_to_names(language: str) -> None:
    """A function bound to a name (`const fetchUser = async () => ...`), to an object's key, or assigned to a
    property at a module's top (`exports.handler = ...`, `Cart.prototype.add = ...`) is a function or method,
    and an exported class is a class with its methods (an object literal is none: `const api = { get() {} }`
    defines the method `api.get`); a module's or class's constants are constants (Go and
    Rust `const`, capitalised JS/TS `const`, Java `static final`, Ruby's); a function's own locals, `let`,
    mutable fields and a computed property (`handlers[name] = ...`) are neither."""
    source, want = DECLARED[language]
    got = {s.name: (s.kind, s.start_line, s.end_line) for s in find_symbols(source, "code", language)}
    if not got:
        pytest.skip(f"no tree-sitter grammar for {language} in this install")
    assert got == want


CART_VUE = """<template>
  <button @click="addItem(sku)">Add</button>
</template>

<script setup lang="ts">
import { ref } from 'vue'
const count = ref(0)
function addItem(sku: string) {
  count.value++
}
</script>

<style scoped>
button { color: red; }
</style>
"""


def test_the_script_of_a_vue_or_svelte_component_or_an_html_page_has_its_symbols_at_their_lines(
        helix: HelixContextManager, tmp_path: Path) -> None:
    """A component's code is in its <script> blocks: read as JS/TS (TypeScript where `lang="ts"` says so), its
    functions point at their lines in the component file; the template and styles define nothing."""
    got = {s.name: (s.kind, s.start_line, s.end_line) for s in find_symbols(CART_VUE, "code", "vue")}
    if not got:
        pytest.skip("no tree-sitter grammar for typescript in this install")
    assert got == {"addItem": ("function", 8, 10)}
    svelte = "<script>\n  export let name;\n  function greet() { alert(name); }\n</script>\n<h1>Hello {name}</h1>\n"
    assert [(s.name, s.start_line) for s in find_symbols(svelte, "code", "svelte")] == [("greet", 3)]
    page = "<html><body><script src='app.js'></script>\n<script>function init() {}\n</script></body></html>\n"
    assert [(s.name, s.start_line) for s in find_symbols(page, "code", "html")] == [("init", 2)]
    assert find_symbols("<html><body><p>function() {}</p></body></html>\n", "code", "html") == []

    (tmp_path / "web").mkdir()
    (tmp_path / "web" / "Cart.vue").write_text(CART_VUE)
    helix.ingest_path(tmp_path / "web")
    top = helix.fingerprint("addItem", max_results=3)[0]
    assert (top["symbol"], top["kind"], top["start_line"], top["end_line"]) == ("addItem", "function", 8, 10)


def test_a_typescript_function_bound_to_a_name_and_a_constant_are_pointed_at(helix: HelixContextManager,
                                                                             tmp_path: Path) -> None:
    source = DECLARED["typescript"][0]
    if not find_symbols(source, "code", "typescript"):
        pytest.skip("no tree-sitter grammar for typescript in this install")
    (tmp_path / "web").mkdir()
    (tmp_path / "web" / "users.ts").write_text(source)
    helix.ingest_path(tmp_path / "web")
    top = helix.fingerprint("fetchUser", max_results=3)[0]
    assert (top["symbol"], top["kind"], top["start_line"], top["end_line"]) == ("fetchUser", "function", 3, 5)
    top = helix.fingerprint("MAX_RETRIES", max_results=3)[0]
    assert (top["symbol"], top["kind"], top["start_line"]) == ("MAX_RETRIES", "constant", 1)


def test_an_older_genome_gets_the_corrected_tree_sitter_symbols_on_its_next_ingest(settings, tmp_path: Path) -> None:
    """Upgrading: a genome indexed before the tree-sitter symbols were corrected marks its files of those languages
    (and, for V13's comment lines, its Python files) for one re-parse; the next ingest gives `exports.handler` its
    pointer and names a Go method for its receiver, without new genes."""
    from helix_context.genome.schema import V9_TREE_SITTER_SYMBOLS

    source = DECLARED["javascript"][0]
    if not find_symbols(source, "code", "javascript") or not find_symbols(DEFINED["go"][0], "code", "go"):
        pytest.skip("no tree-sitter grammar for javascript or go in this install")
    (tmp_path / "api").mkdir()
    (tmp_path / "api" / "lambda.js").write_text(source)
    (tmp_path / "api" / "server.go").write_text(DEFINED["go"][0])
    (tmp_path / "api" / "retry.py").write_text(RETRY)
    helix = older_genome(settings, tmp_path / "api", V9_TREE_SITTER_SYMBOLS,
                          "DELETE FROM symbols WHERE path LIKE '%.js' AND name <> 'Cart'",
                          "UPDATE symbols SET name = 'Start', kind = 'function' WHERE name = 'Server.Start'")
    try:
        reingest_marked(helix, tmp_path / "api", {"lambda.js", "server.go", "retry.py"})
        top = helix.fingerprint("where is the lambda handler", max_results=3)[0]
        assert (top["symbol"], top["kind"], top["start_line"], top["end_line"]) == ("handler", "function", 1, 3)
        top = helix.fingerprint("Cart.add", max_results=3)[0]
        assert (top["symbol"], top["kind"], top["start_line"], top["end_line"]) == ("Cart.add", "method", 6, 8)
        top = helix.fingerprint("Server.Start", max_results=3)[0]
        assert (top["symbol"], top["kind"], top["start_line"]) == ("Server.Start", "method", 7)
    finally:
        helix.close()
