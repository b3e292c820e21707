"""A walked folder may hold symlinks to secrets elsewhere and names that are not text.

Each test builds the hostile folder for real (os.symlink, a file name with a byte that is not
UTF-8) and ingests it the way a user would: POST /ingest {path} over real HTTP, or `helix ingest`
in a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

SECRET = "quillfeather private key 9931"
REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(os.name == "nt", reason="creating symlinks and non-UTF-8 names needs POSIX here")


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    """root/ (to ingest) and outside/ (a secret next to it)."""
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("def serve():\n    return 'served by the app'\n")
    (root / "README.md").write_text("# Project\n\nThe inside documentation.\n")
    outside = tmp_path / "outside"
    (outside / "keys").mkdir(parents=True)
    (outside / "id_secret.txt").write_text(f"The {SECRET} is here.\n")
    (outside / "keys" / "more.txt").write_text(f"More of the {SECRET}.\n")
    return root, outside


def _server(lean, server_factory, root: Path, follow: bool, extra_roots: tuple[str, ...] = ()):
    return server_factory(lean.replace(server={"allowed_ingest_roots": (str(root), *extra_roots)},
                                       ingest={"follow_symlinks": follow}))


def _ingest(server, path: Path) -> dict:
    r = httpx.post(server.url + "/ingest", json={"path": str(path), "embed": False}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def _finds_secret(server) -> bool:
    r = httpx.post(server.url + "/context", json={"query": "quillfeather private key"}, timeout=60)
    assert r.status_code == 200
    return SECRET in r.text


def _skips(report: dict) -> dict[str, str]:
    return {Path(s["path"]).name: s["reason"] for s in report["files_skipped"]}


def test_follow_symlinks_false_follows_no_file_or_folder_link(lean, server_factory, tmp_path) -> None:
    root, outside = _tree(tmp_path)
    os.symlink(outside / "id_secret.txt", root / "notes.txt")  # a file link (was followed before)
    os.symlink(outside / "keys", root / "vendor")  # a folder link
    os.symlink(root / "README.md", root / "README-link.md")  # even one that stays inside
    server = _server(lean, server_factory, root, follow=False)
    report = _ingest(server, root)
    skips = _skips(report)
    for name in ("notes.txt", "vendor", "README-link.md"):
        assert "follow_symlinks = false" in skips[name], skips
    assert report["files_ingested"] == 2
    assert not _finds_secret(server)


def test_follow_symlinks_true_refuses_targets_outside_the_walked_root(lean, server_factory, tmp_path) -> None:
    root, outside = _tree(tmp_path)
    os.symlink(outside / "id_secret.txt", root / "notes.txt")
    os.symlink(outside / "keys", root / "vendor")
    os.symlink(root / "src" / "app.py", root / "app-link.py")  # inside: followed
    os.symlink("../../outside/id_secret.txt", root / "src" / "relative.txt")  # relative target, outside
    server = _server(lean, server_factory, root, follow=True)
    report = _ingest(server, root)
    skips = _skips(report)
    for name in ("notes.txt", "vendor", "relative.txt"):
        assert "outside the walked folder" in skips[name], skips
    assert "app-link.py" not in skips
    assert report["files_ingested"] == 3  # README.md, src/app.py and app-link.py
    assert not _finds_secret(server)


def test_api_ingest_follows_links_only_into_the_allowed_roots(lean, server_factory, tmp_path) -> None:
    """POST /ingest {path}: a link may point into another allowed root, never out of them."""
    root, outside = _tree(tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "glossary.md").write_text("The shared glossary of the team.\n")
    os.symlink(shared / "glossary.md", root / "glossary.md")
    os.symlink(outside / "id_secret.txt", root / "notes.txt")
    server = _server(lean, server_factory, root, follow=True, extra_roots=(str(shared),))
    report = _ingest(server, root)
    skips = _skips(report)
    assert "glossary.md" not in skips
    assert "outside the walked folders" in skips["notes.txt"]
    assert not _finds_secret(server)
    # and a link given as the path itself is judged by where it points
    r = httpx.post(server.url + "/ingest", json={"path": str(root / "notes.txt")})
    assert r.status_code == 403
    assert not _finds_secret(server)


def test_a_non_utf8_file_name_is_skipped_and_the_rest_is_ingested_over_http(lean, server_factory, tmp_path) -> None:
    root, _ = _tree(tmp_path)
    bad_file = os.path.join(os.fsencode(root), b"caf\xe9-menu.txt")
    with open(bad_file, "wb") as fh:
        fh.write(b"a file whose name is Latin-1, not UTF-8\n")
    bad_dir = os.path.join(os.fsencode(root), b"d\xff")
    os.mkdir(bad_dir)
    with open(os.path.join(bad_dir, b"inside.txt"), "wb") as fh:
        fh.write(b"inside a folder with a bad name\n")
    (root / "latin1.txt").write_bytes("Stra\u00dfe".encode("latin-1") + b" is not UTF-8 text\n")
    server = _server(lean, server_factory, root, follow=False)
    r = httpx.post(server.url + "/ingest", json={"path": str(root), "embed": False}, timeout=60)
    assert r.status_code == 200, r.text
    report = r.json()
    reasons = {s["path"]: s["reason"] for s in report["files_skipped"]}
    assert any(p.endswith("caf\\xe9-menu.txt") and "not valid UTF-8" in why for p, why in reasons.items()), reasons
    assert any(p.endswith("d\\xff") and "not valid UTF-8" in why for p, why in reasons.items()), reasons
    assert "not valid UTF-8" in reasons[str(root / "latin1.txt")]
    assert report["files_ingested"] == 2
    hit = httpx.post(server.url + "/context", json={"query": "inside documentation"}).json()
    assert "inside documentation" in hit["expressed_context"]


def test_cli_ingest_of_a_folder_with_a_bad_name_exits_0_with_a_json_report(tmp_path, helix_home) -> None:
    root, _ = _tree(tmp_path)
    with open(os.path.join(os.fsencode(root), b"r\xe9sum\xe9.md"), "wb") as fh:
        fh.write(b"# resume\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "HELIX_EMBEDDING_ENABLED": "0", "HELIX_NER_ENABLED": "0",
           "HELIX_INGEST_WORKERS": "1"}
    proc = subprocess.run([sys.executable, "-m", "helix_context.cli", "ingest", str(root), "--json"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["files_ingested"] == 2
    assert [s for s in report["files_skipped"] if "not valid UTF-8" in s["reason"]]
