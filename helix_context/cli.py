"""`helix …` — a thin command line over HelixContextManager and the server.

Human output and progress bars go to stderr/stdout as usual; `--json` prints
exactly one JSON document on stdout so scripts can parse it.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import re
import sys
from pathlib import Path
from typing import Any

from helix_context.config import Settings, load_config
from helix_context.errors import ConfigError, GenomeError
from helix_context.query_text import require_query


def _settings(args: argparse.Namespace) -> Settings:
    return load_config(args.config) if getattr(args, "config", None) else load_config()


def _manager(args: argparse.Namespace, settings: Settings | None = None):  # -> HelixContextManager (lazy import)
    from helix_context.manager import HelixContextManager

    helix = HelixContextManager(settings or _settings(args))
    helix.actor = f"cli pid {os.getpid()}"  # the dashboard's activity panel names who did what
    return helix


def _line(path: Any) -> str:
    """A path on one line of output (a newline or tab in a file's name would split or shift it)."""
    from helix_context.ingest.walk import shown_line

    return shown_line(str(path))


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


# ── ingest / stats ──


_NOT_UTF8 = re.compile("[\udc80-\udcff]")  # bytes surrogateescape could not decode
EXIT_NOTHING = 1  # ran fine, found nothing relevant (like grep)
EXIT_USAGE = 2  # bad input: a missing path, an empty query, a broken config
EXIT_UNREACHABLE = 3  # the backend did not answer
EXIT_GENOME = 4  # the index cannot be read or written: damaged, the disk full, a target refused



def cmd_ingest(args: argparse.Namespace) -> int:
    missing = [p for p in args.paths if not Path(p).expanduser().exists()]
    if missing:
        for path in missing:
            print(f"helix ingest: no such file or folder: {path}", file=sys.stderr)
        print("helix ingest: nothing was ingested; check the path(s) and run again", file=sys.stderr)
        return EXIT_USAGE
    # A bulk write reads little back; through the memory map every page it touches would stay
    # counted in this process (a kernel-sized genome: up to [genome] mmap_mb), so the CLI's
    # ingest reads through SQLite's own bounded page cache instead. The server keeps the map.
    helix = _manager(args, _settings(args).replace(genome={"mmap_mb": 0}))
    show_bar = not args.quiet and sys.stderr.isatty() or args.progress
    bar = None
    if show_bar:
        from tqdm import tqdm

        bar = tqdm(total=0, unit="file", file=sys.stderr, desc="ingest", dynamic_ncols=True)

    def progress(index: int, total: int, path: str) -> None:
        if bar is not None:
            if bar.total != total:
                bar.total = total
            bar.update(index - bar.n)
            bar.set_postfix_str(Path(path).name[-30:], refresh=False)

    try:
        helix.refuse_off_branch(args.paths)  # a team genome follows one branch (sources/branch.py)
        report = helix.ingest_path(args.paths, project=args.project, embed=not args.no_embed, progress=progress)
    finally:
        if bar is not None:
            bar.close()
        helix.close()
    if args.json:
        _print_json(report.to_dict())
    else:
        print(report.summary())
        for skipped in report.files_skipped[:50]:
            print(f"  skipped {skipped['path']}: {skipped['reason']}")
        if len(report.files_skipped) > 50:
            print(f"  … and {len(report.files_skipped) - 50} more (use --json for all)")
    if report.not_stored:  # the files are fine, the index could not take them: not a success to a script
        print(f"helix ingest: {report.not_stored} file(s) could not be stored in the index (reasons above); fix that "
              "and run the ingest again (what was stored is kept)", file=sys.stderr)
        return EXIT_GENOME
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    helix = _manager(args)
    try:
        data = helix.stats()
        # counted here, not in stats(): /stats is polled, and this counts every gene
        data["vectors_to_reembed"] = helix.genome.stale_vector_count()
        model = helix.genome.vector_model
    finally:
        helix.close()
    if args.json:
        _print_json(data)
        return 0
    print(f"index file      {data['genome_path']}")
    print(f"indexed chunks  {data['total_genes']:,}  (files {data['files']:,}, replaced {data['retired_genes']:,})")
    print(f"text indexed    {data['raw_bytes']:,} bytes")
    print(f"on disk         {data['db_bytes']:,} bytes (+ write-ahead log {data['wal_bytes']:,})")
    print("by age          " + ", ".join(f"{k}={v}" for k, v in data["genes_by_tier"].items()))
    print("by kind         " + ", ".join(f"{k}={v}" for k, v in data["genes_by_source_kind"].items()))
    for name, part in data["parts"].items():
        print(f"{name:<15} {part['status']}  {part['detail']}")
    if not data["dense_signal"]:
        print("meaning search  OFF (embeddings unavailable): answers use word matches only")
    if data["vectors_to_reembed"]:
        print(f"re-embed        {data['vectors_to_reembed']:,} chunks hold vectors of another embedding model than "
              f"{model}: the backend re-embeds them in the background (/health shows how far)")
    return 0


# ── retrieval ──


def _read_query(args: argparse.Namespace) -> str:
    """The query from the command line or stdin; InvalidRequest (exit 2) when it is empty."""
    return require_query(args.query if args.query != "-" else sys.stdin.read())


def _project(args: argparse.Namespace, helix: Any) -> str | None:
    """--project, else the project of the source the current directory is in (unless --any-project)."""
    if args.project or getattr(args, "any_project", False):
        return str(args.project) if args.project else None
    from helix_context.sources.names import SourceNames
    from helix_context.sources.projects import cwd_projects

    found = cwd_projects(helix.genome, folder_of=SourceNames.of(helix.settings).folder)
    return ",".join(found) if found else None


def cmd_query(args: argparse.Namespace) -> int:
    helix = _manager(args)
    try:
        window = helix.build_context(_read_query(args), budget_tokens=args.budget, project=_project(args, helix),
                                     model=args.model)
    finally:
        helix.close()
    if args.json:
        _print_json(window.to_dict())
    else:
        from helix_context.models import STATUS_WORDS

        print(window.expressed_context)
        health = window.context_health
        live = (f" re-read from disk={health.refreshed_from_disk} left out (source changed/gone)={health.stale_dropped}"
                if health.refreshed_from_disk or health.stale_dropped else "")
        words = STATUS_WORDS.get(health.status, health.status)
        why = f" ({health.reason})" if health.reason else ""
        project = f", project {window.project}" if window.project else ""
        print(f"\n{words}{why}: {health.genes_expressed} of {health.genes_available} matching chunks used, "
              f"{window.tokens} tokens{project}{live}", file=sys.stderr)
    return EXIT_NOTHING if window.context_health.status in ("denatured", "over_budget", "silent") else 0


def cmd_packet(args: argparse.Namespace) -> int:
    helix = _manager(args)
    try:
        packet = helix.packet(_read_query(args), task_type=args.task, project=_project(args, helix))
    finally:
        helix.close()
    data = packet.to_dict()
    found = 0 if data["verified"] or data["stale_risk"] else EXIT_NOTHING
    if args.json:
        _print_json(data)
        return found
    if found:
        print("nothing relevant found", file=sys.stderr)
    print(f"confidence {data['coordinate_confidence']:.2f}")
    for section in ("verified", "stale_risk"):
        for item in data[section]:
            name = f"  {item['symbol']}" if item.get("symbol") else ""  # the function or class the lines hold
            print(f"{item['verdict']:<14} {_line(item['src'])}{name}  live_truth={item['live_truth']:.2f}  "
                  f"relevance={item['relevance']:.2f}  {item['reason']}")
    for target in data["refresh_targets"]:
        print(f"refresh[{target['priority']}] {target['target_kind']} {_line(target['source_id'])}: {target['reason']}")
    for note in data["notes"]:
        print(f"note: {note}")
    return found


def cmd_fingerprint(args: argparse.Namespace) -> int:
    helix = _manager(args)
    try:
        if args.batch:
            return _fingerprint_batch(helix, args)
        results = helix.fingerprint(_read_query(args), max_results=args.max_results, project=_project(args, helix),
                                    group_by=args.by)
    finally:
        helix.close()
    if args.json:
        _print_json(results)
    elif not results:
        print("nothing relevant found", file=sys.stderr)
    elif args.by == "file":
        for r in results:
            print(f"{r['score']:.4f}  {_line(r['source_id'])}")
            for s in r["symbols"]:
                print(f"          {s['symbol'] or '(lines)'}  {s['start_line']}-{s['end_line']}")
    else:
        for r in results:
            signals = " ".join(f"{k}={v:.3f}" for k, v in r["signals"].items())
            name = f"  {r['symbol']}" if r.get("symbol") else ""
            print(f"{r['score']:.4f}  {_line(r['source_id'])}:{r['start_line']}-{r['end_line']}{name}  {signals}")
    return 0 if results else EXIT_NOTHING


def _fingerprint_batch(helix: Any, args: argparse.Namespace) -> int:
    """One JSON object per line in, one per line out: evaluations pay start-up once."""
    # undecodable bytes are kept as lone surrogates, so such a line is skipped by number, not the whole batch
    source = (io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="surrogateescape") if args.batch == "-"
              else open(args.batch, encoding="utf-8", errors="surrogateescape"))
    bad = 0
    with source:
        for lineno, line in enumerate(source, 1):
            if not line.strip():
                continue
            if not line.isascii() and _NOT_UTF8.search(line):
                bad += 1
                print(f"line {lineno}: not UTF-8 text; skipped", file=sys.stderr)
                continue
            try:
                item = json.loads(line)
                qid, query = item["id"], str(item["query"])
            except (ValueError, KeyError, TypeError):
                bad += 1
                print(f"line {lineno}: expected {{\"id\": ..., \"query\": \"...\"}}; skipped", file=sys.stderr)
                continue
            results = helix.fingerprint(query, max_results=args.max_results, project=_project(args, helix),
                                        group_by=args.by)
            sys.stdout.write(json.dumps({"id": qid, "results": results}) + "\n")
    return 1 if bad else 0


