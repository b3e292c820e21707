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
from helix_context.genome import activity_sql
from helix_context.genome import portable_sql as sql
from helix_context.genome.retention import cap_sessions
from helix_context.genome.vector_models import DEFAULT_VECTOR_MODEL
from helix_context.genome.store import Genome
from helix_context.portable.convert import upgrade
from helix_context.portable.fileformat import raw_records, read_header, verify_checksum
from helix_context.portable.validate import ImportGuard, check_shape

STRATEGIES = ("skip_existing", "overwrite", "newest")
EXAMPLES = 10  # ids listed per category in a summary
_BATCH = 500


class _Plan:
    """Decisions and counts for one import; also what a dry run reports."""

    def __init__(self) -> None:
        self.genes = {"new": 0, "skipped": 0, "overwritten": 0}
        self.files = {"new": 0, "skipped": 0, "overwritten": 0}
        self.links = {"new": 0, "updated": 0, "kept": 0, "dangling": 0}
        self.symbols = {"new": 0, "kept": 0, "dangling": 0}
        self.sessions = {"new": 0, "updated": 0, "kept": 0}
        self.activity = {"new": 0, "kept": 0}
        self.vector_changes = 0
        self.sources_added: list[str] = []
        self.spans_added = 0
        self.examples: dict[str, list[str]] = {"new": [], "skipped": [], "overwritten": []}

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
    """One pass over the records: decide each (and write it when `write`)."""

    def __init__(self, conn: Any, strategy: str, plan: _Plan, guard: ImportGuard, *, write: bool,
                 max_sessions: int) -> None:
        self.conn, self.strategy, self.plan, self.guard, self.write = conn, strategy, plan, guard, write
        self.max_sessions = max_sessions
        self.genes: list[dict[str, Any]] = []
        self.files: list[dict[str, Any]] = []
        self.links: list[dict[str, Any]] = []
        self.planned: set[str] = set()  # genes a dry run would have added (they exist for what refers to them)

    def run(self, records: Iterator[tuple[int, dict[str, Any]]], path: Path) -> None:
        for root in self.guard.roots.values():
            if root.adds_source and root.local is not None and not sql.source_exists(self.conn, str(root.local)):
                self.plan.sources_added.append(str(root.local))
                if self.write:
                    sql.write_source(self.conn, str(root.local), None, time.time())
        for lineno, record in records:
            check_shape(record, path, lineno)
            kind = record["t"]
            if kind != "gene" and self.genes:  # what follows the genes refers to them: all in place first
                self.flush_genes()
            if kind == "gene":
                gene = self.guard.gene(record)
                if gene is not None:
                    self.genes.append(gene)
                if len(self.genes) >= _BATCH:
                    self.flush_genes()
            elif kind == "file":
                located = self.guard.located("file", record, self.guard.shown(record["path"]))
                if located is not None:
                    self.files.append(located)
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
            cap_sessions(self.conn, self.max_sessions)

    def flush_genes(self) -> None:
        conn, plan = self.conn, self.plan
        stored = sql.existing_genes(conn, [r["gene_id"] for r in self.genes])
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
                                     else sql.missing_sources(conn, known[0], record["sources"]))
                continue
            row = _store_row(record)
            if known is None:
                rowid = sql.insert_gene(conn, row)
                stored[gid] = (rowid, row["last_verified_at"], row["observed_at"])
            else:
                rowid = known[0]
                sql.overwrite_gene(conn, rowid, row)
            plan.spans_added += sql.add_sources(conn, rowid, record["sources"])
        self.genes.clear()

    def flush_files(self) -> None:
        stored = sql.existing_files(self.conn, [r["path"] for r in self.files])
        for record in self.files:
            outcome = _decide(self.strategy, None if record["path"] not in stored else (stored[record["path"]],),
                              (record["ingested_at"],))
            self.plan.files[outcome] += 1
            if self.write and outcome != "skipped":
                sql.upsert_file(self.conn, record)
                stored[record["path"]] = record["ingested_at"]
        self.files.clear()

    def _rowid(self, gene_id: str, rowids: Mapping[str, int]) -> int | None:
        found = rowids.get(gene_id)
        return -1 if found is None and gene_id in self.planned else found

    def flush_links(self) -> None:
        rowids = sql.rowids_for(self.conn, [gid for r in self.links for gid in (r["a"], r["b"])])
        for record in self.links:
            a, b = self._rowid(record["a"], rowids), self._rowid(record["b"], rowids)
            if a is None or b is None or record["a"] == record["b"]:
                self.plan.links["dangling"] += 1
                continue
            state = sql.link_state(self.conn, a, b) if a > 0 and b > 0 else None
            if state is None:
                outcome = "new"
            elif self.strategy == "overwrite" or (self.strategy == "newest"
                                                  and _newer((record["last_at"],), (state[1],))):
                outcome = "updated"
            else:
                outcome = "kept"
            self.plan.links[outcome] += 1
            if self.write and outcome != "kept":
                sql.write_link(self.conn, a, b, record["count"], record["last_at"])
        self.links.clear()

    def symbol(self, record: dict[str, Any]) -> None:
        located = self.guard.located("symbol", record, f"{record['name']} in {self.guard.shown(record['path'])}")
        if located is None:
            return
        gene = self._rowid(record["gene"], sql.rowids_for(self.conn, [record["gene"]]))
        if gene is None:
            self.plan.symbols["dangling"] += 1
            return
        if not self.write:
            self.plan.symbols["new" if gene < 0 else "kept" if sql.symbol_exists(self.conn, gene, located)
                              else "new"] += 1
            return
        self.plan.symbols["new" if sql.write_symbol(self.conn, gene, located) else "kept"] += 1

    def source(self, record: dict[str, Any]) -> None:
        root = self.guard.source(record)
        if root is not None and root.adds_source and root.local is not None and self.write:
            sql.write_source(self.conn, str(root.local), record["project"], record["added_at"])

    def session(self, record: dict[str, Any]) -> None:
        if len(record["session_id"]) > 256:
            self.guard.refuse("session", record["session_id"], "a session id longer than 256 characters")
            return
        seen = sql.session_last_seen(self.conn, record["session_id"])
        if seen is None:
            outcome = "new"
        elif self.strategy == "overwrite" or (self.strategy == "newest" and record["last_seen"] > seen):
            outcome = "updated"
        else:
            outcome = "kept"
        self.plan.sessions[outcome] += 1
        if self.write and outcome != "kept":
            sql.write_session(self.conn, record)

    def activity(self, record: dict[str, Any]) -> None:
        if sql.activity_exists(self.conn, record):
            self.plan.activity["kept"] += 1
            return
        self.plan.activity["new"] += 1
        if self.write:
            activity_sql.record(self.conn, record["kind"], record["actor"], record["summary"], record["counts"],
                                at=record["at"])


