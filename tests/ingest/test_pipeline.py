"""Ingest end to end on real folders and a real genome: what a user sees from `helix ingest`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from helix_context import HelixContextManager, load_config

PY_FILE = '''"""Server settings."""

PORT = 11437
HOST = "127.0.0.1"


def start_server(port: int = PORT) -> None:
    """Start the backend on the given port."""
    print("starting", port)


class RequestRouter:
    def route(self, path: str) -> str:
        return path.strip("/")
'''


def make_tree(root: Path) -> Path:
    (root / ".git").mkdir(parents=True)
    (root / "src").mkdir()
    (root / "src" / "server.py").write_text(PY_FILE)
    (root / "README.md").write_text("# Demo\n\nA demo project.\n\n## Running\n\nRun `helix serve` on port 11437.\n")
    (root / "node_modules" / "lib").mkdir(parents=True)
    (root / "node_modules" / "lib" / "index.js").write_text("module.exports = 1;\n")
    (root / ".gitignore").write_text("secret/\n*.tmp\n")
    (root / "secret").mkdir()
    (root / "secret" / "keys.txt").write_text("password = hunter2\n")
    (root / "scratch.tmp").write_text("ignored\n")
    return root


def run_cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "helix_context.cli", *args], capture_output=True, text=True,
                          env=os.environ.copy(), timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"helix {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def test_folder_ingest_respects_gitignore_and_default_ignores(tmp_path: Path, helix: HelixContextManager) -> None:
    root = make_tree(tmp_path / "demo")
    report = helix.ingest_path(root, embed=False)
    paths = {g.source_path for g in helix.genome.iter_genes()}
    assert str(root / "src" / "server.py") in paths and str(root / "README.md") in paths
    assert not any("node_modules" in p or "secret" in p or p.endswith(".tmp") for p in paths)
    assert report.files_ingested == 3  # server.py, README.md, .gitignore
    gene = next(g for g in helix.genome.iter_genes() if g.symbol == "start_server")
    assert gene.project == "demo"
    assert PY_FILE.splitlines()[gene.start_line - 1].startswith("def start_server")
    facts = {k: v for g in helix.genome.iter_genes() for k, v in g.facts}
    assert facts.get("PORT") == "11437"


def test_bad_files_are_reported_with_reasons_and_the_rest_goes_on(tmp_path: Path, helix: HelixContextManager) -> None:
    root = tmp_path / "mixed"
    root.mkdir()
    (root / "good.py").write_text("GOOD = True\n")
    (root / "image.dat").write_bytes(bytes(range(256)) * 40)
    (root / "nul.txt").write_bytes(b"text with a \x00 NUL byte inside\n" * 10)
    (root / "latin1.txt").write_bytes("caf\xe9 cr\xe8me".encode("latin-1") * 20)
    (root / "huge.log").write_text("x" * 200 + "\n" * 200_000)
    (root / "loop").symlink_to(root, target_is_directory=True)
    settings = helix.settings.replace(ingest={"max_file_bytes": 100_000, "follow_symlinks": True})
    manager = HelixContextManager(settings, genome=helix.genome)
    report = manager.ingest_path([root, tmp_path / "does-not-exist"], embed=False)
    reasons = {Path(s["path"]).name: s["reason"] for s in report.files_skipped}
    assert reasons["image.dat"] == "binary file"
    assert reasons["nul.txt"] == "binary file"
    assert "UTF-8" in reasons["latin1.txt"]
    assert "too large" in reasons["huge.log"]
    assert "symlink loop" in reasons["loop"]
    assert "does not exist" in reasons["does-not-exist"]
    assert report.files_ingested == 1


def test_unchanged_reingest_writes_nothing(tmp_path: Path, helix: HelixContextManager) -> None:
    root = make_tree(tmp_path / "demo")
    helix.ingest_path(root, embed=False)
    generation = helix.genome.generation()
    again = helix.ingest_path(root, embed=False)
    assert again.files_unchanged == 3 and again.files_ingested == 0 and again.genes_added == 0
    assert helix.genome.generation() == generation
    # touched but identical: the mtime is remembered, no gene is rewritten
    os.utime(root / "README.md", None)
    third = helix.ingest_path(root, embed=False)
    assert third.files_ingested == 0 and third.genes_added == 0 and third.genes_replaced == 0


def test_changed_file_is_replaced_and_deleted_file_retired(tmp_path: Path, helix: HelixContextManager) -> None:
    root = make_tree(tmp_path / "demo")
    helix.ingest_path(root, embed=False)
    server = root / "src" / "server.py"
    server.write_text(PY_FILE.replace("11437", "12000"))
    report = helix.ingest_path(root, embed=False)
    assert report.files_ingested == 1 and report.genes_replaced >= 1
    contents = "\n".join(g.content for g in helix.genome.iter_genes())
    assert "12000" in contents and "PORT = 11437" not in contents
    (root / "README.md").unlink()
    report = helix.ingest_path(root, embed=False)
    assert report.genes_retired >= 1
    assert not any(g.source_path == str(root / "README.md") for g in helix.genome.iter_genes())


def test_python_api_of_the_original_helix(helix_home: Path) -> None:
    helix = HelixContextManager(load_config())
    report = helix.ingest("def handler():\n    return 42\n", content_type="code", metadata={"path": "api/handler.py"})
    assert report.genes_added == 1
    gene = next(helix.genome.iter_genes())
    assert gene.source_path == "api/handler.py" and gene.content_type == "code"
    assert gene.provenance.source_kind == "api"
    assert gene.org and gene.device and gene.user
    # re-posting the same path replaces its genes
    helix.ingest("def handler():\n    return 43\n", content_type="code", metadata={"path": "api/handler.py"})
    assert [g.content.strip() for g in helix.genome.iter_genes()] == ["def handler():\n    return 43"]
    helix.close()


def test_cli_ingest_json_and_stats(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "demo")
    out = json.loads(run_cli("ingest", str(root), "--no-embed", "--json").stdout)
    for key in ("files_seen", "files_ingested", "files_unchanged", "files_skipped", "genes_added",
                "genes_replaced", "genes_retired", "bytes", "seconds"):
        assert key in out, key
    assert out["files_ingested"] == 3
    stats = json.loads(run_cli("stats", "--json").stdout)
    for key in ("total_genes", "raw_bytes", "db_bytes", "genes_by_tier", "genes_by_source_kind", "parts"):
        assert key in stats, key
    assert set(stats["parts"]) == {"embeddings", "ner", "headroom"}
    text = run_cli("stats").stdout
    assert "indexed chunks" in text and "embeddings" in text


def test_cli_reports_a_broken_config_clearly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "helix.toml"
    cfg.write_text("[ingest]\nmax_file_bytes = 'big'\n")
    monkeypatch.setenv("HELIX_CONFIG", str(cfg))
    proc = run_cli("stats", check=False)
    assert proc.returncode == 2
    assert "max_file_bytes" in proc.stderr and str(cfg) in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.skipif(os.name == "nt", reason="SIGKILL")
def test_kill_9_mid_ingest_leaves_a_consistent_genome_the_next_run_completes(tmp_path: Path) -> None:
    root = tmp_path / "many"
    root.mkdir()
    for i in range(400):
        (root / f"mod_{i:03}.py").write_text(f'"""Module {i}."""\n\nVALUE_{i} = {i}\n\n\ndef func_{i}(x):\n    return x + {i}\n')
    proc = subprocess.Popen([sys.executable, "-m", "helix_context.cli", "ingest", str(root), "--no-embed", "--quiet"],
                            env=os.environ.copy(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    genome_path = Path(os.environ["HELIX_HOME"]) / "genome.db"
    deadline = time.monotonic() + 60
    killed = False
    while time.monotonic() < deadline and proc.poll() is None:
        if genome_path.exists():
            helix = HelixContextManager(load_config())
            n = helix.genome.stats()["files"]
            helix.close()
            if n >= 20:
                proc.send_signal(signal.SIGKILL)
                killed = True
                break
        time.sleep(0.02)
    proc.wait(timeout=30)
    helix = HelixContextManager(load_config())
    assert helix.genome.integrity_check() == []
    before = helix.genome.stats()["files"]
    # every recorded file has its genes (one transaction per file)
    for path, record in helix.genome.file_records().items():
        assert len(helix.genome.genes_for_source(path)) == record.genes
    report = helix.ingest_path(root, embed=False)
    assert report.files_unchanged == before
    assert report.files_ingested == 400 - before
    assert helix.genome.stats()["files"] == 400
    helix.close()
    if not killed:
        pytest.skip("the ingest finished before it could be killed (machine too fast); consistency still checked")


def _topic_tree(root: Path, files: int) -> Path:
    root.mkdir(parents=True)
    topics = ["cache eviction", "invoice totals", "socket retries", "thumbnail resizing", "token refresh",
              "queue draining", "csv export", "audit trail", "rate limiting", "email digests"]
    for i in range(files):
        topic = topics[i % len(topics)]
        name = topic.replace(" ", "_")
        body = "\n\n".join(
            f'def {name}_step_{j}_{i}(value):\n    """Handle {topic}, stage {j} of module {i}."""\n'
            f"    # {topic}: keep stage {j} separate\n"
            + "".join(f"    value = value + {k} * {j + i}  # {topic} adjustment {k}\n" for k in range(14))
            + "    return value\n" for j in range(4))
        (root / f"{name}_{i}.py").write_text(body)
    return root


def test_ingest_with_embeddings_stores_each_gene_the_vector_of_its_own_text(tmp_path: Path,
                                                                          helix: HelixContextManager) -> None:
    from helix_context.ingest.embed_text import embedding_text, embedding_tokens

    if helix.embedder is None:
        pytest.skip(f"embeddings unavailable: {helix.embedder_part.detail}")
    root = _topic_tree(tmp_path / "repo", 40)  # well over one batch: embedding overlaps parsing
    report = helix.ingest_path(root)
    assert report.files_ingested == 40 and report.embedded
    genes = list(helix.genome.iter_genes())
    assert len(genes) > 100

    def check() -> None:
        cfg = helix.settings.embedding
        expected = helix.embedder.embed([embedding_text(g) for g in genes], [embedding_tokens(g, cfg) for g in genes])
        stored = np.stack([helix.genome.embedding_of(g.rowid) for g in genes])
        cosine = (stored * expected).sum(1) / np.linalg.norm(stored, axis=1)
        assert cosine.min() > 0.98  # int8 storage and per-batch quantisation move vectors a little
        # and no vector landed on another gene: each stored vector is closest to its own gene's text
        assert (np.argmax(stored @ expected.T, axis=1) == np.arange(len(genes))).mean() > 0.95

    check()
    # genes stored without a vector (dense signal off at the time) get the same text's vector later
    helix.genome.conn.execute("UPDATE genes SET embedding = NULL WHERE id % 2 = 0")
    assert helix.kv_backfill()["genes_embedded"] == sum(1 for g in genes if g.rowid % 2 == 0)
    check()


def test_a_symlink_to_a_file_outside_is_not_followed(tmp_path: Path, helix: HelixContextManager) -> None:
    """A walked folder may hold a link to ~/.ssh/id_rsa: without [ingest] follow_symlinks it is reported, not read;
    a file that becomes such a link retires."""
    secret = tmp_path / "outside" / "id_rsa"
    secret.parent.mkdir()
    secret.write_text("PRIVATE KEY hunter2_material\n")
    root = make_tree(tmp_path / "demo")
    (root / "key.txt").symlink_to(secret)
    report = helix.ingest_path(root, embed=False)
    assert {Path(s["path"]).name: s["reason"] for s in report.files_skipped}["key.txt"].startswith("symlink not followed")
    readme = root / "README.md"
    key = str(readme.resolve())
    assert helix.genome.file_record(key) is not None
    readme.unlink()
    readme.symlink_to(secret)
    again = helix.ingest_path(root, embed=False)
    assert again.genes_retired >= 1 and helix.genome.file_record(key) is None
    assert "hunter2" not in "\n".join(g.content for g in helix.genome.iter_genes())
