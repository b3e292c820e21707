"""A common word's gene ids kept across writes (posting_sets.py): after genes are added, removed, or an old
gene is indexed again, the ids held equal the postings, and only added genes are read as a delta."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import psycopg
import pytest

from helix_context.config import Settings
from helix_context.genome.pg import posting_sets
from helix_context.genome.pg.posting_sets import PostingSets
from helix_context.manager import HelixContextManager


def _truth(conn: psycopg.Connection, term: str, column: str | None = None) -> list[int]:
    where = f" AND tf_{column} > 0" if column else ""
    row = conn.execute(f"SELECT array_agg(gene ORDER BY gene) FROM lex_postings WHERE term = %s{where}",
                       (term,)).fetchone()
    return list(row[0] or []) if row else []


def _write(tree: Path, name: str, i: int) -> None:
    (tree / name).write_text(f"def settle_ledger_invoice_{i}(total):\n    return round(total, {i})\n")


def _ledgers(settings: Settings, pg_url: str, tmp_path: Path) -> tuple[Path, HelixContextManager]:
    """Six small ledger modules (not indexed yet) and a backend on the test database, without models."""
    tree = tmp_path / "tree"
    tree.mkdir()
    for i in range(6):
        _write(tree, f"ledger_{i}.py", i)
    return tree, HelixContextManager(settings.replace(embedding={"enabled": False}, ner={"enabled": False},
                                                      genome={"url": pg_url}))


def test_ids_follow_every_write_and_only_new_genes_are_read_as_a_delta(
        settings: Settings, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree, helix = _ledgers(settings, pg_url, tmp_path)
    afters: list[list[int]] = []
    plain = posting_sets._read
    monkeypatch.setattr(posting_sets, "_read", lambda conn, after, column: (
        afters.append(list(after.values())), plain(conn, after, column))[1])
    generation = [1]
    sets = PostingSets(lambda: generation[0])
    words = ["ledger", "invoic", "settl"]

    def check(column: str | None = None) -> None:
        got = sets.of(conn, words, column)
        for w in words:
            assert got[w].tolist() == _truth(conn, w, column), (w, column)
        assert np.array_equal(sets.holding_all(conn, ["ledger", "invoic"], column),
                              np.intersect1d(_truth(conn, "ledger", column), _truth(conn, "invoic", column)))

    try:
        helix.ingest_path(tree)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            check()
            check("path")
            afters.clear()
            check()
            assert afters == [], "same generation: nothing read"

            for i in range(6, 9):  # new genes: a delta above the last id held
                _write(tree, f"ledger_{i}.py", i)
            helix.ingest_path(tree)
            generation[0] += 1
            afters.clear()
            check()
            assert len(afters) == 1 and all(a > 0 for a in afters[0]), "only the new genes were read"

            (tree / "ledger_0.py").unlink()  # a gene removed: the word's ids are read whole
            helix.ingest_path(tree)
            helix.genome.retire_source(str(tree / "ledger_0.py"))
            generation[0] += 1
            check()
            check("path")

            held = sets.of(conn, ["ledger"])["ledger"]
            _write(tree, "ledger_0.py", 0)  # restored as it was: its old gene, a lower id, is indexed again
            helix.ingest_path(tree)
            generation[0] += 1
            restored = set(_truth(conn, "ledger")) - set(held.tolist())
            assert restored and max(restored) < held[-1], "the old gene came back below the last id held"
            check()

            _write(tree, "ledger_1.py", 100)  # an edit, then its revert
            helix.ingest_path(tree)
            generation[0] += 1
            check()
            _write(tree, "ledger_1.py", 1)
            helix.ingest_path(tree)
            generation[0] += 1
            check()
            check("path")
    finally:
        helix.close()


def test_a_started_backend_holds_the_common_words_before_its_first_question(
        settings: Settings, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's start-up (load_parts) reads the commonest words' ids, so a question made only of
    common words reads no postings; a word in too few genes is not read at start."""
    tree = tmp_path / "tree"
    tree.mkdir()
    for i in range(6):
        _write(tree, f"ledger_{i}.py", i)
    (tree / "lonely.py").write_text("def quartermaster(x):\n    return x\n")
    cfg = settings.replace(embedding={"enabled": False}, ner={"enabled": False}, genome={"url": pg_url})
    HelixContextManager(cfg).close()
    writer = HelixContextManager(cfg)
    try:
        writer.ingest_path(tree)
    finally:
        writer.close()
    monkeypatch.setattr("helix_context.manager.MAX_WORD_DOCS", 3)  # "common" in a 7-file tree
    helix = HelixContextManager(cfg)
    try:
        helix.load_parts()
        reads: list[list[str]] = []
        plain = posting_sets._read
        monkeypatch.setattr(posting_sets, "_read", lambda conn, after, column: (
            reads.append(list(after)), plain(conn, after, column))[1])
        held = helix.genome._postings.of(helix.genome._raw(), ["ledger", "invoic", "settl"])
        assert reads == [], "the common words were read at start"
        lists = helix.genome.term_rowid_lists(["ledger", "invoice", "quartermaster"], 4)  # the silence gate's read
        with psycopg.connect(pg_url, autocommit=True) as conn:
            assert held["ledger"].tolist() == _truth(conn, "ledger")
            assert lists["ledger"].tolist() == _truth(conn, "ledger")[:4]
            assert lists["invoice"].tolist() == _truth(conn, "invoic")[:4]
            assert lists["quartermaster"].tolist() == _truth(conn, "quartermast")
        helix.genome._postings.of(helix.genome._raw(), ["quartermast"])
        assert reads == [["quartermast"]], "a rare word is read when a question needs it"
        kinds = helix.genome._kinds
        with psycopg.connect(pg_url, autocommit=True) as conn:
            code = {r for (r,) in conn.execute("SELECT id FROM genes WHERE retired_at IS NULL AND content_type = 'code'")}
            other = {r for (r,) in conn.execute("SELECT id FROM genes WHERE retired_at IS NULL AND content_type <> 'code'")}
        assert (kinds._code, kinds._other) == (code, other) and code, "every live gene's kind was learnt at start"
    finally:
        helix.close()


