"""`helix sources add|list|remove|pause|resume`: through the running backend, else recorded for its next start.

The backend is the genome's one writer of genes, so the CLI never indexes a
source itself: with a backend answering it calls /sources (and the backend
indexes and watches at once); without one it writes the list in the genome and
says that the next start will index it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

from helix_context import signals
from helix_context.backend_identity import other_genome
from helix_context.sources.projects import default_project
from helix_context.config import Settings
from helix_context.genome import sources_sql
from helix_context.genome.store import Genome
from helix_context.genome.storage import GenomeStore
from helix_context.sources import registry
from helix_context.errors import InvalidRequest, SourceError
from helix_context.sources.names import SourceNames
from helix_context.sources.roots import RootMap, is_shared


EXIT_UNREACHABLE = 3  # the CLI's code for "the backend did not answer"


class BackendUnreachable(SourceError):
    """The backend's state file says it serves, yet nothing answers there."""


class Backend:
    """The running backend's /sources, or None when nothing answers where it could be."""

    def __init__(self, settings: Settings, timeout: float = 10.0, url: str | None = None) -> None:
        headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
        self.settings = settings
        self.url = url or settings.base_url
        self.client = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def answers(self) -> bool:
        """It answers /health, and as this HELIX_HOME's backend (another home's on the same port is not ours)."""
        try:
            response = self.client.get("/health", timeout=1.5)
        except httpx.HTTPError:
            return False
        try:
            body = response.json()
        except ValueError:
            body = {}
        return not isinstance(body, dict) or other_genome(body, self.settings) is None

    @classmethod
    def find(cls, settings: Settings) -> Backend | None:
        """The backend at the URL its state file names (any port), else at helix.toml's address.

        None when neither answers and no backend claims to run. A backend that claims to run
        (state file "running", its pid alive) but does not answer raises BackendUnreachable:
        recording a change in the genome behind its back would make two writers."""
        announced = signals.announced_backend_url(settings.home)
        for url in dict.fromkeys(u for u in (announced, settings.base_url) if u):
            backend = cls(settings, url=url)
            if backend.answers():
                return backend
            backend.client.close()
        state, _stale, _age = signals.read_server_state(settings.home)
        if announced and state is not None and state.pid is not None and psutil.pid_exists(state.pid):
            raise BackendUnreachable(f"the backend (pid {state.pid}) says it serves on {announced}, but it does not "
                                     "answer; it may still be starting: retry in a moment, or restart it")
        return None

    def call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        response = self.client.request(method, path, **kwargs)
        try:
            data: Any = response.json()
        except ValueError:
            data = {}
        if response.status_code >= 400:
            message = (data.get("error") or {}).get("message") if isinstance(data, dict) else None
            raise SourceError(message or f"the backend answered {response.status_code} for {method} {path}")
        if not isinstance(data, dict):
            raise SourceError(f"the backend answered {method} {path} with something that is not a JSON object")
        return data

    def close(self) -> None:
        self.client.close()


def _offline_status(genome: GenomeStore, names: SourceNames) -> dict[str, Any]:
    rows = [sources_sql.as_dict(r) for r in genome.list_sources()]
    for row in rows:
        row["watching"] = False
        folder = names.folder(row["path"])
        row["folder"] = None if folder is None else str(folder)
        if folder is None and row["state"] != "removing":
            row["state"], row["last_error"] = "unmapped", names.why_not_here(row["path"])
    paused = genome.sources_paused()
    return {"backend": "not running", "paused": paused, "indexing": False, "sources": rows,
            "indexed_genes": genome.live_gene_count(),
            "summary": f"backend not running; {len(rows)} folder{'s' if len(rows) != 1 else ''} on the list"}


def _ago(at: float | None) -> str:
    if not at:
        return "never"
    seconds = max(0, time.time() - at)
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit} ago"
    return f"{seconds:.0f} s ago"


