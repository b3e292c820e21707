"""The dense index on disk: persisted next to the genome, kept in step with ingest and retire, rebuilt when broken."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from helix_context.genome import vectors
from helix_context.genome.store import FileRecord, Genome, SourceWrite
from helix_context.models import Gene, Provenance

DIM = 384


def gene(i: int, path: str) -> Gene:
    content = f"def handler_{i}(): return {i}"
    return Gene(gene_id=hashlib.sha256(content.encode()).hexdigest()[:32], content=content, content_type="code",
                language="python", source_path=path, project="demo", start_line=i, end_line=i,
                provenance=Provenance(observed_at=1.0, last_verified_at=1.0))


def clustered(n: int, seed: int = 0) -> np.ndarray:
    """Unit vectors in 40 clusters: neighbours are close, as with real text embeddings."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(40, DIM)).astype(np.float32)
    x = centres[rng.integers(0, 40, n)] + rng.normal(size=(n, DIM)).astype(np.float32) * 0.7
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def fill(g: Genome, vecs: np.ndarray, per_file: int = 100, first: int = 0) -> None:
    writes = []
    for start in range(0, len(vecs), per_file):
        path = f"f{(first + start) // per_file}.py"
        genes = [(gene(first + start + j, path), vecs[start + j]) for j in range(min(per_file, len(vecs) - start))]
        writes.append(SourceWrite(FileRecord(path, "demo", 10, 1, "h"), path, genes))
    g.replace_sources(writes)


def rowid_of(g: Genome, i: int) -> int:
    return g.get_gene(gene(i, "").gene_id).rowid


def exact_top(g: Genome, q: np.ndarray, k: int) -> set[int]:
    ids, codes = [], []
    for rowids, block in vectors.iter_live_vectors(g.conn, g.vector_model_id):
        ids.append(rowids)
        codes.append(block.astype(np.float32))
    m = np.concatenate(codes)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    return {int(r) for r in np.concatenate(ids)[np.argsort(-(m @ q))[:k]]}


def test_index_is_saved_next_to_the_genome_and_reopened_without_a_rebuild(tmp_path: Path) -> None:
    vecs = clustered(300)
    g = Genome(tmp_path / "g.db")
    fill(g, vecs)
    first = g.vector_index().search(vecs[7], 5)
    assert first.rowids[0] == rowid_of(g, 7) and first.similarities[0] > 0.99
    g.close()
    assert (tmp_path / "g.db.ann").stat().st_size > 300 * DIM
    g = Genome(tmp_path / "g.db")
    again = g.vector_index().search(vecs[7], 5)
    assert list(again.rowids) == list(first.rowids)
    assert g.vector_index().rebuilds == 0  # loaded from disk, not from the genes table


def test_ingest_and_retire_update_the_index_incrementally(tmp_path: Path) -> None:
    vecs = clustered(400)
    g = Genome(tmp_path / "g.db")
    fill(g, vecs[:300])
    index = g.vector_index()
    assert len(index) == 300
    fill(g, vecs[300:], first=300)  # a later ingest
    assert index.search(vecs[350], 1).rowids[0] == rowid_of(g, 350)
    gone = rowid_of(g, 10)
    g.retire_source("f0.py")  # genes 0..99 leave retrieval
    hits = index.search(vecs[10], 50)
    assert gone not in set(hits.rowids.tolist()) and len(index) == 300
    assert index.rebuilds == 1  # built once when first asked, updated in place since


def test_another_process_writing_is_seen_through_the_change_log(tmp_path: Path) -> None:
    vecs = clustered(200)
    server = Genome(tmp_path / "g.db")
    fill(server, vecs[:100])
    assert len(server.vector_index()) == 100
    cli = Genome(tmp_path / "g.db")  # e.g. `helix ingest` in its own process: it never loads the index
    fill(cli, vecs[100:], first=100)
    cli.close()
    assert server.vector_index().search(vecs[150], 1).rowids[0] == rowid_of(server, 150)
    assert server.vector_index().rebuilds == 1