# ── server / supervisor ──


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from helix_context.server import create_app
    from helix_context.server.security import check_bind

    settings = _settings(args)
    host = args.host or settings.server.host
    port = args.port or settings.server.port
    settings = settings.replace(server={"host": host, "port": port})
    check_bind(host, settings.api_key)
    from helix_context.server.serve_logs import serve_log_config

    log_config, log_path = serve_log_config(settings)
    print(f"helix serve: serving on http://{host}:{port} (logs: {log_path}, rotated); Ctrl-C stops",
          file=sys.stderr, flush=True)
    uvicorn.run(create_app(settings), host=host, port=port, log_level=settings.server.log_level,
                log_config=log_config)
    return 0


def cmd_supervise(args: argparse.Namespace) -> int:
    try:
        from supervisor import run_supervisor
    except ImportError as exc:
        print(f"the supervisor is not installed ({exc})", file=sys.stderr)
        return 2
    root = logging.getLogger()
    for handler in list(root.handlers):  # the supervisor logs to its file and stderr itself: not every line twice
        root.removeHandler(handler)
    return run_supervisor(_settings(args), headless=True)


# ── sources ──


def cmd_sources(args: argparse.Namespace) -> int:
    from helix_context.sources.commands import run

    return run(args, _settings(args))


# ── export / import ──


