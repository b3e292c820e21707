"""How code is ranked: symbol names, test files, traceback frames, code weights and file mass.

Each test builds a small real tree, ingests it into a real genome (no embeddings, so the
lexical evidence under test decides) and asks what a user would ask.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from helix_context import HelixContextManager
from helix_context.config import Settings
from helix_context.models import Gene, Pointer
from helix_context.retrieve.fusion import fuse_weighted
from helix_context.genome.symbols_sql import SymbolRow
from helix_context.models import ScoredGene
from helix_context.retrieve.locate import (LocateWeights, _weighed_definitions, file_mass, is_test_path,
                                           rank_files, score_pointers)
from helix_context.retrieve.query import extract

ESCAPES = textwrap.dedent('''\
    """Escaping helpers for markup text."""


    def unescape(data, entities={}):
        """Turn &amp;, &lt; and &gt; back into characters in a string of data."""
        data = data.replace("&lt;", "<").replace("&gt;", ">")
        return data.replace("&amp;", "&")


    def escape(data, entities={}):
        """Replace ampersands and angle brackets in a string of data with entities."""
        data = data.replace("&", "&amp;")
        return data.replace(">", "&gt;").replace("<", "&lt;")
    ''')


@pytest.fixture
def lexical(settings: Settings) -> HelixContextManager:
    manager = HelixContextManager(settings.replace(embedding={"enabled": False}, ner={"enabled": False}))
    yield manager
    manager.close()


def test_the_symbol_named_for_the_task_wins_over_its_neighbour(lexical: HelixContextManager, tmp_path: Path) -> None:
    """`escape` and `unescape` share one gene and nearly every word; the query's verb names one of them."""
    (tmp_path / "saxutils.py").write_text(ESCAPES)
    lexical.ingest_path(tmp_path)
    top = lexical.fingerprint("escape ampersands and angle brackets in markup text", max_results=3)
    assert top[0]["symbol"] == "escape"
    assert top[0]["signals"].get("name", 0) > 0
    assert next(r for r in top if r["symbol"] == "unescape")["signals"].get("name", 0) == 0


def test_code_outranks_its_tests_unless_the_question_is_about_tests(lexical: HelixContextManager,
                                                                    tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "src" / "headers.py").write_text(textwrap.dedent('''\
        def split_header_list(value):
            """Split a comma separated header value, keeping quoted strings whole."""
            return [part.strip() for part in value.split(",")]
        '''))
    (tmp_path / "tests" / "test_headers.py").write_text(textwrap.dedent('''\
        from src.headers import split_header_list


        def test_split_header_list_keeps_quoted_commas():
            """Quoted commas inside quoted strings of a comma separated header value."""
            assert split_header_list('a, "b, c"') == ["a", '"b, c"']
            assert split_header_list('"x, y", z') == ['"x, y"', "z"]
        '''))
    for i in range(8):  # other code, so that word rarity means something
        (tmp_path / "src" / f"util{i}.py").write_text(f"def convert_{i}(value):\n    return int(value) + {i}\n")
    lexical.ingest_path(tmp_path)
    issue = "a comma separated header value is split apart at quoted commas inside quoted strings"
    top = lexical.fingerprint(issue, max_results=4)
    assert top[0]["source_id"].endswith("src/headers.py")
    asked = lexical.fingerprint("which test checks that " + issue, max_results=4)
    assert asked[0]["source_id"].endswith("test_headers.py"), "a question about tests takes test files at full weight"


@pytest.mark.parametrize("path, is_test", [
    ("pkg/tests/test_io.py", True), ("pkg/io_test.go", True), ("web/app.spec.ts", True), ("conftest.py", True),
    ("pkg/testing.py", False), ("pkg/contest.py", False), ("src/attestation/sign.py", False),
])
def test_test_files_are_told_by_shared_conventions(path: str, is_test: bool) -> None:
    assert is_test_path(path) is is_test


