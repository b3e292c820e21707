"""Ingest: files or text → chunks → tags, facts, provenance → embeddings → genes.

Stages are plain functions over plain data; this module wires them and owns
the incremental logic:
  * size + mtime unchanged → the file is not even read;
  * bytes unchanged (same hash) → only the mtime is remembered;
  * otherwise the file's genes are replaced in one transaction;
  * a file gone from a folder that was walked completely → its genes retire.
Embedding runs in batches across files (the model is much faster per chunk in
batches) on a background thread, while the caller parses the next batch; the
batches are written in order, one transaction each.
"""

from __future__ import annotations

import hashlib
import logging
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, Protocol

import numpy as np

from helix_context.config import Settings
from helix_context.errors import GenomeError, IngestRefused
from helix_context.genome.store import FileRecord, SourceWrite
from helix_context.genome.storage import GenomeStore
from helix_context.genome.stored_form import StoredForm
from helix_context.ingest.detect import is_binary
from helix_context.ingest.embed_text import embedding_text, embedding_tokens
from helix_context.ingest.genes import TaggerLike, make_genes
from helix_context.ingest.parallel import ParseJob, ParsePool, Scheduler
from helix_context.ingest.walk import FileEntry, Skipped, WalkedRoot, walk
from helix_context.models import Gene, Provenance
from helix_context.safe_open import ReadRule, Refusal, read_file
from helix_context.sources.roots import RootMap, is_shared

log = logging.getLogger("helix.ingest")

class EmbedderLike(Protocol):
    parallel: int  # model calls that run well at once (one per core)

    def embed(self, texts: Sequence[str], max_tokens: Sequence[int] | None = None, *,
              spread: bool = True) -> np.ndarray: ...


@dataclass
class IngestReport:
    files_seen: int = 0
    files_ingested: int = 0
    files_unchanged: int = 0
    files_skipped: list[dict[str, str]] = field(default_factory=list)
    genes_added: int = 0
    genes_replaced: int = 0
    genes_retired: int = 0
    genes_reused: int = 0
    bytes: int = 0
    seconds: float = 0.0
    embedded: bool = False
    not_stored: int = 0  # files read but refused by the genome (a full disk, a lock): the CLI exits 4

    def skip(self, path: str, reason: str, *, store_failed: bool = False) -> None:
        self.files_skipped.append({"path": path, "reason": reason})
        self.not_stored += store_failed

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["seconds"] = round(self.seconds, 3)
        data["mb_per_s"] = round(self.bytes / 1e6 / self.seconds, 3) if self.seconds > 0 else 0.0
        return data

    def summary(self) -> str:
        parts = [
            f"{self.files_seen} files seen",
            f"{self.files_ingested} ingested",
            f"{self.files_unchanged} unchanged",
            f"{len(self.files_skipped)} skipped",
            f"{self.genes_added} chunks indexed",
            f"{self.genes_replaced} replaced",
            f"{self.genes_retired} removed",
            f"{self.bytes / 1e6:.2f} MB in {self.seconds:.2f} s",
        ]
        return ", ".join(parts)


def _may_pass(reason: str) -> bool:
    """A walk or read refusal that a later try may not meet (a permission, a file mid-write, a stalled network
    folder): the file keeps what it held until then. Any other (gone, a link, too large) retires it."""
    return reason.startswith(("unreadable", "it changed while")) or "stalled" in reason


class ApiTextRefused(IngestRefused):
    """API text that would stand in for a file on disk (the server answers 409 with the message)."""


