"""Crafted exports (issue 25, finding 4): a correctly checksummed export is still input from elsewhere.

Each attack is a record of today's export format (version 1, what an attacker hands over as "my genome"),
imported with the real `helix import` into the HELIX_HOME of a running backend, followed by what made
it dangerous: `POST /admin/refresh` (re-reads every file record from disk), `/context` (serves what was
read) and `POST /admin/compact` (hashes every changed file). Before: the refresh read a file outside
every source and /context served it; the /dev/zero record made compact read without end.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import pytest

from helix_context import cli, portable
from helix_context.genome import portable_sql
from helix_context.ingest.genes import gene_id_for
from tests.sources.conftest import wait_until, write

SECRET = "hunter2_outside_the_sources"


def _gene(content: str, path: str | None, *, kind: str = "file", gene_id: str | None = None) -> dict[str, Any]:
    record: dict[str, Any] = {"t": "gene", **dict.fromkeys(portable_sql.GENE_FIELDS)}
    record.update(gene_id=gene_id or gene_id_for(content, kind), content=content, content_type="code",
                  language="python", source_path=path, project="demo", start_line=1, end_line=2, source_kind=kind,
                  volatility_class="medium", authority_class="primary", observed_at=1.0, last_verified_at=1.0,
                  org="", device="", user="", agent="", tier="open", access_count=0, source_changed=0, tags=[],
                  facts=[], embedding=None, sources=[[path, 1, 2]] if path else [])
    return record


def _file(path: str) -> dict[str, Any]:
    # a stale record: refresh and compact see the file "changed" and read it
    return {"t": "file", "path": path, "project": "demo", "size": 1, "mtime_ns": 1, "content_hash": "0" * 64,
            "genes": 1, "ingested_at": 1.0}


def crafted_export(path: Path, records: list[dict[str, Any]], roots: list[dict[str, str]] | None = None) -> Path:
    """An export in format version 1 (with `roots`: version 2, paths as [root, rel]), checksummed as Helix
    writes it."""
    genes = sum(r["t"] == "gene" for r in records)
    files = sum(r["t"] == "file" for r in records)
    end = {"t": "end", "genes": genes, "files": files, "links": 0}
    payload = gzip.compress(b"".join(json.dumps(r).encode() + b"\n" for r in [*records, end]), mtime=0)
    header = {"format": portable.FORMAT_NAME, "version": 1, "compression": "gzip", "created_at": time.time(),
              "payload_bytes": len(payload), "payload_sha256": hashlib.sha256(payload).hexdigest(),
              "counts": {"genes": genes, "files": files, "links": 0}}
    if roots is not None:
        header.update(version=portable.FORMAT_VERSION, roots=roots)
    path.write_bytes(portable.MAGIC + json.dumps(header).encode() + b"\n" + payload)
    return path


def test_a_crafted_export_cannot_make_helix_read_or_serve_files_outside_its_sources(
        server, tmp_path: Path, capsys) -> None:
    proj = tmp_path / "proj"
    write(proj / "app.py", "def app_entry():\n    return 'inside the source'\n")
    outside = tmp_path / "outside"
    write(outside / "secret.py", f"API_TOKEN = '{SECRET}_absolute'\n")
    write(outside / "climbed.py", f"API_TOKEN = '{SECRET}_climbed'\n")
    write(outside / "api_named.md", f"token {SECRET}_api\n")
    service = server.app.state.sources
    with server.client() as client:
        assert client.post("/sources", json={"path": str(proj)}).status_code == 202
        assert service.wait_idle(30)

    absolute = str(outside.resolve() / "secret.py")
    climbed = f"{proj.resolve()}/../outside/climbed.py"
    legit = str(proj.resolve() / "legit.py")
    export = crafted_export(tmp_path / "crafted.hxg", [
        _gene("placeholder one\n", absolute),                               # a file gene with an absolute path
        _gene("placeholder two\n", climbed),                                # a file gene that climbs with ../
        _gene("placeholder three\n", str(outside.resolve() / "api_named.md"), kind="api"),  # API text on disk
        _gene("placeholder four\n", "notes/x.md", kind="api", gene_id="../../../../tmp/helix-owned"),
        _gene("def legit_helper():\n    return 1\n", legit),               # an honest record beside them
        _file(absolute), _file(climbed), _file("/dev/zero"), _file(legit),
    ])

    assert cli.main(["import", str(export), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    with server.client() as client:  # the attack: refresh re-reads every file record, /context serves it
        assert client.post("/admin/refresh").status_code == 200
        context = client.post("/context", json={"query": f"API_TOKEN {SECRET} token"}).json()["expressed_context"]
        assert SECRET not in context
    genome = service.genome
    assert SECRET not in "\n".join(g.content for g in genome.iter_genes(include_retired=True))
    stored = set(genome.file_records())
    assert stored <= {legit, str(proj.resolve() / "app.py")}, stored  # no /dev/zero record for compact to read

    refused = summary["refused"]
    # refused records are counted and listed, each with its reason; the honest gene and file went in
    assert refused["total"] == 7, refused
    listed = {r["id"]: r["reason"] for r in refused["records"]}
    assert "outside every source" in listed["/dev/zero"] or "/dev" in listed["/dev/zero"], listed
    assert "content hash" in listed["../../../../tmp/helix-owned"]
    assert any("absolute path" in why for why in listed.values())
    assert summary["genes"]["new"] == 1 and summary["files"]["new"] == 1, summary

    with server.client() as client:
        started = time.monotonic()
        response = client.post("/admin/compact", timeout=30)
        assert response.status_code == 200 and time.monotonic() - started < 20
    assert genome.get_gene("../../../../tmp/helix-owned") is None
    assert not [g for g in genome.iter_genes(include_retired=True)
                if g.provenance.source_kind != "file" and g.source_path and g.source_path.startswith("/")]


def test_a_root_outside_every_source_needs_the_users_remap(server, tmp_path: Path, capsys) -> None:
    """The same tree moved to another folder: refused until `--remap OLD=NEW` names where it lives now,
    and then that folder becomes a source (so nothing imported is read from outside a source)."""
    elsewhere = tmp_path / "checkout"
    write(elsewhere / "lib.py", "def moved_function():\n    return 2\n")
    export = crafted_export(tmp_path / "moved.hxg", [
        _gene("def moved_function():\n    return 2\n", "/home/someone/project/lib.py"),
        _file("/home/someone/project/lib.py")])

    assert cli.main(["import", str(export), "--dry-run", "--json"]) == 2  # all refused: not a success to a script
    captured = capsys.readouterr()
    plan = json.loads(captured.out)
    assert plan["refused"]["total"] == 2 and not plan["would_change"]
    assert "every chunk and file of the export was refused" in captured.err
    assert "--remap project=" in plan["refused"]["records"][0]["reason"]

    assert cli.main(["import", str(export), "--remap", f"project={elsewhere}"]) == 0
    out = capsys.readouterr().out
    assert f"sources added (a running backend indexes and watches them now, a stopped one when it starts): " \
           f"{elsewhere.resolve()}" in out
    genome = server.app.state.sources.genome
    assert set(genome.file_records()) == {str(elsewhere.resolve() / "lib.py")}
    wait_until(lambda: any(s.path == str(elsewhere.resolve()) for s in genome.list_sources()), what="the source")


def test_a_path_through_a_symlink_inside_a_source_cannot_leave_it(server, tmp_path: Path, capsys) -> None:
    """The path is relative to its root and has no '..', yet a symlink inside the source leads out: refused."""
    proj = tmp_path / "proj"
    write(proj / "app.py", "def app_entry():\n    return 1\n")
    outside = tmp_path / "outside"
    write(outside / "secret.py", f"API_TOKEN = '{SECRET}_linked'\n")
    (proj / "vendor").symlink_to(outside, target_is_directory=True)
    service = server.app.state.sources
    with server.client() as client:
        assert client.post("/sources", json={"path": str(proj)}).status_code == 202
        assert service.wait_idle(30)
    linked = str(proj.resolve() / "vendor" / "secret.py")
    export = crafted_export(tmp_path / "linked.hxg", [_gene("placeholder linked\n", linked), _file(linked)])

    assert cli.main(["import", str(export), "--json"]) == 2  # every record refused
    summary = json.loads(capsys.readouterr().out)
    assert summary["refused"]["total"] == 2
    # its folder (proj/vendor, the root a v1 file gets) resolves outside every source
    assert all("through a symlink" in r["reason"] or "outside every source" in r["reason"]
               for r in summary["refused"]["records"]), summary["refused"]
    with server.client() as client:
        assert client.post("/admin/refresh").status_code == 200
        assert SECRET not in client.post("/context", json={"query": f"API_TOKEN {SECRET}"}).json()["expressed_context"]
    assert linked not in service.genome.file_records()


def test_a_team_exports_shared_names_cannot_leave_the_checkout_they_map_to(tmp_path: Path) -> None:
    """A team export's shared root (`@api`) lands in this machine's checkout of `api`; a name that climbs
    out with '..', is absolute, leads out through a symlink, or a root that is no valid shared name, is
    refused record by record, into a SQLite genome (read from disk) as into a team genome (kept as names)."""
    from helix_context.errors import InvalidRequest
    from helix_context.genome.store import Genome
    from helix_context.portable.validate import ImportGuard
    from helix_context.sources.roots import RootMap

    checkout, outside = tmp_path / "api", tmp_path / "outside"
    write(checkout / "ok.py", "def ok():\n    return 1\n")
    write(outside / "secret.py", f"API_TOKEN = '{SECRET}'\n")
    (checkout / "vendor").symlink_to(outside, target_is_directory=True)
    roots = [{"name": "@api", "path": "@api"}, {"name": "up", "path": "@api/../outside"},
             {"name": "dots", "path": "@../outside"}, {"name": "back", "path": "@api\\..\\outside"}]
    hostile = [["@api", "../outside/secret.py"], ["@api", "/etc/passwd"], ["@api", "vendor/secret.py"],
               ["@api", "..\\outside\\secret.py"], ["up", "secret.py"], ["dots", "secret.py"], ["back", "secret.py"]]
    records = [_gene(f"placeholder {i}\n", ref) for i, ref in enumerate(hostile)]  # type: ignore[arg-type]
    records += [_gene("def ok():\n    return 1\n", ["@api", "ok.py"]), _file(["@api", "ok.py"])]  # type: ignore[arg-type]
    export = crafted_export(tmp_path / "team.hxg", records, roots)

    genome = Genome(tmp_path / "genome.db")
    try:
        with pytest.raises(InvalidRequest, match="helix sources map api PATH-OF-YOUR-CHECKOUT"):
            portable.import_genome(genome, export, machine_roots=RootMap({}))
        summary = portable.import_genome(genome, export, machine_roots=RootMap({"api": checkout}))
        assert summary["refused"]["total"] == len(hostile), summary["refused"]
        assert set(genome.file_records()) == {str(checkout.resolve() / "ok.py")}
        assert not any(SECRET in g.content or "placeholder" in g.content for g in genome.iter_genes())
    finally:
        genome.close()

    team = ImportGuard(roots, {}, sources=[], ingest_roots=[], check_folder=None, keep_shared=True)
    assert team.disk_path(["@api", "src/ok.py"]) == ("@api/src/ok.py", None)
    for ref in hostile:
        if ref[1] != "vendor/secret.py":  # a link in someone's checkout: each backend's map refuses it there
            assert team.disk_path(ref)[0] is None, ref