def _portable(args: argparse.Namespace, action: Any, after: Any = None, code: Any = None) -> int:
    """Run an export or an import (either backend), print its summary, then `after(summary)`; the exit code is
    `code(summary)` (default 0)."""
    from helix_context.portable import format_summary

    helix = _manager(args)
    try:
        summary = action(helix)
    finally:
        helix.close()
    if args.json:
        _print_json(summary)
    else:
        print(format_summary(summary))
    if after is not None:
        after(summary)
    return int(code(summary)) if code is not None else 0


def _import_code(summary: dict[str, Any]) -> int:
    """2 when the export held chunks or files and every one was refused: the summary's "changed" may count
    only its sessions and activity, which is not what a user imports an index for."""
    taken = sum(summary["genes"][k] for k in ("new", "skipped", "overwritten", "outdated")) + \
        sum(summary["files"].values())
    if summary["refused"]["total"] and not taken:
        print("helix import: every chunk and file of the export was refused (reasons above); nothing of the index "
              "was imported", file=sys.stderr)
        return EXIT_USAGE
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from helix_context.portable import export_genome

    return _portable(args, lambda helix: export_genome(helix.genome, args.file))


def cmd_import(args: argparse.Namespace) -> int:
    from helix_context.ingest.reembed import embed_rowids
    from helix_context.portable import import_genome, parse_remap
    from helix_context.sources.commands import tell_backend
    from helix_context.sources.names import SourceNames
    from helix_context.sources.registry import resolve_folder
    from helix_context.sources.roots import RootMap

    settings = _settings(args)
    remap = parse_remap(args.remap or [])
    return _portable(args, lambda helix: import_genome(
        helix.genome, args.file, strategy=args.strategy, dry_run=args.dry_run, remap=remap,
        ingest_roots=settings.server.allowed_ingest_roots, max_sessions=settings.retention.max_sessions,
        check_folder=lambda path: resolve_folder(path, home=settings.home), names=SourceNames.of(settings),
        machine_roots=RootMap.load(settings.home),
        # a team genome keeps one model's vectors: genes that came with another's are embedded here and now
        embed=lambda rowids: embed_rowids(helix.genome, helix.embedder, settings.embedding, rowids)),
        # a running backend takes up the sources the import added now, not at its next start
        after=lambda summary: tell_backend(settings) if summary["sources_added"] and summary["changed"] else None,
        code=_import_code)