# one failing call as each tool prints its traceback: users paste all of them
TRACEBACKS = {
    "python": '''\
        Traceback (most recent call last):
          File "<string>", line 1, in <module>
          File "/opt/lib/pkg/numbers.py", line 4, in __new__
            num = num.replace(" ", "")
        TypeError: a bytes-like object is required''',
    "pytest": '''\
        ```
        pkg/test_pickle.py:7: in test_roundtrip
            load(data)
        C:\\venv\\lib\\pkg\\numbers.py:4: in __new__
            num = num.replace(" ", "")
        E   TypeError: a bytes-like object is required
        ```''',
    "ipython 7": '''\
        <ipython-input-3-e2060d5eec73> in <module>
        ----> 1 load(data)

        ~/venv/lib/python3.8/site-packages/pkg/numbers.py in __new__(cls, num, dps)
              3         if isinstance(num, str):
        ----> 4             num = num.replace(" ", "")

        TypeError: a bytes-like object is required''',
    "ipython 8": '''\
        Cell In[3], line 1
        ----> 1 load(data)

        File ~/venv/lib/python3.11/site-packages/pkg/numbers.py:4, in Float.__new__(cls, num, dps)
              3 if isinstance(num, str):
        ----> 4     num = num.replace(" ", "")

        TypeError: a bytes-like object is required''',
}


@pytest.mark.parametrize("printed_by", TRACEBACKS)
def test_a_traceback_frame_pins_a_common_method_name_to_its_file(lexical: HelixContextManager, tmp_path: Path,
                                                                 printed_by: str) -> None:
    """`__new__` is defined in 14 modules (too common to locate by name); the frame's file names the one,
    however the traceback was printed."""
    for i in range(13):
        (tmp_path / f"kind{i}.py").write_text(f"class Kind{i}:\n    def __new__(cls, value):\n"
                                              f"        return object.__new__(cls)\n")
    (tmp_path / "numbers.py").write_text(textwrap.dedent('''\
        class Float:
            def __new__(cls, num, dps=None):
                if isinstance(num, str):
                    num = num.replace(" ", "")
                return object.__new__(cls)
        '''))
    lexical.ingest_path(tmp_path)
    issue = "Unpickling fails for a float written by another version\n\n" + textwrap.dedent(TRACEBACKS[printed_by])
    top = lexical.fingerprint(issue, max_results=3)
    assert top[0]["source_id"].endswith("numbers.py") and top[0]["symbol"] == "Float.__new__"
    assert top[0]["signals"].get("definition", 0) > 0


def test_prose_that_mentions_a_file_and_a_function_is_no_frame() -> None:
    frames = extract("The parser lives in util.py in our tree.\nsee util.py in detail\n"
                     "util.py: in parse the loop never ends\n" + textwrap.dedent(TRACEBACKS["ipython 7"])).frames
    assert frames == (("numbers.py", "__new__"),)


def test_code_genes_are_fused_with_the_code_weights() -> None:
    per_signal = {"fts": {1: 2.0, 2: 2.0}, "dense": {1: 0.6, 2: 0.6}}
    fused = fuse_weighted(per_signal, {"fts": 1.0, "dense": 1.0}, code_rows={2},
                          code_weights={"fts": 1.0, "dense": 0.0})
    assert fused[1][1].keys() == {"fts", "dense"}
    assert fused[2][1].keys() == {"fts"} and fused[2][0] < fused[1][0]


def _pointer(path: str, score: float) -> Pointer:
    gene = Gene(gene_id=f"{path}:{score}", content="", content_type="code", language="python", source_path=path,
                project=None, start_line=1, end_line=2)
    return Pointer(gene, path, f"f{score}", "function", int(score * 100), int(score * 100) + 1, score)


def test_a_file_whose_many_genes_rank_well_beats_one_stray_strong_gene() -> None:
    pointers = [_pointer("stray.py", 1.0), _pointer("module.py", 0.8)]
    ranked = [("stray.py", 1.0)] + [("module.py", 0.9 - 0.05 * i) for i in range(8)]
    mass = file_mass(ranked)
    assert mass["module.py"] == 1.0 and mass["stray.py"] < 1.0
    assert rank_files(pointers)[0].path == "stray.py"  # pointers alone
    assert rank_files(pointers, mass=mass, mass_weight=1.5)[0].path == "module.py"
    tested = file_mass(ranked + [("tests/test_module.py", 0.95)] * 3, tests_factor=0.3)
    assert tested["tests/test_module.py"] < file_mass(ranked + [("tests/test_module.py", 0.95)] * 3)["tests/test_module.py"]


