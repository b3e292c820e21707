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
    frames = [("m3.py", "run"), ("m1.py", "load"), ("m3.py", "save"), ("m9.py", "absent")]
    names = ["run", "load", "save", "absent", "other"]
    alone_named, alone_framed = genome.symbols_named(names, 12), genome.frame_symbols(frames)
    seen = statements(genome)
    full = genome.symbols_by_leaf(fn for _, fn in frames)
    named = genome.symbols_named(names, 12, read=full)
    framed = genome.frame_symbols(frames, read=full)
    assert framed == alone_framed and set(framed) == {"run", "load", "save"}
    assert named.keys() == alone_named.keys()
    for name, rows in named.items():  # at most 12: the same list; more: 'too common' either way
        assert rows == alone_named[name] if len(rows) <= 12 else len(alone_named[name]) == 13
    assert len(named["run"]) == 15 and len(named["load"]) == 2
    # one statement for the frames' functions, one for the name no frame has ("other"), none for the frames
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