def import_genome(genome: Genome, path: str | Path, strategy: str = "skip_existing", dry_run: bool = False, *,
                  remap: Mapping[str, str] | None = None, ingest_roots: Sequence[str] = (),
                  check_folder: Callable[[Path], Path] | None = None, max_sessions: int = 5_000) -> dict[str, Any]:
    """Merge an export into `genome`. dry_run: report what would change and write nothing.

    remap: {root name or its old folder: folder here}, the roots the user confirms (`--remap OLD=NEW`).
    ingest_roots: [server] allowed_ingest_roots, trusted like sources. check_folder: the rules for a
    folder that becomes a source (the CLI passes sources.registry.resolve_folder with Helix's home).
    Raises ExportFormatError for a file that is not a valid export; nothing is written then.
    """
    if strategy not in STRATEGIES:
        raise InvalidRequest(f"unknown import strategy {strategy!r}; use one of {', '.join(STRATEGIES)}")
    started = time.perf_counter()
    source = Path(path).expanduser()
    header, offset = read_header(source)
    verify_checksum(source, header, offset)
    header, records = upgrade(header, lambda: raw_records(source, header, offset))
    generation_before = genome.generation()
    current = [Path(r["path"]) for r in sql.iter_source_rows(genome.conn)]

    def guard() -> ImportGuard:
        return ImportGuard(header.get("roots", []), remap or {}, sources=[p.resolve() for p in current],
                           ingest_roots=[Path(r).expanduser().resolve() for r in ingest_roots],
                           check_folder=check_folder or (lambda p: p.resolve(strict=True)))

    plan, checks = _Plan(), guard()
    _Walk(genome.conn, strategy, plan, checks, write=False, max_sessions=max_sessions).run(records(), source)
    if not dry_run and plan.changes:
        plan, checks = _Plan(), guard()
        try:
            with genome.transaction() as tx:
                _Walk(tx, strategy, plan, checks, write=True, max_sessions=max_sessions).run(records(), source)
                if not plan.changes:
                    raise _NothingToDo
        except _NothingToDo:
            pass
    return {
        "path": str(source), "strategy": strategy, "dry_run": dry_run,
        "format_version": header["version"], "converted_from": header.get("converted_from"),
        "schema_version": header.get("schema_version"), "created_at": header.get("created_at"),
        "in_file": header.get("counts", {}),
        "roots": [{"name": r.name, "exported": r.exported, "local": str(r.local) if r.local else None,
                   "confirmed": r.confirmed, "refused": r.refusal} for r in checks.roots.values()],
        "genes": plan.genes, "files": plan.files, "links": plan.links, "symbols": plan.symbols,
        "sessions": plan.sessions, "activity": plan.activity, "vector_changes": plan.vector_changes,
        "sources_added": plan.sources_added, "spans_added": plan.spans_added,
        "refused": {"total": checks.refused, "by_reason": checks.reasons, "records": checks.refusals},
        "examples": plan.examples,
        "would_change": plan.changes, "changed": plan.changes and not dry_run,
        "generation_before": generation_before, "generation_after": genome.generation(),
        "seconds": round(time.perf_counter() - started, 3),
    }