def _print_list(status: dict[str, Any]) -> None:
    print(status["summary"])
    if isinstance(status.get("indexed_genes"), int):  # the count /stats, the dashboard and the tray show
        print(f"{status['indexed_genes']:,} indexed chunks in all (a chunk shared by files counts once)")
    for row in status["sources"]:
        line = (f"  {row['state']:<9} {row['files']:>7,} files {row['genes']:>8,} chunks  "
                f"indexed {_ago(row['last_indexed']):<12} {row['path']}")
        line += f"  [{row.get('project') or default_project(row.get('folder') or row['path'])}]"  # unset: the default
        if row.get("folder") and row["folder"] != row["path"]:  # a team genome's shared source: its checkout here
            line += f"  here: {row['folder']}"
        print(line)
        if row.get("progress"):
            print(f"            indexing {row['progress']['done']:,} / {row['progress']['total']:,} files")
        if row.get("skipped_total"):
            print(f"            {row['skipped_total']} skipped, e.g. {row['skipped'][0]['path']}: "
                  f"{row['skipped'][0]['reason']}" if row["skipped"] else f"            {row['skipped_total']} skipped")
        if row.get("last_error"):
            print(f"            {row['last_error']}")
        branch = row.get("branch")  # a team genome: the branch it follows (sources/branch.py)
        if branch and branch.get("note") != row.get("last_error"):
            print(f"            {branch['note']}")


def _map(args: argparse.Namespace, settings: Settings) -> int:
    """`helix sources map [ROOT PATH] | unmap ROOT`: this machine's map of a team genome's shared roots.

    Local only (HELIX_HOME/roots.json): each developer's checkout is somewhere else. The running
    backend reads the map on each answer, so no restart is needed."""
    roots = RootMap.load(settings.home)
    try:
        if args.action == "unmap":
            roots.unmapped(args.root).save(settings.home)
            print(f"unmapped {args.root}: its shared files are no longer checked against a checkout here")
            return 0
        if args.root is None:
            for name, folder in sorted(roots.roots.items()):
                print(f"{name:<24} {folder}")
            if not roots.roots:
                print("no shared roots mapped on this machine (helix sources map ROOT PATH-OF-YOUR-CHECKOUT)")
            return 0
        if args.path is None:
            raise InvalidRequest(f"map {args.root} to which folder? helix sources map {args.root} PATH")
        roots = roots.mapped(args.root, Path(args.path))
        roots.save(settings.home)
    except InvalidRequest as exc:
        print(f"helix sources: {exc}", file=sys.stderr)
        return 2
    print(f"mapped {args.root} to {roots.roots[args.root]}: a team genome's @{args.root}/… files are read "
          "from there, and your uncommitted edits in it win over the shared text")
    if not settings.genome.url:
        return 0
    done = _rename_indexed(settings, roots, args.root)
    tell_backend(settings)
    return done


def tell_backend(settings: Settings) -> None:
    """A running backend takes up sources recorded behind its back (the shared sources of a newly mapped root,
    those an import adds) when it next reads its list: it reads it now."""
    try:
        backend = Backend.find(settings)
    except BackendUnreachable:
        return
    if backend is not None:
        try:
            backend.call("GET", "/sources")
        except (SourceError, httpx.HTTPError):
            pass  # it reads the map again at its next start
        finally:
            backend.close()


def _rename_indexed(settings: Settings, roots: RootMap, name: str) -> int:
    """Files this machine indexed under the folder before mapping it take their shared names (genome/renames.py)."""
    from helix_context.errors import GenomeError

    folder = roots.roots[name]
    try:
        genome = _open(settings)
        try:
            done = genome.rename_under(str(folder), lambda path: roots.shared_name(Path(path)))
            moved = _rename_sources(genome, roots, folder)
        finally:
            genome.close()
    except GenomeError as exc:
        print(f"helix sources: the map is saved, but files already indexed under {folder} keep their names "
              f"({exc}); run the command again", file=sys.stderr)
        return 1
    for old, new in moved:
        print(f"source {old} is now the shared source {new}")
    if done.files_renamed or done.files_dropped:
        print(f"{done.files_renamed} file(s) indexed under {folder} now named @{name}/…; {done.files_dropped} "
              f"already indexed under their shared name were retired here ({done.genes_reindexed} indexed chunk(s) re-indexed)")
    return 0


def _rename_sources(genome: GenomeStore, roots: RootMap, folder: Path) -> list[tuple[str, str]]:
    """Sources this machine added under `folder` before it was mapped take their shared names (names.py)."""
    moved: list[tuple[str, str]] = []
    for row in genome.list_sources():
        if is_shared(row.path) or row.pending is not None:
            continue
        shared = roots.shared_name(Path(row.path))
        here = Path(row.path)
        if shared is None or not (here == folder or folder in here.parents):
            continue
        genome.add_source(shared, row.project, row.added_at)
        genome.delete_source(row.path)
        moved.append((row.path, shared))
    return moved


