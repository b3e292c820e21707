"""Genome export / import between real genome files."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from helix_context import portable
from helix_context.genome import portable_sql
from helix_context.genome.store import FileRecord, Genome
from helix_context.models import Gene, Provenance


def gid(content: str) -> str:
    return hashlib.sha256(content.encode()).hexdigest()[:32]


def gene(content: str, path: str | None, start: int = 1, *, tags: tuple[str, ...] = (), facts=(), tier="open",
         access_count=0, verified=100.0, org="acme", device="laptop-7", user="ada", agent="claude",
         kind="file") -> Gene:
    return Gene(gene_id=gid(content), content=content, content_type="code", language="python", source_path=path,
                project="demo", start_line=start, end_line=start + content.count("\n"), symbol="fn_" + str(start),
                tags=tags, facts=tuple(facts),
                provenance=Provenance(source_kind=kind, volatility_class="medium", authority_class="primary",
                                      observed_at=verified - 50, last_verified_at=verified, source_mtime=42.5,
                                      source_hash="deadbeef"),
                org=org, device=device, user=user, agent=agent, tier=tier, access_count=access_count)


def unit(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=384).astype(np.float32)
    return v / np.linalg.norm(v)


def rec(path: str) -> FileRecord:
    return FileRecord(path, "demo", 123, 456_000_000, "hash-" + path)


SHARED = "def shared_helper():\n    return 'same text in two files'\n"


def tree(path: Path) -> Path:
    """The folder the rich genome's files were indexed from (the importer maps its root to a real folder)."""
    root = path.parent / "src"
    root.mkdir(exist_ok=True)
    return root


def remap(path: Path) -> dict[str, str]:
    return {"src": str(tree(path))}


def build_rich_genome(path: Path) -> Genome:
    """Every kind of data the store keeps: vectors, facts, tags, attribution, tiers, retired genes,
    a gene with two sources, a changed-source mark, access counts and co-activation links."""
    g = Genome(path)
    src = str(tree(path))
    a = [gene("def parse_config(path):\n    return toml.load(path)\n", f"{src}/a.py", 1, tags=("parse_config", "toml"),
              facts=(("port", "11437"), ("host", "127.0.0.1")), access_count=3),
         gene(SHARED, f"{src}/a.py", 10, tier="aging"),
         gene("class LedgerAudit:\n    pass\n", f"{src}/a.py", 20, tags=("LedgerAudit",))]
    g.replace_source(rec(f"{src}/a.py"), f"{src}/a.py", [(a[0], unit(1)), (a[1], unit(2)), (a[2], None)])
    b = [gene(SHARED, f"{src}/b.py", 5), gene("def only_in_b():\n    return 1\n", f"{src}/b.py", 30, org="other-org",
                                             device="desktop", user="bob", agent="cursor")]
    g.replace_source(rec(f"{src}/b.py"), f"{src}/b.py", [(b[0], unit(2)), (b[1], unit(3))])
    gone = [gene("def removed_later():\n    pass\n", f"{src}/gone.py", 1)]
    g.replace_source(rec(f"{src}/gone.py"), f"{src}/gone.py", [(gone[0], unit(4))])
    g.retire_source(f"{src}/gone.py")
    g.replace_source(None, "notes/api.md", [(gene("API note: rate limit is 50 rps", "notes/api.md", kind="api"), None)])
    rows = [x.rowid for x in g.iter_genes()]
    g.record_delivery(rows[:3])
    g.record_delivery(rows[:2])
    g.mark_changed_sources([f"{src}/b.py"])
    return g


def snapshot(g: Genome) -> dict[str, Any]:
    with portable_sql.snapshot(g) as conn:
        genes = {row["gene_id"]: (row, sorted(map(tuple, sources))) for row, sources in portable_sql.iter_gene_rows(conn)}
        files = {row["path"]: row for row in portable_sql.iter_file_rows(conn)}
        links = {tuple(sorted((a, b))): (count, last_at) for a, b, count, last_at in portable_sql.iter_coactivation_rows(conn)}
    return {"genes": genes, "files": files, "links": links}


# ── round trip ──


