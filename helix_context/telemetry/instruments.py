"""The Telemetry object: one MeterProvider per process, its instruments, and the recorders that feed them.

Who calls it: the backend (HTTP, chat, retrieval, verdicts, ingest, compression, genome size)
and the supervisor (backend up/restarts, GPU memory, resident models, pressure). The provider is
never installed as OTel's global one. See :mod:`helix_context.telemetry` for the metric names.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource

from helix_context.redact import redact_url
from helix_context.telemetry.attrs import BoundedValues, finite_number
from helix_context.telemetry.export import EXPORT_TIMEOUT_S, SHUTDOWN_TIMEOUT_S, make_exporter, package_version
from helix_context.telemetry.reader import add_metric
from helix_context.telemetry.supervisor_status import normalize_supervisor_status

if TYPE_CHECKING:  # pragma: no cover
    from helix_context.config import Settings

log = logging.getLogger("helix.telemetry")

SCOPE_NAME = "helix_context"

# Bucket boundaries. Latency: the semconv advisory for HTTP, extended below 5 ms
# (a local server answers /health in ~1 ms) and up to the proxy timeout.
HTTP_DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75,
                         1.0, 2.5, 5.0, 7.5, 10.0, 30.0, 60.0, 120.0)
# gen_ai semconv advisory boundaries
GENAI_DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48,
                          40.96, 81.92)
GENAI_TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304,
                       16777216, 67108864)
STAGE_DURATION_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                          0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
INGEST_DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0,
                           900.0, 3600.0)
GENE_COUNT_BUCKETS = (0, 1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64, 96, 128)
RATIO_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0)

_KNOWN_METHODS = frozenset({"CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "QUERY", "TRACE"})


class _Source:
    """A user callback feeding several observable instruments: called once per
    collection (short TTL cache), failures logged (rate-limited) and swallowed."""

    def __init__(self, name: str, ttl_s: float = 0.5) -> None:
        self.name = name
        self.ttl_s = ttl_s
        self.fn: Callable[[], Any] | None = None
        self._lock = threading.Lock()
        self._value: Any = None
        self._at = 0.0
        self._last_error_log = 0.0

    def set(self, fn: Callable[[], Any] | None) -> None:
        with self._lock:
            self.fn = fn
            self._at = 0.0
            self._value = None

    def get(self) -> Any:
        with self._lock:
            fn = self.fn
            if fn is None:
                return None
            now = time.monotonic()
            if self._at and now - self._at < self.ttl_s:
                return self._value
            try:
                value = fn()
            except Exception as exc:  # a broken probe must never break collection
                if now - self._last_error_log > 60:
                    self._last_error_log = now
                    log.warning("telemetry %s callback failed: %s", self.name, exc)
                value = None
            self._value, self._at = value, now
            return value

# ── the telemetry object ──────────────────────────────────────────────────────


class Telemetry:
    """One MeterProvider (never installed as the global one), its instruments,
    an in-memory reader for :meth:`snapshot`, and OTLP export when enabled."""

    def __init__(self, settings: Settings, service_name: str) -> None:
        self.settings = settings
        self.service_name = service_name
        section = settings.telemetry
        self.enabled_export: bool = bool(section.enabled)
        self.export_protocol = str(section.protocol)
        self.export_endpoint = redact_url(str(section.endpoint))  # shown on the dashboard: never a password
        self._closed = False
        self._lock = threading.Lock()

        self._reader = InMemoryMetricReader()
        readers: list[MetricReader] = [self._reader]
        self._export_reader: PeriodicExportingMetricReader | None = None
        if self.enabled_export:
            try:
                exporter = make_exporter(section)
                interval_ms = max(100.0, float(section.export_interval_s) * 1000.0)
                self._export_reader = PeriodicExportingMetricReader(
                    exporter, export_interval_millis=interval_ms, export_timeout_millis=EXPORT_TIMEOUT_S * 1000
                )
                readers.append(self._export_reader)
            except Exception as exc:  # never crash the server over telemetry
                log.warning("OTLP metrics export disabled: %s", exc)
                self.enabled_export = False

        resource = Resource.create({
            "service.name": service_name,
            "service.version": package_version(),
            "service.instance.id": str(uuid.uuid4()),
        })
        self._provider = MeterProvider(metric_readers=readers, resource=resource, shutdown_on_exit=False)
        meter = self._provider.get_meter(SCOPE_NAME, package_version())

        self._model = BoundedValues(64)
        self._route = BoundedValues(256, max_len=200)
        self._stage = BoundedValues(32, max_len=48)
        self._label = BoundedValues(64, max_len=48)

        # HTTP server (semconv)
        self._http_duration = meter.create_histogram(
            "http.server.request.duration", unit="s", description="Duration of HTTP server requests.",
            explicit_bucket_boundaries_advisory=HTTP_DURATION_BUCKETS)
        # GenAI client (semconv): the proxy's calls to the upstream LLM
        self._token_usage = meter.create_histogram(
            "gen_ai.client.token.usage", unit="{token}", description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=GENAI_TOKEN_BUCKETS)
        self._op_duration = meter.create_histogram(
            "gen_ai.client.operation.duration", unit="s", description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=GENAI_DURATION_BUCKETS)
        # retrieval
        self._retrieval_duration = meter.create_histogram(
            "helix.retrieval.duration", unit="s", description="Time spent per retrieval stage (attribute stage).",
            explicit_bucket_boundaries_advisory=STAGE_DURATION_BUCKETS)
        self._genes_delivered = meter.create_histogram(
            "helix.genes.delivered", unit="{gene}", description="Genes delivered per retrieval.",
            explicit_bucket_boundaries_advisory=GENE_COUNT_BUCKETS)
        self._budget_tier = meter.create_counter(
            "helix.budget.tier", unit="{request}", description="Retrievals per budget tier (tight / focused / broad).")
        self._zone_cap = meter.create_histogram(
            "helix.budget_zone.cap", unit="{gene}", description="Gene cap set by the budget zone, when one applied.",
            explicit_bucket_boundaries_advisory=GENE_COUNT_BUCKETS)
        self._verdicts = meter.create_counter(
            "helix.verdicts", unit="{item}", description="Packet items per verdict (verified / stale_risk / needs_refresh).")
        # ingest
        self._ingest_bytes = meter.create_counter("helix.ingest.bytes", unit="By", description="Source bytes ingested.")
        self._ingest_files = meter.create_counter("helix.ingest.files", unit="{file}", description="Files ingested.")
        self._ingest_genes = meter.create_counter("helix.ingest.genes", unit="{gene}", description="Genes written by ingest.")
        self._ingest_duration = meter.create_histogram(
            "helix.ingest.duration", unit="s", description="Duration of ingest runs.",
            explicit_bucket_boundaries_advisory=INGEST_DURATION_BUCKETS)
        # compression
        self._compression_ratio = meter.create_histogram(
            "helix.compression.ratio", unit="1", description="Compressed tokens / original tokens per compression.",
            explicit_bucket_boundaries_advisory=RATIO_BUCKETS)
        self._critical_keep = meter.create_histogram(
            "helix.compression.critical_keep_rate", unit="1",
            description="Share of critical tokens (paths, identifiers, numbers) kept by compression.",
            explicit_bucket_boundaries_advisory=RATIO_BUCKETS)
        self._compression_tokens = meter.create_counter(
            "helix.compression.tokens", unit="{token}", description="Tokens before (type=original) and after (type=compressed) compression.")

        # observable: genome (backend)
        self._genome = _Source("genome")
        meter.create_observable_gauge("helix.genome.genes", callbacks=[self._observe_genes], unit="{gene}",
                                      description="Genes in the genome per lifecycle tier.")
        meter.create_observable_gauge("helix.genome.db.size", callbacks=[self._observe_db_size], unit="By",
                                      description="Size of the genome database files (file=main|wal).")
        # observable: supervisor
        self._supervisor = _Source("supervisor")
        meter.create_observable_gauge("helix.backend.up", callbacks=[self._observe_up], unit="{backend}",
                                      description="1 when the supervised backend is serving, else 0.")
        meter.create_observable_counter("helix.backend.restarts", callbacks=[self._observe_restarts], unit="{restart}",
                                        description="Backend restarts done by the supervisor.")
        meter.create_observable_up_down_counter("hw.gpu.memory.usage", callbacks=[self._observe_gpu_used], unit="By",
                                                description="GPU memory used.")
        meter.create_observable_up_down_counter("hw.gpu.memory.limit", callbacks=[self._observe_gpu_total], unit="By",
                                                description="GPU memory available in total.")
        meter.create_observable_gauge("helix.models.resident", callbacks=[self._observe_model_count], unit="{model}",
                                      description="Models resident in the local LLM server (Ollama /api/ps).")
        meter.create_observable_gauge("helix.model.size", callbacks=[self._observe_model_size], unit="By",
                                      description="Memory taken by each resident model (attribute model).")
        meter.create_observable_gauge("helix.model.vram.usage", callbacks=[self._observe_model_vram], unit="By",
                                      description="GPU memory taken by each resident model (attribute model).")
        meter.create_observable_gauge("helix.gpu.pressure", callbacks=[self._observe_pressure], unit="{state}",
                                      description="1 while GPU memory is over the pressure threshold.")
        meter.create_observable_gauge("helix.ribosome.paused", callbacks=[self._observe_ribosome], unit="{state}",
                                      description="1 while the ribosome is paused.")

    # ── synchronous recorders ──

    def record_http(self, method: str, route: str, status: int, seconds: float) -> None:
        """One HTTP request: ``route`` must be the route template (``/items/{id}``), never the raw path;
        pass an empty route when nothing matched (the attribute is then left out)."""
        if self._closed:
            return
        method = (method or "").upper()
        attrs: dict[str, Any] = {
            "http.request.method": method if method in _KNOWN_METHODS else "_OTHER",
            "http.response.status_code": int(status),
        }
        if route:
            attrs["http.route"] = self._route(route)
        if int(status) >= 500:
            attrs["error.type"] = str(int(status))
        self._http_duration.record(max(0.0, float(seconds)), attrs)

    def record_chat(self, model: str, input_tokens: int, output_tokens: int, seconds: float, upstream: str) -> None:
        """One chat completion forwarded upstream. ``upstream`` is the upstream kind (``ollama``,
        ``openai``) or its URL (then recorded as server.address / server.port)."""
        if self._closed:
            return
        attrs: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.request.model": self._model(model)}
        attrs.update(self._upstream_attrs(upstream))
        if input_tokens is not None and input_tokens >= 0:
            self._token_usage.record(int(input_tokens), {**attrs, "gen_ai.token.type": "input"})
        if output_tokens is not None and output_tokens >= 0:
            self._token_usage.record(int(output_tokens), {**attrs, "gen_ai.token.type": "output"})
        self._op_duration.record(max(0.0, float(seconds)), attrs)

    def record_retrieval(self, stage_seconds: dict[str, float], genes_delivered: int, tier: str,
                         zone_cap: int | None) -> None:
        """One retrieval: seconds per stage (e.g. signals, fts, dense, fusion, assemble, total),
        the genes delivered, the budget tier, and the budget-zone cap (None when no zone applied)."""
        if self._closed:
            return
        for stage, seconds in (stage_seconds or {}).items():
            value = finite_number(seconds)
            if value is not None:
                self._retrieval_duration.record(max(0.0, value), {"stage": self._stage(stage)})
        tier_label = self._label(tier or "unknown")
        self._genes_delivered.record(max(0, int(genes_delivered or 0)), {"tier": tier_label})
        self._budget_tier.add(1, {"tier": tier_label})
        if zone_cap is not None:
            self._zone_cap.record(max(0, int(zone_cap)))

    def record_verdicts(self, counts: dict[str, int]) -> None:
        """Items per verdict of one packet: {"verified": n, "stale_risk": n, "needs_refresh": n}."""
        if self._closed:
            return
        for verdict, n in (counts or {}).items():
            if n and int(n) > 0:
                self._verdicts.add(int(n), {"verdict": self._label(verdict)})

    def record_ingest(self, bytes_: int, files: int, genes: int, seconds: float) -> None:
        """One ingest run (or batch): source bytes read, files and genes written, seconds taken."""
        if self._closed:
            return
        if bytes_ and bytes_ > 0:
            self._ingest_bytes.add(int(bytes_))
        if files and files > 0:
            self._ingest_files.add(int(files))
        if genes and genes > 0:
            self._ingest_genes.add(int(genes))
        self._ingest_duration.record(max(0.0, float(seconds or 0.0)))

    def record_compression(self, original_tokens: int, compressed_tokens: int, critical_total: int,
                           critical_kept: int) -> None:
        """One compressed gene (or context): token counts before/after and the critical-token keep."""
        if self._closed:
            return
        if original_tokens and original_tokens > 0:
            self._compression_ratio.record(max(0.0, compressed_tokens / original_tokens))
            self._compression_tokens.add(int(original_tokens), {"type": "original"})
            self._compression_tokens.add(max(0, int(compressed_tokens)), {"type": "compressed"})
        if critical_total and critical_total > 0:
            self._critical_keep.record(max(0.0, min(1.0, critical_kept / critical_total)))

    # ── observable sources ──

    def observe_genome(self, callback: Callable[[], dict[str, Any]]) -> None:
        """Register the genome probe: ``callback()`` → {"genes_by_tier": {tier: n}, "db_bytes": n,
        "wal_bytes": n}. Called at most about twice a second, from the collecting thread."""
        self._genome.set(callback)

    def observe_supervisor(self, callback: Callable[[], dict[str, Any] | None]) -> None:
        """Register the supervisor probe: ``callback()`` → the status snapshot dict (the one
        signals.write_supervisor_status writes) or None when there is nothing to report."""
        self._supervisor.set(callback)

    def _observe_genes(self, options: CallbackOptions) -> Iterable[Observation]:
        data = self._genome.get()
        if not isinstance(data, Mapping):
            return []
        tiers = data.get("genes_by_tier") or {}
        out = []
        for tier, n in tiers.items():
            value = finite_number(n)
            if value is not None:
                out.append(Observation(int(value), {"tier": str(tier)}))
        return out

    def _observe_db_size(self, options: CallbackOptions) -> Iterable[Observation]:
        data = self._genome.get()
        if not isinstance(data, Mapping):
            return []
        out = []
        for key, file in (("db_bytes", "main"), ("wal_bytes", "wal")):
            value = finite_number(data.get(key))
            if value is not None:
                out.append(Observation(int(value), {"file": file}))
        return out

    def _sup(self) -> dict[str, Any] | None:
        return normalize_supervisor_status(self._supervisor.get())

    def _observe_up(self, options: CallbackOptions) -> Iterable[Observation]:
        sup = self._sup()
        return [Observation(1 if sup["backend_up"] else 0)] if sup else []

    def _observe_restarts(self, options: CallbackOptions) -> Iterable[Observation]:
        sup = self._sup()
        return [Observation(int(sup["restarts"]))] if sup else []

    def _observe_gpu(self, key: str) -> list[Observation]:
        """One observation per GPU device (hw.id = gpu<index>, hw.name when known)."""
        sup = self._sup()
        if not sup or not sup["gpu"]["available"]:
            return []
        out = []
        for dev in sup["gpu"]["devices"]:
            if dev[key] is None:
                continue
            attrs = {"hw.id": f"gpu{dev['id']}", "hw.type": "gpu"}
            if dev["name"]:
                attrs["hw.name"] = dev["name"]
            out.append(Observation(int(dev[key]), attrs))
        return out

    def _observe_gpu_used(self, options: CallbackOptions) -> Iterable[Observation]:
        return self._observe_gpu("used_bytes")

    def _observe_gpu_total(self, options: CallbackOptions) -> Iterable[Observation]:
        return self._observe_gpu("total_bytes")

    def _observe_model_count(self, options: CallbackOptions) -> Iterable[Observation]:
        sup = self._sup()
        return [Observation(len(sup["models"]))] if sup else []

    def _observe_model_size(self, options: CallbackOptions) -> Iterable[Observation]:
        sup = self._sup()
        if not sup:
            return []
        return [Observation(int(m["size"]), {"model": self._model(m["name"])}) for m in sup["models"]]

    def _observe_model_vram(self, options: CallbackOptions) -> Iterable[Observation]:
        sup = self._sup()
        if not sup:
            return []
        return [Observation(int(m["size_vram"]), {"model": self._model(m["name"])}) for m in sup["models"]]

    def _observe_pressure(self, options: CallbackOptions) -> Iterable[Observation]:
        sup = self._sup()
        return [Observation(1 if sup["pressure"] else 0)] if sup else []

    def _observe_ribosome(self, options: CallbackOptions) -> Iterable[Observation]:
        sup = self._sup()
        return [Observation(1 if sup["ribosome_paused"] else 0)] if sup else []

    @staticmethod
    def _upstream_attrs(upstream: str) -> dict[str, Any]:
        text = str(upstream or "").strip()
        if not text:
            return {}
        if "://" in text:
            parts = urlsplit(text)
            attrs: dict[str, Any] = {}
            if parts.hostname:
                attrs["server.address"] = parts.hostname
            try:
                if parts.port:
                    attrs["server.port"] = parts.port
            except ValueError:
                pass
            return attrs
        return {"gen_ai.provider.name": text.lower()[:32]}

    # ── reading back ──

    def snapshot(self) -> dict[str, Any]:
        """Current cumulative values from the in-process reader:

        ``{"service", "at", "export": {...}, "counters": {name: {"unit", "description", "series":
        [{"attrs", "value"}]}}, "gauges": {…same…}, "histograms": {name: {"unit", "description",
        "series": [{"attrs", "count", "sum", "min", "max", "p50", "p90", "p95", "p99", "bounds",
        "buckets"}]}}}``. Up-down counters are listed with the gauges.
        """
        out: dict[str, Any] = {
            "service": self.service_name,
            "at": time.time(),
            "export": {"enabled": self.enabled_export, "protocol": self.export_protocol,
                       "endpoint": self.export_endpoint if self.enabled_export else None},
            "counters": {},
            "gauges": {},
            "histograms": {},
        }
        if self._closed:
            return out
        try:
            data = self._reader.get_metrics_data()
        except Exception as exc:
            log.warning("telemetry snapshot failed: %s", exc)
            return out
        if data is None:
            return out
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    add_metric(out, metric)
        return out


    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        """Export now (OTLP on) — tests and clean stops use it."""
        if self._closed:
            return True
        try:
            return bool(self._provider.force_flush(timeout_millis))
        except Exception as exc:
            log.warning("telemetry flush failed: %s", exc)
            return False

    def shutdown(self) -> None:
        """Final export (when enabled) and stop the reader threads; safe to call twice.
        Takes at most ~4 s even when the collector is unreachable (the supervisor's stop
        timeout must not be spent waiting on telemetry)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True

        def stop() -> None:
            try:
                self._provider.shutdown(timeout_millis=SHUTDOWN_TIMEOUT_S * 1000)
            except Exception as exc:
                log.warning("telemetry shutdown: %s", exc)

        if self._export_reader is None:
            stop()
            return
        thread = threading.Thread(target=stop, name="helix-telemetry-shutdown", daemon=True)
        thread.start()
        thread.join(SHUTDOWN_TIMEOUT_S + 1.0)