def api_text_refusal(path: str | None, source_kind: str) -> str | None:
    """Why text sent through the API (HTTP, MCP, session notes) may not be stored under this name and kind.

    Why: genes from disk are keyed by their file's absolute path and checked against the file when
    weighed. API text therefore lives in its own namespace, relative names (``notes/design.md``), and
    never claims the source kind ``file``: it can neither replace a file's genes nor pass for them,
    and weighing never touches a path an API caller chose (which would tell them whether it exists).
    """
    if source_kind == "file":
        return ("source_kind 'file' is reserved for files read from disk; leave it out (API text is kind 'api') "
                "or ingest the file itself with `helix ingest PATH` or POST /ingest {\"path\": ...}")
    if path is None:
        return None
    if (path.startswith(("/", "\\", "~")) or PurePosixPath(path).is_absolute() or PureWindowsPath(path).drive):
        return (f"metadata.path {path[:200]!r} is an absolute path, which names a file on disk; API text is "
                "stored under a relative name of your choosing (like notes/design.md). To index the file "
                "itself, use `helix ingest PATH` or POST /ingest {\"path\": ...}")
    if ".." in set(PurePosixPath(path).parts) | set(PureWindowsPath(path).parts):  # `../../etc/passwd`, as an import
        return (f"metadata.path {path[:200]!r} climbs with '..': API text is stored under a relative name inside "
                "its own namespace (like notes/design.md), and a name that reads as another file misleads the model")
    return None


@dataclass
class _Prepared:
    """One file, chunked and tagged, waiting for embeddings and its transaction."""

    record: FileRecord | None
    path: str | None
    genes: list[Gene]
    forms: dict[str, StoredForm]  # stored forms computed by a parse worker, by gene id
    size: int


def find_project(path: Path, fallback: Path) -> str:
    """The repository root holding `path` (a folder with .git), else the ingest root's name."""
    for parent in [path, *path.parents]:
        if (parent / ".git").exists():
            return parent.name
        if parent == fallback.parent:
            break
    return fallback.name or str(fallback)