def _open(settings: Settings) -> GenomeStore:
    """The configured genome (a team genome with [genome] url), for the changes recorded without a backend."""
    if settings.genome.url:
        from helix_context.genome.pg.open import open_team_genome

        who = settings.attribution
        return open_team_genome(settings.genome.url, party=f"{who.user}@{who.device}")
    return Genome(settings.genome_path, busy_timeout_ms=settings.genome.busy_timeout_ms)


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.action in ("map", "unmap"):
        return _map(args, settings)
    try:
        backend = Backend.find(settings)
    except BackendUnreachable as exc:
        print(f"helix sources: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    try:
        if backend is not None:
            data = _online(args, backend)
        else:
            genome = _open(settings)
            try:
                data = _offline(args, genome, settings)
            finally:
                genome.close()
    except SourceError as exc:  # a folder that cannot be a source, a path that is none: bad input, as for ingest
        print(f"helix sources: {exc}", file=sys.stderr)
        return 2
    finally:
        if backend is not None:
            backend.close()
    if args.action == "list":
        if args.json:
            sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
        else:
            _print_list(data)
    else:
        print(data["message"])
    return 0


def _online(args: argparse.Namespace, backend: Backend) -> dict[str, Any]:
    if args.action == "list":
        return backend.call("GET", "/sources")
    if args.action == "add":
        # resolved here: the backend's working folder is not the user's
        path = str(registry.resolve_folder(args.path))
        row = backend.call("POST", "/sources", json={"path": path, "project": args.project})
        if row.get("state") == "paused":  # the row as the backend describes it: say what will happen
            then = "indexing is paused: `helix sources resume` indexes it"
        elif row.get("state") in ("missing", "error", "unmapped", "other_branch"):
            then = f"not indexed now ({row['state']}: {row.get('last_error') or 'see `helix sources list`'})"
        else:
            then = "the backend is indexing it now (`helix sources list` shows the progress)"
        return {**row, "message": f"added {row['path']}: {then}"}
    if args.action == "remove":
        result = backend.call("DELETE", "/sources", json={"path": registry.lookup_key(args.path),
                                                          "forget": args.forget})
        return {**result, "message": f"removed {result['path']}: {result['detail']}"}
    data = backend.call("POST", f"/sources/{args.action}")
    return {**data, "message": data["summary"]}


def _offline(args: argparse.Namespace, genome: GenomeStore, settings: Settings) -> dict[str, Any]:
    names = SourceNames.of(settings)
    if args.action == "list":
        return _offline_status(genome, names)
    if args.action == "add":
        row = registry.record_add(genome, args.path, args.project, home=settings.home, names=names)
        return {**sources_sql.as_dict(row), "message": f"added {row.path}; no backend is running, so it is "
                                                         "indexed and watched when the backend next starts"}
    if args.action == "remove":
        result = registry.record_remove(genome, args.path, forget=args.forget, names=names)
        what = ("its indexed chunks leave the answers when the backend next starts" if args.forget
                else "its indexed chunks stay")
        return {**result, "message": f"removed {result['path']} from the list; {what}"}
    genome.set_sources_paused(args.action == "pause")
    return {"paused": args.action == "pause",
            "message": f"indexing {'paused' if args.action == 'pause' else 'resumed'} for the next backend start"}


def add_parser(sub: Any, func: Any) -> None:
    p = sub.add_parser("sources", help="folders kept indexed and watched by the backend")
    actions = p.add_subparsers(dest="action", required=True)
    a = actions.add_parser("add", help="index a folder now and keep it fresh")
    a.add_argument("path", help="the folder to index and watch")
    a.add_argument("--project", help="project name (default: the repository's)")
    a = actions.add_parser("list", help="the folders, with files, indexed chunks, last indexed, skipped files, errors")
    a.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    a = actions.add_parser("remove", help="stop watching a folder")
    a.add_argument("path", help="the folder, as added or as listed")
    a.add_argument("--forget", action="store_true", help="also drop the folder's indexed chunks from answers")
    actions.add_parser("pause", help="stop watching and indexing until resumed")
    actions.add_parser("resume", help="catch up and watch again")
    a = actions.add_parser("map", help="where a team genome's shared root is on this machine (no arguments: list)")
    a.add_argument("root", nargs="?", help="the shared root's name, as the team genome stores it (@ROOT/…)")
    a.add_argument("path", nargs="?", help="your checkout of it on this machine")
    a = actions.add_parser("unmap", help="forget where a shared root is on this machine")
    a.add_argument("root", help="the shared root's name")
    p.set_defaults(func=func)
