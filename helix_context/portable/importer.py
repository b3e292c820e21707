"""`helix import`: merge an export into a genome — or, with --dry-run, say what that would change.

Two passes over the file. The first checks the checksum, decompresses, converts an older format
(convert.py), checks every record's shape (a corrupt file is refused whole) and every record's
claims (validate.py: a hostile record is refused on its own, counted and listed), and plans.
The second does the same walk inside one genome transaction and writes, hashing the payload
again (a file changed in between rolls the import back). Gene ids are content hashes, so a gene
already stored is the same gene: the strategy decides whose metadata wins (skip_existing: ours;
overwrite: the file's; newest: the one verified last).
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from helix_context.errors import InvalidRequest
from helix_context.genome import portable_sql as sql
from helix_context.genome.portable_sql import ImportWrites
from helix_context.genome.storage import GenomeStore
from helix_context.genome.vector_models import DEFAULT_VECTOR_MODEL
from helix_context.portable.convert import upgrade
from helix_context.portable.fileformat import raw_records, read_header, verify_checksum
from helix_context.portable.validate import ImportGuard, check_shape
from helix_context.sources.names import SourceNames
from helix_context.sources.roots import RootMap

STRATEGIES = ("skip_existing", "overwrite", "newest")
EXAMPLES = 10  # ids listed per category in a summary
_BATCH = 500


class _Plan:
    """Decisions and counts for one import; also what a dry run reports."""

    def __init__(self) -> None:
        # outdated: chunks (and symbols) of a file this genome indexes in another version, where the file's
        # record is ours (skip_existing, newest): stored, they answered beside the current text and no ingest
        # removed them (the file is unchanged on disk)
        self.genes = {"new": 0, "skipped": 0, "overwritten": 0, "outdated": 0}
        self.files = {"new": 0, "skipped": 0, "overwritten": 0}
        self.links = {"new": 0, "updated": 0, "kept": 0, "dangling": 0}
        self.symbols = {"new": 0, "kept": 0, "dangling": 0, "outdated": 0}
        self.sessions = {"new": 0, "updated": 0, "kept": 0}
        self.activity = {"new": 0, "kept": 0}
        self.vector_changes = 0
        self.sources_added: list[str] = []
        self.spans_added = 0
        self.examples: dict[str, list[str]] = {"new": [], "skipped": [], "overwritten": [], "outdated": []}

    def gene(self, outcome: str, gene_id: str) -> None:
        self.genes[outcome] += 1
        if len(self.examples[outcome]) < EXAMPLES:
            self.examples[outcome].append(gene_id)

    @property
    def changes(self) -> bool:
        return bool(self.genes["new"] or self.genes["overwritten"] or self.files["new"] or self.files["overwritten"]
                    or self.links["new"] or self.links["updated"] or self.spans_added or self.symbols["new"]
                    or self.sessions["new"] or self.sessions["updated"] or self.activity["new"]
                    or self.sources_added)


def _newer(incoming: tuple[float, ...], stored: tuple[float, ...]) -> bool:
    return tuple(float(x or 0.0) for x in incoming) > tuple(float(x or 0.0) for x in stored)


def _decide(strategy: str, stored: tuple[float, ...] | None, incoming: tuple[float, ...]) -> str:
    if stored is None:
        return "new"
    if strategy == "overwrite" or (strategy == "newest" and _newer(incoming, stored)):
        return "overwritten"
    return "skipped"


def _store_row(record: dict[str, Any]) -> dict[str, Any]:
    row = {name: record.get(name) for name in sql.GENE_FIELDS}
    row["tags"] = sql.encode_tags(record["tags"])
    row["facts"] = sql.encode_facts(record["facts"])
    row["embedding"] = base64.b64decode(record["embedding"]) if record.get("embedding") else None
    if "vector_model" not in record and row["embedding"] is not None:
        row["vector_model"] = DEFAULT_VECTOR_MODEL  # exports made before models were recorded: all MiniLM
    return row


class _NothingToDo(Exception):
    """Rolls back an import that changed nothing, so the genome's generation stays put."""


