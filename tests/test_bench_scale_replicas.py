"""benchmarks/bench_scale.py's ~1M genome: renamed replicas, ingested by the real CLI, vectors copied and nudged."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_scale  # noqa: E402 - imported after the sys.path line above that makes it importable

from helix_context.genome.store import Genome  # noqa: E402 - imported after the sys.path line above that makes it importable
from helix_context.genome.vectors import encode_vector  # noqa: E402 - imported after the sys.path line above that makes it importable

SOURCE = '''def parse_header(line):
    """Split one header line into its name and value."""
    name, _, value = line.partition(":")
    return name.strip(), value.strip()


class HeaderTable:
    def lookup(self, key):
        return self.rows.get(key)
'''


def test_replicas_are_distinct_genes_that_inherit_their_original_vector(tmp_path: Path) -> None:
    corpus = tmp_path / "site"
    (corpus / "pkg").mkdir(parents=True)
    (corpus / "pkg" / "headers.py").write_text(SOURCE)
    (corpus / "pkg" / "other.py").write_text(SOURCE.replace("header", "cookie").replace("Header", "Cookie"))
    home = tmp_path / "home"
    env = {**os.environ, "HELIX_HOME": str(home), "PYTHONPATH": str(REPO), "HELIX_CONFIG": str(REPO / "helix.toml")}
    source = bench_scale.Corpus(corpus, tmp_path / "out")
    slices = []
    for step in range(3):  # one slice a replica: a slice never crosses into the next copy
        folder, files, _, replica = source.take(10**9, step)
        slices.append((files, replica))
        subprocess.run([sys.executable, "-m", "helix_context.cli", "ingest", str(folder), "--json", "--quiet",
                        "--no-embed"], env=env, check=True, capture_output=True, cwd=str(REPO))
    assert slices == [(2, 0), (2, 1), (2, 2)]
    g = Genome(home / "genome.db")
    originals = {}
    rng = np.random.default_rng(0)
    with g.transaction() as tx:  # replica 0 gets "real" vectors, as the embedded first ingest would
        for rowid, _path in tx.execute("SELECT id, source_path FROM genes WHERE source_path LIKE '%/r0/%'").fetchall():
            vec = rng.normal(size=384).astype(np.float32)
            originals[rowid] = vec
            tx.execute("UPDATE genes SET embedding = ? WHERE id = ?", (encode_vector(vec), rowid))
    g.close()
    copied = bench_scale.copy_vectors(home / "genome.db", seed=1)
    g = Genome(home / "genome.db")
    rows = g.conn.execute("SELECT id, source_path, embedding, content FROM genes ORDER BY id").fetchall()
    assert copied == len(rows) - len(originals) > 0 and all(r[2] is not None for r in rows)
    by_file: dict[str, list] = {}
    for _rowid, path, blob, _ in rows:
        by_file.setdefault(path.split("/r", 1)[1].split("/", 1)[1], []).append((path, blob))
    for genes in by_file.values():
        first = np.frombuffer(genes[0][1], dtype=np.int8, offset=4).astype(np.float32)
        for _, blob in genes[1:]:  # same chunk, another copy: close to the original, never equal
            other = np.frombuffer(blob, dtype=np.int8, offset=4).astype(np.float32)
            cos = float(first @ other / np.linalg.norm(first) / np.linalg.norm(other))
            assert 0.97 < cos < 1.0
    genes = g.genes_by_rowid([r[0] for r in rows if "/r2/" in r[1]])
    assert genes and all("parse_header" not in x.content or "parse_header_r2" in x.content for x in genes.values())
    hits = g.fts_search('"parse_header_r2"', 5)  # a renamed identifier is its own word: one copy's genes only
    assert hits and all("/r2/" in genes[rowid].source_path for rowid, _ in hits)
    g.close()