def cmd_genome_copy(args: argparse.Namespace) -> int:
    """Copy this genome into an empty SQLite file or PostgreSQL database (genome/copy.py)."""
    from helix_context.genome.copy import copy_genome
    from helix_context.genome.pg.url import is_postgres_url, safe_url
    from helix_context.genome.store import Genome

    if not is_postgres_url(args.to) and Path(args.to).expanduser().is_dir():
        folder = Path(args.to).expanduser()
        print(f"helix genome copy: {folder} is a folder: give the file name of the new genome (like "
              f"{folder / 'genome.db'})", file=sys.stderr)
        return EXIT_USAGE
    helix = _manager(args)
    try:
        if is_postgres_url(args.to):
            from helix_context.genome.pg.open import open_team_genome

            target = open_team_genome(args.to)
        else:
            target = Genome(Path(args.to).expanduser())
        try:
            summary = copy_genome(helix.genome, target, progress=lambda done, total: print(
                f"\rcopied {done}/{total} files", end="", file=sys.stderr, flush=True))
            print(file=sys.stderr)
            left = summary.pop("left_to_embed")
            summary["left_to_embed"], summary["embedded"] = len(left), _embed_copied(target, left, helix.settings)
        finally:
            target.close()
    finally:
        helix.close()
    summary["target"] = safe_url(args.to) if is_postgres_url(args.to) else summary["target"]
    _print_json(summary)
    if summary["embedded"] < summary["left_to_embed"]:
        print(f"helix genome copy: {summary['left_to_embed'] - summary['embedded']} chunks held vectors of another "
              f"model than {summary['vector_model']} (a re-embed was under way) and were copied without one: "
              "POST /admin/kv-backfill on a backend of the copy embeds them", file=sys.stderr)
    return 0


