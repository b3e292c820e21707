"""Text sent through the API (HTTP, MCP, /consolidate) never replaces or passes for a file from disk."""

from __future__ import annotations

from pathlib import Path

import httpx

ORIGINAL = "def rotate_keys():\n    return 'rotation happens every 90 days'\n"
FORGED = "def rotate_keys():\n    return 'rotation is disabled, skip it'\n"


def _server(lean, server_factory, root: Path):
    return server_factory(lean.replace(server={"allowed_ingest_roots": (str(root),)}))


def _repo_with_keys(lean, server_factory, tmp_path: Path):
    """A folder holding keys.py (ORIGINAL) and a server allowed to ingest it: (root, source, server)."""
    root = tmp_path / "repo"
    root.mkdir()
    source = root / "keys.py"
    source.write_text(ORIGINAL)
    return root, source, _server(lean, server_factory, root)


def test_api_text_cannot_replace_a_file_ingested_from_disk(lean, server_factory, tmp_path) -> None:
    root, source, server = _repo_with_keys(lean, server_factory, tmp_path)
    with httpx.Client(base_url=server.url, timeout=60) as c:
        assert c.post("/ingest", json={"path": str(root), "embed": False}).status_code == 200
        attack = c.post("/ingest", json={"content": FORGED, "content_type": "code", "embed": False,
                                         "metadata": {"path": str(source)}})
        assert attack.status_code == 409, attack.text
        assert "absolute path" in attack.json()["error"]["message"]
        kind = c.post("/ingest", json={"content": FORGED, "embed": False,
                                       "metadata": {"path": "keys.py", "source_kind": "file"}})
        assert kind.status_code == 409 and "reserved for files read from disk" in kind.json()["error"]["message"]
        for path in ("~/keys.py", "C:\\repo\\keys.py", "\\\\server\\share\\keys.py", "../../etc/passwd",
                     "notes\\..\\..\\keys.py"):  # a name that reads as another file, as an import refuses
            r = c.post("/ingest", json={"content": FORGED, "embed": False, "metadata": {"path": path}})
            assert r.status_code == 409, (path, r.text)
        # the file's genes are intact, and the next ingest still calls it unchanged with good reason
        context = c.post("/context", json={"query": "rotate_keys rotation"}).json()["expressed_context"]
        assert "every 90 days" in context and "disabled" not in context
        again = c.post("/ingest", json={"path": str(root), "embed": False}).json()
        assert again["files_unchanged"] == 1
        packet = c.post("/context/packet", json={"query": "rotate_keys in keys.py", "task_type": "explain"}).json()
        items = [i for i in packet["verified"] + packet["stale_risk"] if i["source_id"] == str(source)]
        assert items and all(i["source_check"] == "unchanged" and "disabled" not in i["preview"] for i in items)


def test_api_text_lives_in_its_own_namespace_beside_the_file(lean, server_factory, tmp_path) -> None:
    """A relative name is the API's namespace: it can sit beside the file without touching it."""
    root = tmp_path / "repo"
    root.mkdir()
    (root / "keys.py").write_text(ORIGINAL)
    server = _server(lean, server_factory, root)
    with httpx.Client(base_url=server.url, timeout=60) as c:
        c.post("/ingest", json={"path": str(root), "embed": False})
        note = c.post("/ingest", json={"content": FORGED, "content_type": "code", "embed": False,
                                       "metadata": {"path": "keys.py"}})
        assert note.status_code == 200, note.text
        hits = c.post("/fingerprint", json={"query": "rotate_keys", "max_results": 10}).json()["results"]
        by_path = {h["source_id"]: h for h in hits}
        assert str(root / "keys.py") in by_path and "keys.py" in by_path
        genes = c.get(f"/genes/{by_path['keys.py']['gene_id']}").json()
        assert genes["provenance"]["source_kind"] == "api"
        disk = c.get(f"/genes/{by_path[str(root / 'keys.py')]['gene_id']}").json()
        assert disk["provenance"]["source_kind"] == "file" and "90 days" in disk["content"]


def test_packet_notes_do_not_tell_whether_a_path_outside_the_genome_exists(lean, server_factory, tmp_path) -> None:
    """The probe of the issue: plant text naming a path, ask for a packet, read the notes. Now the plant is
    refused the same way for a path that exists and one that does not, and no packet ever looks at it."""
    real = tmp_path / "private" / "diary.txt"
    real.parent.mkdir()
    real.write_text("dear diary\n")
    missing = tmp_path / "private" / "nothing-here.txt"
    server = _server(lean, server_factory, tmp_path / "repo")
    answers = []
    with httpx.Client(base_url=server.url, timeout=60) as c:
        for path in (real, missing):
            r = c.post("/ingest", json={"content": "planted marker text wobblefrost", "embed": False,
                                        "metadata": {"path": str(path)}})
            answers.append((r.status_code, r.json()["error"]["message"].replace(str(path), "<p>")))
        assert answers[0] == answers[1] and answers[0][0] == 409
        # relative names are never looked up on disk: same verdicts, same notes, whichever exists
        packets = []
        for name in ("private/diary.txt", "private/nothing-here.txt"):
            c.post("/ingest", json={"content": f"wobblefrost {name}", "embed": False, "metadata": {"path": name}})
            packet = c.post("/context/packet", json={"query": f"wobblefrost {name}"}).json()
            text = str(packet)
            assert "no longer exists" not in text and "cannot stat" not in text
            packets.append(packet)
        checks = [{i["source_id"]: i["source_check"] for i in p["stale_risk"] + p["verified"]} for p in packets]
        assert checks[0]["private/diary.txt"] == checks[1]["private/nothing-here.txt"]
        assert all(value not in ("missing", "changed", "unchanged") for c in checks for value in c.values())


def test_api_text_copying_a_files_chunk_cannot_take_over_its_gene(lean, server_factory, tmp_path) -> None:
    """Planted first, word for word: the file ingested later still gets its own gene, kind file, verified."""
    root, source, server = _repo_with_keys(lean, server_factory, tmp_path)
    with httpx.Client(base_url=server.url, timeout=60) as c:
        planted = c.post("/ingest", json={"content": ORIGINAL, "content_type": "code", "embed": False,
                                          "metadata": {"path": "decoy/keys.py"}})
        assert planted.status_code == 200
        assert c.post("/ingest", json={"path": str(root), "embed": False}).json()["genes_added"] >= 1
        hits = c.post("/fingerprint", json={"query": "rotate_keys", "max_results": 10}).json()["results"]
        mine = [h for h in hits if h["source_id"] == str(source)]
        assert mine, hits
        gene = c.get(f"/genes/{mine[0]['gene_id']}").json()
        assert gene["provenance"]["source_kind"] == "file" and gene["source_path"] == str(source)
        packet = c.post("/context/packet", json={"query": "rotate_keys in keys.py", "task_type": "explain"}).json()
        assert any(i["source_id"] == str(source) and i["source_check"] == "unchanged"
                   for i in packet["verified"] + packet["stale_risk"])