def test_a_corrupt_or_missing_index_file_is_rebuilt(tmp_path: Path) -> None:
    vecs = clustered(200)
    g = Genome(tmp_path / "g.db")
    fill(g, vecs)
    assert len(g.vector_index()) == 200
    g.close()
    (tmp_path / "g.db.ann").write_bytes(b"\x00garbage" * 100)
    g = Genome(tmp_path / "g.db")
    assert g.vector_index().search(vecs[42], 1).rowids[0] == rowid_of(g, 42)
    assert g.vector_index().rebuilds == 1
    g.close()
    (tmp_path / "g.db.ann").unlink()
    g = Genome(tmp_path / "g.db")
    assert len(g.vector_index()) == 200 and g.vector_index().rebuilds == 1


def test_change_log_is_trimmed_once_the_index_file_holds_it(tmp_path: Path) -> None:
    vecs = clustered(200)
    g = Genome(tmp_path / "g.db")
    fill(g, vecs[:100])
    count = lambda: g.conn.execute("SELECT COUNT(*) FROM vector_changes").fetchone()[0]  # noqa: E731 - a one-line helper beside its only use
    assert count() == 100  # no index file yet: kept until the next open or the first index
    assert len(g.vector_index()) == 100
    assert count() == 0  # built and saved: nothing left to replay
    fill(g, vecs[100:], first=100)
    assert count() == 100
    g.close()  # saves the index with the 100 replayed vectors
    g = Genome(tmp_path / "g.db")
    assert count() == 0 and len(g.vector_index()) == 200


def test_graph_search_keeps_recall_against_the_exact_scan(tmp_path: Path) -> None:
    vecs = clustered(3000, seed=1)
    g = Genome(tmp_path / "g.db")
    fill(g, vecs, per_file=500)
    index = g.vector_index()
    rng = np.random.default_rng(2)
    queries = vecs[rng.integers(0, 3000, 20)] + rng.normal(size=(20, DIM)).astype(np.float32) * 0.03
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    recalls, agreement = [], []
    for q in queries:
        graph = index.search(q, 100, exact=False)
        scan = index.search(q, 100, exact=True)
        assert not graph.exact and scan.exact
        agreement.append(len(set(scan.rowids.tolist()) & exact_top(g, q, 100)) / 100)
        recalls.append(len(set(graph.rowids.tolist()) & set(scan.rowids.tolist())) / 100)
    assert np.mean(agreement) >= 0.97  # the scan is the float cosine up to int8 rounding
    assert np.mean(recalls) >= 0.95
    # the threshold picks the path
    assert index.search(queries[0], 10, exact_below=5000).exact
    assert not index.search(queries[0], 10, exact_below=1000).exact


def test_a_query_replays_a_bounded_batch_and_warm_replays_everything(tmp_path: Path, monkeypatch) -> None:
    from helix_context.genome import ann

    vecs = clustered(300)
    g = Genome(tmp_path / "g.db")
    fill(g, vecs[:100])
    index = g.vector_index()
    assert len(index) == 100
    fill(g, vecs[100:], first=100)  # 200 changes waiting
    monkeypatch.setattr(ann, "SYNC_BATCH", 50)
    index.search(vecs[0], 5)  # a query pays for 50 of them, not for the whole ingest
    assert index.held() == 150
    index.warm()  # server start: everything now
    assert index.held() == 300


def test_many_removals_make_the_next_load_rebuild_a_compact_graph(tmp_path: Path, monkeypatch) -> None:
    from helix_context.genome import ann

    monkeypatch.setattr(ann, "COMPACT_AFTER", 50)
    vecs = clustered(300)
    g = Genome(tmp_path / "g.db")
    fill(g, vecs)
    assert len(g.vector_index()) == 300
    g.retire_source("f0.py")  # 100 removals: fewer than half of the 200 left
    assert len(g.vector_index()) == 200
    g.close()
    g = Genome(tmp_path / "g.db")
    assert len(g.vector_index()) == 200 and g.vector_index().rebuilds == 0
    g.retire_source("f1.py")  # 200 removals in all: more than half of the 100 left
    assert len(g.vector_index()) == 100
    g.close()
    g = Genome(tmp_path / "g.db")
    index = g.vector_index()
    assert len(index) == 100 and index.rebuilds == 1
    assert index.search(vecs[250], 1).rowids[0] == rowid_of(g, 250)