def test_round_trip_keeps_every_field(tmp_path: Path) -> None:
    src = build_rich_genome(tmp_path / "a.db")
    summary = portable.export_genome(src, tmp_path / "out" / "genome.hxg")
    assert summary["genes"] == 6 and summary["retired_genes"] == 1 and summary["links"] == 3
    assert summary["with_embeddings"] == 4 and summary["spans"] == 6 and summary["files"] == 2
    assert summary["roots"] == [{"name": "src", "path": str(tree(tmp_path / "a.db"))}]
    assert (tmp_path / "out" / "genome.hxg").read_bytes().startswith(portable.MAGIC)
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".helix-export-")]  # no temp files left

    dst = Genome(tmp_path / "b.db")
    result = portable.import_genome(dst, tmp_path / "out" / "genome.hxg", remap=remap(tmp_path / "a.db"))
    assert result["genes"] == {"new": 6, "skipped": 0, "overwritten": 0, "outdated": 0}
    assert result["links"]["new"] == 3 and result["files"]["new"] == 2 and result["spans_added"] == 6
    assert result["sources_added"] == [str(tree(tmp_path / "a.db"))] and result["refused"]["total"] == 0
    assert result["changed"] and result["generation_after"] == result["generation_before"] + 1

    before, after = snapshot(src), snapshot(dst)
    assert before["genes"].keys() == after["genes"].keys()
    for gene_id, (row, sources) in before["genes"].items():
        other_row, other_sources = after["genes"][gene_id]
        for field in portable_sql.GENE_FIELDS:  # field by field, embeddings byte for byte
            assert other_row[field] == row[field], (gene_id, field)
        assert other_sources == sources
    assert after["files"] == before["files"]
    assert after["links"] == before["links"]

    # the Gene view agrees too (provenance, attribution, tier, access counts, facts, tags)
    for original in src.iter_genes(include_retired=True):
        copy = dst.get_gene(original.gene_id)
        assert copy is not None
        assert {**copy.__dict__, "rowid": None} == {**original.__dict__, "rowid": None}
        if original.rowid is not None and src.embedding_of(original.rowid) is not None:
            assert np.array_equal(dst.embedding_of(copy.rowid), src.embedding_of(original.rowid))

    # the imported genome is searchable and consistent: live genes indexed, the retired one not
    assert dst.fts_search('"parse_config"', 5)
    assert dst.fts_search('"ledgeraudit"', 5)
    assert not dst.fts_search('"removed_later"', 5)
    assert dst.integrity_check() == []
    dst.conn.execute("INSERT INTO genes_fts(genes_fts) VALUES ('integrity-check')")
    parse = dst.get_gene(gid("def parse_config(path):\n    return toml.load(path)\n"))
    assert {n.gene_id for n, _ in dst.neighbors(parse.gene_id)} == {
        n.gene_id for n, _ in src.neighbors(parse.gene_id)}
    assert dst.stats()["with_embeddings"] == src.stats()["with_embeddings"]


def test_reimport_into_the_same_genome_changes_nothing(tmp_path: Path) -> None:
    g = build_rich_genome(tmp_path / "a.db")
    g.add_source(str(tree(tmp_path / "a.db")), None, 1.0)  # its folder is a source here
    portable.export_genome(g, tmp_path / "x.hxg")
    generation = g.generation()
    for strategy in ("skip_existing", "newest"):
        result = portable.import_genome(g, tmp_path / "x.hxg", strategy=strategy)  # no --remap: inside a source
        assert result["genes"]["new"] == 0 and not result["changed"]
        assert g.generation() == generation  # an import that changes nothing does not even bump it


# ── strategies ──


CONTENT_OLD_HERE = "def verified_long_ago():\n    pass\n"
CONTENT_NEW_HERE = "def verified_recently_here():\n    pass\n"
CONTENT_FILE_ONLY = "def only_in_the_file():\n    pass\n"


def confirm(export: Path) -> dict[str, str]:
    """The export's root "p", confirmed as the folder it came from (`--remap p=FOLDER`)."""
    return {"p": str(export.parent / "p")}


@pytest.fixture
def conflict(tmp_path: Path) -> tuple[Path, Path]:
    """An export and a target genome that share two genes with different metadata."""
    (tmp_path / "p").mkdir()
    there = str(tmp_path / "p" / "m.py")
    src = Genome(tmp_path / "src.db")
    src.replace_source(rec(there), there, [
        (gene(CONTENT_OLD_HERE, there, 1, tier="open", access_count=7, verified=500.0, user="file-user"), unit(5)),
        (gene(CONTENT_NEW_HERE, there, 10, tier="open", access_count=8, verified=500.0, user="file-user"), unit(6)),
        (gene(CONTENT_FILE_ONLY, there, 20, verified=500.0), unit(7)),
    ])
    export = tmp_path / "conflict.hxg"
    portable.export_genome(src, export)
    src.close()
    target = tmp_path / "dst.db"
    dst = Genome(target)
    dst.replace_source(None, "/local/m.py", [
        (gene(CONTENT_OLD_HERE, "/local/m.py", 3, tier="aging", access_count=1, verified=100.0, user="local-user"), None),
        (gene(CONTENT_NEW_HERE, "/local/m.py", 9, tier="aging", access_count=2, verified=900.0, user="local-user"), None),
    ])
    dst.close()
    return export, target