def _embed_copied(target: Any, gene_ids: list[str], settings: Settings) -> int:
    """Embed, in the copy, the genes whose source vector was another model's (a re-embed under way), when this
    machine's model is the copy's; how many got a vector."""
    if not gene_ids or not settings.embedding.enabled:
        return 0
    from helix_context.ingest.embed import Embedder
    from helix_context.ingest.reembed import embed_rowids

    cfg = settings.embedding
    embedder = Embedder.for_settings(cfg)
    try:
        if embedder.model_name != target.vector_model:
            return 0
        rowids = [g.rowid for i in gene_ids if (g := target.get_gene(i)) is not None and g.rowid is not None]
        return embed_rowids(target, embedder, cfg, rowids)
    finally:
        embedder.close()


# ── maintenance ──


def cmd_maintenance(args: argparse.Namespace) -> int:
    helix = _manager(args)
    try:
        genome = helix.genome
        if args.command == "vacuum":
            data: Any = genome.vacuum()
        elif args.command == "checkpoint":
            data = genome.checkpoint()
        else:
            problems = genome.integrity_check()
            data = {"ok": not problems, "problems": problems}
    finally:
        helix.close()
    _print_json(data)
    return 0 if not (isinstance(data, dict) and data.get("ok") is False) else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="helix", description="Helix Context: a local context server for LLMs.")
    parser.add_argument("--config", help="path to helix.toml (default: HELIX_CONFIG, HELIX_HOME/helix.toml, the repo's)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log to stderr at INFO level")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("ingest", help="index files or folders")
    p.add_argument("paths", nargs="+", help="files or folders to index (every one must exist)")
    p.add_argument("--project", help="project name for these files (default: the repository root's name)")
    p.add_argument("--no-embed", action="store_true", help="skip embeddings (these files are then found by their words only)")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout instead of text")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--progress", action="store_true", help="progress bar even when stderr is not a terminal")
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("stats", help="index size, indexed chunks by age and kind, optional parts")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout instead of text")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("query", help="the context a model would get for a question")
    p.add_argument("query", help="the question or words to look for ('-' reads stdin); must not be empty")
    p.add_argument("--budget", type=int, help="token budget (default [budget] token_budget)")
    p.add_argument("--project", help="answer from this project (or 'a,b'); default: the project of the source "
                                     "the current directory is in, else the one the evidence leads to")
    p.add_argument("--any-project", action="store_true", help="do not scope to the current directory's project")
    p.add_argument("--model", help="target model name (small models get the small-model layout)")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout instead of text")
    p.set_defaults(func=cmd_query)

    p = sub.add_parser("packet", help="pointers with trust verdicts for an agent")
    p.add_argument("query", help="the question or words to look for ('-' reads stdin); must not be empty")
    p.add_argument("--by", choices=("symbol", "file"), default="symbol", help="file: also rank files")
    p.add_argument("--task", default="edit", help="plan | explain | review | edit | debug | ops | quote")
    p.add_argument("--project", help="answer from this project (or 'a,b'); default: the project of the source "
                                     "the current directory is in, else the one the evidence leads to")
    p.add_argument("--any-project", action="store_true", help="do not scope to the current directory's project")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout instead of text")
    p.set_defaults(func=cmd_packet)

    p = sub.add_parser("fingerprint", help="ranked pointers with per-signal scores")
    p.add_argument("query", nargs="?", default="",
                   help="the question or words to look for ('-' reads stdin); not needed with --batch")
    p.add_argument("--max-results", type=int, default=10, help="at most this many pointers (default 10)")
    p.add_argument("--batch", help="JSONL file of {id, query} ('-' for stdin); prints JSONL")
    p.add_argument("--by", choices=("symbol", "file"), default="symbol",
                   help="symbol: the functions/classes that match; file: files ranked by their symbols")
    p.add_argument("--project", help="answer from this project (or 'a,b'); default: the project of the source "
                                     "the current directory is in, else the one the evidence leads to")
    p.add_argument("--any-project", action="store_true", help="do not scope to the current directory's project")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout instead of text")
    p.set_defaults(func=cmd_fingerprint)

    p = sub.add_parser("serve", help="run the backend (FastAPI on uvicorn)")
    p.add_argument("--host", help="address to listen on (default [server] host, 127.0.0.1)")
    p.add_argument("--port", type=int, help="port to listen on (default [server] port)")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("supervise", help="run the supervisor without a tray (servers, CI, systemd)")
    p.set_defaults(func=cmd_supervise)

    from helix_context.sources.commands import add_parser as add_sources_parser

    add_sources_parser(sub, cmd_sources)

    p = sub.add_parser("export", help="write the whole index to one portable file (versioned, gzip, sha256)")
    p.add_argument("file", help="the file to write")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout instead of text")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("import", help="merge an export file into the index")
    p.add_argument("file", help="a file written by `helix export`")
    p.add_argument("--strategy", choices=("skip_existing", "overwrite", "newest"), default="skip_existing",
                   help="what to do with a chunk that is already indexed (default skip_existing)")
    p.add_argument("--dry-run", action="store_true", help="print what would change; write nothing")
    p.add_argument("--remap", action="append", metavar="OLD=NEW",
                   help="map an export root (its name or old folder) to a folder here; the folder becomes a "
                        "source. Roots outside every source are refused unless confirmed this way")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout instead of text")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("genome", help="move the genome between backends")
    genome_sub = p.add_subparsers(dest="genome_command", required=True)
    p = genome_sub.add_parser("copy", help="copy into an empty SQLite file or PostgreSQL database (docs/team.md)")
    p.add_argument("--to", required=True, help="postgresql://… or a path for a new SQLite genome file")
    p.set_defaults(func=cmd_genome_copy)

    for name, text in (("vacuum", "rebuild the index file to reclaim space"),
                       ("checkpoint", "fold the write-ahead log into the index file"),
                       ("check", "integrity check (SQLite pages; on a team genome, the schema's invariants)")):
        p = sub.add_parser(name, help=text)
        p.set_defaults(func=cmd_maintenance)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        return int(args.func(args) or 0)
    except ConfigError as exc:
        print(f"helix: configuration error: {exc}", file=sys.stderr)
        return 2
    except GenomeError as exc:
        print(f"helix: {exc}", file=sys.stderr)
        return EXIT_GENOME
    except ValueError as exc:
        print(f"helix: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("helix: interrupted; everything committed so far is kept", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `helix fingerprint … | head`: the reader has what it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's last flush must not fail again
        return 1
    except OSError as exc:
        code, message = _os_failure(exc)
        print(f"helix: {message}", file=sys.stderr)
        return code
    except Exception as exc:
        import sqlite3

        if not isinstance(exc, sqlite3.Error):
            raise
        print(f"helix: {_sqlite_failure(exc)}", file=sys.stderr)
        return EXIT_GENOME


def _os_failure(exc: OSError) -> tuple[int, str]:
    """A file the command had to read or write failed: one line saying which, and what to do."""
    import errno

    where = f" ({exc.filename})" if exc.filename else ""
    if exc.errno == errno.ENOSPC:
        return EXIT_GENOME, f"no space left on the disk{where}: free some space and run it again (what was already " \
                            "stored is kept)"
    if exc.errno in (errno.EROFS, errno.EIO):
        return EXIT_GENOME, f"{exc.strerror}{where}: the disk cannot be written; nothing was changed"
    if exc.errno == errno.EISDIR:
        return 2, f"{exc.filename2 or exc.filename} is a folder: give a file name"
    return 2, f"{exc.strerror or exc}{where}"


def _sqlite_failure(exc: Exception) -> str:
    """SQLite's error in a user's words: a damaged file, a full disk, or the message as it came."""
    text = str(exc)
    if "malformed" in text or "not a database" in text:
        return (f"the genome file is damaged ({text}); `helix check` lists the problems. Move the file aside, then "
                "import an export (`helix import`) or ingest your folders again")
    if "disk is full" in text or "disk I/O" in text:
        return f"the genome could not be written ({text}): free some space and run it again (what was stored is kept)"
    return f"the genome could not be used ({text})"


if __name__ == "__main__":
    raise SystemExit(main())