def test_describe_says_how_queries_search_and_never_waits_for_a_load(tmp_path: Path) -> None:
    import threading

    vecs = clustered(300)
    g = Genome(tmp_path / "g.db")
    fill(g, vecs)
    index = g.vector_index()
    assert index.describe(1000)["status"] == "not loaded"  # nothing searched yet: /health does not load it
    index.warm()
    small = index.describe(1000)
    assert small["kind"] == "exact" and small["vectors"] == 300 and small["file_bytes"] > 300 * DIM
    assert index.describe(100)["kind"] == "hnsw"
    held = threading.Event()
    release = threading.Event()

    def hold() -> None:  # a rebuild in progress holds the lock for minutes on a big genome
        with index._lock:
            held.set()
            release.wait(5)

    worker = threading.Thread(target=hold)
    worker.start()
    held.wait(5)
    try:
        assert index.describe(100)["status"] == "loading"
    finally:
        release.set()
        worker.join()
    g.close()


def test_a_start_after_a_big_ingest_builds_afresh_instead_of_replaying(tmp_path: Path, monkeypatch) -> None:
    from helix_context.genome import ann

    vecs = clustered(700)
    g = Genome(tmp_path / "g.db")
    fill(g, vecs[:200])
    g.vector_index().warm()
    g.close()  # the file holds 200 vectors
    g = Genome(tmp_path / "g.db")
    fill(g, vecs[200:], first=200)  # another process (the CLI) adds 500 while no server runs
    g.close()
    monkeypatch.setattr(ann, "REBUILD_AFTER", 100)
    g = Genome(tmp_path / "g.db")
    index = g.vector_index()
    index.warm()
    assert index.rebuilds == 1 and len(index) == 700
    assert index.search(vecs[650], 1).rowids[0] == rowid_of(g, 650)
    g.close()
    g = Genome(tmp_path / "g.db")  # and what it built was saved: the next start loads it
    g.vector_index().warm()
    assert g.vector_index().rebuilds == 0 and len(g.vector_index()) == 700
    g.close()


def _warm_index_of_300(tmp_path: Path, monkeypatch) -> tuple[Genome, object, np.ndarray]:
    """A genome of 300 vectors (of 400 made) whose index file holds them all, with MERGE_AT at 50."""
    from helix_context.genome import ann

    monkeypatch.setattr(ann, "MERGE_AT", 50)
    vecs = clustered(400)
    g = Genome(tmp_path / "g.db")
    fill(g, vecs[:300])
    index = g.vector_index()
    index.warm()
    return g, index, vecs


def test_the_graph_file_is_mapped_and_changes_are_folded_into_it(tmp_path: Path, monkeypatch) -> None:
    """The saved graph is read through a map of its file; what changes since waits in memory until MERGE_AT."""
    g, index, vecs = _warm_index_of_300(tmp_path, monkeypatch)
    assert index.describe(100)["file_mapped"] and index.describe(100)["in_memory_changes"] == 0
    fill(g, vecs[300:340], first=300)  # 40 new: held in memory, found at once
    assert index.search(vecs[320], 1).rowids[0] == rowid_of(g, 320)
    assert index.describe(100)["in_memory_changes"] == 40 and index.merges == 0
    g.retire_source("f0.py")  # 100 of the file's keys leave: past MERGE_AT, folded into the file
    assert len(index) == 240
    index.wait_for_merge(30)  # the fold runs beside the queries
    assert index.merges == 1 and index.describe(100)["in_memory_changes"] == 0
    assert rowid_of(g, 10) not in set(index.search(vecs[10], 50).rowids.tolist())
    assert index.search(vecs[320], 1).rowids[0] == rowid_of(g, 320)
    g.close()
    g = Genome(tmp_path / "g.db")  # the file alone now holds all of it
    assert len(g.vector_index()) == 240 and g.vector_index().rebuilds == 0
    g.close()