class Ingestor:
    def __init__(self, genome: GenomeStore, settings: Settings, *, embedder: EmbedderLike | None = None,
                 tagger: TaggerLike | None = None, parse_pool: ParsePool | None = None) -> None:
        self.genome = genome
        self.settings = settings
        self.embedder = embedder
        self.tagger = tagger
        self.parse_pool = parse_pool
        # a team genome names files under a mapped shared root relative to it (`@api/src/x.py`), so every
        # machine's checkout of the root indexes and answers to the same names (sources/roots.py)
        self.roots = RootMap.load(settings.home) if settings.genome.url else RootMap({})

    def stored_name(self, path: str | Path) -> str:
        """The name a file is stored under: its shared name on a team genome, else its path."""
        return (self.roots.shared_name(Path(path)) if self.roots.roots else None) or str(path)

    # ── genes from text ──

    def make_genes(self, text: str, *, path: str | None, content_type: str | None, language: str | None = None,
                   project: str | None, provenance: Provenance) -> list[Gene]:
        return make_genes(text, settings=self.settings, tagger=self.tagger, path=path, content_type=content_type,
                          language=language, project=project, provenance=provenance)

    # ── public entry points ──

    def ingest_text(self, text: str, *, content_type: str | None = None, metadata: dict[str, Any] | None = None
                    ) -> IngestReport:
        """API ingest: text with optional metadata {path, project, source_kind, authority_class, volatility_class}.
        With a path, the text becomes that path's complete set of genes (re-posting replaces them)."""
        return self.ingest_texts([(text, content_type, metadata or {})])

    def ingest_texts(self, items: Iterable[tuple[str, str | None, dict[str, Any]]]) -> IngestReport:
        """Many API texts, embedded in batches across texts (evaluations, imports, session notes)."""
        started = time.perf_counter()
        report = IngestReport(embedded=self.embedder is not None)
        with _Batches(self, report) as batches:
            for text, content_type, metadata in items:
                report.files_seen += 1
                try:
                    prepared = self._prepare_text(text, content_type, metadata)
                except ApiTextRefused:
                    raise
                except Exception as exc:  # one text's failure is that text's, as for files
                    log.warning("could not parse API text %s: %s", metadata.get("path"), exc)
                    report.skip(str(metadata.get("path") or "<text>"),
                                f"could not be parsed ({type(exc).__name__}: {exc})")
                    continue
                batches.add(prepared)
        report.seconds = time.perf_counter() - started
        return report

    def _prepare_text(self, text: str, content_type: str | None, metadata: dict[str, Any]) -> _Prepared:
        now = time.time()
        path = str(metadata["path"]) if metadata.get("path") else None
        source_kind = str(metadata.get("source_kind") or "api")
        refused = api_text_refusal(path, source_kind)
        if refused is not None:
            raise ApiTextRefused(refused)
        prov = Provenance(
            source_kind=source_kind,
            volatility_class=str(metadata.get("volatility_class", "stable")),
            authority_class=str(metadata.get("authority_class", "primary" if path else "derived")),
            observed_at=now,
            last_verified_at=now,
        )
        genes = self.make_genes(text, path=path, content_type=content_type, language=metadata.get("language"),
                                project=metadata.get("project"), provenance=prov)
        encoded = text.encode("utf-8", "surrogatepass")
        # no files-table record: the path names the text, it is not a file to re-read or retire;
        # re-posting the same path still replaces its genes (they are keyed by source path)
        return _Prepared(None, path, genes, {}, len(encoded))

    def ingest_paths(self, paths: Sequence[str | Path], *, project: str | None = None,
                     progress: Callable[[int, int, str], None] | None = None,
                     confine_to: Sequence[str | Path] | None = None) -> IngestReport:
        """Walk, skip what is unchanged, replace what changed, retire what vanished.
        `confine_to`: folders a followed symlink may point into (default: the walked root itself)."""
        started = time.perf_counter()
        if self.settings.genome.url:  # `helix sources map` may have run since: a running backend names files by it
            self.roots = RootMap.load(self.settings.home)
        report = IngestReport(embedded=self.embedder is not None)
        cfg = self.settings.ingest
        entries: list[FileEntry] = []
        walked_roots: list[Path] = []
        kept: set[str] = set()
        for item in walk(paths, max_file_bytes=cfg.max_file_bytes, ignore=cfg.ignore,
                         respect_gitignore=cfg.respect_gitignore, follow_symlinks=cfg.follow_symlinks,
                         confine_to=confine_to):
            if isinstance(item, FileEntry):
                entries.append(item)
            elif isinstance(item, Skipped):
                report.files_seen += 1
                report.skip(item.path, item.reason)
                if _may_pass(item.reason):
                    kept.add(self.stored_name(item.path))  # a read that may work next time keeps what it held
            elif isinstance(item, WalkedRoot):
                walked_roots.append(item.root)

        known: dict[str, FileRecord] = {}
        for root in {e.root for e in entries} | set(walked_roots):
            known.update(self.genome.file_records(under=self.stored_name(root)))

        self._ingest_entries(entries, known, project, progress, report)

        # what a walk no longer yields as a file to index retires: gone, a link or a folder now, ignored since (a
        # .gitignore edit), too large: the index holds what a fresh ingest would hold, no more
        seen = {self.stored_name(e.path) for e in entries} | kept
        prefixes = [(p, p.rstrip("/\\") + ("\\" if "\\" in p else "/")) for p in map(self.stored_name, walked_roots)]

        def walked(path: str) -> bool:
            return any(path == prefix or path.startswith(under) for prefix, under in prefixes)

        gone = {path for path in known if path not in seen and walked(path) and self._not_here(path)}
        # a file named on its own (not inside a walked folder) that is skipped now: looked up one by one
        gone.update(path for path in (self.stored_name(s["path"]) for s in report.files_skipped
                                      if not s["path"].startswith("<")) if path not in seen and not walked(path))
        for path in sorted(gone):
            self._retire_missing_file(path, report)  # a path never indexed has no record: nothing happens
        report.seconds = time.perf_counter() - started
        return report

    # ── internals ──

    def _not_here(self, path: str) -> bool:
        """Whether this machine may retire an indexed file its walk did not yield. A team genome's file (a shared
        name) only when it is no file in this checkout (gone, a folder or a link now): what this machine's own
        ignore rules or size limit leave out may be a teammate's to index. A personal genome's always: it holds
        what a fresh ingest here would."""
        if not is_shared(path):
            return True
        local = self.roots.local_path(path)
        return local is not None and not local.is_file()

    def _retire_missing_file(self, path: str, report: IngestReport) -> None:
        if self.genome.file_record(path) is None:
            return
        try:
            report.genes_retired += self.genome.retire_source(path)
        except GenomeError as exc:
            report.skip(path, f"could not retire genes of a deleted file: {exc}", store_failed=True)

    def _ingest_entries(self, entries: list[FileEntry], known: dict[str, FileRecord], project: str | None,
                        progress: Callable[[int, int, str], None] | None, report: IngestReport) -> None:
        jobs = self._changed_files(entries, known, project, progress, report)
        # With embeddings on, the model's threads keep every core busy and parsing in this process
        # overlaps them: workers would only take cores from the model.
        pool = self.parse_pool if self.embedder is None else None
        with _Batches(self, report) as batches:
            for job, parsed in Scheduler(pool, self.settings, self.tagger).run(jobs):
                if isinstance(parsed, BaseException):
                    report.skip(job.path, f"could not be parsed ({type(parsed).__name__}: {parsed})")
                    continue
                record, size = job.payload
                batches.add(_Prepared(record, job.path, parsed.genes, parsed.forms, size))

    def _changed_files(self, entries: list[FileEntry], known: dict[str, FileRecord], project: str | None,
                       progress: Callable[[int, int, str], None] | None, report: IngestReport
                       ) -> Iterator[ParseJob]:
        """Files to parse, read and decoded; unchanged, binary and unreadable ones are counted here."""
        total = len(entries)
        for index, entry in enumerate(entries, 1):
            report.files_seen += 1
            key = self.stored_name(entry.path)
            if progress is not None:
                progress(index, total, key)
            previous = known.get(key)
            if previous is not None and project is not None and previous.project != project:
                previous = None  # indexed under another project: its chunks are made again as this one's
            if previous is not None and previous.stat_matches(entry.size, entry.mtime_ns):
                report.files_unchanged += 1
                continue
            job = self._read_file(entry, previous, project, report)
            if job is not None:
                yield job

    def _read_file(self, entry: FileEntry, previous: FileRecord | None, project: str | None,
                   report: IngestReport) -> ParseJob | None:
        key = self.stored_name(entry.path)
        cfg = self.settings.ingest
        got = read_file(entry.path, ReadRule(entry.roots or (entry.root,), cfg.follow_symlinks, cfg.max_file_bytes,
                                             cfg.read_timeout_s))
        if isinstance(got, Refusal):
            report.skip(key, got.reason)
            if not _may_pass(got.reason):  # gone, a link, too large, not a file: what it held retires
                self._retire_missing_file(key, report)
            return None
        data = got.data
        if is_binary(data):
            report.skip(key, "binary file")
            self._retire_missing_file(key, report)  # its old text would be served, and asked to be re-read, forever
            return None
        content_hash = hashlib.sha256(data).hexdigest()
        record = FileRecord(key, project or find_project(entry.path, entry.root), len(data), got.mtime_ns,
                            content_hash)
        if previous is not None and previous.content_hash == content_hash:
            try:
                self.genome.touch_file(record)
            except GenomeError as exc:
                report.skip(key, str(exc), store_failed=True)
                return None
            report.files_unchanged += 1
            return None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            report.skip(key, f"not valid UTF-8 (byte {exc.start}); convert it to UTF-8 to index it")
            self._retire_missing_file(key, report)
            return None
        if text.startswith("\ufeff"):
            text = text[1:]
        now = time.time()
        prov = Provenance(source_kind="file", observed_at=now, last_verified_at=now,
                          source_mtime=got.mtime_ns / 1e9, source_hash=content_hash)
        return ParseJob(key, text, record.project, prov, payload=(record, len(data)))

    def _write(self, pending: list[_Prepared], vectors: list[np.ndarray | None], report: IngestReport) -> None:
        """Write one batch of files in one transaction (file by file if that fails)."""
        writes: list[SourceWrite] = []
        offset = 0
        for item in pending:
            genes = list(zip(item.genes, vectors[offset:offset + len(item.genes)]))
            writes.append(SourceWrite(item.record, item.path, genes, item.forms))
            offset += len(item.genes)
        for item, result in zip(pending, self._replace(writes)):
            if isinstance(result, Exception):
                report.skip(item.path or "<text>", str(result), store_failed=True)
                continue
            report.files_ingested += 1
            report.bytes += item.size
            report.genes_added += result.added
            report.genes_replaced += result.replaced
            report.genes_reused += result.reused

    def _replace(self, writes: list[SourceWrite]) -> list[Any]:
        """The store's per-file results; a failure the store does not expect (a bad value in one file's
        genes) is retried file by file, so it costs that file alone and never the whole ingest."""
        try:
            return self.genome.replace_sources(writes)
        except Exception:  # anything: the batch rolled back, find the file that breaks it
            if len(writes) == 1:
                exc = sys.exc_info()[1]
                log.warning("could not store %s: %s", writes[0].path, exc)
                return [GenomeError(f"could not be stored ({type(exc).__name__}: {exc})")]
        return [result for write in writes for result in self._replace([write])]

    def _vectors(self, pending: list[_Prepared]) -> list[np.ndarray | None]:
        genes = [g for p in pending for g in p.genes]
        vectors: list[np.ndarray | None] = [None] * len(genes)
        if self.embedder is None or not genes:
            return vectors
        # genes already stored with a vector (unchanged chunks of a changed file, duplicates) keep it,
        # and a chunk repeated within the batch is embedded once
        have = self.genome.embedded_gene_ids([g.gene_id for g in genes])
        first: dict[str, Gene] = {}
        for gene in genes:
            if gene.gene_id not in have:
                first.setdefault(gene.gene_id, gene)
        try:
            if first:
                cfg = self.settings.embedding
                # one call per core runs at once (see _Batches), so each stays on its own thread
                matrix = self.embedder.embed([embedding_text(g) for g in first.values()],
                                             [embedding_tokens(g, cfg) for g in first.values()], spread=False)
                by_id = dict(zip(first, matrix))
                vectors = [by_id.get(g.gene_id) for g in genes]
        except Exception as exc:  # the dense signal is optional: store genes without vectors
            log.warning("embedding failed (%s); genes stored without vectors", exc)
        return vectors


