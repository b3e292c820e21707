"""What one question reads is read once: a traceback's functions in one statement, the candidates'
code-ness once per generation, an issue's words without the regex where the text is ASCII; the same answers."""

from __future__ import annotations

import hashlib
import random
import re
from collections import Counter
from pathlib import Path

import pytest

from helix_context.genome import lexicon
from helix_context.genome.store import FileRecord, Genome, SourceWrite
from helix_context.genome.symbols_sql import SymbolRow
from helix_context.models import Gene, Provenance, Symbol
from helix_context.retrieve import query


def code_gene(path: str, names: list[str], content_type: str = "code") -> Gene:
    content = "".join(f"def {n}():\n    return {i}\n" for i, n in enumerate(names)) + f"# {path}\n"
    symbols = tuple(Symbol(n, "function", 2 * i + 1, 2 * i + 2) for i, n in enumerate(names))
    return Gene(gene_id=hashlib.sha256(content.encode()).hexdigest()[:32], content=content, content_type=content_type,
                language="python", source_path=path, project="demo", start_line=1, end_line=2 * len(names) + 1,
                symbols=symbols, provenance=Provenance(observed_at=1.0, last_verified_at=1.0))


def write(g: Genome, *genes: Gene) -> None:
    g.replace_sources([SourceWrite(FileRecord(x.source_path or "", "demo", 10, 1, "h"), x.source_path, [(x, None)])
                       for x in genes])


@pytest.fixture()
def genome(tmp_path: Path) -> Genome:
    """`run` defined in 15 files (too common to name), `load` in 2, `save` in 1."""
    g = Genome(tmp_path / "g.db")
    write(g, *[code_gene(f"pkg/m{i}.py", ["run"] + (["load"] if i < 2 else []) + (["save"] if i == 3 else []))
               for i in range(15)])
    return g


def statements(g: Genome) -> list[str]:
    seen: list[str] = []
    g.conn.set_trace_callback(seen.append)
    return seen


def test_a_traceback_s_functions_are_read_once_with_the_same_definitions(genome: Genome) -> None:
    frames = [("m3.py", "run"), ("m1.py", "load"), ("m3.py", "save"), ("m9.py", "absent"), ("M1.py", "load")]
    names = ["run", "load", "save", "absent", "other"]
    columns = "id, path, gene, name, kind, start_line, end_line"

    def rows(sql: str, *args: object) -> list[SymbolRow]:
        return [SymbolRow(*r) for r in genome.conn.execute(f"SELECT {columns} FROM symbols WHERE {sql}", args)]

    # what one statement per name and per frame read (the reads this replaces)
    one_by_one = {n: rows("leaf = ? LIMIT ?", n, 13) for n in names}
    by_frame: dict[str, list[SymbolRow]] = {}
    for tail, fn in dict.fromkeys((t.lower(), f) for t, f in frames):
        by_frame.setdefault(fn, []).extend(r for r in rows("leaf = ?", fn) if r.path.rsplit("/", 1)[-1] == tail)
    seen = statements(genome)
    named, framed = genome.start_named_and_framed(names, 12, frames)()
    assert named == {n: r for n, r in one_by_one.items() if r} and len(named["run"]) == 13
    assert framed == {fn: r for fn, r in by_frame.items() if r} and set(framed) == {"run", "load", "save"}
    # one statement for the frames' functions, one for the name no frame has ("other")
    assert len([s for s in seen if s.startswith("SELECT")]) == 2


def test_code_rows_are_read_once_and_again_after_the_genome_changes(genome: Genome,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    memory = lexicon.CodeRows(genome.generation)
    asked: list[list[int]] = []
    real = genome.code_rowids
    monkeypatch.setattr(genome, "code_rowids", lambda rowids: asked.append(list(rowids)) or real(rowids))
    last = max(r for (r,) in genome.conn.execute("SELECT id FROM genes"))
    assert memory.get(genome, [1, 2, last]) == {1, 2, last}
    assert memory.get(genome, [last, 2]) == {2, last} and asked == [[1, 2, last]]  # remembered
    # the last gene's file is emptied, and a new file of prose takes the freed rowid (SQLite reuses the highest)
    genome.replace_sources([SourceWrite(FileRecord("pkg/m14.py", "demo", 10, 2, "h2"), "pkg/m14.py", [])])
    write(genome, code_gene("pkg/notes.md", ["notes"], content_type="text"))
    assert genome.code_rowids([last]) == set() and genome.genes_by_rowid([last])[last].content_type == "text"
    assert memory.get(genome, [last, 2]) == {2} and asked[-1] == [last, 2]


def test_an_issue_s_words_are_the_regex_s_words(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(3)
    for alphabet in ("ab'_ .-x1\n9Z", "ab'’_é .x1\n", "a'b'c d''e"):
        for _ in range(2000):
            text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(40)))
            expected = Counter(query._WORD_RE.findall(text))
            assert list(query._spellings(text).items()) == list(expected.items()), text
    text = "Don't retry: `fetch_all('a', b)` fails — naïve café 3.14 isn't it's"
    assert list(query._spellings(text).items()) == list(Counter(re.findall(r"[^\W_]+(?:['’][^\W_]+)?", text)).items())


def _regex_code_blocks(text: str) -> tuple[tuple[str, ...], str]:
    """What `_CODE_BLOCK_RE.finditer` splits the text into (the reading `_code_blocks` replaces)."""
    blocks, rest, at = [], [], 0
    for match in query._CODE_BLOCK_RE.finditer(text):
        blocks.append(match.group(0))
        rest.append(text[at:match.start()])
        at = match.end()
    rest.append(text[at:])
    return tuple(blocks), " ".join(rest)


def test_an_issue_s_code_blocks_are_the_regex_s_blocks() -> None:
    rng = random.Random(5)
    for alphabet in ("`\n> .\ta", "``\n\n>>> ... a\t", "`a\n    \t"):
        for _ in range(3000):
            text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(40)))
            assert query._code_blocks.__wrapped__(text) == _regex_code_blocks(text), repr(text)
    issue = ("Title\n\nprose `x`\n```\nTraceback (most recent call last):\n  File \"a.py\", line 1, in f\n```\n"
             "more prose\n```python\n>>> f()\n```\nafter\n>>> g()\n    indented\nend")
    assert query._code_blocks.__wrapped__(issue) == _regex_code_blocks(issue)
    assert query._code_blocks.__wrapped__(issue)[0][-1] == ">>> g()\n    indented\nend"  # a prompt: to the end