def _hold_the_fold(monkeypatch):
    """(entered, release): the fold into the file, and only the fold, waits once it has read the file until released."""
    import threading

    from helix_context.genome import ann

    entered, release = threading.Event(), threading.Event()
    real = vectors.live_vectors_of

    def held(conn, rowids, model):
        if threading.current_thread().name == "helix-ann-merge":
            entered.set()
            release.wait(30)
        return real(conn, rowids, model)

    monkeypatch.setattr(ann.vectors, "live_vectors_of", held)
    return entered, release


def test_a_search_does_not_wait_for_the_fold_into_the_file(tmp_path: Path, monkeypatch) -> None:
    """Past MERGE_AT the changes are folded into the graph file in a thread of their own: a search meanwhile answers
    from the file and the delta instead of waiting (adding 50k vectors took 7.6 s at 100k genes, under the lock)."""
    g, index, vecs = _warm_index_of_300(tmp_path, monkeypatch)
    entered, release = _hold_the_fold(monkeypatch)
    try:
        fill(g, vecs[300:360], first=300)  # 60 new vectors: past MERGE_AT, the next search starts the fold
        assert index.search(vecs[320], 1).rowids[0] == rowid_of(g, 320)
        assert entered.wait(10), "no fold started beside the search"
        assert index.search(vecs[350], 1).rowids[0] == rowid_of(g, 350)  # answered while the fold is held
        assert index.merges == 0 and index.describe(100)["in_memory_changes"] == 60
    finally:
        release.set()
    index.wait_for_merge(30)
    assert index.merges == 1 and index.describe(100)["in_memory_changes"] == 0
    assert index.search(vecs[350], 1).rowids[0] == rowid_of(g, 350)
    assert len(index) == 360
    g.close()
    g = Genome(tmp_path / "g.db")  # the file holds it all
    assert len(g.vector_index()) == 360 and g.vector_index().rebuilds == 0
    g.close()


def test_a_fold_overtaken_by_another_process_starts_from_that_process_file(tmp_path: Path, monkeypatch) -> None:
    """Another process (a CLI ingest that closes its genome) may write the graph file while a fold works from the
    old one: the fold then installs nothing and the index loads the other process's file, losing no vector."""
    g, index, vecs = _warm_index_of_300(tmp_path, monkeypatch)
    entered, release = _hold_the_fold(monkeypatch)
    try:
        fill(g, vecs[300:360], first=300)  # f3.py: 60 new vectors
        index.search(vecs[320], 1)  # starts the fold, held once it has read the file
        assert entered.wait(10)
        other = Genome(tmp_path / "g.db")  # another process: f3.py now holds 40 others; it folds all into the file
        fill(other, vecs[360:400], first=360)
        other.vector_index().warm()
        other.close()
    finally:
        release.set()
    index.wait_for_merge(30)
    assert len(index) == 340 and index.merges == 0
    for i in (10, 290, 360, 399):
        assert index.search(vecs[i], 1).rowids[0] == rowid_of(g, i)
    g.close()


def test_a_graph_file_that_cannot_be_written_keeps_the_index_in_memory(tmp_path: Path, monkeypatch) -> None:
    """A full disk or a folder that refuses the new graph file (here: a folder in the way of both of its temporary
    names): the fold installs nothing, every vector stays searchable from memory, and the next start, once the file
    can be written, finds them all from the file and the change log."""
    g, index, vecs = _warm_index_of_300(tmp_path, monkeypatch)
    blocked = [tmp_path / "g.db.ann.tmp", tmp_path / "g.db.ann.fold.tmp"]
    for folder in blocked:
        folder.mkdir()
    fill(g, vecs[300:360], first=300)  # past MERGE_AT: the next search starts the fold
    assert index.search(vecs[320], 1).rowids[0] == rowid_of(g, 320)
    index.wait_for_merge(30)
    for i in (10, 299, 320, 359):
        assert index.search(vecs[i], 1).rowids[0] == rowid_of(g, i)
    assert len(index) == 360
    g.close()
    for folder in blocked:
        folder.rmdir()
    g = Genome(tmp_path / "g.db")
    for i in (10, 299, 320, 359):
        assert g.vector_index().search(vecs[i], 1).rowids[0] == rowid_of(g, i)
    g.close()
