"""Watched folders with real file events (watchfiles: inotify here, and its polling mode).

Each test changes files on disk the way an editor, git or a user would, and
checks what the genome then holds — the genes /context would serve.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tests.sources.conftest import make_tree, wait_until, write


def _content(service, path: Path) -> str:
    return "\n".join(g.content for g in service.genome.genes_for_source(str(path)))


def _indexed(service, path: Path) -> bool:
    return service.genome.file_record(str(path)) is not None


def test_edit_delete_rename_and_new_file_are_followed(service_factory, tmp_path: Path, mode: str) -> None:
    service = service_factory(polling=mode == "polling")
    root = make_tree(tmp_path / "proj")
    added = service.add(str(root))
    assert added["path"] == str(root.resolve())
    assert service.wait_idle(30) and service.wait_watching(10)
    src = root.resolve() / "src"
    assert "function_0" in _content(service, src / "mod_0.py")

    write(src / "mod_0.py", "def freshly_edited_function():\n    return 'edited'\n")
    wait_until(lambda: "freshly_edited_function" in _content(service, src / "mod_0.py"), what="the edit")
    assert "function_0" not in _content(service, src / "mod_0.py")

    (src / "mod_1.py").unlink()
    wait_until(lambda: not _indexed(service, src / "mod_1.py"), what="the delete")
    assert service.genome.genes_for_source(str(src / "mod_1.py")) == []

    (src / "mod_2.py").rename(src / "renamed_mod.py")
    wait_until(lambda: _indexed(service, src / "renamed_mod.py") and not _indexed(service, src / "mod_2.py"),
               what="the rename")
    assert "function_2" in _content(service, src / "renamed_mod.py")

    write(src / "pkg" / "brand_new.py", "def brand_new_helper():\n    return 42\n")
    wait_until(lambda: "brand_new_helper" in _content(service, src / "pkg" / "brand_new.py"), what="the new file")

    # the folder's counts are recorded right after a batch's genes are stored: wait for them too
    wait_until(lambda: service.status()["sources"][0]["files"] == 6, what="the folder's counts")
    status = service.status()
    (row,) = status["sources"]
    assert row["files"] == 6 and row["genes"] >= 6 and row["watching"]
    assert status["summary"] == "Index up to date, 1 folder (project proj)"


def test_writes_to_ignored_paths_queue_nothing(service_factory, tmp_path: Path) -> None:
    service = service_factory()
    root = make_tree(tmp_path / "proj")
    write(root / ".gitignore", "generated/\n*.log\n")
    for folder in (".git/objects", "node_modules/left-pad", "generated", "build"):
        (root / folder).mkdir(parents=True)  # watched from the start (a brand-new folder's first events can race)
    service.add(str(root))
    assert service.wait_idle(30) and service.wait_watching(10)
    batches = service.batches
    for i in range(30):
        write(root / ".git" / "objects" / f"ab{i:02d}", "blob")
        write(root / "node_modules" / "left-pad" / f"index{i}.js", "module.exports = 1;\n")
        write(root / "generated" / f"out{i}.py", "X = 1\n")
        write(root / "src" / f"debug{i}.log", "DEBUG nothing\n")
        write(root / "build" / f"obj{i}.py", "Y = 2\n")
    wait_until(lambda: service.ignored_events >= 100, what="the events to reach the filter")
    write(root / "src" / "marker.py", "MARKER = 'visible'\n")  # a wanted file, after the ignored ones
    wait_until(lambda: _indexed(service, root.resolve() / "src" / "marker.py"), what="the marker file")
    assert service.batches - batches == 1  # only the marker's batch was queued
    indexed = set(service.genome.file_records(under=str(root.resolve())))
    assert not [p for p in indexed if any(part in p for part in ("/.git/", "node_modules", "generated", ".log",
                                                                  "/build/"))]


def test_a_500_file_checkout_is_batched_and_matches_a_clean_ingest(service_factory, tmp_path: Path,
                                                                   settings) -> None:
    from helix_context.manager import HelixContextManager
    from tests.sources.conftest import fast_settings

    service = service_factory()
    root = tmp_path / "repo"
    for i in range(500):
        write(root / f"pkg{i % 10}" / f"file_{i}.py", f"def old_{i}():\n    return {i}\n")
    service.add(str(root))
    assert service.wait_idle(120) and service.wait_watching(10)
    batches = service.batches
    for i in range(500):  # "git checkout other-branch": every file rewritten at once
        write(root / f"pkg{i % 10}" / f"file_{i}.py", f"def new_{i}():\n    return {i} * 2\n")
    resolved = root.resolve()
    wait_until(lambda: "new_499" in _content(service, resolved / "pkg9" / "file_499.py")
               and service.wait_idle(0.01), timeout=120, what="the checkout to be indexed")
    assert service.wait_idle(60)
    assert service.batches - batches <= 25, f"{service.batches - batches} batches for one checkout"

    clean = HelixContextManager(fast_settings(settings).replace(genome={"path": str(tmp_path / "clean.db")}))
    try:
        clean.ingest_path(resolved)
        want = {p: r.content_hash for p, r in clean.genome.file_records(under=str(resolved)).items()}
        got = {p: r.content_hash for p, r in service.genome.file_records(under=str(resolved)).items()}
        assert got == want and len(got) == 500
        live = lambda g: sorted(x.gene_id for x in g.iter_genes())  # noqa: E731 - a one-line helper beside its only use
        assert live(service.genome) == live(clean.genome)
    finally:
        clean.close()


def test_a_watched_folder_removed_from_disk_shows_missing_and_comes_back(service_factory, tmp_path: Path,
                                                                         mode: str) -> None:
    service = service_factory(polling=mode == "polling")
    root = make_tree(tmp_path / "proj")
    key = str(root.resolve())
    service.add(key)
    assert service.wait_idle(30) and service.wait_watching(10)
    assert service.genome.counts_under(key)[0] == 6

    shutil.rmtree(root)
    wait_until(lambda: service.status()["sources"][0]["state"] == "missing", what="the folder to show missing")
    wait_until(lambda: service.genome.counts_under(key) == (0, 0) and service.wait_idle(0.01),
               what="its genes to retire")
    status = service.status()
    assert "not found" in status["sources"][0]["last_error"]
    assert status["summary"].endswith("(1 missing)")
    batches = service.batches
    import time

    time.sleep(2.5)  # two more looks for the folder: no error loop, nothing queued
    assert service.batches == batches and service.wait_idle(0.01)
    assert service.status()["sources"][0]["state"] == "missing"

    make_tree(root, n=2)
    wait_until(lambda: service.status()["sources"][0]["state"] == "watching"
               and service.genome.counts_under(key)[0] == 3, timeout=20, what="the folder to come back")
    write(root / "src" / "after.py", "def after_return():\n    return 1\n")
    wait_until(lambda: _indexed(service, root.resolve() / "src" / "after.py"), what="watching again")


def test_pause_stops_watching_and_resume_catches_up(service_factory, tmp_path: Path) -> None:
    import time

    service = service_factory()
    root = make_tree(tmp_path / "proj")
    src = root.resolve() / "src"
    service.add(str(root))
    assert service.wait_idle(30) and service.wait_watching(10)

    paused = service.pause()
    assert paused["paused"] and paused["summary"] == "Indexing paused, 1 folder"
    assert paused["sources"][0]["state"] == "paused" and not paused["sources"][0]["watching"]
    write(src / "mod_0.py", "def edited_while_paused():\n    return 0\n")
    (src / "mod_3.py").unlink()
    time.sleep(1.5)
    assert "edited_while_paused" not in _content(service, src / "mod_0.py")
    assert _indexed(service, src / "mod_3.py")
    assert service.genome.sources_paused()  # a restart stays paused

    resumed = service.resume()
    assert not resumed["paused"]
    wait_until(lambda: "edited_while_paused" in _content(service, src / "mod_0.py")
               and not _indexed(service, src / "mod_3.py"), what="resume to catch up")
    assert service.wait_watching(10)
    write(src / "mod_4.py", "def edited_after_resume():\n    return 4\n")
    wait_until(lambda: "edited_after_resume" in _content(service, src / "mod_4.py"), what="watching again")


def test_start_reconciles_what_changed_while_helix_was_not_running(service_factory, tmp_path: Path) -> None:
    first = service_factory()
    root = make_tree(tmp_path / "proj")
    src = root.resolve() / "src"
    first.add(str(root))
    assert first.wait_idle(30)
    first.stop()

    write(src / "mod_0.py", "def changed_offline():\n    return 0\n")
    (src / "mod_1.py").unlink()
    write(src / "offline_new.py", "def created_offline():\n    return 1\n")
    old = os.stat(src / "mod_4.py")

    second = service_factory()
    assert second.wait_idle(30)
    assert "changed_offline" in _content(second, src / "mod_0.py")
    assert not _indexed(second, src / "mod_1.py")
    assert "created_offline" in _content(second, src / "offline_new.py")
    assert second.genome.file_record(str(src / "mod_4.py")).mtime_ns == old.st_mtime_ns


def test_remove_keeps_genes_unless_forget(service_factory, tmp_path: Path) -> None:
    service = service_factory()
    keep, drop = make_tree(tmp_path / "keep"), make_tree(tmp_path / "drop")
    service.add(str(keep))
    service.add(str(drop), project="dropped")
    assert service.wait_idle(30) and service.wait_watching(10)
    service.remove(str(keep))
    service.remove(str(drop), forget=True)
    assert service.wait_idle(30)
    assert service.status()["sources"] == []
    assert service.genome.counts_under(str(keep.resolve()))[0] == 6
    assert service.genome.counts_under(str(drop.resolve())) == (0, 0)
    write(keep / "src" / "mod_0.py", "def not_watched_any_more():\n    return 0\n")
    import time

    time.sleep(1.0)
    assert "not_watched_any_more" not in _content(service, keep.resolve() / "src" / "mod_0.py")


def test_packet_items_of_a_watched_folder_are_verified_only_while_they_match_disk(service_factory,
                                                                                 tmp_path: Path) -> None:
    service, helix = service_factory(with_manager=True)
    root = make_tree(tmp_path / "proj")
    target = root.resolve() / "src" / "mod_0.py"
    service.add(str(root))
    assert service.wait_idle(30)

    def item(query: str):
        packet = helix.packet(query, "explain")
        return next(i for i in packet.items if i.source_id == str(target))

    before = item("function_0 module 0 of the tree")
    assert before.source_check == "unchanged" and before.verdict == "verified", before.reason

    service.pause()
    write(target, "def function_0():\n    \"\"\"Module 0, rewritten while indexing is paused.\"\"\"\n    return -1\n")
    stale = item("function_0 module 0 of the tree")
    assert stale.verdict == "needs_refresh" and stale.source_check == "changed"
    assert "indexing is paused: resume indexing to refresh it" in stale.reason

    service.resume()
    wait_until(lambda: "rewritten while indexing is paused" in _content(service, target), what="the re-index")
    after = item("function_0 module 0 rewritten while indexing is paused")
    assert after.source_check == "unchanged" and after.verdict == "verified", after.reason


def test_a_hostile_symlink_in_a_watched_folder_is_never_followed(service_factory, tmp_path: Path) -> None:
    service = service_factory()
    secrets = tmp_path / "outside"
    write(secrets / "id_rsa", "-----BEGIN OPENSSH PRIVATE KEY----- hunter2_secret_material\n")
    write(secrets / "nested" / "token.txt", "api_token=hunter2_token_material\n")
    root = make_tree(tmp_path / "proj")
    write(root / "src" / "plain.py", "def plain_file():\n    return 1\n")
    service.add(str(root))
    assert service.wait_idle(30) and service.wait_watching(10)
    src = root.resolve() / "src"

    (src / "key.py").symlink_to(secrets / "id_rsa")             # a new symlink to a secret file
    (src / "linked").symlink_to(secrets, target_is_directory=True)  # a new symlink to an outside folder
    (src / "plain.py").unlink()
    (src / "plain.py").symlink_to(secrets / "nested" / "token.txt")  # a watched file replaced by a link
    write(src / "marker.py", "MARKER = 'after the links'\n")
    wait_until(lambda: _indexed(service, src / "marker.py") and service.wait_idle(0.01), what="the marker")
    assert service.wait_idle(10)
    indexed = "\n".join(g.content for g in service.genome.iter_genes())
    assert "hunter2" not in indexed
    assert not _indexed(service, src / "plain.py")
    assert all(str(secrets) not in p for p in service.genome.file_records())
    skipped = service.status()["sources"][0]["skipped"]
    assert not any("hunter2" in s["path"] for s in skipped)


def test_a_renamed_folder_moves_its_files(service_factory, tmp_path: Path) -> None:
    service = service_factory()
    root = make_tree(tmp_path / "proj")
    service.add(str(root))
    assert service.wait_idle(30) and service.wait_watching(10)
    resolved = root.resolve()
    (resolved / "src").rename(resolved / "lib")
    wait_until(lambda: _indexed(service, resolved / "lib" / "mod_3.py")
               and not _indexed(service, resolved / "src" / "mod_3.py"), what="the folder rename")
    assert service.wait_idle(30)
    assert sorted(Path(p).parent.name for p in service.genome.file_records(under=str(resolved))) == \
        ["lib"] * 5 + ["proj"]
    assert "function_3" in _content(service, resolved / "lib" / "mod_3.py")


def test_pause_interrupts_a_running_index_and_resume_finishes_it(service_factory, tmp_path: Path) -> None:
    import time

    service = service_factory()
    root = tmp_path / "big"
    for i in range(1500):
        write(root / f"pkg{i % 20}" / f"m{i}.py", f"def f{i}():\n    return {i}\n")
    key = str(root.resolve())
    service.add(key)
    wait_until(lambda: (service.status()["progress"] or {}).get("done", 0) > 50, what="indexing to be under way")
    service.pause()
    assert service.wait_idle(10)  # the running ingest stopped between two files
    stopped_at = service.genome.counts_under(key)[0]
    assert stopped_at < 1500
    time.sleep(1.0)
    assert service.genome.counts_under(key)[0] == stopped_at
    assert service.status()["summary"] == "Indexing paused, 1 folder"
    service.resume()
    wait_until(lambda: service.genome.counts_under(key)[0] == 1500 and service.wait_idle(0.01),
               timeout=120, what="resume to finish the folder")


def test_a_name_that_is_not_utf8_costs_only_that_file(settings, server_factory, tmp_path: Path,
                                                      mode: str) -> None:
    """watchfiles raises for the whole batch on such a name (and again on every later call): the file written
    in the same moment must still be served, the bad name listed as skipped, and the folder still watched."""
    import time

    from tests.sources.conftest import fast_settings

    if os.name == "nt":
        import pytest

        pytest.skip("Windows names are UTF-16: no undecodable bytes to create")
    server = server_factory(fast_settings(settings, polling=mode == "polling"))
    service = server.app.state.sources
    root = make_tree(tmp_path / "proj")
    with server.client() as client:
        assert client.post("/sources", json={"path": str(root)}).status_code == 202
        assert service.wait_idle(30) and service.wait_watching(10)

        bad = os.path.join(os.fsencode(root / "src"), b"caf\xe9_latin1.py")
        with open(bad, "wb") as f:
            f.write(b"def latin_named():\n    return 'latin'\n")
        write(root / "src" / "beside_it.py", "def written_beside_the_bad_name():\n    return 'umbrabird'\n")
        written = time.monotonic()

        def served() -> bool:
            body = client.post("/context", json={"query": "written_beside_the_bad_name umbrabird"}).json()
            return "written_beside_the_bad_name" in body["expressed_context"]

        wait_until(served, timeout=2.0, what="the file written beside the bad name to be served")
        assert time.monotonic() - written < 2.0
        assert service.wait_idle(10)

        status = client.get("/sources").json()
        (row,) = status["sources"]
        skipped = {s["path"]: s["reason"] for s in row["skipped"]}
        bad_shown = str(root.resolve() / "src" / "caf\\xe9_latin1.py")
        assert bad_shown in skipped and "not valid UTF-8" in skipped[bad_shown], skipped
        assert row["watching"] and row["polling"] == (mode == "polling") and not row["watch_failed"]
        assert status["summary"].startswith("Index up to date, 1 folder")

        # the watch still works after the rebuild: the next edit is followed as usual
        write(root / "src" / "after.py", "def after_the_bad_name():\n    return 'kestrelfin'\n")
        wait_until(lambda: _indexed(service, root.resolve() / "src" / "after.py"), what="a later file")


def test_a_folder_deleted_and_made_again_at_once_is_watched_again(service_factory, tmp_path: Path) -> None:
    """`rm -rf d && git clone … d`: the folder was back before the watcher looked, so its OS watch stayed on the
    deleted folder and nothing in the new one was ever indexed, while the list said "watching"."""
    service = service_factory()
    root = make_tree(tmp_path / "proj")
    service.add(str(root))
    assert service.wait_idle(30) and service.wait_watching(10)
    shutil.rmtree(root)
    write(root / "b.py", "def second_stork():\n    return 2\n")
    wait_until(lambda: _indexed(service, root.resolve() / "b.py"), timeout=30, what="the new folder's file")
    write(root / "c.py", "def third_crane():\n    return 3\n")
    wait_until(lambda: _indexed(service, root.resolve() / "c.py"), timeout=30, what="watching the new folder")
    wait_until(lambda: not _indexed(service, root.resolve() / "src" / "mod_0.py"), what="the old files to retire")


def test_a_file_that_becomes_ignored_unreadable_or_a_folder_leaves_the_index(service_factory, tmp_path: Path) -> None:
    """A file newly ignored by .gitignore, grown past max_file_bytes, turned binary or replaced by a folder of its
    name kept its old chunks for good (served, and a packet kept asking to re-ingest it), even after a full pass."""
    service = service_factory()
    root = make_tree(tmp_path / "proj")
    for name in ("ignored", "grown", "binary", "folder"):
        write(root / "extra" / f"{name}.py", f"def {name}_marmoset():\n    return 1\n")
    service.add(str(root))
    assert service.wait_idle(30) and service.wait_watching(10)
    extra = root.resolve() / "extra"
    assert all(_indexed(service, extra / f"{n}.py") for n in ("ignored", "grown", "binary", "folder"))

    write(root / ".gitignore", "extra/ignored.py\n")
    write(extra / "grown.py", "def grown_marmoset():\n    return 1\n" + "# padding\n" * 250_000)  # 2.5 MB
    (extra / "binary.py").write_bytes(b"\x00\x01\x02" * 1000)
    (extra / "folder.py").unlink()
    write(extra / "folder.py" / "inside.py", "def inside_wren():\n    return 1\n")
    for name in ("ignored", "grown", "binary", "folder"):
        wait_until(lambda n=name: not _indexed(service, extra / f"{n}.py"), timeout=30, what=f"{name}.py to retire")
        assert service.genome.genes_for_source(str(extra / f"{name}.py")) == []
    wait_until(lambda: _indexed(service, extra / "folder.py" / "inside.py"), what="the folder's own file")


def test_forgetting_a_subfolder_source_keeps_its_files_in_the_folder_around_it(service_factory, tmp_path: Path) -> None:
    """`sources remove SUBFOLDER --forget` retired the subfolder's files though the parent source still watches
    them: questions about them found nothing until each file changed again."""
    service = service_factory()
    root = make_tree(tmp_path / "proj")
    service.add(str(root))
    assert service.wait_idle(30) and service.wait_watching(10)
    sub = root.resolve() / "src"
    service.add(str(sub), project="srcproj")
    assert service.wait_idle(30)
    inner = sorted(service.genome.paths_under(str(sub)))
    assert inner
    service.remove(str(sub), forget=True)
    assert service.wait_idle(30)
    assert [row["path"] for row in service.status()["sources"]] == [str(root.resolve())]
    wait_until(lambda: all(_indexed(service, Path(p)) for p in inner), what="the subfolder's files to stay indexed")
    wait_until(lambda: {r.project for p in inner if (r := service.genome.file_record(p))} == {"proj"},
               what="them to be the parent's project again")


def test_the_folders_row_follows_a_file_turned_link_and_a_skipped_file_deleted(service_factory, tmp_path: Path) -> None:
    """A file replaced by a symlink left the row counting it (and the link unlisted); a skipped file deleted
    stayed listed as skipped."""
    service = service_factory()
    root = make_tree(tmp_path / "proj")
    service.add(str(root))
    assert service.wait_idle(30) and service.wait_watching(10)
    src = root.resolve() / "src"
    (src / "mod_0.py").unlink()
    (src / "mod_0.py").symlink_to(tmp_path / "elsewhere.py")
    (tmp_path / "elsewhere.py").write_text("SECRET = 1\n")
    wait_until(lambda: (row := service.status()["sources"][0])["files"] == 5
               and any(s["path"] == str(src / "mod_0.py") for s in row["skipped"]), what="the row to count 5 files")
    (src / "big.bin.py").write_bytes(b"\x00" * 10)  # binary: skipped and listed
    wait_until(lambda: any(s["path"].endswith("big.bin.py") for s in service.status()["sources"][0]["skipped"]),
               what="the binary file to be listed")
    (src / "big.bin.py").unlink()
    wait_until(lambda: not any(s["path"].endswith("big.bin.py") for s in service.status()["sources"][0]["skipped"]),
               what="the deleted file to leave the skipped list")
