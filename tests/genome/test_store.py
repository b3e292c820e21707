"""The genome store on real SQLite files."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
from pathlib import Path

import numpy as np
import pytest

from helix_context.genome.schema import FTS_VERSION, SCHEMA_VERSION
from helix_context.errors import GenomeError, GenomeVersionError
from helix_context.genome.store import FileRecord, Genome, SourceWrite, WriteResult
from helix_context.models import Gene, Provenance


def gene(content: str, path: str | None = "a.py", start: int = 1, tags: tuple[str, ...] = ()) -> Gene:
    return Gene(gene_id=hashlib.sha256(content.encode()).hexdigest()[:32], content=content, content_type="code",
                language="python", source_path=path, project="demo", start_line=start,
                end_line=start + content.count("\n"), tags=tags,
                facts=(("port", "11437"),), provenance=Provenance(observed_at=1.0, last_verified_at=1.0))


def rec(path: str, h: str = "h") -> FileRecord:
    return FileRecord(path, "demo", 10, 1, h)


def unit(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=384).astype(np.float32)
    return v / np.linalg.norm(v)


def test_fresh_genome_is_wal_and_versioned(tmp_path: Path) -> None:
    g = Genome(tmp_path / "g.db")
    assert g.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert g.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert g.integrity_check() == []


def test_newer_genome_is_refused_and_not_modified(tmp_path: Path) -> None:
    path = tmp_path / "g.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    conn.close()
    before = path.read_bytes()
    with pytest.raises(GenomeVersionError, match="newer Helix"):
        Genome(path)
    assert path.read_bytes() == before
    assert not Path(str(path) + "-wal").exists()


def test_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "g.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(GenomeError, match="not a Helix genome"):
        Genome(path)


def test_identical_chunks_are_stored_once(tmp_path: Path) -> None:
    g = Genome(tmp_path / "g.db")
    g.replace_source(rec("a.py"), "a.py", [(gene("PORT = 11437", "a.py"), None)])
    result = g.replace_source(rec("b.py"), "b.py", [(gene("PORT = 11437", "b.py"), None)])
    assert result.added == 0 and result.reused == 1
    assert g.stats()["total_genes"] == 1
    stored = g.get_gene(gene("PORT = 11437").gene_id)
    assert {p for p, *_ in g.sources_of(stored.rowid)} == {"a.py", "b.py"}


def test_replacing_a_file_swaps_its_genes_and_keeps_shared_ones(tmp_path: Path) -> None:
    g = Genome(tmp_path / "g.db")
    g.replace_source(rec("a.py"), "a.py", [(gene("def old_name(): pass"), None), (gene("SHARED = 1"), None)])
    g.replace_source(rec("b.py"), "b.py", [(gene("SHARED = 1", "b.py"), None)])
    result = g.replace_source(rec("a.py", "h2"), "a.py", [(gene("def new_name(): pass"), None)])
    assert result.added == 1 and result.replaced == 1
    assert g.fts_search('"old_name"', 5) == []
    assert len(g.fts_search('"new_name"', 5)) == 1
    shared = g.get_gene(gene("SHARED = 1").gene_id)
    assert shared is not None and shared.source_path == "b.py"  # ownership moved to the file that still has it
    assert g.fts_search('"shared"', 5, column="body")


def test_retiring_a_file_archives_its_genes(tmp_path: Path) -> None:
    g = Genome(tmp_path / "g.db")
    g.replace_source(rec("a.py"), "a.py", [(gene("def gone(): pass"), unit(1))])
    assert len(g.vector_index()) == 1
    assert g.retire_source("a.py") == 1
    assert g.fts_search('"gone"', 5) == []
    g.vector_index().sync()
    assert len(g.vector_index()) == 0
    assert g.get_gene(gene("def gone(): pass").gene_id).tier == "archived"
    assert g.file_record("a.py") is None
    # the same content coming back revives the gene
    g.replace_source(rec("c.py"), "c.py", [(gene("def gone(): pass", "c.py"), None)])
    assert g.get_gene(gene("def gone(): pass").gene_id).tier == "open"
    assert len(g.fts_search('"gone"', 5)) == 1


def test_renaming_a_folder_keeps_each_file_once_and_reindexes_its_path_words(tmp_path: Path) -> None:
    """rename_under (genome/renames.py) on SQLite: FTS5's contentless rows are removed with the old path
    replayed, then written with the new one; a file whose new name is indexed already is retired."""
    g = Genome(tmp_path / "g.db")
    old = "/home/ana/zqfolder/api"
    g.replace_source(rec(f"{old}/ledger.py"), f"{old}/ledger.py", [(gene("def close_books(): pass", f"{old}/ledger.py"), None)])
    g.replace_source(rec(f"{old}/util.py"), f"{old}/util.py", [(gene("def helper(): pass", f"{old}/util.py"), None)])
    g.replace_source(rec("@api/util.py"), "@api/util.py", [(gene("def helper(): pass", "@api/util.py"), None)])
    g.replace_source(rec("/home/ana/zqfolder/apiary.py"), "/home/ana/zqfolder/apiary.py",
                     [(gene("def bees(): pass", "/home/ana/zqfolder/apiary.py"), None)])  # beside, not under
    assert g.fts_search('"zqfolder"', 5, "path")
    done = g.rename_under(old, lambda p: "@api" + p[len(old):])
    assert (done.files_renamed, done.files_dropped, done.genes_reindexed) == (1, 1, 1)
    assert set(g.file_records()) == {"@api/ledger.py", "@api/util.py", "/home/ana/zqfolder/apiary.py"}
    moved = g.get_gene(gene("def close_books(): pass").gene_id)
    assert moved is not None and moved.source_path == "@api/ledger.py" and moved.tier == "open"
    assert [r for r, _ in g.fts_search('"zqfolder"', 5, "path")] == [
        g.get_gene(gene("def bees(): pass").gene_id).rowid]  # only the file beside the folder keeps the word
    assert len(g.fts_search('"close_books"', 5)) == 1 and len(g.fts_search('"helper"', 5)) == 1
    assert g.integrity_check() == []


def test_identifier_parts_are_searchable(tmp_path: Path) -> None:
    g = Genome(tmp_path / "g.db")
    g.replace_source(rec("a.py"), "a.py", [(gene("def getUserName(): return load_user_record()"), None)])
    assert g.fts_search('"user" AND "name"', 5)
    assert g.fts_search('"load_user_record"', 5)
    assert g.fts_search('"record"', 5)
    assert g.fts_search('"getusername"', 5)


def test_an_index_built_by_an_older_helix_is_rebuilt_on_open(tmp_path: Path) -> None:
    path = tmp_path / "g.db"
    g = Genome(path)
    g.replace_source(rec("a.py"), "a.py", [(gene("def getUserName(): return cache.lookupTable"), None)])
    g.replace_source(rec("b.py"), "b.py", [(gene("def gone(): pass", "b.py"), None)])
    g.retire_source("b.py")
    # what an older text derivation left: rows without the split identifier parts
    with g.transaction() as tx:
        tx.execute("INSERT INTO genes_fts(genes_fts) VALUES ('delete-all')")
        tx.execute("INSERT INTO genes_fts(rowid, body, tags, path) SELECT id, 'def getUserName', '', 'a py' "
                   "FROM genes WHERE source_path = 'a.py'")
        tx.execute("UPDATE meta SET value = '1' WHERE key = 'fts_version'")
    assert g.fts_search('"lookup" AND "table"', 5) == []
    g.close()

    g = Genome(path)
    assert g.conn.execute("SELECT value FROM meta WHERE key = 'fts_version'").fetchone()[0] == str(FTS_VERSION)
    assert len(g.fts_search('"lookup" AND "table"', 5)) == 1  # parts of a name inside a dotted name
    assert len(g.fts_search('"user" AND "name"', 5)) == 1
    assert g.fts_search('"gone"', 5) == []  # retired genes stay out of the index
    # rows now match the current derivation, so replacing the file removes the old words cleanly
    g.replace_source(rec("a.py", "h2"), "a.py", [(gene("def fresh_start(): pass"), None)])
    assert g.fts_search('"lookup"', 5) == [] and len(g.fts_search('"fresh"', 5)) == 1
    g.conn.execute("INSERT INTO genes_fts(genes_fts, rank) VALUES ('integrity-check', 0)")
    assert g.integrity_check() == []


def test_vectors_round_trip_through_int8(tmp_path: Path) -> None:
    g = Genome(tmp_path / "g.db")
    v = unit(3)
    g.replace_source(rec("a.py"), "a.py", [(gene("x = 1"), v)])
    assert float(g.embedding_of(g.get_gene(gene("x = 1").gene_id).rowid) @ v) > 0.999
    hits = g.vector_index().search(v, 5)
    assert hits.similarities[0] > 0.99


def test_coactivation_and_access_counts(tmp_path: Path) -> None:
    g = Genome(tmp_path / "g.db")
    g.replace_source(rec("a.py"), "a.py", [(gene("A = 1"), None), (gene("B = 2", start=2), None),
                                            (gene("C = 3", start=3), None)])
    a, b, c = (g.get_gene(gene(x).gene_id).rowid for x in ("A = 1", "B = 2", "C = 3"))
    g.record_delivery([a, b])
    g.record_delivery([a, b])
    g.record_delivery([a, c])
    assert g.coactivated([a]) == {b: 2.0, c: 1.0}
    assert g.get_gene(gene("A = 1").gene_id).access_count == 3


def test_full_disk_loses_nothing_already_stored(tmp_path: Path) -> None:
    g = Genome(tmp_path / "g.db")
    g.replace_source(rec("a.py"), "a.py", [(gene("KEEP = 1"), None)])
    pages = g.conn.execute("PRAGMA page_count").fetchone()[0]
    g.conn.execute(f"PRAGMA max_page_count = {pages + 1}")
    big = [(gene(f"VALUE_{i} = '{'x' * 3000}'", start=i), None) for i in range(50)]
    with pytest.raises(GenomeError, match="no space left"):
        g.replace_source(rec("b.py"), "b.py", big)
    assert g.get_gene(gene("KEEP = 1").gene_id) is not None
    assert g.file_record("b.py") is None
    assert g.integrity_check() == []


def test_batch_write_rolls_back_only_the_file_that_fails(tmp_path: Path) -> None:
    g = Genome(tmp_path / "g.db")
    broken = Gene(gene_id="b" * 32, content="BROKEN = 1", content_type=None, language=None,  # type: ignore[arg-type]  # the wrong type is the input under test
                  source_path="b.py", project="demo", start_line=1, end_line=1)
    results = g.replace_sources([
        SourceWrite(rec("a.py"), "a.py", [(gene("ALPHA_PORT = 1"), None)]),
        SourceWrite(rec("b.py"), "b.py", [(gene("BETA_PORT = 2", "b.py"), None), (broken, None)]),
        SourceWrite(rec("c.py"), "c.py", [(gene("GAMMA_PORT = 3", "c.py"), None)]),
    ])
    assert isinstance(results[0], WriteResult) and results[0].added == 1
    assert isinstance(results[1], GenomeError) and "content_type" in str(results[1])
    assert isinstance(results[2], WriteResult) and results[2].added == 1
    assert g.file_record("a.py") and g.file_record("c.py") and g.file_record("b.py") is None
    assert g.get_gene(gene("BETA_PORT = 2", "b.py").gene_id) is None  # the failed file left nothing behind
    assert [r for r, _ in g.fts_search('"gamma_port"', 5)] and not g.fts_search('"beta_port"', 5)
    assert g.integrity_check() == []


def test_full_disk_mid_batch_keeps_what_was_stored_and_blames_the_file_that_did_not_fit(tmp_path: Path) -> None:
    g = Genome(tmp_path / "g.db")
    g.replace_source(rec("a.py"), "a.py", [(gene("KEEP = 1"), None)])
    pages = g.conn.execute("PRAGMA page_count").fetchone()[0]
    g.conn.execute(f"PRAGMA max_page_count = {pages + 1}")
    big = [(gene(f"VALUE_{i} = '{'x' * 3000}'", "c.py", start=i), None) for i in range(50)]
    small, large = g.replace_sources([SourceWrite(rec("b.py"), "b.py", [(gene("SMALL = 2", "b.py"), None)]),
                                      SourceWrite(rec("c.py"), "c.py", big)])
    assert isinstance(large, GenomeError) and "no space left" in str(large)
    assert g.file_record("c.py") is None
    # what the report says about the small file is what the genome holds
    assert (g.file_record("b.py") is not None) == isinstance(small, WriteResult)
    assert g.get_gene(gene("KEEP = 1").gene_id) is not None
    assert g.integrity_check() == []


@pytest.mark.skipif(os.name == "nt" or os.geteuid() == 0, reason="root ignores file permissions")
def test_read_only_genome_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "g.db"
    Genome(path).close()
    path.chmod(stat.S_IRUSR)
    with pytest.raises(GenomeError):
        g = Genome(path)
        g.replace_source(rec("a.py"), "a.py", [(gene("X = 1"), None)])


def test_read_only_mode_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "g.db"
    Genome(path).close()
    g = Genome(path, readonly=True)
    with pytest.raises(GenomeError, match="read-only"):
        g.replace_source(rec("a.py"), "a.py", [(gene("X = 1"), None)])


def test_locked_genome_times_out_with_a_message(tmp_path: Path) -> None:
    path = tmp_path / "g.db"
    Genome(path).close()
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        g = Genome(path, busy_timeout_ms=200)
        with pytest.raises(GenomeError, match="locked"):
            g.replace_source(rec("a.py"), "a.py", [(gene("X = 1"), None)])
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()


def test_stats_vacuum_checkpoint(tmp_path: Path) -> None:
    g = Genome(tmp_path / "g.db")
    g.replace_source(rec("a.py"), "a.py", [(gene("X = 1"), None)])
    stats = g.stats()
    assert stats["total_genes"] == 1 and stats["genes_by_tier"] == {"open": 1}
    assert stats["genes_by_project"] == {"demo": 1}
    assert g.checkpoint()["busy"] == 0
    assert g.vacuum()["bytes_after"] > 0


def test_unused_genes_age_and_come_back_when_delivered(tmp_path: Path) -> None:
    g = Genome(tmp_path / "g.db")
    g.replace_source(rec("a.py"), "a.py", [(gene("OLD = 1"), None), (gene("NEW = 2", start=2), None)])
    old = g.get_gene(gene("OLD = 1").gene_id)
    g.conn.execute("UPDATE genes SET last_verified_at = CASE WHEN id = ? THEN 1000 ELSE 9000 END", (old.rowid,))
    assert g.age_genes(older_than=5000) == 1
    assert g.get_gene(old.gene_id).tier == "aging"
    assert g.get_gene(gene("NEW = 2").gene_id).tier == "open"
    assert g.stats()["genes_by_tier"] == {"open": 1, "aging": 1}
    g.record_delivery([old.rowid])
    assert g.get_gene(old.gene_id).tier == "open"


def test_a_gene_revived_in_another_file_keeps_the_full_text_index_sound(tmp_path: Path) -> None:
    """A file's text moves to another path (a rename between two checkouts), then changes again.

    The full-text index is contentless: a row is deleted by giving the values it was indexed with, so
    the gene's row must hold the path and tags it was indexed under. Otherwise searches that score
    the stale entries fail with "database disk image is malformed".
    """
    g = Genome(tmp_path / "g.db")
    body = "def unary_minus(x):\n    return -x"
    g.replace_source(rec("old/ops.py"), "old/ops.py", [(gene(body, "old/ops.py", tags=("old_tag",)), None)])
    g.retire_source("old/ops.py")
    g.replace_source(rec("new/moved.py"), "new/moved.py", [(gene(body, "new/moved.py", tags=("new_tag",)), None)])
    g.replace_source(rec("other.py"), "other.py", [(gene("def unary_plus(x):\n    return +x", "other.py"), None)])
    assert g.get_gene(gene(body).gene_id).source_path == "new/moved.py"
    assert [r for r, _ in g.fts_search('"moved"', 5, column="path")] and not g.fts_search('"ops"', 5, column="path")
    g.retire_source("new/moved.py")  # deletes its full-text row with the values in the genes row
    assert len(g.fts_search('"unary"', 5)) == 1
    assert g.fts_search('"unary_minus"', 5) == [] and g.fts_search('"moved"', 5, column="path") == []
    assert g.fts_search('"new_tag"', 5, column="tags") == [] and g.fts_search('"old_tag"', 5, column="tags") == []


def test_one_batch_with_repeated_moved_and_many_chunks_keeps_the_full_text_index_sound(tmp_path: Path) -> None:
    """One transaction, the way an ingest writes: a chunk twice in one file, a chunk that moves to a
    file later in the batch, and a file of more genes than one multi-row full-text insert holds."""
    g = Genome(tmp_path / "g.db")
    g.replace_source(rec("old.py"), "old.py", [(gene("def wandering_helper(): pass", "old.py"), None)])
    repeated = gene("LICENSE_HEADER = 'MIT'", "a.py")
    many = [(gene(f"def generated_{i}(): return {i}", "big.py", start=i + 1), None) for i in range(450)]
    results = g.replace_sources([
        SourceWrite(rec("a.py"), "a.py", [(repeated, None), (gene("def only_in_a(): pass"), None),
                                          (gene("LICENSE_HEADER = 'MIT'", "a.py", start=40), None)], {}),
        SourceWrite(rec("new.py"), "new.py", [(gene("def wandering_helper(): pass", "new.py"), None)], {}),
        SourceWrite(rec("old.py", "h2"), "old.py", [(gene("def stays_behind(): pass", "old.py"), None)], {}),
        SourceWrite(rec("big.py"), "big.py", many, {}),
    ])
    assert [(r.added, r.reused, r.replaced) for r in results] == [(2, 1, 0), (0, 1, 0), (1, 0, 0), (450, 0, 0)]
    assert g.get_gene(repeated.gene_id).start_line == 40  # the later copy's span, as when written one by one
    assert g.get_gene(gene("def wandering_helper(): pass").gene_id).source_path == "new.py"
    assert [r for r, _ in g.fts_search('"wandering_helper"', 5, column="body")]
    assert len(g.fts_search('"generated_449" OR "generated_0" OR "generated_200"', 10)) == 3
    assert g.conn.execute("INSERT INTO genes_fts(genes_fts, rank) VALUES ('integrity-check', 0)").fetchall() == []
    # the repeated chunk has two source rows in a.py: retired once (a second full-text delete of the
    # same row corrupted the contentless index: "database disk image is malformed" on later writes)
    assert g.retire_source("a.py") == 2
    for path in ("new.py", "old.py", "big.py"):  # every other full-text row deletes cleanly
        g.retire_source(path)
    assert g.fts_search('"wandering_helper" OR "generated_7" OR "license_header" OR "stays_behind"', 10) == []
    assert g.conn.execute("SELECT COUNT(*) FROM genes_fts_vocab").fetchone()[0] == 0


def test_a_damaged_full_text_index_is_survived_and_rebuilt_at_the_next_open(tmp_path: Path, caplog) -> None:
    """Stale postings (a delete replayed with other values than were indexed) make BM25 searches fail with
    "database disk image is malformed": searches go on without full-text results, and the next open rebuilds."""
    g = Genome(tmp_path / "g.db")
    g.replace_source(rec("ops.py"), "ops.py", [(gene("def unary_minus(x):\n    return -x", "ops.py"), None)])
    g.replace_source(rec("more.py"), "more.py", [(gene("def unary_plus(x):\n    return +x", "more.py"), None)])
    rowid = g.fts_search('"minus"', 5)[0][0]
    with g.transaction() as tx:  # the attack on the index: a delete that does not match what was indexed
        tx.execute("INSERT INTO genes_fts(genes_fts, rowid, body, tags, path) VALUES ('delete', ?, 'other', '', '')",
                   (rowid,))
    with pytest.raises(sqlite3.DatabaseError):  # the raw failure this guards against
        g.conn.execute("SELECT rowid FROM genes_fts WHERE genes_fts MATCH '\"unary\"' ORDER BY bm25(genes_fts)").fetchall()
    assert g.fts_search('"unary"', 5) == []
    assert g.full_text_damaged()
    assert any("full-text index is damaged" in r.getMessage() and "helix check" in r.getMessage() for r in caplog.records)
    g.close()
    g = Genome(tmp_path / "g.db")
    assert not g.full_text_damaged()
    assert len(g.fts_search('"unary"', 5)) == 2 and len(g.fts_search('"minus"', 5)) == 1
    g.close()


def test_threads_that_end_do_not_leave_their_connections_open(tmp_path: Path) -> None:
    """Every ingest with embeddings reads the genome from fresh threads; a long-running server must not
    keep one open file handle per thread that ever read it."""
    import threading

    import psutil

    g = Genome(tmp_path / "g.db")
    g.replace_source(rec("a.py"), "a.py", [(gene("PORT = 11437"), None)])

    def handles() -> int:
        return sum(1 for f in psutil.Process().open_files() if Path(f.path).name == "g.db")

    before = handles()
    for _ in range(30):
        t = threading.Thread(target=lambda: g.fts_search('"port"', 5))
        t.start()
        t.join()
    assert g.fts_search('"port"', 5)  # this thread's connection is still there and works
    # the last thread's connection stays until the next one opens, and SQLite keeps a closed one's file
    # handle for reuse (closing it would drop the process's locks on the file): two at most, not 30
    assert handles() <= before + 2, f"{handles() - before} more open handles on the genome after 30 threads"
    g.close()