class _Walk:
    """One pass over the records: decide each (and write it when `write`), through the genome's ImportWrites.

    `name`: the stored name of a local path (a team genome's `@ROOT/…` under a mapped root: sources/names.py)."""

    def __init__(self, db: ImportWrites, strategy: str, plan: _Plan, guard: ImportGuard, *, write: bool,
                 max_sessions: int, name: Callable[[str], str]) -> None:
        self.db, self.strategy, self.plan, self.guard, self.write = db, strategy, plan, guard, write
        self.max_sessions = max_sessions
        self.name = name
        self.genes: list[dict[str, Any]] = []
        self.files: list[dict[str, Any]] = []
        self.links: list[dict[str, Any]] = []
        self.planned: set[str] = set()  # genes a dry run would have added (they exist for what refers to them)
        self.outdated_paths: set[str] = set()  # files this genome holds in another version, its record kept

    def run(self, records: Iterator[tuple[int, dict[str, Any]]], path: Path) -> None:
        for root in self.guard.roots.values():
            if root.adds_source and root.local is not None and not self.db.source_exists(self.name(str(root.local))):
                self.plan.sources_added.append(self.name(str(root.local)))
                if self.write:
                    self.db.write_source(self.name(str(root.local)), None, time.time())
        for lineno, record in records:
            check_shape(record, path, lineno)
            kind = record["t"]
            if kind != "gene" and self.genes:  # what follows the genes refers to them: all in place first
                self.flush_genes()
            if kind not in ("gene", "file") and self.files:  # the symbols need to know which files are outdated
                self.flush_files()
            if kind == "gene":
                gene = self.guard.gene(record)
                if gene is not None:
                    self.genes.append(self._named(gene))
                if len(self.genes) >= _BATCH:
                    self.flush_genes()
            elif kind == "file":
                located = self.guard.located("file", record, self.guard.shown(record["path"]))
                if located is not None:
                    self.files.append({**located, "path": self.name(located["path"])})
                if len(self.files) >= _BATCH:
                    self.flush_files()
            elif kind == "link":
                self.links.append(record)
                if len(self.links) >= _BATCH:
                    self.flush_links()
            elif kind == "symbol":
                self.symbol(record)
            elif kind == "source":
                self.source(record)
            elif kind == "session":
                self.session(record)
            elif kind == "activity":
                self.activity(record)
            else:  # vector_change: the store's triggers log each imported vector as it is written
                self.plan.vector_changes += 1
        self.flush_genes()
        self.flush_files()
        self.flush_links()
        if self.write and (self.plan.sessions["new"] or self.plan.sessions["updated"]):
            self.db.cap_sessions(self.max_sessions)

    def _named(self, gene: dict[str, Any]) -> dict[str, Any]:
        """A file gene's local paths under their stored names (API texts keep their relative names)."""
        if gene["source_kind"] != "file":
            return gene
        path = gene["source_path"]
        return {**gene, "source_path": None if path is None else self.name(path),
                "sources": [[self.name(p), start, end] for p, start, end in gene["sources"]]}

    def _current(self, genes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The genes with the spans of files this genome indexes in another version left out (the file's
        record stays ours unless the strategy is overwrite, whose file records make the next ingest read
        the file again); a gene left with no span is outdated and not imported."""
        if self.strategy == "overwrite":
            return genes
        local = self.db.existing_files([s[0] for r in genes if r["source_kind"] == "file" for s in r["sources"]])
        if not local:
            return genes
        out = []
        for record in genes:
            version = record["source_hash"]
            if record["source_kind"] != "file" or not version:
                out.append(record)
                continue
            kept = [s for s in record["sources"] if s[0] not in local or local[s[0]][1] == version]
            if len(kept) == len(record["sources"]):
                out.append(record)
            elif kept:
                path = record["source_path"] if record["source_path"] in {s[0] for s in kept} else kept[0][0]
                out.append({**record, "sources": kept, "source_path": path})
            else:
                self.plan.gene("outdated", record["gene_id"])
        return out

    def flush_genes(self) -> None:
        db, plan = self.db, self.plan
        self.genes = self._current(self.genes)
        stored = db.existing_genes([r["gene_id"] for r in self.genes])
        for record in self.genes:
            gid = record["gene_id"]
            known = stored.get(gid)
            if known is None and gid in self.planned:  # listed twice in one file: the second is a repeat
                known = (0, float("inf"), float("inf"))
            outcome = _decide(self.strategy, None if known is None else known[1:],
                              (record["last_verified_at"], record["observed_at"]))
            plan.gene(outcome, gid)
            if outcome == "skipped":
                continue
            if not self.write:
                self.planned.add(gid)
                plan.spans_added += (len(record["sources"]) if known is None or known[0] <= 0
                                     else db.missing_sources(known[0], record["sources"]))
                continue
            row = _store_row(record)
            if known is None:
                rowid = db.insert_gene(row)
                stored[gid] = (rowid, row["last_verified_at"], row["observed_at"])
            else:
                rowid = known[0]
                db.overwrite_gene(rowid, row)
            plan.spans_added += db.add_sources(rowid, record["sources"])
        self.genes.clear()

    def flush_files(self) -> None:
        stored = self.db.existing_files([r["path"] for r in self.files])
        for record in self.files:
            local = stored.get(record["path"])
            outcome = _decide(self.strategy, None if local is None else (local[0],), (record["ingested_at"],))
            self.plan.files[outcome] += 1
            if outcome == "skipped" and local is not None and local[1] != record["content_hash"]:
                self.outdated_paths.add(record["path"])  # its symbols are of the other version too
            if self.write and outcome != "skipped":
                self.db.upsert_file(record)
                stored[record["path"]] = (record["ingested_at"], record["content_hash"])
        self.files.clear()

    def _rowids(self, gene_ids: Sequence[str]) -> dict[str, int]:
        return {gid: found[0] for gid, found in self.db.existing_genes(gene_ids).items()}

    def _rowid(self, gene_id: str, rowids: Mapping[str, int]) -> int | None:
        found = rowids.get(gene_id)
        return -1 if found is None and gene_id in self.planned else found

    def flush_links(self) -> None:
        rowids = self._rowids([gid for r in self.links for gid in (r["a"], r["b"])])
        for record in self.links:
            a, b = self._rowid(record["a"], rowids), self._rowid(record["b"], rowids)
            if a is None or b is None or record["a"] == record["b"]:
                self.plan.links["dangling"] += 1
                continue
            state = self.db.link_state(a, b) if a > 0 and b > 0 else None
            if state is None:
                outcome = "new"
            elif self.strategy == "overwrite" or (self.strategy == "newest"
                                                  and _newer((record["last_at"],), (state[1],))):
                outcome = "updated"
            else:
                outcome = "kept"
            self.plan.links[outcome] += 1
            if self.write and outcome != "kept":
                self.db.write_link(a, b, record["count"], record["last_at"])
        self.links.clear()

    def symbol(self, record: dict[str, Any]) -> None:
        located = self.guard.located("symbol", record, f"{record['name']} in {self.guard.shown(record['path'])}")
        if located is None:
            return
        located = {**located, "path": self.name(located["path"])}
        if located["path"] in self.outdated_paths:  # lines of another version of a file this genome holds
            self.plan.symbols["outdated"] += 1
            return
        gene = self._rowid(record["gene"], self._rowids([record["gene"]]))
        if gene is None:
            self.plan.symbols["dangling"] += 1
            return
        if not self.write:
            self.plan.symbols["new" if gene < 0 else "kept" if self.db.symbol_exists(gene, located)
                              else "new"] += 1
            return
        self.plan.symbols["new" if self.db.write_symbol(gene, located) else "kept"] += 1

    def source(self, record: dict[str, Any]) -> None:
        root = self.guard.source(record)
        if root is not None and root.shared is not None:
            self.shared_source(root.shared, record)
        elif root is not None and root.adds_source and root.local is not None and self.write:
            self.db.write_source(self.name(str(root.local)), record["project"], record["added_at"])

    def shared_source(self, key: str, record: dict[str, Any]) -> None:
        """A team genome's source into a team genome: the same name, which every backend that maps its
        root indexes (the export lists only sources the team had)."""
        if self.db.source_exists(key) or key in self.plan.sources_added:
            return
        self.plan.sources_added.append(key)
        if self.write:
            self.db.write_source(key, record["project"], record["added_at"])

    def session(self, record: dict[str, Any]) -> None:
        if len(record["session_id"]) > 256:
            self.guard.refuse("session", record["session_id"], "a session id longer than 256 characters")
            return
        seen = self.db.session_last_seen(record["session_id"])
        if seen is None:
            outcome = "new"
        elif self.strategy == "overwrite" or (self.strategy == "newest" and record["last_seen"] > seen):
            outcome = "updated"
        else:
            outcome = "kept"
        self.plan.sessions[outcome] += 1
        if self.write and outcome != "kept":
            self.db.write_session(record)

    def activity(self, record: dict[str, Any]) -> None:
        if self.db.activity_exists(record):
            self.plan.activity["kept"] += 1
            return
        self.plan.activity["new"] += 1
        if self.write:
            self.db.record_activity(record)


def import_genome(genome: GenomeStore, path: str | Path, strategy: str = "skip_existing", dry_run: bool = False, *,
                  remap: Mapping[str, str] | None = None, ingest_roots: Sequence[str] = (),
                  check_folder: Callable[[Path], Path] | None = None, max_sessions: int = 5_000,
                  names: SourceNames | None = None, machine_roots: RootMap | None = None,
                  embed: Callable[[list[int]], int] | None = None) -> dict[str, Any]:
    """Merge an export into `genome` (either backend). dry_run: report what would change and write nothing.

    remap: {root name or its old folder: folder here}, the roots the user confirms (`--remap OLD=NEW`).
    ingest_roots: [server] allowed_ingest_roots, trusted like sources. check_folder: the rules for a
    folder that becomes a source (the CLI passes sources.registry.resolve_folder with Helix's home).
    names: how this genome names sources and files (a team genome: relative to this machine's mapped
    roots, as the ingest does; a new source outside them is refused: sources/names.py).
    machine_roots: this machine's root map (default: the team genome's, `names.roots`), where a team
    export's shared root (`@api`) is on this machine when the genome keeps absolute paths (SQLite).
    embed: embeds the genes whose vectors this genome could not keep (another model's, on a team genome) and
    says how many it embedded (the CLI passes the manager's `embed_genes`); without it they wait for
    POST /admin/kv-backfill.
    Raises ExportFormatError for a file that is not a valid export; nothing is written then.
    """
    names = names or SourceNames(None)
    if strategy not in STRATEGIES:
        raise InvalidRequest(f"unknown import strategy {strategy!r}; use one of {', '.join(STRATEGIES)}")
    started = time.perf_counter()
    source = Path(path).expanduser()
    header, offset = read_header(source)
    verify_checksum(source, header, offset)
    header, records = upgrade(header, lambda: raw_records(source, header, offset))
    generation_before = genome.generation()
    current = [folder for r in genome.list_sources() if r.pending != "forget"
               and (folder := names.folder(r.path)) is not None]
    folder_rule = check_folder or (lambda p: p.resolve(strict=True))

    def checked(folder: Path) -> Path:
        found = folder_rule(folder)
        names.key(found)  # a team genome: a new source lies in a mapped root (SourceError says how to map it)
        return found

    def guard() -> ImportGuard:
        return ImportGuard(header.get("roots", []), remap or {}, sources=[p.resolve() for p in current],
                           ingest_roots=[Path(r).expanduser().resolve() for r in ingest_roots], check_folder=checked,
                           machine_roots=machine_roots or names.roots, keep_shared=names.team)

    plan, checks = _Plan(), guard()
    with genome.import_writes(write=False) as reads:
        _Walk(reads, strategy, plan, checks, write=False, max_sessions=max_sessions,
              name=names.stored).run(records(), source)
    left_out: list[int] = []
    if not dry_run and plan.changes:
        plan, checks = _Plan(), guard()
        try:
            with genome.import_writes(write=True) as writes:
                _Walk(writes, strategy, plan, checks, write=True, max_sessions=max_sessions,
                      name=names.stored).run(records(), source)
                if not plan.changes:
                    raise _NothingToDo
                left_out = writes.left_out
        except _NothingToDo:
            pass
    # committed: the genes whose vectors were left out (and that hold none now) are embedded with this genome's model
    left_out = [r for r in dict.fromkeys(left_out) if genome.embedding_of(r) is None]
    embedded = embed(left_out) if embed is not None and left_out else 0
    return {
        "path": str(source), "strategy": strategy, "dry_run": dry_run,
        "format_version": header["version"], "converted_from": header.get("converted_from"),
        "schema_version": header.get("schema_version"), "created_at": header.get("created_at"),
        "in_file": header.get("counts", {}),
        "roots": [{"name": r.name, "exported": r.exported, "local": str(r.local) if r.local else None,
                   "confirmed": r.confirmed, "refused": r.refusal, "shared": r.shared} for r in checks.roots.values()],
        "genes": plan.genes, "files": plan.files, "links": plan.links, "symbols": plan.symbols,
        "sessions": plan.sessions, "activity": plan.activity, "vector_changes": plan.vector_changes,
        "sources_added": plan.sources_added, "spans_added": plan.spans_added,
        "refused": {"total": checks.refused, "by_reason": checks.reasons, "records": checks.refusals},
        "examples": plan.examples,
        "would_change": plan.changes, "changed": plan.changes and not dry_run,
        "generation_before": generation_before, "generation_after": genome.generation(),
        # genes whose vector another model made: a running backend re-embeds them (manager.resume_reembed)
        "to_reembed": genome.stale_vector_count() if plan.changes and not dry_run else 0,
        "vector_model": genome.vector_model,
        # a team genome keeps one model's vectors: the genes that came with another's, and those embedded again
        "vectors_left_out": len(left_out), "embedded_again": embedded,
        "seconds": round(time.perf_counter() - started, 3),
    }