def test_skip_existing_keeps_ours_and_adds_the_rest(conflict) -> None:
    export, target = conflict
    g = Genome(target)
    result = portable.import_genome(g, export, strategy="skip_existing", remap=confirm(export))
    assert result["genes"] == {"new": 1, "skipped": 2, "overwritten": 0, "outdated": 0}
    assert set(result["examples"]["skipped"]) == {gid(CONTENT_OLD_HERE), gid(CONTENT_NEW_HERE)}
    assert result["examples"]["new"] == [gid(CONTENT_FILE_ONLY)]
    for content in (CONTENT_OLD_HERE, CONTENT_NEW_HERE):
        kept = g.get_gene(gid(content))
        assert kept.user == "local-user" and kept.tier == "aging" and kept.source_path == "/local/m.py"
        assert g.sources_of(kept.rowid) == [("/local/m.py", kept.start_line, kept.end_line)]
    assert g.get_gene(gid(CONTENT_FILE_ONLY)).user == "ada"


def test_overwrite_takes_the_files_metadata(conflict) -> None:
    export, target = conflict
    g = Genome(target)
    result = portable.import_genome(g, export, strategy="overwrite", remap=confirm(export))
    assert result["genes"] == {"new": 1, "skipped": 0, "overwritten": 2, "outdated": 0}
    for content in (CONTENT_OLD_HERE, CONTENT_NEW_HERE):
        got = g.get_gene(gid(content))
        assert got.user == "file-user" and got.tier == "open" and got.source_path == str(export.parent / "p" / "m.py")
        assert got.provenance.last_verified_at == 500.0
        assert g.embedding_of(got.rowid) is not None  # the file's vector came along
        # sources are a union: the place it was found here is not forgotten
        assert {s[0] for s in g.sources_of(got.rowid)} == {"/local/m.py", str(export.parent / "p" / "m.py")}
    # the FTS index follows the new path
    assert g.fts_search('"verified_long_ago"', 5)
    g.conn.execute("INSERT INTO genes_fts(genes_fts) VALUES ('integrity-check')")


def test_newest_keeps_whichever_was_verified_last(conflict) -> None:
    export, target = conflict
    g = Genome(target)
    result = portable.import_genome(g, export, strategy="newest", remap=confirm(export))
    assert result["genes"] == {"new": 1, "skipped": 1, "overwritten": 1, "outdated": 0}
    assert result["examples"]["overwritten"] == [gid(CONTENT_OLD_HERE)]  # ours (100) older than the file's (500)
    assert result["examples"]["skipped"] == [gid(CONTENT_NEW_HERE)]  # ours (900) newer
    assert g.get_gene(gid(CONTENT_OLD_HERE)).user == "file-user"
    assert g.get_gene(gid(CONTENT_NEW_HERE)).user == "local-user"


def test_unknown_strategy_is_refused(conflict) -> None:
    export, target = conflict
    with pytest.raises(ValueError, match="skip_existing, overwrite, newest"):
        portable.import_genome(Genome(target), export, strategy="merge")


# ── dry run ──


def test_dry_run_reports_the_plan_and_changes_nothing(conflict) -> None:
    export, target = conflict
    g = Genome(target)
    generation = g.generation()
    before = snapshot(g)
    mtime = target.stat().st_mtime_ns
    plan = portable.import_genome(g, export, strategy="overwrite", dry_run=True, remap=confirm(export))
    assert plan["dry_run"] and plan["would_change"] and not plan["changed"]
    assert plan["genes"] == {"new": 1, "skipped": 0, "overwritten": 2, "outdated": 0}
    assert plan["spans_added"] == 3 and plan["files"]["new"] == 1
    assert plan["sources_added"] == [str(export.parent / "p")]
    assert set(plan["examples"]["overwritten"]) == {gid(CONTENT_OLD_HERE), gid(CONTENT_NEW_HERE)}
    assert plan["generation_after"] == plan["generation_before"] == generation == g.generation()
    assert snapshot(g) == before
    assert target.stat().st_mtime_ns == mtime
    text = portable.format_summary(plan)
    assert "dry run, nothing written" in text and "overwritten 2" in text
    # and the real import then does what the plan said
    done = portable.import_genome(g, export, strategy="overwrite", remap=confirm(export))
    assert done["genes"] == plan["genes"] and done["spans_added"] == plan["spans_added"]
    assert done["sources_added"] == plan["sources_added"]