def test_a_name_used_as_code_prefers_definitions_spelled_the_same(lexical: HelixContextManager,
                                                                  tmp_path: Path) -> None:
    """`sin(x)` in a question is the function `sin`, not a rule helper `Sin` that differs only in case."""
    (tmp_path / "functions").mkdir()
    (tmp_path / "rules").mkdir()
    (tmp_path / "functions" / "trig.py").write_text(textwrap.dedent('''\
        import math


        def sin(x):
            return math.sin(x)
        '''))
    (tmp_path / "rules" / "helpers.py").write_text(textwrap.dedent('''\
        def Sin(u):
            """A sin rule: rewrite sin of u as sin of the reduced u; sin terms first."""
            return ("sin", u)
        '''))
    for i in range(6):  # other code, so that word rarity means something
        (tmp_path / "functions" / f"util{i}.py").write_text(f"def convert_{i}(value):\n    return int(value) + {i}\n")
    lexical.ingest_path(tmp_path)
    top = lexical.fingerprint("calling sin(x) gives the wrong sign for negative angles", max_results=2)
    assert top[0]["source_id"].endswith("trig.py") and top[0]["symbol"] == "sin", [r["symbol"] for r in top]


FRAMED_ISSUE = textwrap.dedent('''\
    Comparing a record with an object evaluates the repr of that object

    ```
    Traceback (most recent call last):
      File "demo.py", line 4, in <module>
        record == Other()
      File "/src/app/records.py", line 9, in __eq__
        other = coerce(other)
      File "/src/app/coerce.py", line 2, in coerce
        return parse_input(str(value))
      File "/src/app/parsing.py", line 6, in parse_input
        return evaluate(tokens(text))
    AttributeError: 'Symbol' object has no attribute 'y'
    ```
    ''')


def test_the_files_a_traceback_runs_through_come_before_files_that_only_share_its_words() -> None:
    """The outer frame (`Record.__eq__`, where such a fix usually goes) has only its frame for evidence; four
    modules in no frame each hold two functions that match the issue's meaning fairly and fill the wider
    ranking a little more (swe-dev's sympy-18057, in small). A frame says where the code broke, which
    outweighs what the words suggest: the three files the traceback runs through come first."""
    qs = extract(FRAMED_ISSUE)
    rows = {name: SymbolRow(n, f"/src/app/{file}", n, name, "function", 1, 9)
            for n, (file, name) in enumerate([("records.py", "Record.__eq__"), ("coerce.py", "coerce"),
                                              ("parsing.py", "parse_input")], 1)}
    framed = {name.rsplit(".", 1)[-1].lower(): [row] for name, row in rows.items()}
    defs = _weighed_definitions(qs, {}, framed)
    genes = {n: Gene(gene_id=f"g{n}", content="", content_type="code", language="python", source_path=path,
                     project=None, start_line=1, end_line=20, rowid=n)
             for n, path in enumerate(["/src/app/records.py", "/src/app/coerce.py", "/src/app/parsing.py"]
                                      + [f"/src/app/topic{i}.py" for i in range(4)], 1)}
    fused = {1: 0.41, 2: 0.54, 3: 1.0, 4: 0.27, 5: 0.27, 6: 0.27, 7: 0.27}
    ranked = [ScoredGene(genes[n], score) for n, score in sorted(fused.items(), key=lambda kv: -kv[1])]
    spans = {1: [(rows["Record.__eq__"], 1, 9, 0.0, 0.0, False)], 2: [(rows["coerce"], 1, 9, 0.1, 0.0, False)],
             3: [(rows["parse_input"], 1, 9, 0.6, 0.0, False)]}
    span_dense = {(3, 1): 0.6}
    for n in range(4, 8):  # two functions each, fair on meaning, no word of note
        spans[n] = [(None, 1, 9, 0.03, 0.0, False), (None, 11, 19, 0.0, 0.0, False)]
        span_dense |= {(n, 1): 0.57, (n, 11): 0.56}
    weights = LocateWeights(name=0.3, tests=0.3, mass=1.5, dense=1.0)  # helix.toml's, for code
    pointers = score_pointers(ranked, spans, defs, weights, span_dense=span_dense)
    mass = {"/src/app/records.py": 0.23, "/src/app/coerce.py": 0.43, "/src/app/parsing.py": 1.0} \
        | {f"/src/app/topic{i}.py": 0.25 for i in range(4)}
    files = [hit.path.rsplit("/", 1)[-1] for hit in rank_files(pointers, mass=mass, mass_weight=weights.mass)]
    assert set(files[:3]) == {"records.py", "coerce.py", "parsing.py"}, files
