"""Python documented by comments: the `#` block right above a definition is part of it.

Much Python says what a function does in a comment block above its `def` instead of a docstring.
The chunker always kept that block with its definition, but the symbol finder started the
function at its `def`, so a question that paraphrases the comment got nothing from it: the
pointer's own words and its span's vector saw the code alone, and a pointer ended up at a
neighbour. Both now follow one rule (ingest/py_layout.comment_block_start). Each test uses the
real ingest, a real SQLite genome and the real MiniLM model.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from helix_context import HelixContextManager
from helix_context.config import Settings
from helix_context.ingest.chunk import chunk_text
from helix_context.ingest.symbols import python_symbols

from tests.retrieve.older_genome import older_genome, reingest_marked
from tests.retrieve.packed_genes import ingest_files, symbols_sharing_gene

# three small helpers stored as one gene; what each one is for is said only by its comment
HELPERS = textwrap.dedent('''\
    import time


    # Drop cached thumbnails older than a week so the disk does not fill up.
    def sweep(store, now):
        for key, stamp in list(store.items()):
            if now - stamp > 604800:
                del store[key]


    # Turn a byte count into a short human string such as 3.2 MB.
    def fmt(n):
        for unit in ("B", "KB", "MB", "GB"):
            if n < 1024:
                return f"{n:.1f} {unit}"
            n /= 1024
        return f"{n:.1f} TB"


    # Call a flaky network function again a few times, waiting longer after each failure.
    @staticmethod
    def again(call, tries=5):
        for attempt in range(tries):
            try:
                return call()
            except OSError:
                time.sleep(2 ** attempt)
        return call()
    ''')


def test_a_comment_block_above_a_definition_is_in_its_lines() -> None:
    """Right above, at the definition's indentation, above its decorators too; not across a blank line, not a deeper
    comment ending the block before, not a file header longer than a doc comment, not a `#` inside a string."""
    source = textwrap.dedent('''\
        # Helpers for the cache.
        # Sweep it often.
        @cache
        def sweep():
            return 1

        # a section title, then a blank line

        def plain():
            x = """
        # not a comment
        """
            return x
            # the end of plain, indented deeper

        class Store:
            # Empty the store and reset its counters.
            def reset(self):
                pass
        ''')
    got = {s.name: (s.start_line, s.end_line) for s in python_symbols(source)}
    assert got == {"sweep": (1, 5), "plain": (9, 13), "Store": (16, 19), "Store.reset": (17, 19)}

    header = "\n".join(f"# licence line {i}" for i in range(80)) + "\ndef first():\n    return 1\n"
    assert [(s.name, s.start_line) for s in python_symbols(header)] == [("first", 81)]


def test_a_definitions_chunk_and_its_symbol_start_on_the_same_line() -> None:
    """The chunker's rule and the symbol finder's are one: where a function is stored as a gene of its own, its first
    line is its symbol's first line, the comment included."""
    body = "\n".join(f"    total += {i}" for i in range(60))
    source = (f"import os\n\n\n# Add up the first numbers the slow way.\ndef slow_sum():\n    total = 0\n{body}\n"
              f"    return total\n\n\n# Add them up again.\ndef slow_sum_again():\n    total = 0\n{body}\n    return total\n")
    starts = {s.name: s.start_line for s in python_symbols(source)}
    chunks = chunk_text(source, "code", "python")
    gene_starts = {c.symbol: c.start_line for c in chunks if c.symbol}
    assert starts == {"slow_sum": 4, "slow_sum_again": 70}
    assert gene_starts == starts


@pytest.mark.parametrize(("question", "name", "first"), [
    ("how are old cached images cleaned up", "sweep", 4),
    ("show a file size in a readable form", "fmt", 11),
    ("retry an unreliable request with exponential backoff", "again", 20),
])
def test_a_question_that_paraphrases_a_comment_finds_its_function(dense: HelixContextManager, tmp_path: Path,
                                                                  question: str, name: str, first: int) -> None:
    ingest_files(dense, tmp_path, {"helpers.py": HELPERS})
    assert symbols_sharing_gene(dense, "sweep") == 3, "the three helpers share one stored gene (else this test shows nothing)"
    top = dense.fingerprint(question, max_results=3)[0]
    assert (top["symbol"], top["start_line"]) == (name, first), top


def test_an_older_genome_gets_its_python_comments_on_the_next_ingest(settings: Settings, tmp_path: Path) -> None:
    """Upgrading: a genome indexed before marks its Python files (only those) for one re-parse; the next ingest
    starts each documented function at its comment, without new genes."""
    from helix_context.genome.schema import V13_PYTHON_COMMENTS

    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "helpers.py").write_text(HELPERS)
    (tmp_path / "app" / "main.rs").write_text("fn main() {\n    println!(\"hi\");\n}\n")
    # as an older Helix left it: each Python symbol starting at its def or decorator
    helix = older_genome(settings.replace(ner={"enabled": False}), tmp_path / "app", V13_PYTHON_COMMENTS,
                         "UPDATE symbols SET start_line = start_line + 1 WHERE path LIKE '%.py'")
    try:
        assert helix.genome.conn.execute("SELECT start_line FROM symbols WHERE name = 'sweep'").fetchone()[0] == 5
        reingest_marked(helix, tmp_path / "app", {"helpers.py"})
        lines = dict(helix.genome.conn.execute("SELECT name, start_line FROM symbols WHERE path LIKE '%helpers.py'"))
        assert lines == {"sweep": 4, "fmt": 11, "again": 20}
    finally:
        helix.close()