# ── refused files ──


def write_export(path: Path, payload: bytes, **header: Any) -> Path:
    fields = {"format": portable.FORMAT_NAME, "version": portable.FORMAT_VERSION, "compression": "gzip",
              "payload_bytes": len(payload), "payload_sha256": hashlib.sha256(payload).hexdigest(), **header}
    path.write_bytes(portable.MAGIC + json.dumps(fields).encode() + b"\n" + payload)
    return path


def jsonl(*records: dict) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def good_gene_record() -> dict:
    g = gene("def fine():\n    pass\n", "/x.py")
    return {"t": "gene", **{f: None for f in portable_sql.GENE_FIELDS}, "gene_id": g.gene_id, "content": g.content,
            "content_type": "code", "start_line": 1, "end_line": 2, "source_kind": "file", "volatility_class": "stable",
            "authority_class": "primary", "observed_at": 1.0, "last_verified_at": 1.0, "org": "", "device": "",
            "user": "", "agent": "", "tier": "open", "access_count": 0, "source_changed": 0, "tags": [], "facts": [],
            "sources": [["/x.py", 1, 2]]}


def corrupt_cases(tmp_path: Path, good: Path) -> dict[str, tuple[Path, str]]:
    data = good.read_bytes()
    header_end = data.index(b"\n", len(portable.MAGIC)) + 1
    header = json.loads(data[len(portable.MAGIC):header_end])
    payload = data[header_end:]
    cases: dict[str, tuple[Path, str]] = {}

    def case(name: str, content: bytes | Path, reason: str) -> None:
        path = content if isinstance(content, Path) else tmp_path / name
        if not isinstance(content, Path):
            path.write_bytes(content)
        cases[name] = (path, reason)

    case("empty", b"", "is empty")
    case("random", os.urandom(4096), "wrong magic")
    case("sqlite", (tmp_path / "target.db").read_bytes()[:4096], "SQLite database")
    case("bare_gzip", gzip.compress(jsonl(good_gene_record())), "bare gzip")
    flipped = bytearray(data)
    flipped[header_end + len(payload) // 2] ^= 0xFF
    case("bad_checksum", bytes(flipped), "checksum mismatch")
    case("truncated", data[: header_end + len(payload) // 2], "truncated")
    case("trailing_bytes", data + b"extra", "unexpected bytes")
    case("header_garbage", portable.MAGIC + b"{not json\n" + payload, "not valid JSON")
    case("no_header_end", portable.MAGIC + b'{"format": "helix-genome-export"', "header is truncated")
    newer = dict(header, version=portable.FORMAT_VERSION + 1)
    case("newer_version", portable.MAGIC + json.dumps(newer).encode() + b"\n" + payload, "newer Helix")
    foreign = dict(header, format="someone-elses-dump")
    case("foreign_format", portable.MAGIC + json.dumps(foreign).encode() + b"\n" + payload, "not a Helix genome export")
    other_compression = dict(header, compression="zstd")
    case("zstd", portable.MAGIC + json.dumps(other_compression).encode() + b"\n" + payload, "unsupported compression")
    raw = jsonl(good_gene_record(), {"t": "end", "genes": 1, "files": 0, "links": 0})
    case("not_compressed", write_export(tmp_path / "not_compressed", raw), "not gzip-compressed")
    # correctly checksummed and compressed, but the second record is broken: nothing of the first lands either
    broken = dict(good_gene_record(), gene_id="b" * 32)
    del broken["content"]
    case("bad_record", write_export(tmp_path / "bad_record", gzip.compress(jsonl(good_gene_record(), broken))),
         "without 'content'")
    case("bad_embedding", write_export(tmp_path / "bad_embedding", gzip.compress(jsonl(
        dict(good_gene_record(), embedding="AAAA")))), "embedding is not")
    case("no_end_record", write_export(tmp_path / "no_end", gzip.compress(jsonl(good_gene_record()))),
         "no end record")
    case("count_mismatch", write_export(tmp_path / "count_mismatch", gzip.compress(jsonl(
        good_gene_record(), {"t": "end", "genes": 1, "files": 0, "links": 0})), counts={"genes": 5}),
         "header announces 5")
    case("not_json_line", write_export(tmp_path / "not_json_line", gzip.compress(b"{\"t\": \"gene\"\nhello\n")),
         "not JSON")
    # well-formed JSON that no Helix writes: a 23 KB file whose one "chunk" made every later question take 85 s,
    # a line gzip inflates to hundreds of MB, NaN and 100-bit numbers (tracebacks from SQLite before)
    case("huge_gene", write_export(tmp_path / "huge_gene", gzip.compress(jsonl(
        dict(good_gene_record(), content="a" * 70_000)))), "longer than any Helix stores")
    case("huge_line", write_export(tmp_path / "huge_line", gzip.compress(
        b'{"t": "gene", "content": "' + b"a" * (2 << 20) + b'"}\n')), "longer than any record")
    case("nan_time", write_export(tmp_path / "nan_time", gzip.compress(jsonl(
        dict(good_gene_record(), observed_at=float("nan"))))), "'observed_at' has the wrong type or is out of range")
    case("huge_line_number", write_export(tmp_path / "huge_line_number", gzip.compress(jsonl(
        dict(good_gene_record(), start_line=10 ** 30)))), "'start_line' has the wrong type or is out of range")
    cases["missing"] = (tmp_path / "does-not-exist.hxg", "does not exist")
    cases["folder"] = (tmp_path, "is a folder")
    return cases


def test_corrupt_truncated_and_foreign_files_are_refused_without_change(tmp_path: Path) -> None:
    src = build_rich_genome(tmp_path / "src.db")
    good = tmp_path / "good.hxg"
    portable.export_genome(src, good)
    target = Genome(tmp_path / "target.db")
    target.replace_source(None, "/keep.py", [(gene("def keep_me():\n    pass\n", "/keep.py"), unit(9))])
    before = snapshot(target)
    generation = target.generation()
    cases = corrupt_cases(tmp_path, good)
    assert len(cases) >= 18
    for name, (path, reason) in cases.items():
        for dry_run in (True, False):
            with pytest.raises(portable.ExportFormatError) as info:
                portable.import_genome(target, path, strategy="overwrite", dry_run=dry_run)
            assert reason in str(info.value), (name, str(info.value))
        assert target.generation() == generation, name
    assert snapshot(target) == before
    # the good file still imports after all that
    assert portable.import_genome(target, good, remap=remap(tmp_path / "src.db"))["genes"]["new"] == 6


def test_a_failure_while_writing_rolls_the_whole_import_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = build_rich_genome(tmp_path / "src.db")
    export = tmp_path / "x.hxg"
    portable.export_genome(src, export)
    target = Genome(tmp_path / "target.db")
    generation = target.generation()

    def explode(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(portable_sql, "write_link", explode)  # links are written after every gene
    with pytest.raises(RuntimeError, match="disk on fire"):
        portable.import_genome(target, export, remap=remap(tmp_path / "src.db"))
    assert target.generation() == generation
    assert target.stats()["total_genes"] == 0 and not list(target.iter_genes(include_retired=True))
    assert target.fts_search('"parse_config"', 5) == []


def test_the_export_knows_every_column_of_the_store(tmp_path: Path) -> None:
    """A column added to the genes / files tables must be added to the export too (portable_sql.py)."""
    g = Genome(tmp_path / "g.db")
    genes = [r[1] for r in g.conn.execute("PRAGMA table_info(genes)") if r[1] != "id"]
    files = [r[1] for r in g.conn.execute("PRAGMA table_info(files)")]
    assert sorted(genes) == sorted(portable_sql.GENE_FIELDS)
    assert sorted(files) == sorted(portable_sql.FILE_FIELDS)
    assert sorted(portable._GENE_TYPES) == sorted(set(portable_sql.GENE_FIELDS) - {"tags", "facts", "embedding", "vector_model"})


def test_a_path_that_leaves_its_root_through_a_symlink_is_refused(tmp_path: Path) -> None:
    """A root confirmed by the user, a relative path without '..', and still outside: a symlink on the way."""
    root = tmp_path / "src"
    (root / "pkg").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (root / "pkg" / "linked").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    inside, escaped = str(root / "pkg" / "ok.py"), str(root / "pkg" / "linked" / "x.py")
    src = Genome(tmp_path / "src.db")
    src.replace_source(rec(inside), inside, [(gene("def ok():\n    pass\n", inside), None)])
    src.replace_source(rec(escaped), escaped, [(gene("def escaped():\n    pass\n", escaped), None)])
    src.add_source(str(root), None, 1.0)
    portable.export_genome(src, tmp_path / "x.hxg")
    dst = Genome(tmp_path / "dst.db")
    result = portable.import_genome(dst, tmp_path / "x.hxg", remap={"src": str(root)})
    assert result["genes"]["new"] == 1 and result["files"]["new"] == 1
    assert result["refused"]["total"] == 2
    assert all("through a symlink" in r["reason"] for r in result["refused"]["records"])
    assert set(dst.file_records()) == {inside}