class _Batches:
    """Parsed files on their way to the genome, gathered into batches of about 64 genes (256 without embeddings).

    With an embedder, one batch per core is embedded at a time, each on a
    background thread of its own (the model runs outside the GIL), while the
    caller parses the next one; a batch is written once its vectors are ready,
    in the order the batches came. Leaving the block early (an error, Ctrl-C)
    writes nothing more: what was written stays, and the next ingest redoes the rest.
    """

    def __init__(self, ingestor: Ingestor, report: IngestReport) -> None:
        self._ingestor = ingestor
        self._report = report
        embedder = ingestor.embedder
        # Without an embedder a batch is only a transaction: larger ones commit less often and
        # leave the full-text index fewer segments to merge (~25 % less write time than 64).
        self._target = max(64, ingestor.settings.embedding.batch_size * 4) if embedder is not None else 256
        self._pending: list[_Prepared] = []
        self._genes = 0
        self._embedding: deque[tuple[list[_Prepared], Future[list[np.ndarray | None]]]] = deque()
        self._in_flight = max(1, getattr(embedder, "parallel", 1))
        self._executor = (ThreadPoolExecutor(self._in_flight, thread_name_prefix="helix-ingest-embed")
                          if embedder is not None else None)

    def __enter__(self) -> _Batches:
        return self

    def add(self, item: _Prepared) -> None:
        self._pending.append(item)
        self._genes += len(item.genes)
        if self._genes >= self._target:
            self._send()

    def _send(self) -> None:
        batch, self._pending, self._genes = self._pending, [], 0
        if not batch:
            return
        if self._executor is None:
            self._ingestor._write(batch, [None] * sum(len(p.genes) for p in batch), self._report)
            return
        self._embedding.append((batch, self._executor.submit(self._ingestor._vectors, batch)))
        while len(self._embedding) > self._in_flight:
            self._write_oldest()

    def _write_oldest(self) -> None:
        batch, future = self._embedding.popleft()
        self._ingestor._write(batch, future.result(), self._report)

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            if exc_type is None:
                self._send()
                while self._embedding:
                    self._write_oldest()
        finally:
            if self._executor is not None:
                self._executor.shutdown(wait=True, cancel_futures=True)