def test_the_memory_drops_the_words_used_longest_ago(
        settings: Settings, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    words = ["alpha", "bravo", "charli", "delta"]
    for i in range(8):
        (tree / f"m{i}.py").write_text(f"def f{i}():\n    return '{' '.join(words)}'\n")
    helix = HelixContextManager(settings.replace(embedding={"enabled": False}, ner={"enabled": False},
                                                 genome={"url": pg_url}))
    try:
        helix.ingest_path(tree)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            one = np.asarray(_truth(conn, "alpha"), dtype=np.uint32).nbytes
            monkeypatch.setattr(posting_sets, "MAX_POSTING_BYTES", 3 * one)  # room for three words
            sets = PostingSets(lambda: 1)
            sets.of(conn, ["alpha", "bravo", "charli"])
            sets.of(conn, ["alpha"])  # used again: now the most recent
            sets.of(conn, ["delta"])
            assert sets.held_bytes <= 3 * one
            reads: list[list[str]] = []
            plain = posting_sets._read
            monkeypatch.setattr(posting_sets, "_read", lambda c, after, column: (
                reads.append(list(after)), plain(c, after, column))[1])
            got = sets.of(conn, ["alpha", "charli", "delta", "bravo"])
            assert reads == [["bravo"]], "bravo, used longest ago, was the one dropped"
            assert all(got[w].tolist() == _truth(conn, w) for w in ["alpha", "bravo", "charli", "delta"])
    finally:
        helix.close()


def test_a_failed_warm_only_logs_and_questions_still_read_their_words(
        settings: Settings, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    tree, helix = _ledgers(settings, pg_url, tmp_path)
    try:
        helix.ingest_path(tree)
        plain = posting_sets._read

        def broken(conn: psycopg.Connection, after: dict[str, int], column: str | None) -> dict:
            raise psycopg.OperationalError("server closed the connection unexpectedly")

        monkeypatch.setattr(posting_sets, "_read", broken)
        assert helix.genome.warm_reads(3) == 0
        assert "could not read the common words" in caplog.text
        monkeypatch.setattr(posting_sets, "_read", plain)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            held = helix.genome._postings.of(helix.genome._raw(), ["ledger"])
            assert held["ledger"].tolist() == _truth(conn, "ledger")
    finally:
        helix.close()


def test_ids_in_both_lists_whichever_way_they_are_intersected() -> None:
    """The mask over a narrow id range and the sorted intersection of sparse ids give the same sorted ids."""
    rng = np.random.default_rng(7)
    for top, n, m in ((1_000, 600, 300), (100_000, 68_000, 40_000), (2**31, 50, 5_000), (10, 1, 1)):
        a = np.sort(rng.choice(top, n, replace=False)).astype(np.uint32)
        b = np.sort(rng.choice(top, m, replace=False)).astype(np.uint32)
        got = posting_sets._intersect(a, b)
        assert got.tolist() == sorted(set(a.tolist()) & set(b.tolist())), (top, n, m)
    assert posting_sets._intersect(np.zeros(0, np.uint32), np.arange(5, dtype=np.uint32)).tolist() == []


def test_an_and_is_remembered_per_generation_and_grown_a_word_at_a_time(
        settings: Settings, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One question ANDs the rarest two words, then three (terms.py), then each column's search ANDs the
    chosen words again: each AND is worked out once per generation, a wider one from the narrower, and a
    write (a new generation) is seen at once."""
    tree, helix = _ledgers(settings, pg_url, tmp_path)
    made: list[tuple[int, int]] = []
    plain = posting_sets._intersect
    monkeypatch.setattr(posting_sets, "_intersect", lambda a, b: (made.append((len(a), len(b))), plain(a, b))[1])
    generation = [1]
    sets = PostingSets(lambda: generation[0])

    def truth(conn: psycopg.Connection, words: list[str]) -> list[int]:
        return sorted(set.intersection(*(set(_truth(conn, w)) for w in words)))

    try:
        helix.ingest_path(tree)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            two, three = ["ledger", "invoic"], ["ledger", "invoic", "settl"]
            assert sets.holding_all(conn, two).tolist() == truth(conn, two)
            assert len(made) == 1
            assert sets.holding_all(conn, three).tolist() == truth(conn, three)
            assert len(made) == 2, "three words: the two remembered, ANDed with the third only"
            assert sets.holding_all(conn, list(reversed(three))).tolist() == truth(conn, three)
            assert len(made) == 2, "the same words again (any order): nothing worked out"

            _write(tree, "ledger_9.py", 9)
            helix.ingest_path(tree)
            generation[0] += 1
            got = sets.holding_all(conn, three).tolist()
            assert got == truth(conn, three) and len(got) == 7, "the new gene is in the AND after the write"

            monkeypatch.setattr(posting_sets, "MAX_AND_BYTES", 1)  # the retention rule: the oldest ANDs go
            sets.holding_all(conn, two)
            sets.holding_all(conn, ["invoic", "settl"])
            assert len(sets._ands) == 1 and sets._and_bytes == sets.holding_all(conn, ["invoic", "settl"]).nbytes
    finally:
        helix.close()
